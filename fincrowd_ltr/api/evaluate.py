"""``evaluate``: base rankers, and a saved correction's always-on and gated rows, on banks."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np

from fincrowd_ltr.api.corpus import (
    SPEC_SHORTCUTS,
    bank_spec,
    build_banks,
    data_settings,
    load_dataset,
    rankers_of,
    read_run,
)
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.defaults import SMALL_HELD_OUT
from fincrowd_ltr.diagnostics.crowding import crowded_labels, repair_counts
from fincrowd_ltr.evaluation.report import evaluate_bankset
from fincrowd_ltr.evaluation.reports import EvaluationReport
from fincrowd_ltr.evaluation.results import system_result
from fincrowd_ltr.model.correction import GatedCorrection
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.retrieval.build import BankSpec
from fincrowd_ltr.settings import DataSettings, EvaluationSettings, FitSettings, require_used

CROSS_ENCODER = "cross-encoder"
_RENAMED = {"size": "bank_size", "method": "gate_method"}  # calibrate_domain's 0.2.0 keywords
_DATA = ("split", "data_root", "cache_dir")
_LIMITS = ("regression_cap", "min_calibration", "delta", "gate_method")
_CALIBRATE_USES = (*_DATA, "folds", "seed", "bank_size", *_LIMITS)
_EVALUATE_USES = (*(f.name for f in fields(EvaluationSettings)), *_DATA, *SPEC_SHORTCUTS)


def evaluate(
    dataset: str | Dataset,
    rankers: str | list[str] = "bm25,dense",
    spec: BankSpec | None = None,
    *,
    data: DataSettings | None = None,
    systems: EvaluationSettings | None = None,
    banks: BankSet | None = None,
    run=None,
    progress: bool = True,
    **shortcuts,
) -> EvaluationReport:
    """The evaluation report (the JSON contract of ``fincrowd evaluate --out``).

    Every ranker gets a ``base:<r>`` row (``run``: yours, whenever ``run`` is given).
    ``systems`` (:class:`~fincrowd_ltr.settings.EvaluationSettings`, or its fields as keyword
    shortcuts: ``checkpoint``, ``domain``, ``fallback``, ``cross_encoder``, ``cascades``) add
    rows: with ``checkpoint`` (a folder or a loaded :class:`GatedCorrection`), ``residual:<r>``
    (always on) and, with ``domain``, ``gated:<r>`` for the ranker it was fitted for, on the
    questions it never trained or calibrated on (left out by content; the report says how
    many; its base ranker's ``base:<r>`` row is added when ``rankers`` lack it); ``cascades``
    add fixed-setting cascades over the same banks (``cascade:<ranker>...``
    rows). The banks are ``banks`` when given, else made as ``spec`` and ``data`` say (or their
    fields as shortcuts: ``first_stage``, ``mode``, ``size``, ``split``, ``data_root``,
    ``cache_dir``, ...: :func:`build_banks`); with a checkpoint and no ``spec``, a static base's
    question reader and, on the dataset it was trained on, the first stage are those its
    training recorded unless ``static_questions`` or ``first_stage`` say.
    """
    require_used(shortcuts, _EVALUATE_USES, "evaluate")
    systems = EvaluationSettings.take(systems, shortcuts)
    settings = data_settings(data, shortcuts)
    correction = None if systems.checkpoint is None else _loaded(systems.checkpoint)
    corpus = load_dataset(dataset, settings.data_root, settings.split)
    named = shortcuts.get("first_stage") is not None
    if not named:
        shortcuts.pop("first_stage", None)  # not chosen (the command line's default: None)
    if correction is not None and spec is None:
        _read_as_trained(correction, corpus, shortcuts)
    spec = bank_spec(spec, **shortcuts)
    names = list(rankers_of(rankers))  # a copy: the caller's list stays as given
    if systems.cross_encoder is not None and CROSS_ENCODER not in names:
        raise DataError(
            "cross_encoder (--cross-encoder) is read by the 'cross-encoder' ranker, which is not "
            f"among those named ({', '.join(names)}): add it, or leave the folder out",
            "cross_encoder",
        )
    added = None  # the correction's rows sit beside their own base (a seventh walk's did not)
    if correction is not None and correction.base_ranker not in names:
        added = (
            f"the checkpoint corrects base ranker {correction.base_ranker!r}, not one of those "
            f"named ({', '.join(names)}): its base row is added"
        )
        names.append(correction.base_ranker)
    corpus.require_covered("measure")
    run = read_run(run, corpus)
    if run is None and spec.first_stage == "run" and not named and banks is None:
        raise DataError(
            "the checkpoint was trained on the banks of your run (first stage 'run'): give the "
            "run (run=, --run), or name another first stage (first_stage='auto', "
            "--first-stage auto)"
        )
    stage_checked = spec.first_stage if named or banks is None else None  # banks given: unknown
    if run is not None and "run" not in names:
        names.append("run")  # a run given is always reported (base:run)
    built = [r for r in names if r != CROSS_ENCODER] or ["bm25"]
    if banks is None:
        banks = build_banks(corpus, built, spec, data=settings, run=run, progress=progress)
    trained = None  # a note when the cross-encoder learned from these questions
    if CROSS_ENCODER in names:
        from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderRanker
        from fincrowd_ltr.retrieval.banks import score_banks

        model = CrossEncoder.load(Path(systems.cross_encoder or "checkpoints/cross-encoder"))
        score_banks(banks, corpus, [CrossEncoderRanker(model, corpus.passages)])
        trained = _trained_on(model, corpus)
    report = EvaluationReport(
        evaluate_bankset(corpus, banks, [r for r in names if r in banks.rankers])
    )
    report["notes"] = list(corpus.notes) + list(banks.notes)
    if trained:
        report["notes"].append(trained)
    if len(corpus.passages) <= banks.size:
        report["notes"].append(
            f"the corpus holds {len(corpus.passages)} passages, no more than a bank's "
            f"{banks.size}: every bank may hold it all, so Recall@{banks.size} says nothing of "
            "the first stage (a smaller bank, size=, --bank-size, measures it)"
        )
    if added:
        report["notes"].append(added)
    if stage_checked is not None:  # banks made here: say whose candidates they hold
        report["first_stage"] = spec.stage(corpus)
    if systems.cascades:
        from fincrowd_ltr.evaluation.cascade import add_cascade_systems

        add_cascade_systems(report, corpus, banks, list(systems.cascades))
    if correction is not None:
        s = systems
        add_correction_rows(report, corpus, banks, correction, s.domain, s.fallback, stage_checked)
    return report


def _trained_on(model, corpus: Dataset) -> str | None:
    """A note when a cross-encoder adapter was trained on questions of ``corpus`` or on
    questions synthesised from its pages (its ``training`` record: dataset, corpus fingerprint,
    question ids, synthetic questions), else None."""
    training = getattr(model.config, "training", None) or {}
    if training.get("dataset") != corpus.name:
        return None
    recorded = training.get("corpus")
    if recorded is not None and recorded != corpus.corpus_fingerprint():
        return None  # another corpus of the same name (every BEIR folder is "beir")
    seen = sorted(set(training.get("query_ids") or []) & set(corpus.queries))
    synthetic = training.get("synthetic") or {}
    if not seen and not synthetic:
        return None
    if not seen:
        return (
            f"the cross-encoder adapter was trained on {training.get('train_groups')} groups "
            f"of the {synthetic.get('questions')} questions synthesised from this corpus's "
            "pages (no labels, but every company's pages, these questions' answers among "
            "them); its out-of-fold run (`train-cross-encoder --run-out`, given as --run) is "
            "the figure for companies it did not read"
        )
    return (
        f"the cross-encoder adapter was trained on {len(seen)} of these questions (its "
        "training record): its row scores questions it learned from; its out-of-fold run "
        "(`train-cross-encoder --run-out`, given as --run) is the held-out figure"
    )


def trained_stage(model: GatedCorrection, corpus: Dataset) -> str | None:
    """The first stage a checkpoint's banks came from, on the dataset it was trained on; None on
    another corpus (whose own ``auto`` applies: the stage is a property of the corpus) or when
    the checkpoint recorded no training."""
    s = model.summary
    return s.first_stage if s.query_ids and s.dataset == corpus.name else None


def _read_as_trained(model: GatedCorrection, corpus: Dataset, shortcuts: dict) -> None:
    """The bank settings a checkpoint's training recorded, where the caller names none: a
    static base's question reader and :func:`trained_stage`."""
    stage = trained_stage(model, corpus)
    if "first_stage" not in shortcuts and stage:
        shortcuts["first_stage"] = stage
    shortcuts.setdefault("static_questions", model.summary.static_questions)


def add_correction_rows(
    report: dict,
    data: Dataset,
    banks: BankSet,
    checkpoint: str | Path | GatedCorrection,
    domain: str | None = None,
    fallback: str = "error",
    first_stage: str | None = None,
) -> None:
    """Add ``residual:<r>`` (and with ``domain`` ``gated:<r>``) rows, decided by the model, and
    the distribution-shift warnings of these banks (``report["warnings"]``)."""
    model = _loaded(checkpoint)
    ranker = model.base_ranker
    if ranker not in banks.rankers:
        raise DataError(
            f"the correction was fitted for base ranker {ranker!r}; add it to the rankers"
        )
    notes = report.setdefault("notes", [])
    if domain is None:
        gated = (
            f"`--domain NAME`, calibrated: {', '.join(sorted(model.domains)) or 'none'}, adds "
            "the gated rows"
            if model.has_gate
            else "this checkpoint has no gate"
        )
        notes.append(f"no domain given: the correction rows are the always-on residual ({gated})")
    elif model.rule(domain, fallback) == "identity":  # an unknown domain fails before any work
        notes.append(
            f"domain {domain!r} is not calibrated in this checkpoint (calibrated: "
            f"{', '.join(sorted(model.domains)) or 'none'}): with the identity fallback the "
            "gated rows keep the base order"
        )
    roles = model.seen_by_role(data)
    seen = set().union(*roles.values())  # every question it saw, whichever domain is asked
    qids = [q for q in data.queries if q in banks.banks and data.covered(q) and q not in seen]
    if not qids:
        seen_as = ", ".join(f"{len(v)} {role}" for role, v in roles.items() if v)
        raise DataError(
            "every covered query was used to train or calibrate this correction (whichever "
            f"domain; by role: {seen_as}); evaluate on other questions (hold some out with "
            "fit_correction(test_fold=K) / `fit-residual --test-fold K`, and calibrate on one "
            "fold: `calibrate --fold K`)"
        )
    examples = model.examples(data, banks, ranker, qids)
    always = model.score_examples(data, examples)
    stage = None if first_stage is None else _stage_name(first_stage, data)
    standardised = np.concatenate([r.decision.standardised for r in always.values()])
    report["warnings"] = model.shift_warnings(
        stage, banks.size, standardised, scorer=banks.scorers.get(ranker)
    )
    base = {q: r.base_ranking for q, r in always.items()}
    systems = {"residual": {q: r.ranking for q, r in always.items()}}
    opened = {}
    if domain is not None:
        gated = model.score_examples(data, examples, domain, fallback)
        systems["gated"] = {q: r.ranking for q, r in gated.items()}
        opened = {q: r.decision.applied for q, r in gated.items()}
    labels = crowded_labels(data, examples) if banks.mode == "retrieved" else {}
    compared = {"base": base, **systems} if seen else systems
    for name, rankings in compared.items():
        result = system_result(data, rankings, qids, base)
        if labels:
            result.extra.update(repair_counts(data, labels, rankings))
        if name == "gated":
            result.extra["gate_open_share"] = float(np.mean([opened[q] for q in qids]))
            result.extra["domain"] = domain
        key = f"{name}:{ranker}" + (":unseen" if name == "base" else "")
        report["systems"][key] = result.to_dict()
        report.setdefault("rankings", {})[key] = {q: rankings[q] for q in qids}
    report["excluded"] = {
        "n_excluded": len(seen),
        "n_scored": len(qids),
        "by_role": {role: len(found) for role, found in roles.items() if found},
    }
    groups = len({data.queries[q].group for q in qids})
    if len(qids) < SMALL_HELD_OUT or groups < 3:
        report.setdefault("notes", []).append(
            f"the correction rows rest on {len(qids)} questions of {groups} "
            f"group{'' if groups == 1 else 's'}: a bootstrap "
            "over so few groups understates the uncertainty (a zero-width interval is not "
            "certainty)"
        )


def _loaded(checkpoint: str | Path | GatedCorrection) -> GatedCorrection:
    """A correction folder loaded (a loaded correction as it is)."""
    if isinstance(checkpoint, GatedCorrection):
        return checkpoint
    return GatedCorrection.from_pretrained(checkpoint)


def _stage_name(first_stage: str, data: Dataset) -> str:
    """The first stage ``first_stage`` resolves to on ``data`` ('auto' names the dataset's)."""
    from fincrowd_ltr.retrieval.build import BankSpec

    return BankSpec(first_stage=first_stage).stage(data)


def calibrate_domain(
    checkpoint: str | Path | GatedCorrection,
    domain: str,
    dataset: str | Dataset,
    settings: FitSettings | None = None,
    *,
    qids: list[str] | None = None,
    fold: int | None = None,
    first_stage: str | None = None,
    run=None,
    save: bool = True,
    replace: bool = False,
    **shortcuts,
):
    """Fit ``domain``'s gate calibration on labelled questions the correction never saw (all of
    ``dataset``, group fold ``fold`` of the fold plan ``folds`` / ``seed`` make, or ``qids``)
    and, for a checkpoint folder, store it there (an existing domain only with ``replace``).

    ``settings`` (:class:`~fincrowd_ltr.settings.FitSettings`, or its fields as keyword
    shortcuts: ``regression_cap``, ``delta``, ``gate_method``, ``min_calibration``, ``folds``,
    ``seed``, ``bank_size``, ``split``, ``data_root``, ``cache_dir``) say where the data is, how
    the banks are made and how the cap is kept: among orderable questions, by ``gate_method``
    (``"ltt"``: with probability >= 1 - delta over the draw of the calibration questions;
    :mod:`fincrowd_ltr.model.calibration`). The banks use ``first_stage``, by default what
    :func:`evaluate` builds (the one the correction was trained on, on its own dataset; else the
    corpus's ``auto``), and the question reader of a static base its training recorded.
    Returns ``(model, calibration)``."""
    from fincrowd_ltr.data.splits import FoldPlan

    _rename_old_keywords(shortcuts)
    require_used(shortcuts, _CALIBRATE_USES, "calibrate_domain")
    s = (settings or FitSettings()).replace(**shortcuts)
    data_root, split, cache_dir = s.data.data_root, s.data.split, s.data.cache_dir
    folds, seed = s.training.folds, s.training.seed
    model = _loaded(checkpoint)
    if domain in model.domains and save and not replace:
        raise DataError(
            f"domain {domain!r} is already calibrated in this checkpoint; pass replace=True "
            "(--replace) to overwrite its calibration"
        )
    if fold is not None and qids is not None:
        raise DataError("give fold or qids, not both", "qids")
    if fold is not None and not 0 <= fold < folds:
        raise DataError(f"calibration fold {fold} is outside 0..{folds - 1} ({folds} folds)")
    data = load_dataset(dataset, data_root, split)
    data.require_covered("calibrate on")
    if qids is None:
        qids = (
            list(FoldPlan.by_group(data, folds, seed).folds[fold])
            if fold is not None
            else list(data.queries)
        )
        if not qids:
            raise DataError(
                f"calibration fold {fold} of {folds} holds no question (fewer groups than folds); "
                "choose another --fold or fewer --folds"
            )
    elif unknown := [q for q in qids if q not in data.queries]:
        raise DataError(
            f"qids: {len(unknown)} of {len(qids)} are not questions of {data.name} "
            f"(first: {unknown[:3]})",
            "qids",
        )
    stage = first_stage or trained_stage(model, data) or "auto"
    banks = build_banks(
        data,
        [model.base_ranker],
        first_stage=stage,
        size=s.banks.bank_size,
        static_questions=model.summary.static_questions,  # as in training
        split=split,
        cache_dir=cache_dir,
        run=read_run(run, data),
    )
    qids = [q for q in qids if q in banks.banks and data.covered(q)]
    # banks unlike the training banks are said, as evaluate says them (the tenth walk: a fit on
    # a corpus's synthetic questions with a named first stage, calibrated on its `auto` banks)
    model.shift_warnings(_stage_name(stage, data), s.banks.bank_size)
    examples = model.examples(data, banks, model.base_ranker, qids)
    from fincrowd_ltr.training.calibration import fit_calibration

    c = s.calibration
    calibration = fit_calibration(
        model,
        data,
        examples,
        c.regression_cap,
        c.min_calibration,
        delta=c.delta,
        method=c.gate_method,
    )
    model = model.with_domain(domain, calibration)
    if save and not isinstance(checkpoint, GatedCorrection):
        from fincrowd_ltr.model.checkpoint import add_domain

        add_domain(Path(checkpoint), domain, calibration, replace)
    return model, calibration


def _rename_old_keywords(shortcuts: dict) -> None:
    """``calibrate_domain``'s keywords of 0.2.0 under their settings names (in place)."""
    for old, new in _RENAMED.items():
        if old in shortcuts:
            if new in shortcuts:
                raise TypeError(f"give {new} or its old name {old}, not both")
            shortcuts[new] = shortcuts.pop(old)
