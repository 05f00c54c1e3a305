"""``fit_correction``: cross-validate the gated correction over group folds, then fit the model a
user keeps.

One fold plan (:class:`~fincrowd_ltr.data.splits.FoldPlan`): round ``k`` tests on fold ``k``,
calibrates the gate on fold ``k + 1`` and trains on the rest; the fold that calibrates never
validates (with labelled training banks, cross-validation over the training folds chooses the
setting and epoch count and the residual is refit on them; with synthetic training questions
only, the labelled training folds validate; without a gate, fold ``k + 1`` validates). The
gate's labels come from cross-fitting inside the training folds. Every residual is fitted once
(:class:`~fincrowd_ltr.training.fitting.ResidualFits`) and reused by the residual rows, the gated
rows and the cross-fitting. The final model is trained on every fold but the one that calibrates
its domain (or, with ``gate=False`` or ``gate_calibration="none"``, on every fold: the latter
trains the gate's predictor too, and calibrates no domain). ``test_fold`` holds a fold out of
everything, so ``evaluate`` can report on it.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from fincrowd_ltr.api.corpus import bank_spec, banks_of, load_dataset, read_run
from fincrowd_ltr.api.synthetic import (
    SyntheticExamples,
    SyntheticSettings,
    check_named_share,
    synthesis_in_background,
    synthetic_examples,
    synthetic_scorer,
)
from fincrowd_ltr.data.schema import SYNTHETIC_SUFFIX, DataError, Dataset
from fincrowd_ltr.data.splits import FoldPlan, Round, held_units
from fincrowd_ltr.defaults import AVERAGED, BANK_MODES, MIXING_KEYS, SMALL_HELD_OUT
from fincrowd_ltr.diagnostics.crowding import crowded_labels, repair_counts
from fincrowd_ltr.engine import Forked, worker_cap
from fincrowd_ltr.evaluation.label_free import held_out_synthetic_check
from fincrowd_ltr.evaluation.reports import CrossValidationReport
from fincrowd_ltr.evaluation.results import (
    SystemResult,
    gold_metadata_filter,
    ideal_order,
    system_result,
    write_report,
)
from fincrowd_ltr.features import BankFeaturizer
from fincrowd_ltr.features.bank_features import FAMILIES
from fincrowd_ltr.features.corpus import CorpusFeaturizers
from fincrowd_ltr.features.examples import (
    BankExample,
    make_examples_together,
    no_support_error,
)
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.model.calibration import one_uncertifiable_warning
from fincrowd_ltr.model.correction import (
    GatedCorrection,
    SyntheticDomainWarning,
    synthetic_domain_note,
)
from fincrowd_ltr.model.summary import TrainingSummary
from fincrowd_ltr.progress import Progress
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.retrieval.build import BankSpec, FirstStages
from fincrowd_ltr.retrieval.rankers import reader_of, recipe_of, scorer_recipe
from fincrowd_ltr.settings import AUTO, DataSettings, FitSettings
from fincrowd_ltr.synthesis import page_table_questions, taught, writes_teaching_questions
from fincrowd_ltr.training.calibration import fit_calibration, gate_rows, orderable_rows

RANKING_DEPTH = 30  # candidates of each held-out ranking kept in the report (for packing)
MODES = BANK_MODES
CV_DOMAIN = "cross-validation"
# rows that use the labels (references, not systems): the gold-metadata filter (not an upper
# bound) and the ideal order of the bank (the true upper bound)
REFERENCE_ROWS = ("gold_metadata_filter", "ideal_order")


@dataclass
class HeldOut:
    """The pooled held-out questions of one bank mode: every system's row and its orders."""

    n_queries: int
    n_groups: int
    systems: dict[str, SystemResult]
    rankings: dict[str, dict[str, list[str]]]
    gate_open_share: float | None = None


@dataclass
class CrossValReport:
    """Held-out results of a cross-validated correction.

    ``modes[mode].systems`` are :class:`~fincrowd_ltr.evaluation.results.SystemResult` rows
    (``base:<r>``, ``residual:<r>``, ``gated:<r>``, and the label-using references
    ``gold_metadata_filter`` and ``ideal_order``); ``modes[mode].rankings`` the held-out orders
    (top 30) that ``pack --orders`` reads; ``info`` the settings and choices.
    """

    dataset: str
    ranker: str
    modes: dict[str, HeldOut] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def system(self, mode: str, name: str) -> SystemResult:
        return self.modes[mode].systems[name]

    def to_dict(self) -> dict:
        """The JSON form (``fincrowd fit-residual --report``): the ungated rows under ``modes``,
        the gated ones and the rankings under ``gated``; without a gate, the retrieved banks'
        rankings under ``rankings``."""
        modes, gated = {}, {}
        for mode, held in self.modes.items():
            counts = {"n_queries": held.n_queries, "n_groups": held.n_groups}
            rows = {k: v.to_dict() for k, v in held.systems.items()}
            modes[mode] = {**counts, **{k: v for k, v in rows.items() if not k.startswith("gated")}}
            if held.gate_open_share is not None:
                gated[mode] = {
                    **counts,
                    "gate_open_share": held.gate_open_share,
                    **{k: v for k, v in rows.items() if k not in REFERENCE_ROWS},
                    "rankings": held.rankings,
                }
        out = {"dataset": self.dataset, "ranker": self.ranker, **self.info, "modes": modes}
        if gated:
            out["gated"] = {"modes": gated, "folds": self.info.get("gate_folds", [])}
        elif "retrieved" in self.modes:  # no gate: the held-out orders `pack --orders` reads
            out["rankings"] = self.modes["retrieved"].rankings
        return out

    def save(self, path: Path) -> Path:
        return write_report(path, self.to_dict())

    def table(self) -> str:
        """The held-out tables the command line prints."""
        return CrossValidationReport(self.to_dict()).table()

    def __str__(self) -> str:
        return self.table()


def _require_covered_folds(data, plan: FoldPlan, folds: int) -> None:
    """Every fold that trains must hold a covered question (each validates or calibrates some
    round); ``folds``: the plan's size before any held-out test fold was taken out."""
    empty = [i for i, fold in enumerate(plan.folds) if not any(data.covered(q) for q in fold)]
    if not empty:
        return
    held = folds - len(plan)  # a held-out test fold is not in ``plan``
    groups = {data.queries[q].group for f in plan.folds for q in f if data.covered(q)}
    fewer = (
        f"use --folds {len(groups) + held} or fewer, or add questions"
        if len(groups) >= 3  # what cross-validation needs at least (the gate: 4)
        else "add questions, or groups: a question's `group` (BEIR) is what folds keep together"
    )
    why = (
        f"{len(plan)} training folds need at least {len(plan)} groups (companies) with covered "
        f"questions, and these have {len(groups)}: {fewer}"
        if len(groups) < len(plan)
        else "its groups' questions have no relevant passage in the qrels: try another --seed "
        "or fewer --folds"
    )
    raise DataError(
        f"a training fold ({empty[0] + 1} of {len(plan)}) holds no covered question (one with a "
        f"relevant passage): {why}",
        "folds",
    )


