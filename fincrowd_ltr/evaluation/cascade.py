"""The cascade on group-held-out folds: stage-2 ranker and score fusion chosen on training folds,
optionally followed by the residual correction and identity gate trained and calibrated on other
folds than the reported one.

For test fold ``f`` the cascade settings (stage-2 ranker, normalisation, fusion weight) are the
best mean Recall@10 (tie-break nDCG@10) over the covered questions of every other fold. The gated
correction on the cascade's top ``k`` is a workflow (``fincrowd_ltr.api.cascade``).
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.evaluation.results import compare
from fincrowd_ltr.evaluation.selection import best, choose_per_fold
from fincrowd_ltr.metrics import per_query
from fincrowd_ltr.retrieval.banks import BankSet, CandidateBank
from fincrowd_ltr.retrieval.cascade import CascadeSettings, cascade_order
from fincrowd_ltr.retrieval.rankers import scores_from_run

SELECT_ON = ("recall@10", "ndcg@10")
FIRST = "first-stage"
SELECTED = "cascade:selected"
COLUMN = "cascade"  # the fused score's column in top-k banks


def run_scores(run: dict[str, dict[str, float]], bankset: BankSet) -> dict[str, np.ndarray]:
    """A TREC run's scores aligned to each bank's candidates (``--scores NAME=FILE``)."""
    return {
        qid: scores_from_run(scores, bankset.banks[qid].pids)
        for qid, scores in run.items()
        if qid in bankset.banks
    }


def _second(bank: CandidateBank, ranker: str, extra: dict[str, dict[str, np.ndarray]]):
    if ranker in bank.scores:
        return bank.scores[ranker]
    if ranker in extra and bank.qid in extra[ranker]:
        return extra[ranker][bank.qid]
    raise DataError(f"bank {bank.qid!r} has no {ranker!r} scores for the cascade's stage 2")


def top_k_bank(
    bank: CandidateBank, settings: CascadeSettings, extra: dict | None = None
) -> tuple[CandidateBank, list[str]]:
    """The cascade's top-``k`` bank (fused scores in column ``cascade``) and the rest of its
    order (candidates ``k + 1 .. n``)."""
    order, fused = cascade_order(
        bank.first_stage, _second(bank, settings.stage2, extra or {}), settings
    )
    top, rest = order[: settings.k], order[settings.k :]
    kept = CandidateBank(
        bank.qid, [bank.pids[i] for i in top], bank.first_stage[top], {COLUMN: fused[top]}
    )
    return kept, [bank.pids[i] for i in rest]


def cascade_ranking(bank: CandidateBank, settings: CascadeSettings, extra=None) -> list[str]:
    kept, rest = top_k_bank(bank, settings, extra)
    return kept.ranking(COLUMN) + rest


def crossvalidate_cascade(
    dataset: Dataset,
    bankset: BankSet,
    grid: list[CascadeSettings],
    folds: int = 5,
    seed: int = 0,
    extra: dict[str, dict[str, np.ndarray]] | None = None,
    report_fixed: list[CascadeSettings] | None = None,
) -> tuple[dict, dict[str, CascadeSettings]]:
    """Report the first stage, each setting in ``report_fixed`` and the settings chosen per
    fold on training folds (``cascade:selected``); returns the report and each question's
    chosen settings."""
    extra = extra or {}
    qids = [q for q in dataset.queries if q in bankset.banks and dataset.covered(q)]
    if not qids:
        raise DataError(f"{dataset.name}: no covered question has a bank")
    by_name = {s.name: s for s in grid}
    rankings = {
        name: {q: cascade_ranking(bankset.banks[q], s, extra) for q in qids}
        for name, s in by_name.items()
    }
    rows = {
        name: {q: per_query(r[q], dataset.qrels[q]) for q in qids} for name, r in rankings.items()
    }
    first = {q: bankset.banks[q].pids for q in qids}
    names, per_fold = choose_per_fold(dataset, rows, qids, SELECT_ON, folds, seed)
    chosen = {q: by_name[name] for q, name in names.items()}
    systems = {FIRST: first}
    for s in report_fixed or []:
        systems[s.name] = {q: cascade_ranking(bankset.banks[q], s, extra) for q in qids}
    systems[SELECTED] = {q: rankings[chosen[q].name][q] for q in qids}
    report = {
        "dataset": dataset.name,
        "n_queries": len(qids),
        "n_groups": len({dataset.queries[q].group for q in qids}),
        "n": grid[0].n,
        "k": grid[0].k,
        "selection": f"best mean {SELECT_ON[0]} (tie-break {SELECT_ON[1]}) over the training "
        f"folds of {folds} group folds; grid of {len(grid)} settings",
        "grid": [s.name for s in grid],
        "chosen_per_fold": per_fold,
        "chosen_on_all": best(rows, qids, SELECT_ON),
        "systems": {name: compare(dataset, r, first, qids) for name, r in systems.items()},
    }
    return report, chosen


def add_cascade_systems(
    report: dict, dataset: Dataset, bankset: BankSet, settings: list[CascadeSettings]
) -> None:
    """Add fixed-setting cascades over ``bankset`` (stage 1 = the bank's first-stage order) to an
    ``evaluate`` report under their names (``cascade:<ranker>`` ...), with the report's metrics
    and intervals."""
    from fincrowd_ltr.evaluation.report import system_metrics

    qids = [q for q in dataset.queries if q in bankset.banks and dataset.covered(q)]
    groups = [dataset.queries[q].group for q in qids]
    for s in settings:
        rankings = {q: cascade_ranking(bankset.banks[q], s) for q in qids}
        report["systems"][s.name] = system_metrics(rankings, dataset.qrels, qids, groups)
        report.setdefault("rankings", {})[s.name] = rankings
