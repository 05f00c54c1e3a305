"""Out-of-fold cross-encoder scores: for each group fold, a cross-encoder trained on the other
folds scores that fold's bank candidates, so every score comes from a model that never saw the
question's company (FinanceBench) or context (TAT-QA): neither its questions, nor a synthetic
question or a negative page of it. Written as a TREC run
(:func:`fincrowd_ltr.data.beir.write_trec_run`), which ``fincrowd evaluate --run`` and
``fincrowd cascade --scores`` read like any other ranker.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tqdm.auto import tqdm

from fincrowd_ltr.crossencoder.model import CrossEncoder, CrossEncoderConfig
from fincrowd_ltr.crossencoder.training import Group, train_cross_encoder
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.data.splits import FoldPlan, held_units
from fincrowd_ltr.retrieval.banks import BankSet


def score_banks_with(
    model: CrossEncoder,
    dataset: Dataset,
    bankset: BankSet,
    qids: list[str],
    depth: int,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """``{qid: {pid: logit}}`` for the first ``depth`` candidates of each bank."""
    out = {}
    for qid in tqdm(qids, desc="cross-encoder scoring", unit=" banks", disable=not progress):
        pids = bankset.banks[qid].pids[:depth]
        texts = [dataset.passages[p].text for p in pids]
        scores = model.score(dataset.queries[qid].text, texts)
        out[qid] = dict(zip(pids, scores.tolist(), strict=True))
    return out


# the training groups of one fold's model: its training questions and the held-out groups
GroupsFor = Callable[[list[str], set[str]], list[Group]]


def crossfit(
    dataset: Dataset,
    bankset: BankSet,
    groups_for: GroupsFor,
    config: CrossEncoderConfig,
    folds: int = 5,
    seed: int = 0,
    depth: int = 200,
    train_kwargs: dict | None = None,
    progress: bool = True,
) -> tuple[dict[str, dict[str, float]], list[dict]]:
    """Out-of-fold scores of the covered questions' top-``depth`` candidates, and per-fold
    summaries (training groups, seconds, pairs scored per second). ``groups_for(train, held)``
    gives a fold's training groups from its training questions and the held-out fold's
    companies (:func:`~fincrowd_ltr.data.splits.held_units`), which none of them may draw on."""
    covered = [q for q in dataset.queries if q in bankset.banks and dataset.covered(q)]
    keep = set(covered)
    fold_qids = [list(f) for f in FoldPlan.by_group(dataset, folds, seed, keep).folds]
    run: dict[str, dict[str, float]] = {}
    summaries = []
    for f, test in enumerate(fold_qids):
        if not test:
            continue
        train = [q for g, fold in enumerate(fold_qids) if g != f for q in fold]
        held = held_units(dataset, test)
        groups = groups_for(train, held)
        model = CrossEncoder.from_minilm(config, seed)
        start = time.perf_counter()
        summary = train_cross_encoder(model, groups, seed=seed, **(train_kwargs or {}))
        summary.pop("trained_qids")
        summary["train_seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        run.update(score_banks_with(model, dataset, bankset, test, depth, progress))
        seconds = time.perf_counter() - start
        pairs = sum(min(depth, len(bankset.banks[q].pids)) for q in test)
        summary.update(
            test_fold=f,
            test_questions=len(test),
            pairs_scored=pairs,
            pairs_per_second=pairs / seconds if seconds else float("nan"),
        )
        summaries.append(summary)
    return run, summaries