def require_gate_rows(s: FitSettings) -> None:
    """Synthetic gate rows need a gate and synthetic questions that some fits never trained on
    (a ``DataError`` naming ``gate_rows`` before any work)."""
    c, syn = s.calibration, s.synthetic
    if c.gate_rows in ("auto", "labelled"):
        return
    why = None
    if not c.gate:
        why = "a fit without a gate has no gate predictor to train"
    elif not syn.active:
        why = "the fit has no synthetic questions (synthetic=N, --synthetic N)"
    elif syn.scope != "folds":
        why = (
            "with synthetic scope 'transductive' every fit trains on every synthetic question, "
            "so none gives a cross-fitted row (use scope 'folds')"
        )
    if why:
        raise DataError(f"gate_rows {c.gate_rows!r}: {why}", "gate_rows")


def resolved_gate_calibration(s: FitSettings, data: Dataset) -> str:
    """How the saved model's gate domain is calibrated: ``auto`` is ``none`` on a dataset of
    synthetic questions (a gate calibrated on them says little about real questions: the user
    calibrates a domain of their own later) unless a domain is named, and ``pooled`` on any
    other; ``none`` with a named domain is refused (a ``DataError``)."""
    c = s.calibration
    if c.gate_calibration == "none" and c.domain is not None and c.gate:
        raise DataError(
            f"gate_calibration 'none' calibrates no domain, so domain {c.domain!r} would be "
            "dropped: name no domain, or calibrate it (gate_calibration 'pooled' or 'fold')",
            "gate_calibration",
        )
    if c.gate_calibration != AUTO:
        return c.gate_calibration
    synthetic = data.name.endswith(SYNTHETIC_SUFFIX) and c.domain is None
    return "none" if synthetic else "pooled"


def _gate_rows(s: FitSettings, has_synthetic: bool) -> str:
    """What the gate learns from: ``auto`` is ``both`` for a gated fit with synthetic questions
    of scope ``folds`` (chosen on FinanceBench fold seeds 0-2 and TAT-QA dev, docs/results.md),
    and anything is ``labelled`` when the corpus yielded no synthetic bank."""
    asked = s.calibration.gate_rows
    if asked == "auto":
        cross_fitted = s.calibration.gate and s.synthetic.scope == "folds"
        asked = "both" if cross_fitted else "labelled"
    return asked if has_synthetic else "labelled"


class _Folds:
    """Examples per bank mode, indexed by the fold plan; training sets add ``extra`` (banks of
    other datasets, in every training set, never in validation, calibration or test) and the
    ``synthetic`` banks their scope allows (with scope ``folds``, none of a company in a fold
    outside the training set, nor of ``held_groups``, the held-out test fold's).

    Which folds validate a residual (early stopping, setting selection): never one that
    calibrates its gate (``calibrates``), whose rows the Learn-then-Test bound needs independent
    of the model. With labelled training banks and a gate, the setting and the epoch count are
    chosen by cross-validation over the training folds and the residual is refit on all of them
    for that many epochs; with synthetic training questions only, the labelled training folds
    (which train nothing) validate; without a gate, the round's validation fold does.
    """

    def __init__(
        self,
        plan: FoldPlan,
        examples: dict[str, dict[str, BankExample]],
        train_mode: str,
        extra: list[BankExample] | None = None,
        synthetic: SyntheticExamples | None = None,
        settings: SyntheticSettings | None = None,
        fold_groups: list[set[str]] | None = None,
        held_groups: set[str] | None = None,
        val_mode: str = "retrieved",
        calibrates: bool = True,
        gate_rows: str = "labelled",
        gate_labels: str = "improved",
        covered: Dataset | None = None,
    ) -> None:
        self.plan, self.examples = plan, examples
        self.covered = covered  # the dataset whose covered questions alone validate
        self.gate_rows, self.gate_labels = gate_rows, gate_labels
        self._synthetic_data: Dataset | None = None
        self.train_mode, self.val_mode = train_mode, val_mode
        self.extra = list(extra or [])
        self.synthetic, self.settings = synthetic, settings or SyntheticSettings()
        self.fold_groups, self.held_groups = fold_groups or [], set(held_groups or ())
        # labelled folds train, and the validation fold calibrates: refit for a chosen epoch count
        self.refits = self.settings.labelled and calibrates

    def train(self, folds) -> list[BankExample]:
        labelled = self.of(self.train_mode, folds) if self.settings.labelled else []
        return labelled + self.extra + self.synthetic_for(folds)

    def synthetic_for(self, folds) -> list[BankExample]:
        """The synthetic banks a training set of ``folds`` may use."""
        if self.synthetic is None:
            return []
        if self.settings.scope == "transductive":
            return list(self.synthetic.examples)
        kept = set(folds)
        excluded = set(self.held_groups)
        for k, groups in enumerate(self.fold_groups):
            if k not in kept:
                excluded |= groups
        return self.synthetic.allowed(excluded)

    def validating(self, train, fold: int) -> list[int]:
        """The folds that validate a residual trained on folds ``train`` whose round validates
        (or calibrates) on ``fold``: none for a refit (its epoch count is in its setting), the
        labelled training folds with synthetic questions only, else ``fold``."""
        if self.refits:
            return []
        return [fold] if self.settings.labelled else list(train)

    def split(self, train, fold: int) -> tuple[list[BankExample], list[BankExample]]:
        """The training and validation banks of the residual trained on folds ``train``."""
        return self.train(train), self.validation(self.validating(train, fold))

    def validation(self, folds) -> list[BankExample]:
        """The banks of ``folds`` that validate: covered questions only (one whose relevant
        pages are outside the corpus, or that has none judged, scores nDCG@10 0 whatever the
        residual does: it would only shrink the score and a fold's weight among folds)."""
        return self.of(self.val_mode, folds, self.covered)

    def selection_splits(self, train, fold: int) -> list[tuple[list, list]]:
        """The (training, validation) banks a residual's settings are compared on: for a refit,
        each training fold validating a fit on the others; else the residual's own split."""
        if not self.refits:
            return [self.split(train, fold)]
        return [
            (self.train(tuple(f for f in train if f != j)), self.validation([j])) for j in train
        ]

    def gate_banks(self, fold: int, data: Dataset) -> list[tuple[str, Dataset, list]]:
        """``(source, dataset, banks)`` of ``fold`` scored by the gate's cross-fitting: the
        labelled banks in each mode (source = the mode; their retrieved rows may also calibrate)
        and, when ``gate_rows`` asks for them, the synthetic banks of the fold's companies
        (source ``synthetic``), which no fit whose training set lacks ``fold`` trained on."""
        out = [(mode, data, self.of(mode, [fold])) for mode in MODES]
        found = self.synthetic_banks(fold, data) if self.gate_rows != "labelled" else None
        if found:
            out.append(("synthetic", *found))
        return out

    def synthetic_banks(self, fold: int, data: Dataset) -> tuple[Dataset, list] | None:
        """``(synthetic dataset, banks)`` of ``fold``'s companies, the dataset reading the
        labelled corpus's passages (one featurizer); None without such banks."""
        banks = self.synthetic_of(fold)
        if not banks:
            return None
        if self._synthetic_data is None:
            found = self.synthetic.synthesis.dataset()
            self._synthetic_data = replace(found, passages=data.passages)
        return self._synthetic_data, banks

    def synthetic_of(self, fold: int) -> list[BankExample]:
        """The synthetic banks of ``fold``'s companies (every fit whose training set lacks
        ``fold`` trained without them)."""
        if self.synthetic is None:
            return []
        groups = self.fold_groups[fold]
        return [e for e in self.synthetic.examples if self.synthetic.groups[e.qid] in groups]

    def require_support(self, trains, **error) -> None:
        """Every training set in ``trains`` holds a bank with a relevant candidate (retrieved
        banks may hold none); checked before any fit (``error``: ``no_support_error``'s
        ``detail``, ``advice`` and ``where``)."""
        for train in trains:
            if not any(e.has_support for e in self.train(train)):
                raise no_support_error(f"of folds {[f + 1 for f in train]} ", **error)

    def require_synthetic_gate_rows(self, trains, pooled: bool) -> None:
        """With gate rows from synthetic questions only, every training set in ``trains`` needs
        synthetic banks in one of its folds (two when out-of-fold gates score the pooled
        calibration's rows); checked before any fit."""
        if self.gate_rows != "synthetic":
            return
        need = 2 if pooled else 1
        for train in trains:
            found = [f for f in train if self.synthetic_of(f)]
            if len(found) < need:
                raise DataError(
                    f"gate_rows 'synthetic': the gate trained on folds {[f + 1 for f in train]} "
                    f"finds synthetic banks in {len(found)} of them and needs {need}; synthesise "
                    "more questions (synthetic=N, --synthetic N), or use gate_rows 'both'",
                    "gate_rows",
                )

    def teaches_gate(self, source: str) -> bool:
        """Whether rows of ``source`` (a bank mode, or ``synthetic``) train the gate."""
        return self.gate_rows == "both" or (source == "synthetic") == (self.gate_rows != "labelled")

    @property
    def validated_on(self) -> str:
        """What validates the residuals, in the fit report's words."""
        if self.refits:
            return "training folds (cross-validated; refit on all of them for the chosen epochs)"
        return "validation fold" if self.settings.labelled else "training folds"

    def fixed(self, setting: dict, epochs: int) -> dict:
        """``setting`` as the residual is trained: with its epoch count for a refit."""
        return {**setting, "epochs": epochs} if self.refits else setting

    def of(self, mode: str, folds, covered_only: Dataset | None = None) -> list[BankExample]:
        found = self.examples[mode]
        out = [found[q] for q in self.plan.qids(folds) if q in found]
        return [e for e in out if covered_only.covered(e.qid)] if covered_only else out


