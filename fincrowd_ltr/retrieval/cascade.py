"""A reranker cascade: a fast first stage picks ``n`` candidates from the whole corpus, a stronger
ranker (alone or fused with the first-stage score) picks the top ``k`` of those, optionally
reordered by the correction and the gate.

Scores of different rankers live on different scales (BM25 sums, cosines, logits), so the first
stage's and the stage-2 ranker's scores are normalised per question (``minmax``, ``zscore`` or
``rank``; :func:`fincrowd_ltr.retrieval.fusion.normalise`) before they are combined:
``fused = weight * norm(stage 2) + (1 - weight) * norm(first stage)``. ``weight = 1`` is the plain
cascade (stage 2 alone decides the top ``k``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fincrowd_ltr.data.ranking import rank_order
from fincrowd_ltr.retrieval.fusion import NORMALISATIONS, weighted_fusion

DEFAULT_N = 200
DEFAULT_K = 20


@dataclass(frozen=True)
class CascadeSettings:
    """Stage sizes and how the two stages' scores are combined."""

    n: int = DEFAULT_N
    k: int = DEFAULT_K
    stage2: str = "dense"
    normalisation: str = "zscore"
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.k <= self.n:
            raise ValueError(f"cascade sizes need 1 <= k <= n; got k={self.k}, n={self.n}")
        if self.normalisation not in NORMALISATIONS:
            raise ValueError(
                f"unknown normalisation {self.normalisation!r}; choose from {NORMALISATIONS}"
            )
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"fusion weight must be in [0, 1]; got {self.weight}")

    @property
    def name(self) -> str:
        if self.weight == 1.0:
            return f"cascade:{self.stage2}"
        return f"cascade:{self.stage2}+first({self.normalisation},{self.weight:g})"


def cascade_order(
    first: np.ndarray, second: np.ndarray, settings: CascadeSettings
) -> tuple[np.ndarray, np.ndarray]:
    """``(order, fused)`` over the first ``settings.n`` candidates (given in first-stage order):
    indices of the top ``k`` by the fused score, then the other stage-1 candidates in the same
    fused order; ties keep first-stage order."""
    n = min(settings.n, len(first))
    fused = weighted_fusion(
        np.asarray(first[:n], np.float64),
        np.asarray(second[:n], np.float64),
        settings.weight,
        settings.normalisation,
    )
    return rank_order(fused), fused


def settings_grid(
    stage2: list[str], n: int = DEFAULT_N, k: int = DEFAULT_K, weights=(1.0, 0.75, 0.5, 0.25)
) -> list[CascadeSettings]:
    """Every stage-2 ranker alone and fused with the first stage under each normalisation."""
    grid = []
    for ranker in stage2:
        grid.append(CascadeSettings(n, k, ranker, "zscore", 1.0))
        for method in NORMALISATIONS:
            grid += [CascadeSettings(n, k, ranker, method, w) for w in weights if w < 1.0]
    return grid
