"""Options for faster dense scoring on this CPU, side by side with today's MiniLM (fp32, max over
254-piece windows), with the quality check: per-bank Spearman correlation of each option's scores
with today's on FinanceBench entity-aware banks (the issue asks for a median >= 0.99).

- speed options, timed on the pages of ``--banks`` banks: fp32 with 2 threads (today), fp32 with
  1 thread, int8 dynamic quantisation of the linear layers (``torch.ao``);
- fewer windows per page (the first K windows, K = 1..4): scored from the cached full embeddings
  (the windows are the same), over every bank whose pages are cached; the speed gain is the share
  of windows skipped.

    .venv/bin/python benchmarks/dense.py [--data-root ../shared/data] [--banks 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from fincrowd_ltr.api.corpus import build_banks, load_dataset
from fincrowd_ltr.retrieval.dense import DenseEncoder

CHUNK = 256


def encode(encoder: DenseEncoder, texts: list[str]) -> tuple[list[np.ndarray], float]:
    start = time.perf_counter()
    out = []
    for i in range(0, len(texts), CHUNK):
        out += encoder.encode_chunk(texts[i : i + CHUNK])
    return out, time.perf_counter() - start


def bank_rho(banks, data, query_vectors, arrays, reference, windows=None) -> list[float]:
    rhos = []
    for bank in banks:
        q = query_vectors[bank.qid]
        texts = [data.passages[p].text for p in bank.pids]
        full = np.array([(reference[t] @ q).max() for t in texts])
        other = np.array([(arrays[t][:windows] @ q).max() for t in texts])
        rhos.append(spearmanr(full, other).statistic)
    return rhos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--banks", type=int, default=4, help="banks whose pages are re-embedded")
    args = parser.parse_args()
    data = load_dataset("financebench", args.data_root, "all")
    bankset = build_banks(
        data, ["bm25"], first_stage="bm25+query+entity", cache_dir=args.cache_dir, progress=False
    )
    cached = DenseEncoder(cache_dir=Path(args.cache_dir))
    banks = [
        b
        for b in bankset.banks.values()
        if all(cached.cache.get(data.passages[p].text) is not None for p in b.pids)
    ]
    if not banks:
        raise SystemExit("no bank has all its pages embedded: run `fincrowd banks --ranker dense`")
    reference = {
        data.passages[p].text: cached.cache.get(data.passages[p].text)
        for b in banks
        for p in b.pids
    }
    queries = {b.qid: cached.encode_queries([data.queries[b.qid].text])[0] for b in banks}
    timed = banks[: args.banks]
    texts = list(dict.fromkeys(data.passages[p].text for b in timed for p in b.pids))
    n_windows = sum(len(reference[t]) for t in texts)
    print(f"{len(texts)} pages, {n_windows} windows of {len(timed)} banks; Spearman over them")
    print(f"{'option':<34}{'windows/s':>10}{'pages/s':>9}{'speed-up':>9}{'median rho':>12}")
    base_rate = None
    threads = torch.get_num_threads()
    for name, build, n_threads in (
        (f"fp32, {threads} threads (today)", lambda: DenseEncoder(cache_dir=None), threads),
        ("fp32, 1 thread", lambda: DenseEncoder(cache_dir=None), 1),
        ("int8 dynamic quantisation", _int8, threads),
    ):
        torch.set_num_threads(n_threads)
        encoder = build()
        arrays, seconds = encode(encoder, texts)
        rate = n_windows / seconds
        base_rate = base_rate or rate
        scored = dict(zip(texts, arrays, strict=True))
        rho = statistics.median(bank_rho(timed, data, queries, scored, reference))
        print(
            f"{name:<34}{rate:>10.1f}{len(texts) / seconds:>9.1f}{rate / base_rate:>8.2f}x"
            f"{rho:>12.4f}"
        )
    torch.set_num_threads(threads)
    counts = np.array([len(reference[t]) for t in reference])
    for k in (1, 2, 3, 4):
        kept = np.minimum(counts, k).sum() / counts.sum()
        rho = statistics.median(bank_rho(banks, data, queries, reference, reference, windows=k))
        print(
            f"{f'first {k} window(s) per page':<34}{'':>10}{'':>9}{1 / kept:>8.2f}x{rho:>12.4f}"
            f"   ({len(banks)} banks)"
        )


def _int8() -> DenseEncoder:
    encoder = DenseEncoder(cache_dir=None)
    encoder.model = torch.ao.quantization.quantize_dynamic(
        encoder.model, {torch.nn.Linear}, dtype=torch.qint8
    )
    return encoder


if __name__ == "__main__":
    main()
