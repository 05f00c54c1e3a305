"""Matching incompatible distractors to compatible ones on observed difficulty.

Each candidate carries covariates: model similarity and lexical similarity to the query, whether it
comes from the reference company, whether it is a table, its length and its numeric density. The
binary covariates are matched exactly; the continuous ones (z-scored within the query) by
distance. Two methods: greedy nearest-neighbour matching with a caliper (primary) and coarsened
exact matching (robustness). Both walk the incompatible candidates in their frozen list order, so
the first ``n`` pairs of a query are the same whatever ``n`` is asked: pools are nested.
"""

from __future__ import annotations

import numpy as np

COVARIATES = (
    "model_similarity",
    "lexical_similarity",
    "same_company",
    "table_form",
    "log_length",
    "numeric_density",
)
EXACT = (2, 3)  # same_company, table_form
CONTINUOUS = (0, 1, 4, 5)
DEFAULT_CALIPER = 1.0  # Euclidean distance over the four within-query z-scored covariates
DEFAULT_BINS = 4


def standardise_within(covariates: np.ndarray) -> np.ndarray:
    """Z-score the continuous covariates over one query's candidates (constant columns -> 0)."""
    out = covariates.astype(np.float64).copy()
    cols = list(CONTINUOUS)
    values = out[:, cols]
    std = values.std(axis=0)
    out[:, cols] = np.where(std > 0, (values - values.mean(axis=0)) / np.where(std > 0, std, 1), 0)
    return out


def match_nearest(
    treated: list[int],
    controls: list[int],
    covariates: np.ndarray,
    limit: int,
    caliper: float = DEFAULT_CALIPER,
) -> list[tuple[int, int]]:
    """Greedy 1:1 matching without replacement: each treated row (in order) takes the nearest
    unused control with equal exact covariates within ``caliper``; unmatched treated rows are
    skipped. Rows index ``covariates`` (already standardised). At most ``limit`` pairs."""
    z = covariates
    free = list(controls)
    pairs: list[tuple[int, int]] = []
    for t in treated:
        if len(pairs) >= limit or not free:
            break
        cand = np.array(free)
        same = np.all(z[cand][:, list(EXACT)] == z[t, list(EXACT)], axis=1)
        if not same.any():
            continue
        dist = np.linalg.norm(z[cand][:, list(CONTINUOUS)] - z[t, list(CONTINUOUS)], axis=1)
        dist[~same] = np.inf
        best = int(np.argmin(dist))  # first of equals: controls keep their list order
        if dist[best] <= caliper:
            pairs.append((t, free.pop(best)))
    return pairs


def strata(covariates: np.ndarray, bins: int = DEFAULT_BINS) -> list[tuple]:
    """Coarsened-exact strata: exact binary covariates and quantile bins of the continuous ones
    (bin edges over all the query's candidates)."""
    keys = [covariates[:, c] for c in EXACT]
    for c in CONTINUOUS:
        edges = np.unique(np.quantile(covariates[:, c], np.linspace(0, 1, bins + 1)[1:-1]))
        keys.append(np.searchsorted(edges, covariates[:, c], side="right"))
    return list(zip(*(k.tolist() for k in keys), strict=True))


def match_cem(
    treated: list[int],
    controls: list[int],
    covariates: np.ndarray,
    limit: int,
    bins: int = DEFAULT_BINS,
) -> list[tuple[int, int]]:
    """Coarsened exact matching: each treated row (in order) takes the first unused control of
    its stratum. At most ``limit`` pairs."""
    keys = strata(covariates, bins)
    free: dict[tuple, list[int]] = {}
    for c in controls:
        free.setdefault(keys[c], []).append(c)
    pairs: list[tuple[int, int]] = []
    for t in treated:
        if len(pairs) >= limit:
            break
        pool = free.get(keys[t])
        if pool:
            pairs.append((t, pool.pop(0)))
    return pairs


def standardised_mean_differences(treated: np.ndarray, controls: np.ndarray) -> list[float]:
    """Per covariate (columns): ``(mean_t - mean_c) / sqrt((var_t + var_c) / 2)``; 0 where both
    groups are constant and equal, ``nan`` for an empty group."""
    if len(treated) == 0 or len(controls) == 0:
        return [float("nan")] * treated.shape[1]
    diff = treated.mean(axis=0) - controls.mean(axis=0)
    pooled = np.sqrt((treated.var(axis=0) + controls.var(axis=0)) / 2.0)
    out = np.where(
        pooled > 0, diff / np.where(pooled > 0, pooled, 1.0), np.where(diff == 0, 0, np.inf)
    )
    return [float(x) for x in out]


MATCHERS = {"nearest": match_nearest, "cem": match_cem}
