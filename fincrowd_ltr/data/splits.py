"""Group-disjoint splits: FinanceBench by company, TAT-QA by context, never a group in two parts.

Folds are assigned by hashing the group name with a seed, so a new company or context lands in a
fold without any list of known groups, and the assignment of existing groups never changes when
others are added (held-out data runs unchanged).
"""

from __future__ import annotations

import hashlib

from fincrowd_ltr.data.schema import Dataset


def group_fold(group: str, k: int, seed: int = 0) -> int:
    """The fold (0..k-1) of a group: a stable hash of ``seed`` and the group name."""
    digest = hashlib.sha1(f"{seed}:{group}".encode()).hexdigest()
    return int(digest, 16) % k


def group_kfold(dataset: Dataset, k: int = 5, seed: int = 0) -> list[list[str]]:
    """Query ids per fold; all queries of one group share a fold."""
    folds: list[list[str]] = [[] for _ in range(k)]
    for qid, query in dataset.queries.items():
        folds[group_fold(query.group, k, seed)].append(qid)
    return folds


def fold_split(
    dataset: Dataset, test_fold: int, k: int = 5, seed: int = 0, validation: bool = True
) -> dict[str, list[str]]:
    """Train / validation / test query ids for one cross-validation round.

    The test part is fold ``test_fold``; the validation part is the next fold (when
    ``validation``); the rest is training. Groups never straddle parts.
    """
    folds = group_kfold(dataset, k, seed)
    val_fold = (test_fold + 1) % k if validation else None
    out = {"train": [], "val": [], "test": list(folds[test_fold])}
    for i, qids in enumerate(folds):
        if i == test_fold:
            continue
        out["val" if i == val_fold else "train"].extend(qids)
    return out
