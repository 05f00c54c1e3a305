"""The HTTP service: ``GET /health`` and ``POST /rerank`` over a ``FinCrowdReranker`` (FastAPI).

Requests are validated before anything runs; every rejection is a 4xx whose JSON body names the
field at fault. A failed request changes nothing (the reranker's caches only ever gain entries for
requests that passed validation).
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.fields.vocabulary import EXTRACTOR_VERSION
from fincrowd_ltr.model.checkpoint import FORMAT_VERSION
from fincrowd_ltr.model.correction import GatedCorrection as FinCrowdReranker


@dataclass(frozen=True)
class Limits:
    """Request limits (all configurable on ``fincrowd serve``)."""

    max_candidates: int = 1000
    max_text_chars: int = 20_000
    max_query_chars: int = 2_000
    max_body_bytes: int = 32 * 1024 * 1024


class RequestError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (scores must be finite numbers)")


def parse_request(body: bytes, limits: Limits) -> dict:
    """Validate a ``/rerank`` body; raises ``RequestError`` naming the field at fault."""
    if len(body) > limits.max_body_bytes:
        raise RequestError(413, f"request body over {limits.max_body_bytes} bytes")
    try:
        payload = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as err:
        raise RequestError(400, f"malformed JSON: {err}") from None
    if not isinstance(payload, dict):
        raise RequestError(422, "the body must be a JSON object")
    query = payload.get("query")
    if not isinstance(query, str) or not query.strip():
        raise RequestError(422, "field 'query' must be a non-empty string", "query")
    if len(query) > limits.max_query_chars:
        raise RequestError(413, f"query over {limits.max_query_chars} characters", "query")
    domain = payload.get("domain")
    if domain is not None and not isinstance(domain, str):
        raise RequestError(422, "field 'domain' must be a string", "domain")
    candidates = payload.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        raise RequestError(422, "field 'candidates' must be a non-empty list", "candidates")
    if len(candidates) > limits.max_candidates:
        raise RequestError(
            413,
            f"{len(candidates)} candidates; at most {limits.max_candidates} per request",
            "candidates",
        )
    items, scores = [], []
    for i, c in enumerate(candidates):
        where = f"candidates[{i}]"
        if not isinstance(c, dict):
            raise RequestError(422, f"{where} must be an object", where)
        for key, kind in (("id", str), ("text", str)):
            if not isinstance(c.get(key), kind):
                raise RequestError(422, f"{where}.{key} must be a string", f"{where}.{key}")
        if len(c["text"]) > limits.max_text_chars:
            raise RequestError(
                413, f"{where}.text over {limits.max_text_chars} characters", f"{where}.text"
            )
        score = c.get("base_score")
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise RequestError(
                422, f"{where}.base_score must be a finite number", f"{where}.base_score"
            )
        metadata = c.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise RequestError(422, f"{where}.metadata must be an object", f"{where}.metadata")
        items.append({"id": c["id"], "text": c["text"], "metadata": metadata})
        scores.append(float(score))
    return {"query": query, "domain": domain, "candidates": items, "base_scores": scores}


def create_app(reranker: FinCrowdReranker, limits: Limits | None = None) -> FastAPI:
    """The ASGI app serving ``reranker``."""
    limits = limits or Limits()
    app = FastAPI(title="fincrowd_ltr", version=str(FORMAT_VERSION))
    lock = threading.Lock()  # the reranker's caches are not thread-safe

    @app.get("/health")
    def health() -> dict:
        return {
            "status": "ok",
            "base_ranker": reranker.base_ranker,
            "domains": sorted(reranker.domains),
            "format_version": FORMAT_VERSION,
            "extractor_version": EXTRACTOR_VERSION,
            "runtime": reranker.runtime.name,
            "limits": limits.__dict__,
        }

    def run(body: bytes) -> JSONResponse:
        try:
            request = parse_request(body, limits)
            with lock:
                result = reranker.rerank(
                    request["query"],
                    request["candidates"],
                    request["base_scores"],
                    domain=request["domain"],
                )
        except RequestError as err:
            return JSONResponse({"error": err.message, "field": err.field}, err.status)
        except DataError as err:
            return JSONResponse({"error": str(err), "field": None}, 422)
        return JSONResponse(
            {
                "ranking": result.ranking,
                "scores": result.scores,
                "gate": result.gate,
                "explanation": result.explanation,
            }
        )

    @app.post("/rerank")
    async def rerank(request: Request) -> JSONResponse:
        from starlette.concurrency import run_in_threadpool

        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limits.max_body_bytes:
            message = f"request body over {limits.max_body_bytes} bytes"
            return JSONResponse({"error": message, "field": None}, 413)
        body = await request.body()
        return await run_in_threadpool(run, body)

    return app


def serve(reranker: FinCrowdReranker, host: str, port: int, limits: Limits) -> None:
    """Run the service with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(create_app(reranker, limits), host=host, port=port, log_level="warning")