def fit_correction(
    dataset: str | Dataset,
    ranker: str = "dense",
    settings: FitSettings | None = None,
    *,
    run=None,
    banks: dict[str, BankSet] | None = None,
    progress: bool = True,
    **shortcuts,
) -> tuple[GatedCorrection, CrossValReport]:
    """Cross-validate and fit the gated correction of ``ranker``'s scores on a labelled corpus.

    Args:
        dataset: A dataset name or an in-memory ``Dataset`` (your corpus).
        ranker: The base ranker to correct: a built-in name, or ``run`` with ``run=``.
        settings: A :class:`~fincrowd_ltr.settings.FitSettings` (data, banks, training,
            calibration, synthetic questions); its defaults are the package's.
        run: Your ranker's scores (TREC file, ``{qid: {pid: score}}`` or a callable).
        banks: Prebuilt banks by mode (``{"retrieved": ..., "injected": ...}``) instead of
            building them.
        shortcuts: Any field of the settings by its name, e.g. ``folds=4``, ``test_fold=0``,
            ``gate=False``, ``grid=None``, ``regression_cap=0.02``, ``cache_dir=None``,
            ``synthetic=400``. Notable ones: ``grid`` (residual settings chosen per fold on
            validation banks; default ``SELECTION_GRID``, 12 settings; ``None``: the package
            defaults only, as ``--no-select``, about a fifth of the fits), ``test_fold`` (held
            out of training and calibration entirely), ``gate_calibration`` (``pooled``: the
            training domain's gate is calibrated on the calibration fold together with the
            training folds' cross-fitted rows; ``fold``: the calibration fold alone;
            ``none``: no domain, every fold trains, ``calibrate_domain`` fits one later;
            ``auto``, the default: ``none`` on a dataset of synthetic questions, else
            ``pooled``), ``extra_training`` (other
            labelled datasets whose banks join every training set), ``synthetic`` (questions
            synthesised from the corpus's own pages, no labels, in the training sets their
            scope allows, never validation, calibration or test), ``monotone``.

    Returns:
        ``(model, report)``: the fitted :class:`GatedCorrection` and the held-out results.
    """
    s = (settings or FitSettings()).replace(**shortcuts)
    data = load_dataset(dataset, s.data.data_root, s.data.split)
    data.require_covered("train on")
    saved = resolved_gate_calibration(s, data) != "none"  # the saved model calibrates a domain
    # --workers 1: no worker process at all; one "cannot certify" warning for every round
    with (
        worker_cap(s.training.workers),
        one_uncertifiable_warning(
            "gate calibrations of the fit", "the saved model's" if saved else None
        ),
    ):
        cv = _CrossValidation(data, ranker, s, read_run(run, data), banks or {}, progress)
        report = cv.cross_validate()
        final = cv.final_model()
    report.info["residual_fits"] = cv.fits.trained
    return final, report


