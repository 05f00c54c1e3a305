"""The HTTP service: ``GET /health`` and ``POST /rerank`` over a ``GatedCorrection`` (FastAPI).

Requests and responses are typed (pydantic models, in the OpenAPI schema at ``/openapi.json``):
unknown fields and mistyped values are rejected, the body must be ``application/json``, and every
rejection is a 4xx whose JSON body is ``{"error": message, "field": "candidates[3].base_score"}``
(never a server path). A failed request changes nothing (the model's caches only gain entries for
requests that passed validation). ``fincrowd serve --workers N`` runs N processes.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import asdict, dataclass
from typing import Annotated, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from fincrowd_ltr.data.schema import MAX_SERVED_TEXT_CHARS, DataError, titled
from fincrowd_ltr.fields.vocabulary import EXTRACTOR_VERSION
from fincrowd_ltr.model.checkpoint import FORMAT_VERSION
from fincrowd_ltr.model.correction import GatedCorrection

FiniteFloat = Annotated[float, Field(allow_inf_nan=False, strict=True)]  # true is no number
Scalar = StrictStr | StrictInt | FiniteFloat


@dataclass(frozen=True)
class Limits:
    """Request limits (all configurable on ``fincrowd serve``)."""

    max_candidates: int = 1000
    max_text_chars: int = MAX_SERVED_TEXT_CHARS
    max_query_chars: int = 2_000
    max_body_bytes: int = 32 * 1024 * 1024


class Metadata(BaseModel):
    """Filing metadata of a candidate (all optional)."""

    model_config = ConfigDict(extra="forbid")

    company: Scalar | None = None
    period: Scalar | list[Scalar] | None = None  # read as fincrowd_ltr.data.metadata says
    doc_type: StrictStr | None = None
    document: StrictStr | None = None
    position: StrictInt | None = None
    is_table: StrictBool | None = None


class CandidateIn(BaseModel):
    """A candidate and its base score (any finite number, higher is better)."""

    model_config = ConfigDict(extra="forbid")

    id: StrictStr = Field(min_length=1)
    text: StrictStr = Field(min_length=1)
    title: StrictStr | None = None  # read as a corpus record's: a first line before the text
    base_score: FiniteFloat
    metadata: Metadata | None = None


class RerankRequest(BaseModel):
    """``domain``: the gate calibration (absent or null: the always-on correction);
    ``fallback``: what an uncalibrated domain does (``error`` or keep the base order)."""

    model_config = ConfigDict(extra="forbid")

    query: StrictStr = Field(min_length=1)
    candidates: list[CandidateIn] = Field(min_length=1)
    domain: StrictStr | None = None
    fallback: Literal["error", "identity"] = "error"


class Guarantee(BaseModel):
    """A gated decision's promise: with probability >= 1 - delta over the calibration draw, the
    domain's regression rate among orderable questions is <= cap (``method`` "ltt"; "crc": in
    expectation; "empirical": on the calibration set only)."""

    method: str
    cap: float
    delta: float | None
    risk_bound: float | None
    bound_delta: float | None = Field(
        None, description="risk_bound is an upper 1 - bound_delta bound (for crc and empirical "
        "it may exceed the cap)"
    )  # fmt: skip
    n_calibration: int
    n_orderable: int | None
    exact: bool = Field(
        description="false: the empirical rule, or rows pooled with cross-fitted training rows"
    )
    can_open: bool = Field(
        True, description="false: the gate never opens (the cap holds trivially: no "
        "threshold gained within the cap, or too few calibration questions to certify one)"
    )  # fmt: skip


class Gate(BaseModel):
    probability: float | None
    threshold: float | None
    applied: bool
    domain: str | None
    mode: Literal["always-on", "gated", "identity"]
    guarantee: Guarantee | None = None


class RerankResponse(BaseModel):
    ranking: list[str]
    scores: list[float]
    gate: Gate
    explanation: dict
    warnings: list[str] = Field(
        default_factory=list,
        description="distribution shift: how this bank differs from the training banks",
    )


class ErrorResponse(BaseModel):
    error: str
    field: str | None


class RequestError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out:
            out = str(part)
        elif part in ("str", "int", "float", "bool", "constrained-str"):
            continue  # pydantic names the union member tried, not a field
        else:
            out += f".{part}"
    return out or None


def _request_field(field: str | None) -> str | None:
    """A Python-API field name as the HTTP body names it (``base_scores[3]`` is
    ``candidates[3].base_score``)."""
    if field and field.startswith("base_scores["):
        return f"candidates{field[len('base_scores') :]}.base_score"
    return field


def parse_request(body: bytes, limits: Limits) -> RerankRequest:
    """Validate a ``/rerank`` body; raises ``RequestError`` naming the field at fault."""
    if len(body) > limits.max_body_bytes:
        raise RequestError(413, f"request body over {limits.max_body_bytes} bytes")
    try:
        request = RerankRequest.model_validate_json(body)
    except ValidationError as err:
        first = err.errors()[0]
        if first["type"] in ("json_invalid", "recursion_loop"):
            raise RequestError(400, f"malformed JSON: {first['msg']}") from None
        field = _where(tuple(first["loc"]))
        if first["type"] == "finite_number":
            raise RequestError(
                400, f"{field}: NaN and infinity are not valid scores", field
            ) from None
        raise RequestError(422, f"{field or 'body'}: {first['msg']}", field) from None
    if len(request.query) > limits.max_query_chars:
        raise RequestError(413, f"query over {limits.max_query_chars} characters", "query")
    if len(request.candidates) > limits.max_candidates:
        raise RequestError(
            413,
            f"{len(request.candidates)} candidates; at most {limits.max_candidates} per request",
            "candidates",
        )
    for i, c in enumerate(request.candidates):
        if len(titled(c.title, c.text)[0]) > limits.max_text_chars:  # as the loader measures it
            field = f"candidates[{i}].text"
            raise RequestError(413, f"{field} over {limits.max_text_chars} characters", field)
    return request


async def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
    """404, 405 and the like in the documented ``{"error", "field"}`` shape."""
    return JSONResponse(
        {"error": str(err.detail), "field": None}, err.status_code, headers=err.headers
    )


def create_app(model: GatedCorrection, limits: Limits | None = None) -> FastAPI:
    """The ASGI app serving ``model``."""
    limits = limits or Limits()
    app = FastAPI(title="fincrowd_ltr", version=str(FORMAT_VERSION))
    lock = threading.Lock()  # the model's request caches are not thread-safe

    app.add_exception_handler(StarletteHTTPException, _http_error)

    @app.get("/health")
    def health() -> dict:
        return {
            "status": "ok",
            "base_ranker": model.base_ranker,
            "domains": sorted(model.domains),
            "format_version": FORMAT_VERSION,
            "extractor_version": EXTRACTOR_VERSION,
            "runtime": model.runtime.name,
            "limits": asdict(limits),
            "pid": os.getpid(),
        }

    run = _request_runner(model, limits, lock)

    @app.post(
        "/rerank",
        response_model=RerankResponse,
        responses={
            400: {"model": ErrorResponse},
            413: {"model": ErrorResponse},
            415: {"model": ErrorResponse},
            422: {"model": ErrorResponse},
        },
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/RerankRequest"}}
                },
            }
        },
    )
    async def rerank(request: Request) -> JSONResponse:
        from starlette.concurrency import run_in_threadpool

        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return JSONResponse(
                {"error": "the body must be JSON (Content-Type: application/json)", "field": None},
                415,
            )
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limits.max_body_bytes:
            message = f"request body over {limits.max_body_bytes} bytes"
            return JSONResponse({"error": message, "field": None}, 413)
        body = await request.body()
        return await run_in_threadpool(run, body)

    _publish_request_schema(app)
    return app


def _publish_request_schema(app: FastAPI) -> None:
    """Put the request model's JSON schema in the OpenAPI document (the route reads the raw
    body itself, so FastAPI does not list it)."""
    schema = app.openapi()
    schema["components"]["schemas"]["RerankRequest"] = RerankRequest.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    for name, sub in schema["components"]["schemas"]["RerankRequest"].pop("$defs", {}).items():
        schema["components"]["schemas"][name] = sub
    app.openapi_schema = schema


def _request_runner(model: GatedCorrection, limits: Limits, lock: threading.Lock):
    """One request body in, the JSON response out (errors name the field at fault)."""

    def run(body: bytes) -> JSONResponse:
        try:
            request = parse_request(body, limits)
            candidates = [
                {
                    "id": c.id,
                    "text": c.text,
                    "title": c.title or "",
                    "metadata": c.metadata.model_dump(exclude_none=True) if c.metadata else {},
                }
                for c in request.candidates
            ]
            with lock:
                result = model.rerank(
                    request.query,
                    candidates,
                    [c.base_score for c in request.candidates],
                    domain=request.domain,
                    fallback=request.fallback,
                )
        except RequestError as err:
            return JSONResponse({"error": err.message, "field": err.field}, err.status)
        except DataError as err:  # raised with the field at fault (or none)
            return JSONResponse({"error": str(err), "field": _request_field(err.field)}, 422)
        if not all(math.isfinite(s) for s in result.scores):  # never expected: finite by design
            return JSONResponse({"error": "non-finite scores", "field": None}, 500)
        return JSONResponse(
            {
                "ranking": result.ranking,
                "scores": result.scores,
                "gate": result.gate,
                "explanation": result.explanation,
                "warnings": result.warnings,
            }
        )

    return run


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
ENV = "FINCROWD_SERVE"  # checkpoint|runtime|ranker|limits, for worker processes


def app_from_env() -> FastAPI:
    """The app of one worker process (``fincrowd serve --workers N``)."""
    import json

    spec = json.loads(os.environ[ENV])
    if spec.get("threads"):  # the workers share the cores: none oversubscribes them (torch, BLAS)
        from threadpoolctl import threadpool_limits

        threadpool_limits(spec["threads"], user_api="blas")  # the BLAS libraries loaded so far
        if spec.get("runtime", "torch") == "torch":  # the ONNX runtime serves without torch
            import torch

            torch.set_num_threads(spec["threads"])
    model = GatedCorrection.from_pretrained(
        spec["checkpoint"],
        base_ranker=spec["ranker"],
        runtime=spec["runtime"],
        trust_unverified=spec.get("trust_unverified", False),
    )
    return create_app(model, Limits(**spec["limits"]))


def serve(
    model: GatedCorrection | None,
    host: str,
    port: int,
    limits: Limits,
    workers: int = 1,
    spec: dict | None = None,
    factory: str = "fincrowd_ltr.serving.http:app_from_env",
) -> None:
    """Run the service with uvicorn until interrupted; with ``workers > 1``, each worker process
    loads the checkpoint in ``spec`` itself, by ``factory`` (``module:function`` returning the
    app; the command's own sets up its libraries first)."""
    import json

    import uvicorn

    from fincrowd_ltr.serving.nodelay import NoDelayH11Protocol

    if workers > 1:
        from fincrowd_ltr.engine import available_cores

        threads = max(1, available_cores() // workers)
        for name in BLAS_THREADS:  # read by every BLAS a worker loads later (scipy's own too)
            os.environ.setdefault(name, str(threads))
        os.environ[ENV] = json.dumps({**(spec or {}), "limits": asdict(limits), "threads": threads})
        uvicorn.run(
            factory,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
            http=NoDelayH11Protocol,
        )
    else:
        uvicorn.run(
            create_app(model, limits), host=host, port=port, log_level="warning",
            http=NoDelayH11Protocol,
        )  # fmt: skip
