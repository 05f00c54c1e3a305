"""One client on a reused (keep-alive) connection against ``fincrowd serve --workers 2``: uvicorn's
plain h11 protocol (the baseline, what ``serve`` used before) beside the package's
``NoDelayH11Protocol``, each in its own server on loopback, side by side and alternated.

Prints per protocol the median latency of ``/health`` and of ``/rerank`` (one bank of
``--candidates`` made-up candidates, BM25-like base scores) over ``--repeats`` requests, and the
ratio baseline / no-delay. With several workers uvicorn binds the shared socket with ``proto``
0, so asyncio never sets ``TCP_NODELAY`` and each response waits for the client's delayed ACK.

    .venv/bin/python benchmarks/serve_keepalive.py --checkpoint checkpoints/demo \\
        [--workers 2 --repeats 30 --rounds 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SERVER = """
import json, os, sys, uvicorn
from fincrowd_ltr.serving.nodelay import NoDelayH11Protocol
protocol = NoDelayH11Protocol if sys.argv[2] == "nodelay" else "h11"
uvicorn.run("fincrowd_ltr.serving.http:app_from_env", factory=True, host="127.0.0.1",
            port=int(sys.argv[1]), workers=int(sys.argv[3]), log_level="warning", http=protocol)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect(port: int) -> http.client.HTTPConnection:
    for _ in range(120):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/health")
            c.getresponse().read()
            return c
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"no server on port {port}")


def _median_ms(c: http.client.HTTPConnection, method: str, path: str, body, repeats: int) -> float:
    times = []
    headers = {"Content-Type": "application/json"} if body else {}
    for _ in range(repeats + 1):  # the first request is not counted
        start = time.perf_counter()
        c.request(method, path, body=body, headers=headers)
        response = c.getresponse()
        answer = response.read()
        assert response.status == 200, (response.status, answer[:300])
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[1:])


def measure(protocol: str, args, body: bytes) -> dict:
    port = _free_port()
    env = dict(os.environ)
    from fincrowd_ltr.serving.http import ENV, Limits

    env[ENV] = json.dumps({
        "checkpoint": args.checkpoint, "ranker": None, "runtime": "torch",
        "limits": Limits().__dict__, "threads": 1,
    })  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), protocol, str(args.workers)], env=env
    )
    try:
        c = _connect(port)
        return {
            "health": _median_ms(c, "GET", "/health", None, args.repeats),
            "rerank": _median_ms(c, "POST", "/rerank", body, args.repeats),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="checkpoints/demo")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=100)
    args = parser.parse_args()
    candidates = [
        {"id": f"c{i}", "text": f"Acme {2015 + i % 8} revenue and operating income, note {i}",
         "metadata": {"company": "Acme", "period": str(2015 + i % 8)},
         "base_score": float(args.candidates - i)}
        for i in range(args.candidates)
    ]  # fmt: skip
    body = json.dumps(
        {"query": "What was Acme's revenue in FY2019?", "candidates": candidates}
    ).encode()
    runs: dict[str, list[dict]] = {"h11": [], "nodelay": []}
    for r in range(args.rounds):  # alternated, so host noise falls on both
        for protocol in ("h11", "nodelay") if r % 2 == 0 else ("nodelay", "h11"):
            runs[protocol].append(measure(protocol, args, body))
    print(f"{args.workers} workers, one keep-alive client, medians of {args.repeats} requests, "
          f"{args.rounds} rounds (each round's median in brackets)")  # fmt: skip
    for what in ("health", "rerank"):
        base = [m[what] for m in runs["h11"]]
        fix = [m[what] for m in runs["nodelay"]]
        b, f = statistics.median(base), statistics.median(fix)
        print(
            f"/{what}: h11 {b:.1f} ms {[round(x, 1) for x in base]}, no-delay {f:.1f} ms "
            f"{[round(x, 1) for x in fix]}, ratio {b / f:.1f}x"
        )


if __name__ == "__main__":
    main()
