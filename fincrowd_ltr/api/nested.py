"""``nested_cross_validation``: the whole system's held-out figure with every choice nested.

For each outer group fold, the first stage is chosen on the *other* folds' labelled questions
(best mean Recall@100, then Recall@10, among ``variants``: the rule of
:func:`~fincrowd_ltr.api.first_stage.first_stage_ablation`), then ``fit_correction`` with that
fold held out selects the residual's setting, trains it and calibrates the gate on the other
folds only, and ``evaluate`` scores the held-out fold on banks of the fold's own first stage.
Nothing about a held-out question (its label, its company's filings' share of any choice)
reaches a choice that orders it. The pooled rows carry percentile and BCa cluster-bootstrap
intervals (few clusters: BCa corrects the percentile interval's bias and skew).
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.api.corpus import load_dataset
from fincrowd_ltr.api.evaluate import evaluate
from fincrowd_ltr.api.fit import fit_correction, require_gate_rows
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.data.splits import FoldPlan
from fincrowd_ltr.engine import worker_cap
from fincrowd_ltr.evaluation.first_stage import SELECT_ON, retrieve_runs
from fincrowd_ltr.evaluation.reports import NestedReport
from fincrowd_ltr.evaluation.selection import best
from fincrowd_ltr.metrics import METRICS, bootstrap_ci, per_query
from fincrowd_ltr.model.calibration import one_uncertifiable_warning
from fincrowd_ltr.retrieval.bm25 import BM25Config
from fincrowd_ltr.retrieval.first_stage import FIRST_STAGES
from fincrowd_ltr.retrieval.sharded import corpus_index
from fincrowd_ltr.settings import AUTO, FitSettings

SYSTEMS = ("base", "residual", "gated")
_COUNTS = ("crowded_repaired", "crowded_failures")


def choose_first_stages(
    data: Dataset, plan: FoldPlan, variants: tuple[str, ...], cache_dir=None
) -> list[str]:
    """The first stage each outer fold gets, chosen on the other folds' covered questions."""
    index = corpus_index(data.passages, BM25Config(), cache_dir)
    runs = retrieve_runs(data, index, list(variants), cache_dir=cache_dir)
    rows = {name: {q: per_query(run[q], data.qrels[q]) for q in run} for name, run in runs.items()}
    covered = set(next(iter(runs.values())))
    chosen = []
    for k in range(len(plan)):
        train = [q for q in plan.qids(i for i in range(len(plan)) if i != k) if q in covered]
        chosen.append(best(rows, train, SELECT_ON))
    return chosen


def nested_cross_validation(
    dataset: str | Dataset,
    ranker: str = "fused",
    settings: FitSettings | None = None,
    *,
    variants: tuple[str, ...] = FIRST_STAGES,
    progress: bool = True,
    **shortcuts,
) -> NestedReport:
    """The nested whole-system report: per fold (its first stage, setting, gate), and the pooled
    ``base`` / ``residual`` / ``gated`` rows over every held-out covered question.

    ``settings`` (or its fields as shortcuts: ``folds``, ``seed``, ``regression_cap``, ...) are
    ``fit_correction``'s; its ``first_stage`` and ``test_fold`` are set per outer fold here.
    Not nested: the package's defaults and the list of ``variants`` (with their filing weights),
    fixed before any fold is drawn.
    """
    for name in ("first_stage", "test_fold"):
        if name in shortcuts:
            raise TypeError(f"nested_cross_validation sets {name} per outer fold; do not give it")
    s = (settings or FitSettings()).replace(**shortcuts)
    if not s.calibration.gate:
        raise DataError("nested_cross_validation reports the gated system: it needs gate=True")
    if s.calibration.gate_calibration == "none":
        raise DataError(
            "nested_cross_validation reports the gated system with the domain each outer fit "
            "calibrates: gate_calibration 'none' calibrates none (use 'pooled' or 'fold')",
            "gate_calibration",
        )
    if s.calibration.gate_calibration == AUTO:  # each outer fit calibrates, synthetic or not
        s = s.replace(gate_calibration="pooled")
    if s.synthetic.active and s.synthetic.scope != "folds":
        raise DataError(
            "nested_cross_validation keeps the held-out companies out of every choice: use "
            "synthetic scope 'folds' (transductive synthesis reads their filings)"
        )
    require_gate_rows(s)
    data = load_dataset(dataset, s.data.data_root, s.data.split)
    plan = FoldPlan.by_group(data, s.training.folds, s.training.seed)
    stages = choose_first_stages(data, plan, tuple(variants), s.data.cache_dir)
    domain = s.calibration.domain or data.name
    per_query_rows: dict[str, dict[str, dict]] = {name: {} for name in SYSTEMS}
    folds = []
    with one_uncertifiable_warning("gate calibrations of the nested run"):
        for k, stage in enumerate(stages):
            row = _outer_fold(data, ranker, s, plan, (k, stage), domain, per_query_rows, progress)
            folds.append(row)
    return NestedReport(
        dataset=data.name,
        ranker=ranker,
        seed=s.training.seed,
        folds=folds,
        variants=list(variants),
        selection="first stage: best mean recall@100 (then recall@10) on the outer training "
        "folds; residual setting and gate: fit_correction on the outer training folds",
        systems=_pooled(data, per_query_rows, folds),
    )


