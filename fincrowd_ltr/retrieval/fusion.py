"""Combining base rankers: reciprocal rank fusion, score normalisation and weighted fusion
(float64)."""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.ranking import rank_order

RRF_K = 60


def ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks by descending score; ties keep input order (stable)."""
    order = rank_order(np.asarray(scores, dtype=np.float64))
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(1, len(order) + 1)
    return out


def reciprocal_rank_fusion(score_lists: list[np.ndarray], k: int = RRF_K) -> np.ndarray:
    """RRF score ``sum_r 1 / (k + rank_r)`` over rankers (Cormack et al., 2009)."""
    if not score_lists:
        raise ValueError("reciprocal_rank_fusion needs at least one score list")
    return np.sum([1.0 / (k + ranks(s)) for s in score_lists], axis=0)


NORMALISATIONS = ("minmax", "zscore", "rank")


def normalise(scores: np.ndarray, method: str) -> np.ndarray:
    """Scores of one candidate list mapped to a common scale (float64), so that rankers can be
    combined or thresholded:

    - ``minmax``: ``(s - min) / (max - min)`` in [0, 1]; all-equal scores map to 0.5;
    - ``zscore``: ``(s - mean) / sd`` (population sd); all-equal scores map to 0;
    - ``rank``: ``1 - (rank - 1) / (n - 1)`` in [0, 1], best 1, ties in input order (stable);
      a single candidate maps to 1.

    Each is monotone, so every normalisation keeps the ranker's own order.
    """
    s = np.asarray(scores, dtype=np.float64)
    if method not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {method!r}; choose from {NORMALISATIONS}")
    if s.size == 0:
        return s.copy()
    if method == "minmax":
        span = s.max() - s.min()
        return (s - s.min()) / span if span > 0 else np.full_like(s, 0.5)
    if method == "zscore":
        sd = s.std()
        return (s - s.mean()) / sd if sd > 0 else np.zeros_like(s)
    n = len(s)
    return 1.0 - (ranks(s) - 1) / (n - 1) if n > 1 else np.ones_like(s)


def weighted_fusion(
    first: np.ndarray, second: np.ndarray, weight: float, method: str
) -> np.ndarray:
    """``weight * normalise(second) + (1 - weight) * normalise(first)``, float64."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"fusion weight must be in [0, 1]; got {weight}")
    return weight * normalise(second, method) + (1.0 - weight) * normalise(first, method)
