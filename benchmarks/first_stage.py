"""First-stage throughput over the FinanceBench corpus (queries per second, one process), each
first stage beside plain BM25 run the same way; medians of ``--repeats`` passes over all questions.
A stage that searches a batch (``search_many``: the ``+static`` ones) is also timed on all the
questions at once, beside its one-question-at-a-time rate, and its results compared.

    .venv/bin/python benchmarks/first_stage.py [--data-root ../shared/data] [--k 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.first_stage import FIRST_STAGES, make_first_stages

TARGET_QPS = 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = load_dataset("financebench", args.data_root, "all")
    index = BM25Index.build(data.passages, cache_dir=Path(args.cache_dir), progress=False)
    extractor = FieldExtractor.from_passages(data.passages.values())
    queries = [q.text for q in data.queries.values()]
    rates, batched = {}, {}
    stages = make_first_stages(FIRST_STAGES, index, data, extractor, Path(args.cache_dir))
    for name, stage in stages:  # page vectors built or read before a stage is timed
        passes = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            alone = [stage.search(q, args.k) for q in queries]
            passes.append(len(queries) / (time.perf_counter() - start))
        rates[name] = statistics.median(passes)
        many = getattr(stage, "search_many", None)
        if many is not None and getattr(stage, "static_weight", 0):
            passes = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                together = many(queries, args.k)
                passes.append(len(queries) / (time.perf_counter() - start))
            same = all(
                a[0] == b[0] and (a[1] == b[1]).all() for a, b in zip(alone, together, strict=True)
            )
            batched[name] = (statistics.median(passes), same)
    print(f"load average {os.getloadavg()[0]:.1f}")
    for name, rate in rates.items():
        print(
            f"{name:<38} {rate:7.0f} queries/s  ratio to bm25 {rate / rates['bm25']:.2f}  "
            f"(target >= {TARGET_QPS})"
        )
        if name in batched:
            rate_many, same = batched[name]
            print(
                f"{'  the questions as one batch':<38} {rate_many:7.0f} queries/s  "
                f"{rate_many / rate:.2f}x one at a time, same results: {'yes' if same else 'NO'}"
            )


if __name__ == "__main__":
    main()
