"""Throughput of the heavy steps on the local engine and on a local Dask cluster of 1 and 2 workers
(one thread each), side by side, and what a cluster would take for 10 million pages.

Steps, on FinanceBench pages chosen at random (seeded):

- embedding: MiniLM window embeddings (max over 254-piece windows), pages/s;
- field extraction: the deterministic extractor, pages/s;
- first-stage retrieval: the entity-aware first stage (bm25+query+entity) over the whole corpus,
  questions/s (the 150 questions, repeated).

Each step's chunks are the ones the engine uses in production (smaller for embedding, so that the
sample splits over the workers). Timings are medians of ``--repeats``; the Dask timings include
sending work and results, not starting the cluster.

    .venv/bin/python benchmarks/engine.py [--pages 256] [--extract 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)

from fincrowd_ltr import engine as engines  # noqa: E402
from fincrowd_ltr.data import load_dataset  # noqa: E402
from fincrowd_ltr.fields import FieldExtractor, extract_passages  # noqa: E402
from fincrowd_ltr.retrieval import banks as bank_module  # noqa: E402
from fincrowd_ltr.retrieval import windowed_encoder  # noqa: E402
from fincrowd_ltr.retrieval.bm25 import BM25Index  # noqa: E402
from fincrowd_ltr.retrieval.dense import DenseEncoder  # noqa: E402
from fincrowd_ltr.retrieval.first_stage import FirstStage  # noqa: E402

PAGES_10M = 10_000_000


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--pages", type=int, default=256, help="pages embedded per run")
    parser.add_argument("--extract", type=int, default=20000, help="pages extracted per run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = load_dataset("financebench", args.data_root, "all")
    rng = random.Random(0)
    pages = rng.sample(list(data.passages.values()), max(args.pages, args.extract))
    embed_texts = [p.text for p in pages[: args.pages]]
    extract_sample = pages[: args.extract]
    extractor = FieldExtractor.from_passages(data.passages.values())
    index = BM25Index.build(data.passages, cache_dir=args.cache_dir, progress=False)
    stage = FirstStage("bm25+query+entity", index, data.passages, extractor)
    questions = list(data.queries.values()) * 4
    windowed_encoder.TEXTS_PER_CHUNK = 32  # the sample splits over the workers

    def embed():
        DenseEncoder(cache_dir=None).encode_texts(embed_texts)

    def extract():
        extract_passages(extractor, extract_sample)

    def retrieve():
        bank_module._search_all(questions, stage, 100)

    steps = {
        "embedding (pages/s)": (embed, len(embed_texts)),
        "field extraction (pages/s)": (extract, len(extract_sample)),
        "first-stage retrieval (questions/s)": (retrieve, len(questions)),
    }
    rates: dict[str, dict[str, float]] = {name: {} for name in steps}
    for label, make in (
        ("local", lambda: engines.LocalEngine("cpu")),
        ("dask x1", lambda: engines.DaskEngine(workers=1, device="cpu")),
        ("dask x2", lambda: engines.DaskEngine(workers=2, device="cpu")),
    ):
        engine = make()
        try:
            with engines.using(engine):
                for name, (fn, n) in steps.items():
                    fn()  # warm: model loaded and sent to the workers, caches built
                    rates[name][label] = n / timed(fn, args.repeats)
                    print(f"{label:<8} {name}: {rates[name][label]:.1f}", flush=True)
        finally:
            engine.close()
    print(f"\nthroughput, medians of {args.repeats}, {os.cpu_count()} cores, one thread per worker")
    print(f"{'step':<38}{'local':>9}{'dask x1':>9}{'dask x2':>9}{'x2 / x1':>9}")
    for name, row in rates.items():
        print(
            f"{name:<38}{row['local']:>9.1f}{row['dask x1']:>9.1f}{row['dask x2']:>9.1f}"
            f"{row['dask x2'] / row['dask x1']:>8.2f}x"
        )
    per_worker = rates["embedding (pages/s)"]["dask x1"]
    extract_rate = rates["field extraction (pages/s)"]["dask x1"]
    print("\n10 million pages, from the measured per-worker rates (one core per worker):")
    for machines, cores in ((1, 2), (10, 16), (100, 16)):
        workers = machines * cores
        hours = PAGES_10M / (per_worker * workers) / 3600
        print(
            f"  {machines:>3} machine(s) x {cores} cores: embedding 10e6 / ({per_worker:.1f} x "
            f"{workers}) s = {hours:,.1f} h; field extraction "
            f"{PAGES_10M / (extract_rate * workers) / 3600:,.2f} h"
        )


if __name__ == "__main__":
    main()
