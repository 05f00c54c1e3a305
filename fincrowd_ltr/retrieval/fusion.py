"""Combining base rankers: reciprocal rank fusion and score normalisation (float64)."""

from __future__ import annotations

import numpy as np

RRF_K = 60


def ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks by descending score; ties keep input order (stable)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(1, len(order) + 1)
    return out


def reciprocal_rank_fusion(score_lists: list[np.ndarray], k: int = RRF_K) -> np.ndarray:
    """RRF score ``sum_r 1 / (k + rank_r)`` over rankers (Cormack et al., 2009)."""
    if not score_lists:
        raise ValueError("reciprocal_rank_fusion needs at least one score list")
    return np.sum([1.0 / (k + ranks(s)) for s in score_lists], axis=0)
