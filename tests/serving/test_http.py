"""The HTTP service as a real server process on loopback: health, reranking that matches the
in-process API, clear 4xx errors, and a server that keeps serving after bad requests."""

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fincrowd_ltr.model.correction import GatedCorrection
from tests.serving.conftest import BASE, QUERY, candidates, post, request_body, start_server


def test_health_and_rerank_match_the_library(server, checkpoint):
    url, health = server
    assert health["status"] == "ok" and health["domains"] == ["closed", "open"]
    status, body = post(url + "/rerank", json.dumps(request_body()).encode())
    assert status == 200
    expected = GatedCorrection.from_pretrained(checkpoint).rerank(
        QUERY, candidates(), BASE, domain="open"
    )
    assert body["ranking"] == expected.ranking
    assert body["scores"] == pytest.approx(expected.scores, abs=1e-12)
    assert body["gate"]["applied"] is True and 0 <= body["gate"]["probability"] <= 1
    assert body["gate"]["guarantee"] == expected.gate["guarantee"]
    assert body["explanation"]["candidates"]["c0"]["conflicts"] == ["period"]
    titled = request_body()  # a corpus record's title is read as the library reads it
    titled["candidates"][0] = {**titled["candidates"][0], "title": "Acme net income"}
    status, body = post(url + "/rerank", json.dumps(titled).encode())
    assert status == 200
    assert "net_income" in body["explanation"]["candidates"]["c0"]["fields"]["metric"]
    same = GatedCorrection.from_pretrained(checkpoint).rerank(
        QUERY, [{**candidates()[0], "title": "Acme net income"}, *candidates()[1:]],
        BASE, domain="open",
    )  # fmt: skip
    assert body["ranking"] == same.ranking
    assert body["scores"] == pytest.approx(same.scores, abs=1e-12)


def test_bad_requests_get_clear_4xx_and_the_server_keeps_serving(server):
    url, _ = server
    too_many = request_body(
        candidates=[{"id": str(i), "text": "x", "base_score": 1.0} for i in range(51)]
    )
    long_text = request_body(candidates=[{"id": "a", "text": "x" * 501, "base_score": 1.0}])
    cases = [
        (b"{not json", 400, "malformed JSON"),
        (
            b'{"query": "q", "candidates": [{"id": "a", "text": "t", "base_score": NaN}]}',
            400,
            "NaN",
        ),
        (json.dumps({"candidates": []}).encode(), 422, "query: Field required"),
        (
            json.dumps(request_body(candidates=[{"id": "a", "text": "t"}])).encode(),
            422,
            "base_score",
        ),
        (json.dumps(too_many).encode(), 413, "at most 50"),
        (json.dumps(long_text).encode(), 413, "over 500 characters"),
        (json.dumps(request_body(domain="nowhere")).encode(), 422, "no gate calibration"),
    ]
    for body, status, message in cases:
        got, payload = post(url + "/rerank", body)
        assert got == status, (body[:60], payload)
        assert message in payload["error"]
    status, body = post(url + "/rerank", json.dumps(request_body()).encode())
    assert status == 200 and body["ranking"][:2] == ["c2", "c3"]


