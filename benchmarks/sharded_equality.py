"""Shard/merge scores against one index: the sharded BM25 index of the FinanceBench page corpus
(written as ``corpus.jsonl`` by ``benchmarks/million_pages.py``, copy 0: the pages as they are)
against one bm25s index over the same 49,942 pages, for every question (raw and as the
filing-aware first stage rewrites it): every page's score, and the top 100.

    .venv/bin/python benchmarks/sharded_equality.py [--data-root ../shared/data]
        [--work runs/million] [--shard-mb 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--work", type=Path, default=Path("runs/million"))
    parser.add_argument("--shard-mb", type=float, default=64)
    args = parser.parse_args()

    from million_pages import write_corpus

    from fincrowd_ltr.api.corpus import index_corpus, load_dataset
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.retrieval.bm25 import BM25Index
    from fincrowd_ltr.retrieval.query import QueryProcessor

    data = load_dataset("financebench", args.data_root)
    paths = write_corpus(data, args.work / "corpus", 1)
    start = time.perf_counter()
    sharded = index_corpus(paths, args.work / "equality-index", shard_mb=args.shard_mb)
    built = time.perf_counter() - start
    start = time.perf_counter()
    single = BM25Index.build(data.passages, progress=False)
    print(
        f"sharded: {len(sharded.names)} shards in {built:.0f} s; one bm25s index: "
        f"{time.perf_counter() - start:.0f} s; pages {len(sharded):,} / {len(single.pids):,}"
    )
    assert sharded.pids == single.pids, "the pages differ in order"
    process = QueryProcessor(FieldExtractor.from_passages(data.passages.values()))
    texts = [q.text for q in data.queries.values()]
    texts += [process(t) for t in texts]
    identical = same_top = 0
    worst = 0.0
    for text in texts:
        a, b = sharded.scores(text), single.scores(text)
        identical += bool(np.array_equal(a, b))
        worst = max(worst, float(np.abs(a - b).max()))
        same_top += sharded.search(text, 100)[0] == single.search(text, 100)[0]
    print(
        f"{len(texts)} queries ({len(data.queries)} questions, raw and processed): every "
        f"page's score bit-identical for {identical}, largest difference {worst:g}; "
        f"top 100 identical (ids and order) for {same_top}"
    )


if __name__ == "__main__":
    main()