class _CrossValidation:
    """One ``fit_correction`` run: the fold plan, every bank's examples and every residual fit.

    Fits are listed from the fold plan and trained in two batches (each in parallel where it
    pays): every round's selection grid, then, with the settings the rounds chose, the gate's
    cross-fitting and the final model's fits.
    """

    def __init__(self, data, ranker, s: FitSettings, run, banks, progress) -> None:
        self.data, self.ranker, self.s, self.progress = data, ranker, s, progress
        t, b = s.training, s.banks
        options = {"objective": t.objective} if t.objective != "pairwise" else {}
        options.update({k: True for k in ("hard_negatives", "monotone") if getattr(t, k)})
        grid = tuple({**g, **options} for g in (t.grid or ({},)))
        if any("epochs" in g for g in grid):
            raise DataError("a grid setting may not fix 'epochs': validation chooses them", "grid")
        plan = FoldPlan.by_group(data, t.folds, t.seed)
        self.held = None
        if t.test_fold is not None:
            self.held = plan.folds[t.test_fold] if 0 <= t.test_fold < len(plan) else None
            _warn_small_test_fold(data, plan, t.test_fold)
            plan = plan.without(t.test_fold)
        _require_covered_folds(data, plan, t.folds)
        if s.calibration.gate and len(plan) < 4:
            raise DataError(
                f"the gate needs at least 4 group folds for training (test, calibration and two "
                f"for cross-fitting); got {len(plan)}"
            )
        if len(plan) < 3:
            raise DataError(f"cross-validation needs at least 3 group folds; got {len(plan)}")
        self.plan = plan
        self.extractor = corpus_extractor(data.passages)
        featurizer = BankFeaturizer(self.extractor, data.passages)
        self.stage = BankSpec(first_stage=b.first_stage).stage(data)
        self.synthetic = s.synthetic
        if self.synthetic.active:  # before any bank is built
            synthetic_scorer(self.synthetic, ranker, self.stage)
            self.synthetic = self.synthetic.resolved(ranker)
        require_gate_rows(s)
        # the synthetic questions are written beside the labelled banks' single-threaded
        # steps (a forked child), and read after them
        pending = self._synthesise() if self.synthetic.active else None
        try:
            from fincrowd_ltr.training.fitting import ResidualFits  # Lightning: seconds, meanwhile

            modes = sorted({b.train_mode, b.val_mode, *MODES})
            cache = s.data.cache_dir
            # one index and first stage for the labelled banks of every mode and the synthetic
            stages = FirstStages()
            self.teaching = self._teaching(pending)
            self.examples, notes = _examples_by_mode(
                data, ranker, modes, banks, featurizer, b.first_stage, b.bank_size,
                s.data.split, cache, run, progress, stages, b.static_questions, self.teaching,
            )  # fmt: skip
            self.notes = list(data.notes) + notes  # the loader's first (unjudged questions)
            if b.train_mode == "retrieved" and self.synthetic.labelled:
                self.notes += _retrieved_training(data, self.examples["retrieved"], self.held)
            extra, self.extra_qids, extra_groups = _extra_examples(
                list(t.extra_training), ranker, b.train_mode, b.first_stage, b.bank_size,
                t.extra_limit, t.seed, s.data.data_root, cache, progress, b.static_questions,
            )  # fmt: skip
            self.syn = self._synthetic_examples(featurizer, pending, stages) if pending else None
            del stages  # the banks are built: the index and page vectors are not needed again
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
        self.gate_rows = _gate_rows(s, self.syn is not None)
        self.gate_calibration = resolved_gate_calibration(s, data)
        # rounds calibrate their held-out gates pooled unless the fold alone is asked for
        self.pooled = self.gate_calibration != "fold"
        if (
            s.calibration.gate
            and self.gate_calibration != "none"
            and data.name.endswith(SYNTHETIC_SUFFIX)
        ):
            warnings.warn(
                synthetic_domain_note(s.calibration.domain or data.name),
                SyntheticDomainWarning,
                stacklevel=2,
            )
        self.grid = self.synthetic.grid(grid) if self.syn else grid
        fold_groups = [held_units(data, fold) for fold in plan.folds]
        held_groups = held_units(data, self.held or ())
        self.ex = _Folds(
            plan, self.examples, b.train_mode, extra, self.syn, self.synthetic, fold_groups,
            held_groups, b.val_mode, s.calibration.gate, self.gate_rows,
            s.calibration.gate_labels, data,
        )  # fmt: skip
        trains = [r.train for r in plan.rounds()] + [self.final_round()[1].train]
        self.ex.require_support(trains)
        if s.calibration.gate:
            self.ex.require_synthetic_gate_rows(trains, self.pooled)
        groups = {**extra_groups, **{q: query.group or q for q, query in data.queries.items()}}
        if self.syn is not None:
            groups.update(self.syn.groups)
        self.fits = ResidualFits(t.workers, progress, t.committee, groups)
        # every fold's model reads this corpus: its segment names, harvested once (by
        # from_passages above), are kept here
        self.features = CorpusFeaturizers()
        self.features.remember_segments(self.extractor, data.passages, self.extractor.segment_names)

    def _synthesise(self) -> Forked:
        """The synthetic questions, written in a forked child from now on. An ``"auto"`` named
        share reads the question texts (never qrels) of every fold but a held-out test fold: a
        cross-validation's test folds' texts included."""
        held = set(self.held or ())
        asked = [q.text for qid, q in self.data.queries.items() if qid not in held]
        return synthesis_in_background(self.synthetic, self.data, self.extractor, asked)

    def _teaching(self, pending: Forked | None):
        """The questions that teach the static page table: this fit's own synthetic questions
        when its settings write them first (one draw or several: not written twice), else
        written when the table is built."""
        syn = self.synthetic
        lends = pending is not None and writes_teaching_questions(
            syn.total, syn.seed, syn.named_share, syn.line_items
        )
        written = pending.result if lends else None
        return page_table_questions(self.data, extractor=self.extractor, written=written)

    def _synthetic_examples(
        self, featurizer, pending: Forked, stages: FirstStages
    ) -> SyntheticExamples | None:
        """The synthetic training banks (None, with a note, when the corpus yields none)."""
        b, data = self.s.banks, self.data
        syn = synthetic_examples(
            self.synthetic, data, featurizer, self.ranker, self.stage, b.train_mode,
            b.bank_size, self.s.data.cache_dir, self.progress, found=pending.result(),
            stages=stages, static_questions=b.static_questions, teaching=self.teaching,
        )  # fmt: skip
        if self.synthetic.named_share != AUTO:  # as `synthesize` warns (every question's text)
            option = "synthetic named_share 'auto' (--synthetic-named-share auto)"
            asked = [q.text for q in data.queries.values()]
            check_named_share(syn.synthesis, asked, self.extractor, "fit", option)
        written, n, draws = len(syn.synthesis.questions), self.synthetic.n, self.synthetic.draws
        if syn.examples and draws > 1 and written < n * draws:  # short draws weigh as full ones
            short = [k + 1 for k in range(draws) if written < n * (k + 1)]
            self.notes.append(
                f"synthetic draws {short} of {draws} hold fewer than {n} questions ({written} "
                f"written of {n * draws} asked) yet weigh as much as the others; a draw without "
                "questions trains on the labelled banks alone: ask fewer questions (synthetic=, "
                "--synthetic) or draws"
            )
        if syn.examples:
            return syn
        found = "no synthetic training bank: " + (
            f"{written} questions synthesised from the corpus's pages, none with a relevant "
            "page in its bank"
            if written
            else "no question could be synthesised from the corpus's pages ("
            + "; ".join(
                syn.synthesis.notes
                or ["none has a table row or sentence stating a figure for a period"]
            )
            + ")"
        )
        if not self.synthetic.labelled:
            raise DataError(f"synthetic-only training has nothing to train on: {found}")
        if self.s.calibration.gate_rows == "synthetic":
            raise DataError(f"the gate has no synthetic row to learn from: {found}", "gate_rows")
        alone = "; trained on the labelled banks alone"
        if self.s.calibration.gate_rows == "both":
            alone += ", and the gate learns from labelled rows alone"
        self.notes.append(found + alone)
        return None

    def final_round(self) -> tuple[int | None, Round, int]:
        """The final model's calibration fold (None: it calibrates no domain), its round and
        the fold its round names as validating (see ``_final_round``)."""
        calibrates = self.s.calibration.gate and self.gate_calibration != "none"
        return _final_round(self.data, self.plan, calibrates)

    def model(self, scorer, gate_module=None, domains=None) -> GatedCorrection:
        return GatedCorrection(
            scorer,
            gate_module,
            domains,
            self.extractor.companies,
            TrainingSummary(dataset=self.data.name, base_ranker=self.ranker),
            segments=self.extractor.segment_names,
            features=self.features,
        )

    def _gate_jobs(self, r, validation: int, setting: dict) -> list[tuple]:
        seed = self.s.training.seed
        return [(t, v, setting, seed) for _, t, v in _gate_splits(self.ex, r.train, validation)]

    def _fit_batches(self) -> list[tuple]:
        """Train every fit the run needs; returns each round's (module, setting, val scores)."""
        seed, rounds, ex = self.s.training.seed, self.plan.rounds(), self.ex
        gate = self.s.calibration.gate
        _, final, val = self.final_round()
        choices = [ex.selection_splits(r.train, r.validation) for r in rounds]
        if gate:  # the final model's setting is chosen on its own training folds
            choices.append(ex.selection_splits(final.train, val))
        self.fits.prefetch([(t, v, g, seed) for c in choices for t, v in c for g in self.grid])
        chosen = [self._choose(splits) for splits in choices]
        if gate:
            self.setting = chosen.pop()[0]
        round_jobs = [(*ex.split(r.train, r.validation), setting, seed)
                      for r, (setting, _) in zip(rounds, chosen, strict=True)]  # fmt: skip
        jobs = []
        if gate:
            for r, (setting, _) in zip(rounds, chosen, strict=True):
                jobs += self._gate_jobs(r, r.validation, setting)
            jobs += self._gate_jobs(final, val, self.setting)
        else:
            best = _best_setting([row[1] for row in chosen])[0]
            self.setting = averaged([self.grid[i] for i in self._mixed(best)])
        jobs.append((*ex.split(final.train, val), self.setting, seed))
        self.fits.prefetch([m for job in round_jobs + jobs for m in self.fits.members(*job)])
        return [(self.fits.deployed(*job)[0], setting, scores)
                for job, (setting, scores) in zip(round_jobs, chosen, strict=True)]  # fmt: skip

    def _choose(self, splits) -> tuple[dict, list[float]]:
        """The setting a residual validated on ``splits`` is trained with (the grid's best, or
        with ``mixing`` ``average`` every mixing weight of the best one's other settings, each
        at its own epoch count), and every grid setting's validation score."""
        from fincrowd_ltr.training.fitting import validate_grid

        scores, epochs = validate_grid(splits, self.grid, self.s.training.seed, self.fits)
        best = _first_best(scores)
        setting = averaged([self.ex.fixed(self.grid[i], epochs[i]) for i in self._mixed(best)])
        return setting, scores

    def _mixed(self, index: int) -> list[int]:
        """The grid settings a residual at grid setting ``index`` averages: itself, or with
        ``mixing`` ``average`` every setting that differs from it by its mixing weight or draw
        alone."""
        if self.synthetic.mixing != "average" or self.syn is None:
            return [index]
        rest = _without_mixing(self.grid[index])
        return [i for i, g in enumerate(self.grid) if _without_mixing(g) == rest]

    def cross_validate(self) -> CrossValReport:
        """The held-out rows of every round, pooled."""
        data, s = self.data, self.s
        selected = self._fit_batches()
        pooled = {m: {k: {} for k in ("base", "residual", "gated", "filter", "ideal", "opened")}
                  for m in MODES}  # fmt: skip
        gate_folds = []
        bar = Progress(len(selected), "cross-validation folds", enabled=self.progress)
        for r, (module, setting, _) in zip(self.plan.rounds(), selected, strict=True):
            self._score_round(r, module, pooled)
            if s.calibration.gate:
                gate_folds.append(self._gated_round(r, module, setting, pooled))
            bar.update()
        bar.close()
        report = CrossValReport(data.name, self.ranker)
        report.info = self._info(selected, gate_folds)
        labels = crowded_labels(data, list(self.examples["retrieved"].values()))
        report.modes = {
            mode: _held_out(data, self.ranker, systems,
                            labels if mode == "retrieved" else None, s.calibration.gate)
            for mode, systems in pooled.items()
        }  # fmt: skip
        return report

    def _score_round(self, r, module, pooled) -> None:
        corrected = self.model(module.scorer)
        for mode in MODES:
            test = self.ex.of(mode, [r.test], self.data)
            for qid, res in corrected.score_examples(self.data, test).items():
                pooled[mode]["base"][qid] = res.base_ranking
                pooled[mode]["residual"][qid] = res.corrected_ranking
                pooled[mode]["filter"][qid] = gold_metadata_filter(self.data, res.base_ranking, qid)
                pooled[mode]["ideal"][qid] = ideal_order(self.data, res.base_ranking, qid)

    def _gated_round(self, r, module, setting, pooled) -> dict:
        c = self.s.calibration
        gate_module, oof = _fit_gate(
            self.data, self.ex, self.fits, self.model, r.train, r.validation, setting,
            self.s.training.seed, self.pooled,
        )  # fmt: skip
        gated = self.model(module.scorer, gate_module)
        calibration = fit_calibration(
            gated, self.data, self.ex.of("retrieved", [r.validation]), c.regression_cap,
            c.min_calibration, cross_fitted=oof, delta=c.delta, method=c.gate_method,
        )  # fmt: skip
        gated = gated.with_domain(CV_DOMAIN, calibration)
        for mode in MODES:
            test = self.ex.of(mode, [r.test], self.data)
            for qid, res in gated.score_examples(self.data, test, CV_DOMAIN).items():
                pooled[mode]["gated"][qid] = res.ranking
                pooled[mode]["opened"][qid] = res.decision.applied
        rows = {
            "calibration": _logit_rows(gated, self.data, self.ex.of("retrieved", [r.validation])),
            "test": _logit_rows(gated, self.data, self.ex.of("retrieved", [r.test], self.data)),
        }
        for qids, logits, gains, orderable in oof or []:  # the pooled cross-fitted rows
            rows["calibration"] = _join_rows(rows["calibration"], qids, logits, gains, orderable)
        held_out = self.synthetic.scope == "folds" and self.ex.synthetic_banks(r.test, self.data)
        if held_out:  # label-free held-out rows: how the gate orders questions it never saw
            rows["synthetic_test"] = _logit_rows(gated, *held_out)
        return {
            "test_fold": r.test,
            "calibration_fold": r.validation,
            "setting": setting,
            **{k: v for k, v in calibration.to_dict().items() if "query" not in k},
            "query_ids": calibration.n_queries,
            # the calibration fold's own questions (pooled cross-fitted rows are training ones)
            "calibration_query_ids": calibration.query_ids,
            # every row's gate logit, nDCG@10 gain and orderability, so another calibration
            # method can be replayed on the same fits (benchmarks/gate_guarantee.py)
            "rows": rows,
        }

    def _info(self, selected, gate_folds) -> dict:
        s = self.s
        info = {
            "first_stage": self.stage,
            "train_mode": s.banks.train_mode,
            "val_mode": s.banks.val_mode,
            "folds": len(self.plan),
            "test_fold": s.training.test_fold,
            "selection": {
                "grid": list(self.grid),
                "chosen_per_fold": [row[1] for row in selected],
                "mean_val_ndcg10": _best_setting([row[2] for row in selected])[1],
                "validated_on": self.ex.validated_on,
            },
            "committee": s.training.committee,
            "notes": self.notes,
        }
        if s.calibration.gate:  # a fit without a gate has no cap, calibration or gate rows
            info["gate_folds"] = gate_folds
            info["regression_cap"] = s.calibration.regression_cap
            info["gate_calibration"] = self.gate_calibration
            info["gate_rows"] = self.gate_rows
            info["gate_labels"] = s.calibration.gate_labels
        if self.syn is not None:
            written = self.syn.synthesis.report(sample=0)
            info["synthetic"] = {
                **self.synthetic_record(),
                "n_companies": len({self.syn.groups[e.qid] for e in self.syn.examples}),
                "per_template": written["per_template"],
                "per_filing_kind": written["per_filing_kind"],
            }
            check = held_out_synthetic_check(gate_folds, self.syn.groups)
            if check is not None:  # label-free: held-out companies' synthetic questions
                info["synthetic_held_out"] = check
        return info

    def synthetic_record(self) -> dict:
        """The synthetic settings used and how many banks they built (0: the corpus yielded
        none), for the fit report and the checkpoint."""
        syn = self.syn
        return {
            **asdict(self.synthetic),
            "n_banks": len(syn.examples) if syn else 0,
            "named_share_used": syn.synthesis.named_share if syn else None,
        }

    def final_model(self) -> GatedCorrection:
        """The model a user keeps, with its training summary."""
        data, s, plan = self.data, self.s, self.plan
        c, b, t = s.calibration, s.banks, s.training
        final = _fit_final(
            data, self.ex, self.fits, self.model, self.final_round(), self.setting, t.seed,
            c.gate, c, c.domain or data.name, self.gate_calibration == "pooled",
        )  # fmt: skip
        calibration_qids = set(final.summary.extra.pop("calibration_qids", []))
        # every question of the plan's folds trained or validated some fit (a question without a
        # bank still shaped the folds): all count as seen, except the calibration fold's, which
        # the domain's calibration records
        trained_qids = sorted(q for q in plan.qids(range(len(plan))) if q not in calibration_qids)
        extra = {}
        if self.held is not None:
            extra["held_out_query_ids"] = sorted(self.held)
        if self.extra_qids:
            extra["extra_training"] = _by_dataset(self.extra_qids)
        if s.training.committee > 1:
            extra["committee"] = s.training.committee
        if c.gate and self.gate_rows != "labelled":
            extra["gate_rows"] = self.gate_rows
        if c.gate and c.gate_labels != "improved":
            extra["gate_labels"] = c.gate_labels
        if self.synthetic.active:  # asked for: recorded even when the corpus yielded none
            extra["synthetic"] = self.synthetic_record()
        final.summary = TrainingSummary(
            dataset=data.name,
            base_ranker=self.ranker,
            first_stage=self.stage,
            base_scorer=scorer_recipe(self.ranker, b.static_questions, taught(data)),
            bank_size=b.bank_size,
            split=s.data.split,
            dataset_fingerprint=data.corpus_fingerprint(),
            setting=self.setting,
            bank_mode=b.train_mode,
            val_bank_mode=b.val_mode,
            folds=t.folds,
            seed=t.seed,
            calibration_fold=final.summary.calibration_fold,
            test_fold=t.test_fold,
            train_banks=final.summary.train_banks,
            query_ids=trained_qids,
            query_fingerprints=sorted(
                data.question_identities(trained_qids) + [fp for _, _, fp in self.extra_qids]
            ),
            extra=extra,
        )
        return final


