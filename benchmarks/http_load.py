"""Load test of ``fincrowd serve`` on loopback with 1 and N worker processes side by side, beside
the in-process API on the same requests.

Requests are real FinanceBench banks (100 candidates, page texts, base scores of ``--ranker``)
sent by concurrent clients over keep-alive connections; every response is checked against the
in-process ``GatedCorrection`` (same ranking, scores to 1e-9). Prints, per worker count,
throughput, p50 / p99 latency, 4xx/5xx counts and mismatches, and the in-process median.

    .venv/bin/python benchmarks/http_load.py --checkpoint checkpoints/default \\
        [--requests 2000 --clients 8 --workers 1,2 --ranker dense --data-root ../shared/data]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from _banks import financebench_banks

from fincrowd_ltr.serving.reranker import FinCrowdReranker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _requests(
    data_root: str | None, cache_dir: str, domain: str, limit: int, ranker: str
) -> list[dict]:
    data, banks = financebench_banks(data_root, cache_dir, limit, ranker)
    out = []
    for bank in banks:
        cands = []
        for pid, score in zip(bank.pids, bank.scores[ranker], strict=True):
            p = data.passages[pid]
            meta = {"company": p.company, "period": p.period, "doc_type": p.doc_type}
            cands.append({"id": pid, "text": p.text, "base_score": float(score), "metadata": meta})
        out.append({"query": data.queries[bank.qid].text, "domain": domain, "candidates": cands})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoint", default="checkpoints/default")
    parser.add_argument("--domain", default="financebench")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--distinct", type=int, default=50, help="distinct banks, cycled")
    parser.add_argument("--ranker", default="dense", help="base scores of the requests")
    parser.add_argument("--workers", default="1,2", help="worker counts to compare")
    args = parser.parse_args()
    payloads = _requests(args.data_root, args.cache_dir, args.domain, args.distinct, args.ranker)
    bodies = [json.dumps(p).encode() for p in payloads]

    reranker = FinCrowdReranker.from_pretrained(args.checkpoint)
    expected, inproc = [], []
    for p in payloads:  # warm pass, then timed passes (the server's cache warms the same way)
        cands = [{k: c[k] for k in ("id", "text", "metadata")} for c in p["candidates"]]
        scores = [c["base_score"] for c in p["candidates"]]
        expected.append(reranker.rerank(p["query"], cands, scores, domain=p["domain"]))
    for _ in range(3):
        for p in payloads:
            cands = [{k: c[k] for k in ("id", "text", "metadata")} for c in p["candidates"]]
            scores = [c["base_score"] for c in p["candidates"]]
            start = time.perf_counter()
            reranker.rerank(p["query"], cands, scores, domain=p["domain"])
            inproc.append(time.perf_counter() - start)

    mine = statistics.median(inproc)
    print(f"in-process rerank, same requests: {mine * 1e3:.2f} ms median")
    for workers in [int(w) for w in args.workers.split(",")]:
        results, wall = _load(args, bodies, expected, workers)
        latencies = sorted(r[0] for r in results)
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        errors_5xx = sum(1 for r in results if r[1] >= 500)
        errors_4xx = sum(1 for r in results if 400 <= r[1] < 500)
        wrong = sum(1 for r in results if r[1] == 200 and not r[2])
        print(
            f"HTTP, {workers} worker(s): {len(results)} requests of 100 candidates from "
            f"{args.clients} clients in {wall:.1f} s ({len(results) / wall:.1f} requests/s); "
            f"p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms; 5xx {errors_5xx}, 4xx {errors_4xx}, "
            f"differing from in-process {wrong}; p50 / in-process {p50 / mine:.1f}x"
        )


def _load(args, bodies, expected, workers: int):
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fincrowd_ltr.cli",
            "serve",
            f"--checkpoint={args.checkpoint}",
            f"--port={port}",
            f"--workers={workers}",
            "--max-text-chars=1000000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        # warm every worker's caches with each distinct request (not timed)
        for _ in range(workers):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            for body in bodies:
                conn.request("POST", "/rerank", body, {"Content-Type": "application/json"})
                conn.getresponse().read()
            conn.close()

        def client(indices: list[int]) -> list[tuple[float, int, bool]]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            out = []
            for i in indices:
                k = i % len(bodies)
                start = time.perf_counter()
                conn.request("POST", "/rerank", bodies[k], {"Content-Type": "application/json"})
                response = conn.getresponse()
                raw = response.read()
                elapsed = time.perf_counter() - start
                ok = False
                if response.status == 200:
                    got = json.loads(raw)
                    ok = got["ranking"] == expected[k].ranking and np.allclose(
                        got["scores"], expected[k].scores, atol=1e-9, rtol=0
                    )
                out.append((elapsed, response.status, ok))
            conn.close()
            return out

        shares = [list(range(c, args.requests, args.clients)) for c in range(args.clients)]
        start = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            results = [r for part in pool.map(client, shares) for r in part]
        wall = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=20)
    return results, wall


if __name__ == "__main__":
    main()
