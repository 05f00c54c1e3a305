"""First-stage ablation on group-held-out folds, and the choice of the default first stage.

Every variant (original query, each processing step alone, steps together, entity-aware) retrieves
the top ``depth`` passages of the whole corpus for every question. Each variant is reported on all
covered questions with cluster-bootstrap intervals and its paired Recall@100 change over plain
BM25. The first stage a user gets by default is chosen on training folds only: for each fold, the
variant with the best mean Recall@100 (then Recall@10) on the *other* folds ranks that fold's
questions; the pooled result ("selected") is the honest estimate of the choice.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.evaluation.report import system_metrics
from fincrowd_ltr.evaluation.selection import best, choose_per_fold
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.metrics import bootstrap_ci, per_query
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.first_stage import make_first_stages

SELECT_ON = ("recall@100", "recall@10")  # the choice's criterion, then its tie-break
SELECTED = "selected"


def retrieve_runs(
    dataset: Dataset,
    index: BM25Index,
    variants: list[str],
    depth: int = 100,
    extractor: FieldExtractor | None = None,
    cache_dir: Path | None = None,
) -> dict[str, dict[str, list[str]]]:
    """``{variant: {qid: top-depth passage ids}}`` over the dataset's covered questions
    (``static`` variants share one set of page vectors, cached under ``cache_dir``)."""
    extractor = extractor or corpus_extractor(dataset.passages, harvest=False)
    qids = [q for q in dataset.queries if dataset.covered(q)]
    runs = {}
    for name, stage in make_first_stages(variants, index, dataset, extractor, cache_dir):
        texts = [dataset.queries[q].text for q in qids]
        many = getattr(stage, "search_many", None)  # the same results, the batch together
        found = many(texts, depth) if many else [stage.search(t, depth) for t in texts]
        runs[name] = {q: pids for q, (pids, _) in zip(qids, found, strict=True)}
    return runs


def ablation(
    dataset: Dataset, runs: dict[str, dict[str, list[str]]], k: int = 5, seed: int = 0
) -> dict:
    """The ablation report: per-variant metrics, paired deltas over ``bm25``, the variant chosen
    on each fold's training folds, the pooled ``selected`` row and the variant chosen on all
    covered questions (the default for new corpora)."""
    qids = [q for q in dataset.queries if dataset.covered(q)]
    groups = [dataset.queries[q].group for q in qids]
    rows = {
        name: {q: per_query(run[q], dataset.qrels[q]) for q in qids} for name, run in runs.items()
    }
    report: dict = {
        "dataset": dataset.name,
        "n_covered": len(qids),
        "n_groups": len(set(groups)),
        "depth": len(next(iter(next(iter(runs.values())).values()), [])),
        "selection": f"best mean {SELECT_ON[0]} (tie-break {SELECT_ON[1]}) on the training "
        f"folds of {k} group folds (seed {seed}); no fold's own labels are used for its choice",
        "variants": {},
    }
    for name, run in runs.items():
        stats = system_metrics(run, dataset.qrels, qids, groups)
        stats.pop("per_query")
        if "bm25" in rows and name != "bm25":
            delta = np.array(
                [rows[name][q]["recall@100"] - rows["bm25"][q]["recall@100"] for q in qids]
            )
            stats["delta_recall@100_vs_bm25"] = float(delta.mean())
            stats["delta_recall@100_ci95"] = list(bootstrap_ci(delta, groups=groups))
        report["variants"][name] = stats
    per_query_choice, chosen = choose_per_fold(dataset, rows, qids, SELECT_ON, k, seed)
    selected = {q: runs[name][q] for q, name in per_query_choice.items()}
    chosen_qids = [q for q in qids if q in selected]  # folds without training folds are skipped
    stats = system_metrics(
        selected, dataset.qrels, chosen_qids, [dataset.queries[q].group for q in chosen_qids]
    )
    stats.pop("per_query")
    report["variants"][SELECTED] = stats
    report["chosen_per_fold"] = chosen
    report["chosen_on_all"] = best(rows, qids, SELECT_ON)
    return report