def _examples_by_mode(
    data, ranker, modes, banks, featurizer, first_stage, bank_size, split, cache_dir, run, progress,
    stages=None, static_questions="minilm", teaching=None,
) -> tuple[dict[str, dict[str, BankExample]], list[str]]:  # fmt: skip
    """Each bank mode's feature matrices (banks built unless given; the modes' banks share
    most of their pages, so their features are computed together), and the banks' notes.
    ``teaching``: the questions that teach the static page table (default: the corpus's own,
    written when the table is built)."""
    banksets, notes = {}, []
    if teaching is None:
        teaching = page_table_questions(data, extractor=featurizer.extractor)
    recipe = scorer_recipe(ranker, static_questions, taught(data))
    for mode in modes:
        bankset = banks.get(mode)
        given = None if bankset is None else bankset.scorers.get(ranker)
        if given and recipe and not given.endswith(recipe):
            raise DataError(
                f"the given {mode} banks' {ranker!r} scores are {recipe_of(given)!r}"
                f", this fit's static scorer reads {recipe!r}: "
                + (
                    "pass the static_questions they were built with, or "
                    if reader_of(given) != reader_of(recipe)
                    else ""
                )
                + "let the fit build its banks",
                "static_questions",
            )
        if bankset is None:
            spec = bank_spec(first_stage=first_stage, mode=mode, size=bank_size,
                             static_questions=static_questions)  # fmt: skip
            where = DataSettings(split=split, cache_dir=cache_dir)
            bankset = banks_of(data, [ranker], spec, where, run, None, progress, stages, teaching)
        notes += [f"{mode} banks: {n}" for n in bankset.notes]
        banksets[mode] = bankset
    cache = None if cache_dir is None else Path(cache_dir)
    found = make_examples_together(data, banksets, ranker, featurizer, cache=cache)
    return {mode: {e.qid: e for e in found[mode]} for mode in modes}, notes


