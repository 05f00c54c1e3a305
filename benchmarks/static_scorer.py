"""The static dense scorer beside MiniLM: pages per second on the same random FinanceBench pages
(max over 254-piece windows, everything computed, nothing cached), with 1 and 2 threads, each
thread count in its own process; medians of ``--repeats``; the machine's load printed beside
each figure. Quality (R@10, nDCG@10 of the dense and fused bases):
``benchmarks/static_quality.py``.

    .venv/bin/python benchmarks/static_scorer.py [--data-root ../shared/data] [--pages 64]
        [--static-pages 2000] [--repeats 3] [--static DIR]

``--static DIR``: a saved static scorer (default: the corpus's own, built and cached by
``fc.load_encoder("static", "financebench")``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = 50.0


def measure(args: argparse.Namespace) -> dict:
    """Rates in this process (its thread count set by the caller's environment)."""
    import random

    import torch

    from fincrowd_ltr.api.corpus import load_dataset, load_encoder
    from fincrowd_ltr.retrieval.dense import DenseEncoder
    from fincrowd_ltr.retrieval.static import StaticEncoder, StaticModel

    torch.set_num_threads(args.threads)
    data = load_dataset("financebench", args.data_root)
    static_model = (
        StaticModel.load(args.static)
        if args.static
        else load_encoder("static", data, cache_dir=args.cache_dir, progress=False).model
    )
    rng = random.Random(0)
    pages = [p.text for p in rng.sample(list(data.passages.values()), args.static_pages)]
    minilm = DenseEncoder(cache_dir=None)
    out: dict = {"threads": args.threads, "load": os.getloadavg()[0]}
    out["minilm"] = median_rate(lambda: minilm.encode_chunk(pages[: args.pages]), args)
    # a fresh encoder each time: nothing memoised
    static = lambda: StaticEncoder(static_model).window_vectors(pages)  # noqa: E731
    out["static"] = median_rate(static, args, len(pages))
    out["load_after"] = os.getloadavg()[0]
    return out


def median_rate(work, args: argparse.Namespace, pages: int | None = None) -> float:
    """Median pages per second of ``work`` over ``args.repeats`` runs."""
    rates = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        work()
        rates.append((pages or args.pages) / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--pages", type=int, default=64, help="pages MiniLM embeds per repeat")
    parser.add_argument("--static-pages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--static", default=None)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        print(json.dumps(measure(args)))
        return
    rows = []
    for threads in (1, 2):
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(threads),
            "RAYON_NUM_THREADS": str(threads),
            "TOKENIZERS_PARALLELISM": "true",
        }
        cmd = [sys.executable, __file__, "--threads", str(threads)]
        for flag in ("data_root", "static"):
            if getattr(args, flag):
                cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
        cmd += ["--cache-dir", args.cache_dir, "--pages", str(args.pages)]
        cmd += ["--static-pages", str(args.static_pages), "--repeats", str(args.repeats)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        f"pages/s, FinanceBench pages, median of {args.repeats} (MiniLM on {args.pages} pages, "
        f"static on {args.static_pages})"
    )
    print(f"{'threads':>7} {'MiniLM':>8} {'static':>8} {'ratio':>7} {'load (1 min)':>14}")
    for row in rows:
        ratio = row["static"] / row["minilm"]
        print(
            f"{row['threads']:>7} {row['minilm']:>8.1f} {row['static']:>8.0f} {ratio:>6.0f}x "
            f"{row['load']:>6.2f} -> {row['load_after']:.2f}"
        )
    best = rows[-1]["static"] / rows[-1]["minilm"]
    verdict = "MET" if best >= TARGET else "NOT MET"
    print(f"target: static >= {TARGET:.0f}x MiniLM on 2 threads: {verdict} ({best:.0f}x)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
