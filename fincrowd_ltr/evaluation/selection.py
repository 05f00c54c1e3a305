"""Choosing among named alternatives on training folds only: each group fold is served by the
alternative with the best mean per-query metrics over the *other* folds' questions."""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.data.splits import FoldPlan

Rows = dict[str, dict[str, dict[str, float]]]  # alternative -> qid -> metric -> value


def best(rows: Rows, qids: list[str], criteria: tuple[str, ...]) -> str:
    """The alternative with the best mean of ``criteria`` (in order) over ``qids``; the first
    listed wins ties."""

    def key(name: str) -> tuple[float, ...]:
        return tuple(float(np.mean([rows[name][q][m] for q in qids])) for m in criteria)

    return max(rows, key=key)  # max keeps the first of equal keys


def choose_per_fold(
    dataset: Dataset,
    rows: Rows,
    qids: list[str],
    criteria: tuple[str, ...],
    k: int = 5,
    seed: int = 0,
) -> tuple[dict[str, str], list[str | None]]:
    """``({qid: alternative chosen for its fold}, [choice per fold])``; a fold without test or
    training questions gets no choice (None) and its questions none."""
    folds = [list(f) for f in FoldPlan.by_group(dataset, k, seed, qids).folds]
    chosen: dict[str, str] = {}
    per_fold: list[str | None] = []
    for i, test in enumerate(folds):
        train = [q for j, fold in enumerate(folds) if j != i for q in fold]
        if not test or not train:
            per_fold.append(None)
            continue
        name = best(rows, train, criteria)
        per_fold.append(name)
        chosen.update(dict.fromkeys(test, name))
    return chosen, per_fold
