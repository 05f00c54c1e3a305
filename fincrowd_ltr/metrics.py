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
    method: str = "percentile",
) -> tuple[float, float]:
    """Bootstrap interval of the mean over queries: ``percentile`` or ``bca`` (bias-corrected
    and accelerated, Efron 1987: better coverage with few clusters and skewed gains).

    For paired comparisons pass per-query differences (the paired bootstrap). With ``groups``
    (company, context), whole groups are resampled (cluster bootstrap), because questions about
    one company or one table are not independent; BCa's acceleration then comes from the
    leave-one-group-out jackknife. A single group gives no interval (NaN, NaN).
    """
    if method not in ("percentile", "bca"):
        raise ValueError(f"method must be 'percentile' or 'bca'; got {method!r}")
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    if groups is None:
        draws = rng.integers(0, len(values), size=(n_resamples, len(values)))
        sums, counts = values, np.ones(len(values))
    else:
        if len(groups) != len(values):
            raise ValueError("groups must have one entry per value")
        names = sorted(set(groups))
        if len(names) < 2:  # resampling one cluster gives it back: no interval to state
            return (float("nan"), float("nan"))
        code = {g: i for i, g in enumerate(names)}
        member = np.array([code[g] for g in groups])
        sums = np.bincount(member, weights=values, minlength=len(names))
        counts = np.bincount(member, minlength=len(names)).astype(np.float64)
        draws = rng.integers(0, len(names), size=(n_resamples, len(names)))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    if method == "percentile":
        return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))
    return _bca(means, sums, counts, alpha)


def _bca(
    means: np.ndarray, sums: np.ndarray, counts: np.ndarray, alpha: float
) -> tuple[float, float]:
    """The BCa interval from bootstrap ``means`` and the clusters' ``sums`` and ``counts``."""
    from statistics import NormalDist

    normal = NormalDist()
    theta = sums.sum() / counts.sum()
    below = (np.sum(means < theta) + 0.5 * np.sum(means == theta)) / len(means)
    if len(sums) < 2 or not 0.0 < below < 1.0:  # a degenerate sample: no correction possible
        return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))
    z0 = normal.inv_cdf(below)
    jack = (sums.sum() - sums) / (counts.sum() - counts)  # leave one cluster out
    d = jack.mean() - jack
    spread = float(np.sum(d**2))
    a = float(np.sum(d**3)) / (6.0 * spread**1.5) if spread > 0 else 0.0
    ends = []
    for q in (alpha, 1.0 - alpha):
        z = z0 + normal.inv_cdf(q)
        if a * z >= 1.0:  # the adjustment breaks down: keep the percentile end
            ends.append(float(np.quantile(means, q)))
            continue
        ends.append(float(np.quantile(means, normal.cdf(z0 + z / (1.0 - a * z)))))
    return (ends[0], ends[1])