def _warn_small_test_fold(data: Dataset, plan: FoldPlan, k: int) -> None:
    """Warn when the held-out fold ``k`` holds few covered questions or groups (folds are
    groups hashed, so sizes vary): its figures and intervals would say little."""
    if not 0 <= k < len(plan):
        return
    sizes = [sum(data.covered(q) for q in fold) for fold in plan.folds]
    groups = len({data.queries[q].group for q in plan.folds[k] if data.covered(q)})
    if sizes[k] < SMALL_HELD_OUT or groups < 3:
        warnings.warn(
            f"the held-out fold {k} holds {sizes[k]} covered questions of {groups} groups "
            f"(covered questions per fold: {sizes}): its figures and intervals say little; "
            "hold out a larger fold (test_fold=, --test-fold) or draw another plan (seed=, --seed)",
            stacklevel=4,
        )


def _retrieved_training(data: Dataset, found: dict[str, BankExample], held=None) -> list[str]:
    """A note when retrieved training banks leave covered questions (outside a held-out test
    fold) without a relevant candidate: those questions train nothing."""
    held = set(held or ())
    covered = [q for q in data.queries if data.covered(q) and q not in held]
    missed = sum(not (q in found and found[q].has_support) for q in covered)
    if not missed:
        return []
    return [
        f"training banks as retrieved: {missed} of {len(covered)} covered questions have no "
        "relevant candidate in their bank and train nothing (train_mode='injected', "
        "--train-mode injected, adds their relevant pages)"
    ]


