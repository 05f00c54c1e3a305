"""``cascade``: the reranker cascade cross-validated on group folds, optionally with the gated
correction on each question's top ``k`` (residual and gate trained on other folds, the gate
calibrated on fold ``f + 1``'s own top-``k`` banks)."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from fincrowd_ltr.api.corpus import build_banks, load_dataset, rankers_of, read_run
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.data.splits import FoldPlan
from fincrowd_ltr.evaluation.cascade import (
    COLUMN,
    FIRST,
    SELECTED,
    crossvalidate_cascade,
    run_scores,
    top_k_bank,
)
from fincrowd_ltr.evaluation.reports import CascadeReport
from fincrowd_ltr.evaluation.results import compare
from fincrowd_ltr.features.examples import make_examples
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.model.calibration import one_uncertifiable_warning
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.retrieval.build import BankSpec
from fincrowd_ltr.retrieval.cascade import CascadeSettings, settings_grid
from fincrowd_ltr.retrieval.first_stage import RUN
from fincrowd_ltr.retrieval.rankers import RANKERS, scorer_recipe
from fincrowd_ltr.settings import (
    BankSettings,
    CalibrationSettings,
    FitSettings,
    require_defaults,
    require_used,
)
from fincrowd_ltr.synthesis import taught

DOMAIN = "cascade"


@dataclasses.dataclass
class CorrectionFolds:
    """The gated cascade's correction before training: its banks as examples per fold plan
    (``folds``, an ``api.fit._Folds``), checked to train in every round."""

    data: Dataset
    ranker: str
    plan: FoldPlan
    banks: BankSettings
    folds: object
    extractor: FieldExtractor
    stage: str  # the first stage, "auto" resolved


def correction_folds(
    data: Dataset, ranker: str, plan: FoldPlan, banks: BankSettings | None = None, *, cache_dir=None
) -> CorrectionFolds:
    """The correction's banks and examples as ``banks`` says (first stage, size, training and
    validation bank modes: :class:`~fincrowd_ltr.settings.BankSettings`, default ``retrieved``
    training); a ``DataError`` before any training when some round's training folds hold no
    relevant candidate."""
    from fincrowd_ltr.api.fit import MODES, _Folds
    from fincrowd_ltr.features import BankFeaturizer

    b = banks or BankSettings()
    for name in ("train_mode", "val_mode"):
        if getattr(b, name) not in MODES:
            raise DataError(f"{name} {getattr(b, name)!r}: choose from {list(MODES)}", name)
    extractor = corpus_extractor(data.passages)
    featurizer = BankFeaturizer(extractor, data.passages)
    examples = {}
    for mode in MODES:
        bankset = build_banks(
            data, [ranker], first_stage=b.first_stage, size=b.bank_size, mode=mode,
            static_questions=b.static_questions, cache_dir=cache_dir, extractor=extractor,
        )  # fmt: skip
        cache = None if cache_dir is None else Path(cache_dir)
        examples[mode] = {
            e.qid: e for e in make_examples(data, bankset, ranker, featurizer, cache=cache)
        }
    # only covered questions validate
    ex = _Folds(plan, examples, b.train_mode, val_mode=b.val_mode, covered=data)
    stage = BankSpec(first_stage=b.first_stage).stage(data)  # as fit records it
    injected = b.train_mode == "injected"
    other = (
        ""
        if injected
        else "gold-injected training banks (train_mode='injected', --train-mode injected) or "
    )
    ex.require_support(
        [r.train for r in plan.rounds()],
        detail=f" ({b.train_mode} banks of {b.bank_size} from first stage {stage!r})",
        advice=f"use {other}another first stage",
        where="gated cascade: ",
    )
    return CorrectionFolds(data, ranker, plan, b, ex, extractor, stage)


def train_corrections(prepared: CorrectionFolds, seed: int = 0) -> dict[int, object]:
    """``{test fold f: GatedCorrection}`` trained on the folds other than ``f`` and ``f + 1``
    (uncalibrated: fold ``f + 1`` calibrates it on the cascade's banks)."""
    from fincrowd_ltr.api.fit import _fit_gate
    from fincrowd_ltr.features.corpus import CorpusFeaturizers
    from fincrowd_ltr.model.correction import GatedCorrection, TrainingSummary
    from fincrowd_ltr.training.fitting import ResidualFits, choose_setting

    p, b, ex, fits = prepared, prepared.banks, prepared.folds, ResidualFits()
    shared = CorpusFeaturizers()  # every fold's model reads the same corpus

    def model(scorer, gate=None, domains=None):
        summary = TrainingSummary(
            dataset=p.data.name, base_ranker=p.ranker, first_stage=p.stage,
            base_scorer=scorer_recipe(p.ranker, b.static_questions, taught(p.data)),
            bank_size=b.bank_size, bank_mode=b.train_mode, val_bank_mode=b.val_mode,
        )  # fmt: skip
        return GatedCorrection(
            scorer, gate, domains, p.extractor.companies, summary,
            segments=p.extractor.segment_names, features=shared,
        )  # fmt: skip

    out = {}
    for r in p.plan.rounds():  # fold r.validation calibrates: the training folds choose epochs
        _, _, epochs = choose_setting(ex.selection_splits(r.train, r.validation), ({},), seed, fits)
        setting = ex.fixed({}, epochs)
        module, _ = fits.deployed(*ex.split(r.train, r.validation), setting, seed)
        gate, _ = _fit_gate(p.data, ex, fits, model, r.train, r.validation, setting, seed)
        out[r.test] = model(module.scorer, gate)
    return out


def fold_corrections(
    data: Dataset,
    ranker: str,
    plan: FoldPlan,
    banks: BankSettings | None = None,
    *,
    cache_dir=None,
    seed: int = 0,
) -> dict[int, object]:
    """:func:`correction_folds` then :func:`train_corrections`."""
    return train_corrections(correction_folds(data, ranker, plan, banks, cache_dir=cache_dir), seed)


@one_uncertifiable_warning("gate calibrations of the cascade")
def gated_cascade(
    data: Dataset,
    plan: FoldPlan,
    corrections: dict[int, object],
    bankset: BankSet,
    chosen: dict[str, CascadeSettings],
    extra: dict | None = None,
    calibration: CalibrationSettings | None = None,
    label: str = SELECTED,
) -> dict:
    """Residual and gate on the cascade's top-``k`` banks, cross-validated; each test fold's
    gate is calibrated on the next fold as ``calibration`` says (cap, delta, method)."""
    c = calibration or CalibrationSettings()
    systems: dict[str, dict[str, list[str]]] = {"cascade": {}, "residual": {}, "gated": {}}
    opened: dict[str, bool] = {}
    folds_out = []

    def examples_of(fold: int, model, settings_of: dict[str, CascadeSettings]):
        # the covered questions the cascade was evaluated on (``chosen``), as before the redesign
        qids = [
            q for q in plan.folds[fold] if q in chosen and q in settings_of and q in bankset.banks
        ]
        kept, rests = {}, {}
        for q in qids:
            kept[q], rests[q] = top_k_bank(bankset.banks[q], settings_of[q], extra)
        top = BankSet(data.name, bankset.split, bankset.mode, 0, kept)
        featurizer = model.featurizer(data.passages)
        return make_examples(data, top, COLUMN, featurizer, qids), rests

    for f in range(len(plan)):
        calib = (f + 1) % len(plan)
        test_q = [q for q in plan.folds[f] if q in chosen]
        if not test_q:
            continue
        model = corrections[f]
        settings = chosen[test_q[0]]  # the test fold's settings on the calibration questions
        cal_examples, _ = examples_of(calib, model, dict.fromkeys(plan.folds[calib], settings))
        from fincrowd_ltr.training.calibration import fit_calibration

        fitted = fit_calibration(
            model, data, cal_examples, c.regression_cap, c.min_calibration,
            delta=c.delta, method=c.gate_method,
        )  # fmt: skip
        model = model.with_domain(DOMAIN, fitted)
        test_examples, rests = examples_of(f, model, chosen)
        test_examples = [e for e in test_examples if data.covered(e.qid)]
        for qid, res in model.score_examples(data, test_examples, DOMAIN).items():
            systems["cascade"][qid] = res.base_ranking + rests[qid]
            systems["residual"][qid] = res.corrected_ranking + rests[qid]
            systems["gated"][qid] = res.ranking + rests[qid]
            opened[qid] = res.decision.applied
        folds_out.append(
            {
                "test_fold": f,
                "calibration_fold": calib,
                "threshold": fitted.threshold,
                "calibration_queries": fitted.n_queries,
                "calibration_query_ids": fitted.query_ids,
                "risk_bound": fitted.risk_bound,
            }
        )
    qids = sorted(systems["cascade"])
    base = systems["cascade"]
    return {
        "n_queries": len(qids),
        "gate_open_share": float(np.mean([opened[q] for q in qids])) if qids else float("nan"),
        "folds": folds_out,
        "systems": {
            label: compare(data, base, base, qids),
            f"{label}+residual": compare(data, systems["residual"], base, qids),
            f"{label}+gated": compare(data, systems["gated"], base, qids),
        },
    }


_CASCADE_USES = (
    *("split", "data_root", "cache_dir", "first_stage", "train_mode", "folds", "seed"),
    *("regression_cap", "min_calibration", "delta", "gate_method"),
)
_CASCADE_READS = {  # the fields of a whole settings object the cascade reads (others: defaults)
    "data": ("split", "data_root", "cache_dir"),
    "banks": ("first_stage", "bank_size", "train_mode", "val_mode", "static_questions"),
    "training": ("folds", "seed"),
    "calibration": ("regression_cap", "min_calibration", "delta", "gate_method"),
}


def cascade(
    dataset: str | Dataset,
    stage2: str | list[str] = "dense,hybrid",
    settings: FitSettings | None = None,
    *,
    n: int = 200,
    k: int = 20,
    gated: bool = False,
    correction_ranker: str | None = None,
    scores: dict[str, str | Path | Mapping] | None = None,
    **shortcuts,
) -> CascadeReport:
    """The cascade report: first stage, each stage-2 ranker, the settings chosen on training
    folds, and with ``gated`` the correction (its base ``correction_ranker``, default ``dense``)
    on the top ``k``. ``scores`` adds runs
    (``{name: TREC file or {qid: {pid: score}}}``) as fixed stage-2 rankers. ``settings``
    (:class:`~fincrowd_ltr.settings.FitSettings`) or its fields as shortcuts say where the data
    is (``split``, ``data_root``, ``cache_dir``), the first stage (``first_stage``), the fold plan
    (``folds``, ``seed``), the correction's training banks (``train_mode``, default
    ``retrieved``; a ``settings`` object's other bank fields too) and the gate's limits
    (``regression_cap``, ``min_calibration``, ``delta``, ``gate_method``; or a whole
    ``calibration=CalibrationSettings(...)``)."""
    calibration = shortcuts.pop("calibration", None)
    require_used(shortcuts, _CASCADE_USES, "cascade")
    s = (settings or FitSettings()).replace(**shortcuts)
    if calibration is not None:
        s = dataclasses.replace(s, calibration=calibration)
    require_defaults(s, _CASCADE_READS, "cascade")
    first_stage, folds, seed = s.banks.first_stage, s.training.folds, s.training.seed
    split, cache_dir = s.data.split, s.data.cache_dir
    stage2, scores = rankers_of(stage2), scores or {}
    _check_shape(n, k, folds, gated, stage2, scores, s, correction_ranker)
    correction_ranker = correction_ranker or "dense"
    data = load_dataset(dataset, s.data.data_root, split)
    data.require_covered("measure")
    runs = {name: _run_of(name, run, data) for name, run in scores.items()}  # checked first
    plan = FoldPlan.by_group(data, folds, seed)
    # the correction's banks before the cascade's: one that cannot train stops the run here
    prepared = (
        correction_folds(data, correction_ranker, plan, s.banks, cache_dir=cache_dir)
        if gated
        else None
    )
    bankset = build_banks(
        data, stage2, first_stage=first_stage, size=n, split=split, cache_dir=cache_dir,
        static_questions=s.banks.static_questions,
    )  # fmt: skip
    extra = {name: run_scores(run, bankset) for name, run in runs.items()}
    grid = settings_grid(stage2, n, k)
    fixed = [CascadeSettings(n, k, r) for r in [*stage2, *extra]]
    report, chosen = crossvalidate_cascade(data, bankset, grid, folds, seed, extra, fixed)
    report = CascadeReport(report)
    if unscored := _unscored(runs, bankset):
        report["notes"] = [*report.get("notes", []), *unscored]
    report["first_stage"] = BankSpec(first_stage=first_stage).stage(data)
    report["scores_from_runs"] = {
        name: "a mapping" if isinstance(run, Mapping) else str(run) for name, run in scores.items()
    }
    if prepared is not None:
        corrections = train_corrections(prepared, seed)
        report["correction_train_mode"] = s.banks.train_mode
        limits = {"calibration": s.calibration}
        report["gated"] = {
            "selected": gated_cascade(data, plan, corrections, bankset, chosen, extra, **limits)
        }
        for name in extra:  # a run-based stage 2 (e.g. cross-encoder) with the correction
            same = dict.fromkeys(chosen, CascadeSettings(n, k, name))
            report["gated"][name] = gated_cascade(
                data, plan, corrections, bankset, same, extra, label=f"cascade:{name}", **limits
            )
    return report


def _check_shape(
    n, k, folds: int, gated: bool, stage2: list, scores: Mapping, s, correction_ranker
) -> None:
    """Refuse, before any work, a cascade that cannot run or would not read what it is given."""
    if not (isinstance(n, numbers.Integral) and n >= 1):
        raise DataError(f"n (--n) must be a whole number >= 1; got {n!r}", "n")
    if not (isinstance(k, numbers.Integral) and 1 <= k <= n):
        raise DataError(f"k (--k) must be a whole number in 1..n ({n}); got {k!r}", "k")
    if not stage2:
        raise DataError("stage2 (--stage2) names no ranker", "stage2")
    least = 3 if gated else 2  # gated: training, calibration and test folds
    if folds < least:
        raise DataError(f"folds (--folds) must be >= {least} for the cascade; got {folds}", "folds")
    # a run's rows are `cascade:<name>` (and `gated[<name>]`): no ranker's, nor the chosen rows'
    reserved = {*RANKERS, RUN, *stage2, SELECTED.removeprefix("cascade:"), FIRST, COLUMN}
    if clash := sorted(set(scores) & reserved):
        raise DataError(
            f"scores {clash}: a run named like a ranker or a row of the report would be read "
            "or reported as that and itself never; name it otherwise (e.g. cross-encoder=FILE)",
            "scores",
        )
    if not gated:
        defaults = FitSettings()
        moved = [
            f.name
            for f in dataclasses.fields(s.calibration)
            if getattr(s.calibration, f.name) != getattr(defaults.calibration, f.name)
        ]
        moved += ["train_mode"] * (s.banks.train_mode != defaults.banks.train_mode)
        moved += ["correction_ranker"] * (correction_ranker is not None)
        if moved:
            flags = ", ".join(f"{m} (--{m.replace('_', '-')})" for m in moved)
            raise DataError(
                f"{flags} set the gated correction: read only with gated=True (--gated)",
                moved[0],
            )


def _unscored(runs: dict, bankset: BankSet) -> list[str]:
    """A note per run that left bank candidates unscored (they rank after its scored ones)."""
    notes = []
    for name, run in runs.items():
        total = missing = 0
        for qid, bank in bankset.banks.items():
            total += len(bank.pids)
            scored = run.get(qid, {})
            missing += sum(p not in scored for p in bank.pids)
        if missing:
            notes.append(
                f"scores {name!r}: did not score {missing} of {total} bank candidates (they rank "
                "after every candidate it scored)"
            )
    return notes


def _run_of(name: str, run, data: Dataset) -> dict:
    """A stage-2 run (a TREC file or a mapping), read and checked against ``data``."""
    if callable(run) or run is None:
        raise DataError(
            f"scores[{name!r}]: a cascade reads a run's scores (a TREC file or a mapping)"
        )
    return read_run(run, data)