def _outer_fold(data, ranker, s, plan, fold, domain, per_query_rows, progress) -> dict:
    """Fit on every outer fold but ``fold`` (its index and first stage), evaluate on it."""
    k, stage = fold
    fold_settings = s.replace(first_stage=stage, test_fold=k)
    model, fitted = fit_correction(data, ranker, fold_settings, progress=progress)
    with worker_cap(s.training.workers):  # the fit's bound holds for its evaluation too
        report = evaluate(
            data, ranker, data=s.data, checkpoint=model, domain=domain, first_stage=stage,
            size=s.banks.bank_size, mode="retrieved", progress=progress,
        )  # fmt: skip
    row = _fold_row(k, stage, model, report, ranker, per_query_rows)
    row["notes"] = fitted.info.get("notes", [])
    if "synthetic" in model.summary.extra:  # what trained the fold's residual
        row["synthetic"] = model.summary.extra["synthetic"]
    if not set(row["query_ids"]) <= set(plan.folds[k]):
        raise DataError(f"outer fold {k}: questions outside the fold were scored")
    return row


def _fold_row(k, stage, model, report, ranker, rows) -> dict:
    """One outer fold's choices and counts; its questions' metrics go into ``rows``."""
    gated = report["systems"][f"gated:{ranker}"]
    qids = list(gated["per_query"])
    # the base order of the scored questions, as the correction rows were paired with it
    unseen = report["systems"].get(f"base:{ranker}:unseen") or report["systems"][f"base:{ranker}"]
    base = unseen["per_query"]
    rows["base"].update({q: base[q] for q in qids})
    rows["residual"].update(report["systems"][f"residual:{ranker}"]["per_query"])
    rows["gated"].update(gated["per_query"])
    counts = {}
    for name in ("residual", "gated"):
        row = report["systems"][f"{name}:{ranker}"]
        counts[name] = {
            "n_orderable": row["n_orderable"],
            "regressed": round(row["regression_rate_orderable"] * row["n_orderable"])
            if row["n_orderable"]
            else 0,
            **{c: row.get(c, 0) for c in _COUNTS},
        }
    return {
        "test_fold": k,
        "first_stage": stage,
        "setting": model.summary.setting,
        "n_questions": len(qids),
        "query_ids": sorted(qids),
        "gate_open_share": gated.get("gate_open_share"),
        "counts": counts,
    }


def _pooled(data: Dataset, rows: dict[str, dict[str, dict]], folds: list[dict]) -> dict:
    """Pooled metrics with percentile and BCa cluster intervals; paired deltas over base."""
    qids = sorted(rows["gated"])
    groups = [data.queries[q].group for q in qids]
    out = {}
    for name in SYSTEMS:
        row: dict = {"n": len(qids), "n_groups": len(set(groups))}
        for m in METRICS:
            v = np.array([rows[name][q][m] for q in qids], dtype=np.float64)
            row[m] = float(v.mean())
            row.setdefault("ci95", {})[m] = list(bootstrap_ci(v, groups=groups))
            if name != "base":
                d = v - np.array([rows["base"][q][m] for q in qids], dtype=np.float64)
                row.setdefault("delta", {})[m] = float(d.mean())
                row.setdefault("delta_ci95", {})[m] = list(bootstrap_ci(d, groups=groups))
                row.setdefault("delta_bca95", {})[m] = list(
                    bootstrap_ci(d, groups=groups, method="bca")
                )
        if name != "base":
            total = {c: sum(f["counts"][name][c] for f in folds) for c in folds[0]["counts"][name]}
            row["n_orderable"] = total["n_orderable"]
            n = total["n_orderable"]
            row["regression_rate_orderable"] = total["regressed"] / n if n else float("nan")
            row.update({c: total[c] for c in _COUNTS})
        out[name] = row
    return out


def seed_spread(reports: list[dict], system: str = "gated", metric: str = "recall@10") -> dict:
    """``metric`` of ``system`` per fold seed and its spread (max - min)."""
    values = [r["systems"][system][metric] for r in reports]
    return {
        "system": system,
        "metric": metric,
        "seeds": [r["seed"] for r in reports],
        "values": values,
        "spread": float(max(values) - min(values)) if values else float("nan"),
    }


__all__ = ["choose_first_stages", "nested_cross_validation", "seed_spread"]
