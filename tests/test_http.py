"""The HTTP service as a real server process on loopback: health, reranking that matches the
in-process API, clear 4xx errors, and a server that keeps serving after bad requests."""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from fincrowd_ltr.serving.reranker import FinCrowdReranker
from tests.test_serving import BASE, QUERY, candidates, checkpoint  # noqa: F401


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def start_server(folder, *extra: str):
    """A real ``fincrowd serve`` process on a free loopback port: ``(proc, url, health)``."""
    port = _free_port()
    args = ["serve", f"--checkpoint={folder}", f"--port={port}", *extra]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fincrowd_ltr.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                return proc, url, json.loads(r.read())
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stdout.read().decode()) from None
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


@pytest.fixture
def server(checkpoint):  # noqa: F811
    proc, url, health = start_server(checkpoint, "--max-candidates=50", "--max-text-chars=500")
    yield url, health
    proc.terminate()
    proc.wait(timeout=10)


def _request(domain="open", **changes):
    cands = [{**c, "base_score": s} for c, s in zip(candidates(), BASE, strict=True)]
    return {"query": QUERY, "domain": domain, "candidates": cands, **changes}


def test_health_and_rerank_match_the_library(server, checkpoint):  # noqa: F811
    url, health = server
    assert health["status"] == "ok" and health["domains"] == ["closed", "open"]
    status, body = _post(url + "/rerank", json.dumps(_request()).encode())
    assert status == 200
    expected = FinCrowdReranker.from_pretrained(checkpoint).rerank(
        QUERY, candidates(), BASE, domain="open"
    )
    assert body["ranking"] == expected.ranking
    assert body["scores"] == pytest.approx(expected.scores, abs=1e-12)
    assert body["gate"]["applied"] is True and 0 <= body["gate"]["probability"] <= 1
    assert body["explanation"]["candidates"]["c0"]["conflicts"] == ["period"]


def test_bad_requests_get_clear_4xx_and_the_server_keeps_serving(server):
    url, _ = server
    too_many = _request(
        candidates=[{"id": str(i), "text": "x", "base_score": 1.0} for i in range(51)]
    )
    long_text = _request(candidates=[{"id": "a", "text": "x" * 501, "base_score": 1.0}])
    cases = [
        (b"{not json", 400, "malformed JSON"),
        (
            b'{"query": "q", "candidates": [{"id": "a", "text": "t", "base_score": NaN}]}',
            400,
            "NaN",
        ),
        (json.dumps({"candidates": []}).encode(), 422, "'query'"),
        (json.dumps(_request(candidates=[{"id": "a", "text": "t"}])).encode(), 422, "base_score"),
        (json.dumps(too_many).encode(), 413, "at most 50"),
        (json.dumps(long_text).encode(), 413, "over 500 characters"),
        (json.dumps(_request(domain="nowhere")).encode(), 422, "no gate calibration"),
    ]
    for body, status, message in cases:
        got, payload = _post(url + "/rerank", body)
        assert got == status, (body[:60], payload)
        assert message in payload["error"]
    status, body = _post(url + "/rerank", json.dumps(_request()).encode())
    assert status == 200 and body["ranking"][:2] == ["c2", "c3"]