def _extra_examples(
    datasets,
    ranker,
    mode,
    first_stage,
    bank_size,
    limit,
    seed,
    data_root,
    cache_dir,
    progress,
    static_questions="minilm",
) -> tuple[list[BankExample], list[tuple[str, str, str]], dict[str, str]]:
    """Training banks of other datasets, their ``(dataset, qid, fingerprint)`` and their
    questions' groups (``dataset:group``)."""
    import random

    out, qids, groups = [], [], {}
    for name in datasets:
        other = load_dataset(name, data_root, "all")
        featurizer = BankFeaturizer(corpus_extractor(other.passages), other.passages)
        found, _ = _examples_by_mode(
            other, ranker, [mode], {}, featurizer, first_stage, bank_size, "all", cache_dir,
            None, progress, None, static_questions,
        )  # fmt: skip
        covered = sorted(q for q, e in found[mode].items() if e.has_support)
        for qid in random.Random(seed).sample(covered, min(limit, len(covered))):
            out.append(found[mode][qid])
            qids.append((other.name, qid, other.question_fingerprint(qid)))
            groups[qid] = f"{other.name}:{other.queries[qid].group or qid}"
    return out, qids, groups


def _by_dataset(rows: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, qid, _ in rows:
        out.setdefault(name, []).append(qid)
    return {name: sorted(q) for name, q in out.items()}


def _held_out(data, ranker, systems: dict, labels: dict | None, gate: bool) -> HeldOut:
    """The pooled held-out rows of one bank mode (crowded-failure repair counted with
    ``labels``)."""
    qids = sorted(systems["base"])
    base = systems["base"]
    names = {
        "base": f"base:{ranker}",
        "residual": f"residual:{ranker}",
        "filter": "gold_metadata_filter",
        "ideal": "ideal_order",
    }
    if gate:
        names["gated"] = f"gated:{ranker}"
    rows = {}
    for key, name in names.items():
        rows[name] = system_result(data, systems[key], qids, base)
        if labels is not None and key not in ("filter", "ideal"):
            rows[name].extra.update(repair_counts(data, labels, systems[key]))
    return HeldOut(
        n_queries=len(qids),
        n_groups=len({data.queries[q].group for q in qids}),
        systems=rows,
        rankings={
            names[k]: {q: systems[k][q][:RANKING_DEPTH] for q in qids}
            for k in ("base", "residual", "gated")
            if k in names
        },
        gate_open_share=float(np.mean([systems["opened"][q] for q in qids])) if gate else None,
    )


def _fit_gate(data, ex, fits, model, train, validation, setting, seed, oof=False):
    """The gate trained on cross-fitted rows of the training folds (each scored by a residual
    trained without it), both bank modes; with ``oof``, also each training fold's retrieved rows
    as ``(qids, logits, gains)`` with logits of a gate trained without that fold (else None)."""
    rows = []
    for test, inner_train, inner_val in _gate_splits(ex, train, validation):
        module, _ = fits.deployed(inner_train, inner_val, setting, seed)
        scorer = model(module.scorer)
        for source, dataset, examples in ex.gate_banks(test, data):
            qids, f, gains = gate_rows(scorer, dataset, examples)
            rows.append((test, source, qids, f, gains, orderable_rows(examples, qids)))
    teaching = [row for row in rows if ex.teaches_gate(row[1])]
    gate = _train_gate_on(teaching, seed, ex.gate_labels)
    if not oof:
        return gate, None
    out = []
    for fold in sorted({row[0] for row in rows}):
        held_out = _train_gate_on([row for row in teaching if row[0] != fold], seed, ex.gate_labels)
        out += [
            (qids, held_out.logits(f), gains, orderable)
            for test, mode, qids, f, gains, orderable in rows
            if test == fold and mode == "retrieved" and len(qids)
        ]
    return gate, out


def _logit_rows(model, data, examples) -> dict:
    """``{"qids", "logits", "gains", "orderable"}`` of ``examples`` (labelled retrieved banks, or
    a held-out fold's synthetic banks) under ``model``'s gate."""
    qids, feats, gains = gate_rows(model, data, examples)
    logits = [model.runtime.gate_logit(f) for f in feats]
    orderable = orderable_rows(examples, qids)
    return {"qids": list(qids), "logits": logits, "gains": gains.tolist(),
            "orderable": orderable.tolist()}  # fmt: skip


def _join_rows(rows: dict, qids, logits, gains, orderable) -> dict:
    return {
        "qids": rows["qids"] + list(qids),
        "logits": rows["logits"] + [float(x) for x in logits],
        "gains": rows["gains"] + [float(x) for x in gains],
        "orderable": rows["orderable"] + [bool(x) for x in orderable],
    }


def _train_gate_on(rows, seed, labels="improved"):
    """The gate trained on cross-fitted ``(fold, source, qids, features, gains, orderable)``
    rows; ``labels`` ``decisive`` keeps the orderable rows whose nDCG@10 moved (all rows, as
    ``improved``, when the moved rows are all improved or all worse: one class teaches a
    logistic gate nothing)."""
    from fincrowd_ltr.training.gate_module import train_gate

    rows = [row for row in rows if len(row[2])]  # a fold without banks of a source adds none
    if not rows:
        raise DataError("the gate has no cross-fitted row to learn from", "gate_rows")
    feats = np.concatenate([row[3] for row in rows])
    gains = np.concatenate([row[4] for row in rows])
    if labels == "decisive":
        moved = np.concatenate([row[5] for row in rows]) & (np.abs(gains) > 1e-12)
        if (gains[moved] > 0).any() and (gains[moved] < 0).any():
            feats, gains = feats[moved], gains[moved]
    return train_gate(feats, (gains > 1e-12).astype(np.float64), seed=seed)


def _gate_splits(ex, train, validation):
    """The gate's cross-fitting inside ``train``: (inner test fold, training examples, validation
    examples) per inner round."""
    for inner in FoldPlan.inner(train, validation):
        inner_val = validation if validation != inner.test else inner.train[0]
        yield (inner.test, *ex.split(inner.train, inner_val))


def _final_round(data, plan, calibrates: bool = True) -> tuple[int | None, Round, int]:
    """The final model's calibration fold (the one with most covered questions), its round and
    the fold its round names as validating (which validates only where ``_Folds`` says so);
    without a calibration (``calibrates`` false: no gate, or none asked for) every fold trains
    and fold 0 is named."""
    if not calibrates:
        return None, Round(None, 0, tuple(range(len(plan)))), 0
    covered = [sum(data.covered(q) for q in fold) for fold in plan.folds]
    calib = max(range(len(plan)), key=lambda f: (covered[f], -f))
    r = plan.final(calib)
    return calib, r, r.train[0]


def averaged(settings: list[dict]) -> dict:
    """One setting whose residual is the average of each of ``settings``' residuals (every
    mixing weight's and draw's, each at its own epoch count); a single setting stays itself."""
    return dict(settings[0]) if len(settings) == 1 else {AVERAGED: [dict(s) for s in settings]}


def _without_mixing(setting: dict) -> dict:
    return {k: v for k, v in setting.items() if k not in MIXING_KEYS}


def _best_setting(val_scores: list[list[float]]) -> tuple[int, list[float]]:
    """The grid setting with the best validation nDCG@10 averaged over the rounds (the first
    wins ties), and those averages."""
    mean_val = [float(np.mean(col)) for col in zip(*val_scores, strict=True)]
    return _first_best(mean_val), mean_val


def _first_best(scores: list[float]) -> int:
    """The index of the highest score, the first of equal ones."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def _fit_final(data, ex, fits, model, final, setting, seed, gate, c, domain, pooled=False):
    """The model a user keeps: the residual of the ``final`` round (``final_round``'s triple)
    and, with ``gate``, its gate's predictor and (where the round has a calibration fold) the
    calibration of ``domain``."""
    calib, r, val = final
    module, _ = fits.deployed(*ex.split(r.train, val), setting, seed)
    gate_module, oof = (
        _fit_gate(data, ex, fits, model, r.train, val, setting, seed, pooled)
        if gate
        else (None, None)
    )
    out = model(module.scorer, gate_module)
    out.summary.train_banks = sum(e.has_support for e in ex.train(r.train))
    if calib is None:  # no gate, or gate_calibration "none": the user calibrates a domain later
        return out
    calibration = fit_calibration(
        out, data, ex.of("retrieved", [calib]), c.regression_cap, c.min_calibration,
        cross_fitted=oof, delta=c.delta, method=c.gate_method,
    )  # fmt: skip
    out = out.with_domain(domain, calibration)
    out.summary.calibration_fold = calib
    out.summary.extra["calibration_qids"] = ex.plan.qids([calib])
    return out


# each row drops these families: all typed fields at once, every family alone, and every source of
# period evidence at once (the period field, periods printed on the page, the filing's fit)
ABLATIONS: dict[str, list[str]] = {
    "compatibility": ["compatibility"],
    **{family: [family] for family in FAMILIES},
    "all_periods": ["period", "text_period", "filing"],
}


def feature_ablation(
    dataset: str | Dataset, ranker: str, setting: dict | None = None, **kwargs
) -> dict:
    """Cross-validated residual deltas (Recall@10, nDCG@10, regression per bank mode) with each
    feature family switched off, at one ``setting``; ``"none"`` is the full model. ``kwargs``
    pass to :func:`fit_correction` (the residual alone, no gate; synthetic questions only if
    ``kwargs`` ask for them, so a mixed fit's ablation is of its labelled banks)."""
    data = load_dataset(dataset, kwargs.pop("data_root", None), kwargs.get("split", "all"))
    from fincrowd_ltr.training.fitting import module_setting

    # a gated fit's setting may carry its refit's epoch count (these fits validate instead) and
    # a mixing weight (for synthetic banks these fits have unless asked), or average several:
    # the model's part of it is kept
    chosen = module_setting(setting or {})
    out = {}
    for family, dropped in {"none": [], **ABLATIONS}.items():
        grid = ({**chosen, "drop_features": dropped},)
        _, report = fit_correction(data, ranker, gate=False, grid=grid, progress=False, **kwargs)
        out[family] = {
            mode: {
                "recall@10_delta": held.systems[f"residual:{ranker}"].delta["recall@10"],
                "ndcg@10_delta": held.systems[f"residual:{ranker}"].delta["ndcg@10"],
                "regression_rate": held.systems[f"residual:{ranker}"].regression_rate,
            }
            for mode, held in report.modes.items()
        }
    return out
