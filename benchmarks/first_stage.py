"""First-stage throughput over the FinanceBench corpus (queries per second, one process), each
first stage beside plain BM25 run the same way; medians of ``--repeats`` passes over all questions.

    .venv/bin/python benchmarks/first_stage.py [--data-root ../shared/data] [--k 100]
"""

from __future__ import annotations

import argparse
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
    rates = {}
    stages = make_first_stages(FIRST_STAGES, index, data, extractor, Path(args.cache_dir))
    for name, stage in stages:  # page vectors built or read before a stage is timed
        passes = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for q in queries:
                stage.search(q, args.k)
            passes.append(len(queries) / (time.perf_counter() - start))
        rates[name] = statistics.median(passes)
    for name, rate in rates.items():
        print(
            f"{name:<38} {rate:7.0f} queries/s  ratio to bm25 {rate / rates['bm25']:.2f}  "
            f"(target >= {TARGET_QPS})"
        )


if __name__ == "__main__":
    main()
