"""Ranking metrics on one ranked list, in float64 (binary gain, log2 discount).

Tie rule: metrics take a *ranked list*; ties between scores are resolved before, when the
ranking is made (``CandidateBank.order``: descending score, ties by first-stage bank position).
Denominators count every relevant passage in the qrels, including those outside the bank, so
a bank that misses evidence cannot score full recall.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _relevant(qrels: dict[str, int]) -> set[str]:
    return {pid for pid, grade in qrels.items() if grade > 0}


def recall_at_k(ranked: Sequence[str], qrels: dict[str, int], k: int) -> float:
    """Share of the relevant passages found in the top ``k``."""
    rel = _relevant(qrels)
    if not rel:
        raise ValueError("recall is undefined for a query without relevant passages")
    return sum(1 for pid in ranked[:k] if pid in rel) / len(rel)


def ndcg_at_k(ranked: Sequence[str], qrels: dict[str, int], k: int) -> float:
    """nDCG@k with binary gain and ``1 / log2(rank + 1)`` discount."""
    rel = _relevant(qrels)
    if not rel:
        raise ValueError("nDCG is undefined for a query without relevant passages")
    dcg = sum(1.0 / math.log2(i + 2) for i, pid in enumerate(ranked[:k]) if pid in rel)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(rel))))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[str], qrels: dict[str, int]) -> float:
    """1 / rank of the first relevant passage in the whole list; 0 if none is ranked."""
    rel = _relevant(qrels)
    for i, pid in enumerate(ranked):
        if pid in rel:
            return 1.0 / (i + 1)
    return 0.0


def first_relevant_rank(ranked: Sequence[str], qrels: dict[str, int]) -> int | None:
    """1-based rank of the highest-ranked relevant passage, or None."""
    rel = _relevant(qrels)
    return next((i + 1 for i, pid in enumerate(ranked) if pid in rel), None)


METRICS = {
    "recall@10": lambda r, q: recall_at_k(r, q, 10),
    "recall@100": lambda r, q: recall_at_k(r, q, 100),
    "ndcg@10": lambda r, q: ndcg_at_k(r, q, 10),
    "mrr": reciprocal_rank,
}


def per_query(ranked: Sequence[str], qrels: dict[str, int]) -> dict[str, float]:
    """All report metrics for one query."""
    return {name: float(fn(ranked, qrels)) for name, fn in METRICS.items()}


def bootstrap_ci(
    values: np.ndarray,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    groups: list[str] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over queries.

    For paired comparisons pass per-query differences (the paired bootstrap). With ``groups``
    (company, context), whole groups are resampled (cluster bootstrap), because questions about
    one company or one table are not independent.
    """
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    if groups is None:
        idx = rng.integers(0, len(values), size=(n_resamples, len(values)))
        means = values[idx].mean(axis=1)
    else:
        if len(groups) != len(values):
            raise ValueError("groups must have one entry per value")
        names = sorted(set(groups))
        code = {g: i for i, g in enumerate(names)}
        member = np.array([code[g] for g in groups])
        sums = np.bincount(member, weights=values, minlength=len(names))
        counts = np.bincount(member, minlength=len(names)).astype(np.float64)
        draws = rng.integers(0, len(names), size=(n_resamples, len(names)))
        means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))
