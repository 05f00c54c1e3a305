"""Group-disjoint folds: FinanceBench by company, TAT-QA by context, never a group in two parts.

Folds are assigned by hashing the group name with a seed, so a new company or context lands in a
fold without any list of known groups, and the assignment of existing groups does not change when
others are added (held-out data runs unchanged). The exception: when hashing leaves a fold empty
(few groups, many folds), whole groups move into it from the folds holding the most groups (the
last by name), so that every fold has questions whenever there are at least as many groups as
folds; such a plan can change when groups are added or renamed. A plan restricted to some
questions (``qids``) is the whole dataset's plan with the others left out.

:class:`FoldPlan` is the one fold protocol every workflow uses: round ``k`` tests on fold ``k``,
validates or calibrates on fold ``k + 1`` and trains on the rest; :meth:`FoldPlan.inner` gives the
cross-fitting rounds inside a set of training folds (each training fold scored by a model trained
on the others).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from fincrowd_ltr.data.schema import DataError, Dataset, Passage


def group_fold(group: str, k: int, seed: int = 0) -> int:
    """The fold (0..k-1) of a group: a stable hash of ``seed`` and the group name."""
    digest = hashlib.sha1(f"{seed}:{group}".encode()).hexdigest()
    return int(digest, 16) % k


def page_unit(page: Passage) -> str:
    """The unit a page belongs to: its company, else its document (anonymised corpora); what
    synthetic questions are grouped by."""
    return page.company or page.document or ""


def held_units(dataset: Dataset, qids: Iterable[str]) -> set[str]:
    """Every name under which pages or questions written from pages (synthetic questions) may
    belong to the questions ``qids``: their groups, their companies, and the company (else the
    document) of each page judged relevant to them. Training drawn from the corpus's pages
    leaves a held-out fold out by these, also where a question's group is not its pages'
    company (a BEIR question without a group is grouped by the pages of its answer)."""
    units: set[str] = set()
    for qid in qids:
        query = dataset.queries[qid]
        units.update(u for u in (query.group, query.company) if u)
        for pid, grade in dataset.qrels.get(qid, {}).items():
            page = dataset.passages.get(pid) if grade > 0 else None
            if page is not None and page_unit(page):
                units.add(page_unit(page))
    return units


def group_kfold(dataset: Dataset, k: int = 5, seed: int = 0) -> list[list[str]]:
    """Query ids per fold; all queries of one group share a fold."""
    if k < 1:
        raise DataError(f"the number of folds must be at least 1; got {k}")
    folds: list[list[str]] = [[] for _ in range(k)]
    for qid, query in dataset.queries.items():
        folds[group_fold(query.group, k, seed)].append(qid)
    return folds


def fill_empty_folds(folds: list[list[str]], groups: dict[str, str]) -> list[list[str]]:
    """``folds`` with every empty fold given a whole group from the fold holding the most groups
    (its last group by name; the first such fold on ties), while some fold holds two or more.
    Folds that hashing filled are left as they are."""
    folds = [list(f) for f in folds]
    while True:
        empty = next((i for i, f in enumerate(folds) if not f), None)
        held = [sorted({groups[q] for q in f}) for f in folds]
        donor = max(range(len(folds)), key=lambda i: (len(held[i]), -i), default=None)
        if empty is None or donor is None or len(held[donor]) < 2:
            return folds
        moved = held[donor][-1]
        folds[empty] = [q for q in folds[donor] if groups[q] == moved]
        folds[donor] = [q for q in folds[donor] if groups[q] != moved]


@dataclass(frozen=True)
class Round:
    """One round of a fold plan: fold indices that test, validate/calibrate and train."""

    test: int | None
    validation: int
    train: tuple[int, ...]


@dataclass(frozen=True)
class FoldPlan:
    """Query ids per group fold, and the rounds every workflow walks.

    Attributes:
        folds: Query ids of each fold (groups never straddle folds).
        seed: Seed of the fold assignment.
    """

    folds: tuple[tuple[str, ...], ...]
    seed: int = 0

    @classmethod
    def by_group(
        cls, dataset: Dataset, k: int = 5, seed: int = 0, qids: Iterable[str] | None = None
    ) -> FoldPlan:
        """Fold ``k`` groups of ``dataset`` (restricted to ``qids`` when given)."""
        keep = None if qids is None else set(qids)
        groups = {q: query.group for q, query in dataset.queries.items()}
        # filled before restricting, so that a group sits in the same fold in every restriction
        folds = fill_empty_folds(group_kfold(dataset, k, seed), groups)
        return cls(tuple(tuple(q for q in f if keep is None or q in keep) for f in folds), seed)

    def __len__(self) -> int:
        return len(self.folds)

    def qids(self, folds: Iterable[int]) -> list[str]:
        """Query ids of the given folds, fold by fold."""
        return [q for f in folds for q in self.folds[f]]

    def without(self, fold: int) -> FoldPlan:
        """The plan with fold ``fold`` held out entirely (``fit-residual --test-fold``)."""
        if not 0 <= fold < len(self.folds):
            raise DataError(f"test fold {fold} is outside 0..{len(self.folds) - 1}")
        return FoldPlan(tuple(f for i, f in enumerate(self.folds) if i != fold), self.seed)

    def round(self, test: int) -> Round:
        """Test on ``test``, validate/calibrate on the next fold, train on the rest."""
        n = len(self.folds)
        val = (test + 1) % n
        return Round(test, val, tuple(f for f in range(n) if f not in (test, val)))

    def rounds(self) -> list[Round]:
        """Every fold tested once (cross-validation)."""
        return [self.round(k) for k in range(len(self.folds))]

    def final(self, validation: int) -> Round:
        """No test fold: ``validation`` validates/calibrates, every other fold trains."""
        return Round(None, validation, tuple(f for f in range(len(self.folds)) if f != validation))

    @staticmethod
    def inner(train: tuple[int, ...], validation: int) -> list[Round]:
        """Cross-fitting inside ``train``: fold ``j`` is scored by a model trained on the other
        training folds (validated on ``validation``)."""
        return [Round(j, validation, tuple(f for f in train if f != j)) for j in train]


def fold_split(
    dataset: Dataset, test_fold: int, k: int = 5, seed: int = 0, validation: bool = True
) -> dict[str, list[str]]:
    """Train / validation / test query ids of round ``test_fold`` (see :class:`FoldPlan`)."""
    plan = FoldPlan.by_group(dataset, k, seed)
    r = plan.round(test_fold)
    if not validation:
        return {
            "train": plan.qids([*r.train, r.validation]),
            "val": [],
            "test": plan.qids([test_fold]),
        }
    return {
        "train": plan.qids(r.train),
        "val": plan.qids([r.validation]),
        "test": plan.qids([test_fold]),
    }