def _raw(url: str, body: bytes, kind: str = "application/json") -> tuple[int, dict]:
    request = urllib.request.Request(url, body, {"Content-Type": kind})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_fuzzer_findings_are_fixed(server):
    """Regression cases of the schema fuzzer and hand-made requests: no 5xx, fields named,
    extreme finite scores handled, a closed gate keeps exactly the input order."""
    url, _ = server
    one = {"id": "a", "text": "t", "base_score": 1.0}
    cases = [
        (request_body(candidates=[{**one, "metadata": {"company": 1}}]), 200, None),
        (request_body(candidates=[{**one, "metadata": {"is_table": "AAA"}}]), 422, "is_table"),
        (request_body(candidates=[{**one, "metadata": {"company": {"x": 1}}}]), 422, "company"),
        (request_body(candidates=[{**one, "id": ""}]), 422, "candidates[0].id"),
        (request_body(candidates=[{**one, "text": ""}]), 422, "candidates[0].text"),
        (request_body(unknown=1), 422, "unknown"),
        (request_body(candidates=[{**one, "extra": 2}]), 422, "candidates[0].extra"),
    ]
    for body, status, field in cases:
        got, payload = post(url + "/rerank", json.dumps(body).encode())
        assert got == status, (body, payload)
        if field:
            assert field in payload["field"] and "/" not in payload["error"]
    # issue 23: every 4xx names the field actually at fault (the catch-all said "domain")
    two = [one, {**one, "text": "u"}]
    exact = [
        (request_body(candidates=two), "candidates[1].id"),
        (request_body(query="   "), "query"),
        (request_body(domain="nowhere"), "domain"),
        (request_body(candidates=[{**one, "metadata": {"period": "H1 2016"}}]), None),
        (request_body(candidates=[{**one, "metadata": {"period": True}}]), None),
        (request_body(candidates=[{**one, "base_score": True}]), "candidates[0].base_score"),
        (request_body(candidates=[{**one, "id": "  "}]), "candidates[0].id"),
    ]
    for body, field in exact:
        got, payload = post(url + "/rerank", json.dumps(body).encode())
        assert got == 422 and set(payload) == {"error", "field"}, payload
        assert payload["field"] == (field or "candidates[0].metadata.period"), payload
    periods = {"period": ["FY2021", "fiscal 2020"], "company": "  Acme   Corp "}
    got, payload = post(
        url + "/rerank",
        json.dumps(request_body(candidates=[{**one, "metadata": periods}])).encode(),
    )
    assert got == 200 and payload["warnings"] == [], payload
    fields = payload["explanation"]["candidates"]["a"]["fields"]
    assert fields["period"] == ["2020", "2021"] and fields["entity"] == ["Acme"]
    for method, path in (("GET", "/rerank"), ("DELETE", "/health"), ("GET", "/nowhere")):
        request = urllib.request.Request(url + path, method=method)
        try:
            urllib.request.urlopen(request, timeout=10)
            raise AssertionError(f"{method} {path} answered 2xx")
        except urllib.error.HTTPError as err:
            assert err.code in (404, 405) and json.loads(err.read()).keys() == {"error", "field"}
    got, payload = _raw(url + "/rerank", b"[" * 50_000)
    assert got == 400 and "malformed JSON" in payload["error"]
    got, payload = _raw(url + "/rerank", json.dumps(request_body()).encode(), "text/plain")
    assert got == 415
    for scores in ([1e160, 2e160, 0.0, -1.79e308, 1.79e308, -2.2e294], [-1.79e308] * 6):
        body = request_body(domain="closed")
        body["candidates"] = [
            {**c, "base_score": s} for c, s in zip(body["candidates"], scores, strict=True)
        ]
        got, payload = post(url + "/rerank", json.dumps(body).encode())
        assert got == 200, payload
        expected = sorted(range(6), key=lambda i: (-scores[i], i))
        assert payload["ranking"] == [f"c{i}" for i in expected]
        assert all(isinstance(s, float) for s in payload["scores"])
    got, payload = post(url + "/rerank", json.dumps(request_body(domain="nowhere")).encode())
    assert got == 422 and "/" not in payload["error"]
    schema = json.loads(urllib.request.urlopen(url + "/openapi.json", timeout=10).read())
    assert "RerankRequest" in schema["components"]["schemas"]
    status, body = post(url + "/rerank", json.dumps(request_body()).encode())
    assert status == 200  # still serving


def _worker_processes(pid: int) -> int:
    """How many of ``pid``'s children are uvicorn workers (spawned by multiprocessing)."""
    found = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        found += ppid == pid and b"spawn_main" in command
    return found


def test_several_workers_serve_the_same_answers(checkpoint):
    """``serve --workers 2`` runs two worker processes (the option was once parsed and then
    ignored: one process served), each answering as the in-process API does."""
    proc, url, _ = start_server(checkpoint, "--workers=2")
    try:
        if Path("/proc").is_dir():
            for _ in range(100):  # the second worker may still be starting
                if _worker_processes(proc.pid) == 2:
                    break
                time.sleep(0.1)
            assert _worker_processes(proc.pid) == 2
        expected = GatedCorrection.from_pretrained(checkpoint).rerank(
            QUERY, candidates(), BASE, domain="open"
        )
        for _ in range(6):
            status, body = post(url + "/rerank", json.dumps(request_body()).encode())
            assert status == 200 and body["ranking"] == expected.ranking
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_every_served_connection_sets_tcp_nodelay(monkeypatch):
    """With several workers uvicorn's shared socket never got TCP_NODELAY, and a client reusing
    its connection waited ~45 ms a request (the tenth walk; benchmarks/serve_keepalive.py)."""
    import socket
    from types import SimpleNamespace

    import uvicorn

    from fincrowd_ltr.serving import http as served
    from fincrowd_ltr.serving.nodelay import NoDelayH11Protocol, no_delay

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert not sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        no_delay(SimpleNamespace(get_extra_info=lambda name: sock))
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    no_delay(SimpleNamespace(get_extra_info=lambda name: None))  # not a socket: nothing to do
    from uvicorn.protocols.http.h11_impl import H11Protocol

    monkeypatch.setattr(H11Protocol, "connection_made", lambda self, transport: None)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # what the protocol does
        transport = SimpleNamespace(get_extra_info=lambda name: sock)
        NoDelayH11Protocol.connection_made(object.__new__(NoDelayH11Protocol), transport)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append(kw))
    monkeypatch.setattr(served, "create_app", lambda model, limits: "app")
    for name in (served.ENV, *served.BLAS_THREADS):  # serve sets them for its workers
        monkeypatch.setenv(name, os.environ.get(name, "1"))  # restored after
    served.serve(None, "127.0.0.1", 0, served.Limits(), workers=2, spec={})
    served.serve(None, "127.0.0.1", 0, served.Limits(), workers=1)
    assert len(calls) == 2 and all(kw["http"] is NoDelayH11Protocol for kw in calls)
