"""``fit_correction``: cross-validate the gated correction over group folds, then fit the model a
user keeps.

One fold plan (:class:`~fincrowd_ltr.data.splits.FoldPlan`): round ``k`` tests on fold ``k``,
validates and calibrates on fold ``k + 1`` and trains on the rest; the gate's labels come from
cross-fitting inside the training folds. Every residual is fitted once
(:class:`~fincrowd_ltr.training.fitting.ResidualFits`) and reused by the residual rows, the gated
rows and the cross-fitting. The final model is trained on every fold but the one that calibrates
its domain (or, with ``gate=False``, on every fold). ``test_fold`` holds a fold out of everything,
so ``evaluate`` can report on it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fincrowd_ltr.api.corpus import DEFAULT_CACHE, build_banks, load_dataset, read_run
from fincrowd_ltr.api.synthetic import SyntheticExamples, SyntheticSettings, synthetic_examples
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.data.splits import FoldPlan
from fincrowd_ltr.diagnostics.crowding import crowded_labels, repair_counts
from fincrowd_ltr.evaluation.results import (
    SystemResult,
    metadata_oracle,
    system_result,
    write_report,
)
from fincrowd_ltr.features import BankFeaturizer
from fincrowd_ltr.features.bank_features import FAMILIES
from fincrowd_ltr.features.examples import BankExample, make_examples
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.model.calibration import DEFAULT_REGRESSION_CAP, MIN_CALIBRATION_QUERIES
from fincrowd_ltr.model.correction import GatedCorrection, TrainingSummary
from fincrowd_ltr.progress import Progress
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.retrieval.build import BankSpec

RANKING_DEPTH = 30  # candidates of each held-out ranking kept in the report (for packing)
MODES = ("retrieved", "injected")
CV_DOMAIN = "cross-validation"
GATE_CALIBRATIONS = ("fold", "pooled")


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
    (``base:<r>``, ``residual:<r>``, ``gated:<r>``, ``metadata_oracle``); ``modes[mode].rankings``
    the held-out orders (top 30) that ``pack --orders`` reads; ``info`` the settings and choices.
    """

    dataset: str
    ranker: str
    modes: dict[str, HeldOut] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def system(self, mode: str, name: str) -> SystemResult:
        return self.modes[mode].systems[name]

    def to_dict(self) -> dict:
        """The JSON form (the shape ``fincrowd fit-residual --report`` has always written: the
        ungated rows under ``modes``, the gated ones and the rankings under ``gated``)."""
        modes, gated = {}, {}
        for mode, held in self.modes.items():
            counts = {"n_queries": held.n_queries, "n_groups": held.n_groups}
            rows = {k: v.to_dict() for k, v in held.systems.items()}
            modes[mode] = {**counts, **{k: v for k, v in rows.items() if not k.startswith("gated")}}
            if held.gate_open_share is not None:
                gated[mode] = {
                    **counts,
                    "gate_open_share": held.gate_open_share,
                    **{k: v for k, v in rows.items() if k != "metadata_oracle"},
                    "rankings": held.rankings,
                }
        out = {"dataset": self.dataset, "ranker": self.ranker, **self.info, "modes": modes}
        if gated:
            out["gated"] = {"modes": gated, "folds": self.info.get("gate_folds", [])}
        return out

    def save(self, path: Path) -> Path:
        return write_report(path, self.to_dict())


def held_out_rankings(report: dict) -> dict[str, dict[str, list[str]]]:
    """The held-out orders of a saved ``fit-residual`` report, by system (for ``pack``)."""
    try:
        return report["gated"]["modes"]["retrieved"]["rankings"]
    except (KeyError, TypeError):
        raise DataError(
            "no held-out rankings (field gated.modes.retrieved.rankings); write the report "
            "with `fincrowd fit-residual --report` (a gated fit)"
        ) from None


class _Folds:
    """Examples per bank mode, indexed by the fold plan; training sets add ``extra`` (banks of
    other datasets, in every training set, never in validation, calibration or test) and the
    ``synthetic`` banks their scope allows (with scope ``folds``, none of a company in a fold
    outside the training set, nor of ``held_groups``, the held-out test fold's)."""

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
    ) -> None:
        self.plan, self.examples = plan, examples
        self.train_mode, self.extra = train_mode, list(extra or [])
        self.synthetic, self.settings = synthetic, settings or SyntheticSettings()
        self.fold_groups, self.held_groups = fold_groups or [], set(held_groups or ())

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
        return self.synthetic.allowed(excluded - self._groups(kept))

    def _groups(self, folds: set[int]) -> set[str]:
        return set().union(*(self.fold_groups[k] for k in folds)) if folds else set()

    def of(self, mode: str, folds, covered_only: Dataset | None = None) -> list[BankExample]:
        found = self.examples[mode]
        out = [found[q] for q in self.plan.qids(folds) if q in found]
        return [e for e in out if covered_only.covered(e.qid)] if covered_only else out


def fit_correction(
    dataset: str | Dataset,
    ranker: str = "dense",
    *,
    gate: bool = True,
    folds: int = 5,
    seed: int = 0,
    grid: tuple[dict, ...] | None = None,
    first_stage: str = "auto",
    split: str = "all",
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE,
    train_mode: str = "injected",
    val_mode: str = "retrieved",
    bank_size: int = 100,
    regression_cap: float = DEFAULT_REGRESSION_CAP,
    min_calibration: int = MIN_CALIBRATION_QUERIES,
    domain: str | None = None,
    test_fold: int | None = None,
    run=None,
    banks: dict[str, BankSet] | None = None,
    progress: bool = True,
    workers: int | None = None,
    objective: str = "pairwise",
    hard_negatives: bool = False,
    monotone: bool = False,
    extra_training: list[str | Dataset] | None = None,
    extra_limit: int = 300,
    gate_calibration: str = "pooled",
    synthetic: SyntheticSettings | int | None = None,
) -> tuple[GatedCorrection, CrossValReport]:
    """Cross-validate and fit the gated correction of ``ranker``'s scores on a labelled corpus.

    Args:
        dataset: A dataset name or an in-memory ``Dataset`` (your corpus).
        ranker: The base ranker to correct: a built-in name, or ``run`` with ``run=``.
        gate: Fit the identity gate (needs at least 4 folds); False fits the residual alone.
        folds: Group folds (companies, contexts, or your queries' ``group``).
        grid: Residual settings chosen per fold on validation banks (default: the package
            defaults only); ``fincrowd_ltr.training.fitting.HPARAM_GRID`` is the full grid.
        test_fold: Hold this fold out of training and calibration entirely.
        run: Your ranker's scores (TREC file, ``{qid: {pid: score}}`` or a callable).
        banks: Prebuilt banks by mode (``{"retrieved": ..., "injected": ...}``) instead of
            building them.
        domain: Name of the gate domain the final model calibrates (default: the dataset name).
        workers: Processes that train the residuals (``None``: one per CPU core when there are
            enough fits; 1: this process). Results are the same either way.
        objective: ``pairwise`` (the paper's supporting-versus-distracting pairs) or ``listnet``.
        hard_negatives: Pair supports first with distractors that conflict on exactly one field.
        monotone: Sign-constrained typed compatibility (a match never lowers a candidate, a
            conflict never raises it).
        extra_training: Other labelled datasets whose banks (``train_mode``, scored by ``ranker``,
            at most ``extra_limit`` covered questions each, drawn with ``seed``) join every
            training set; their questions are recorded as training questions, so evaluation
            leaves them out.
        gate_calibration: ``pooled`` (default) calibrates the gate's temperature and threshold
            on the calibration fold together with the training folds' cross-fitted rows (each
            scored by a residual and a gate trained without it: several times more questions);
            ``fold`` on the calibration fold alone.
        synthetic: Training questions synthesised from the corpus's own pages (no labels):
            a :class:`~fincrowd_ltr.api.synthetic.SyntheticSettings` or a number of questions.
            Their banks (same first stage and ranker) join the training sets their scope allows,
            never validation, calibration or test; ``labelled=False`` trains on them alone.

    Returns:
        ``(model, report)``: the fitted :class:`GatedCorrection` and the held-out results.
    """
    from fincrowd_ltr.training.fitting import ResidualFits, select_residual

    if gate_calibration not in GATE_CALIBRATIONS:
        raise DataError(
            f"gate_calibration must be one of {GATE_CALIBRATIONS}; got {gate_calibration!r}"
        )
    pooled_calibration = gate_calibration == "pooled"
    data = load_dataset(dataset, data_root, split)
    run = read_run(run, data)
    options = {"objective": objective} if objective != "pairwise" else {}
    if hard_negatives:
        options["hard_negatives"] = True
    if monotone:
        options["monotone"] = True
    grid = tuple({**setting, **options} for setting in (grid or ({},)))
    plan = FoldPlan.by_group(data, folds, seed)
    held = None
    if test_fold is not None:
        held = plan.folds[test_fold] if 0 <= test_fold < len(plan) else None
        plan = plan.without(test_fold)
    if gate and len(plan) < 4:
        raise DataError(
            f"the gate needs at least 4 group folds for training (test, calibration and two for "
            f"cross-fitting); got {len(plan)}"
        )
    if len(plan) < 3:
        raise DataError(f"cross-validation needs at least 3 group folds; got {len(plan)}")
    modes = sorted({train_mode, val_mode, *MODES})
    extractor = FieldExtractor.from_passages(data.passages.values())
    featurizer = BankFeaturizer(extractor, data.passages)
    stage = BankSpec(first_stage=first_stage).stage(data)
    examples, notes = _examples_by_mode(
        data,
        ranker,
        modes,
        banks or {},
        featurizer,
        first_stage,
        bank_size,
        split,
        cache_dir,
        run,
        progress,
    )
    extra, extra_qids = _extra_examples(
        extra_training or [], ranker, train_mode, first_stage, bank_size, extra_limit, seed,
        data_root, cache_dir, progress,
    )  # fmt: skip
    if isinstance(synthetic, int):
        synthetic = SyntheticSettings(n=synthetic, seed=seed)
    syn = None
    if synthetic is not None and synthetic.active:
        syn = synthetic_examples(
            synthetic, data, featurizer, ranker, stage, train_mode, bank_size, cache_dir, progress
        )
    fold_groups = [{data.queries[q].group for q in fold} for fold in plan.folds]
    held_groups = {data.queries[q].group for q in held} if held is not None else set()
    ex = _Folds(plan, examples, train_mode, extra, syn, synthetic, fold_groups, held_groups)
    fits = ResidualFits(workers, progress)
    companies = extractor.companies

    def model(scorer, gate_module=None, domains=None) -> GatedCorrection:
        return GatedCorrection(
            scorer,
            gate_module,
            domains,
            companies,
            TrainingSummary(dataset=data.name, base_ranker=ranker),
            segments=extractor.segment_names,
        )

    rounds = plan.rounds()
    _prefetch(fits, ex, plan, data, grid, seed, gate, train_mode, val_mode)
    bar = Progress(len(rounds), "cross-validation folds", enabled=progress)
    pooled = {
        m: {"base": {}, "residual": {}, "gated": {}, "oracle": {}, "opened": {}} for m in MODES
    }
    chosen, val_scores, gate_folds = [], [], []
    for r in rounds:
        val = ex.of(val_mode, [r.validation])
        module, index, scores = select_residual(ex.train(r.train), val, grid, seed, fits)
        setting = grid[index]
        chosen.append(setting)
        val_scores.append(scores)
        corrected = model(module.scorer)
        for mode in MODES:
            for qid, res in corrected.score_examples(data, ex.of(mode, [r.test], data)).items():
                pooled[mode]["base"][qid] = res.base_ranking
                pooled[mode]["residual"][qid] = res.corrected_ranking
                pooled[mode]["oracle"][qid] = metadata_oracle(data, res.base_ranking, qid)
        if gate:
            gate_module, oof = _fit_gate(
                data, ex, fits, model, r.train, r.validation, setting, seed, train_mode, val_mode,
                pooled_calibration,
            )  # fmt: skip
            gated = model(module.scorer, gate_module)
            calibration = gated.calibrate(
                CV_DOMAIN, data, ex.of("retrieved", [r.validation]), regression_cap,
                min_calibration, cross_fitted=oof,
            )  # fmt: skip
            gate_folds.append(
                {
                    "test_fold": r.test,
                    "calibration_fold": r.validation,
                    "setting": setting,
                    **{k: v for k, v in calibration.to_dict().items() if "query" not in k},
                    "query_ids": calibration.n_queries,
                }
            )
            for mode in MODES:
                test = ex.of(mode, [r.test], data)
                for qid, res in gated.score_examples(data, test, CV_DOMAIN).items():
                    pooled[mode]["gated"][qid] = res.ranking
                    pooled[mode]["opened"][qid] = res.decision.applied
        bar.update()
    bar.close()

    report = CrossValReport(data.name, ranker)
    best, mean_val = _best_setting(val_scores)
    setting = grid[best]
    report.info = {
        "first_stage": stage,
        "train_mode": train_mode,
        "val_mode": val_mode,
        "folds": len(plan),
        "test_fold": test_fold,
        "selection": {"grid": list(grid), "chosen_per_fold": chosen, "mean_val_ndcg10": mean_val},
        "regression_cap": regression_cap,
        "gate_calibration": gate_calibration,
        "gate_folds": gate_folds,
        "notes": notes,
    }
    if syn is not None:
        report.info["synthetic"] = {
            **asdict(synthetic),
            "n_banks": len(syn.examples),
            "n_companies": len({syn.groups[e.qid] for e in syn.examples}),
            "per_template": syn.synthesis.report(sample=0)["per_template"],
        }
    labels = crowded_labels(data, list(examples["retrieved"].values()))
    report.modes = {
        mode: _held_out(data, ranker, systems, labels if mode == "retrieved" else None, gate)
        for mode, systems in pooled.items()
    }
    report.info["residual_fits"] = fits.trained

    final = _fit_final(
        data,
        ex,
        fits,
        model,
        plan,
        setting,
        seed,
        gate,
        train_mode,
        val_mode,
        regression_cap,
        min_calibration,
        domain or data.name,
        pooled_calibration,
    )
    calibration_qids = set(final.summary.extra.pop("calibration_qids", []))
    trained_qids = sorted(
        q
        for q in plan.qids(range(len(plan)))
        if q in examples[train_mode] and q not in calibration_qids
    )
    final.summary = TrainingSummary(
        dataset=data.name,
        base_ranker=ranker,
        first_stage=stage,
        split=split,
        dataset_fingerprint=data.corpus_fingerprint(),
        setting=setting,
        bank_mode=train_mode,
        val_bank_mode=val_mode,
        folds=folds,
        seed=seed,
        calibration_fold=final.summary.calibration_fold,
        test_fold=test_fold,
        train_banks=final.summary.train_banks,
        query_ids=trained_qids,
        query_fingerprints=sorted(
            [data.question_fingerprint(q) for q in trained_qids] + [fp for _, _, fp in extra_qids]
        ),
        extra={
            **({"held_out_query_ids": sorted(held)} if held is not None else {}),
            **({"extra_training": _by_dataset(extra_qids)} if extra_qids else {}),
        },
    )
    report.info["residual_fits"] = fits.trained
    return final, report


def _examples_by_mode(
    data, ranker, modes, banks, featurizer, first_stage, bank_size, split, cache_dir, run, progress
) -> tuple[dict[str, dict[str, BankExample]], list[str]]:
    """Each bank mode's feature matrices (banks built unless given), and the banks' notes."""
    examples, notes = {}, []
    for mode in modes:
        bankset = banks.get(mode)
        if bankset is None:
            bankset = build_banks(
                data,
                [ranker],
                first_stage=first_stage,
                mode=mode,
                size=bank_size,
                split=split,
                cache_dir=cache_dir,
                run=run,
                progress=progress,
            )
        notes += [f"{mode} banks: {n}" for n in bankset.notes]
        cache = None if cache_dir is None else Path(cache_dir)
        found = make_examples(data, bankset, ranker, featurizer, cache=cache)
        examples[mode] = {e.qid: e for e in found}
    return examples, notes


def _extra_examples(
    datasets, ranker, mode, first_stage, bank_size, limit, seed, data_root, cache_dir, progress
) -> tuple[list[BankExample], list[tuple[str, str, str]]]:
    """Training banks of other datasets and their ``(dataset, qid, fingerprint)``."""
    import random

    out, qids = [], []
    for name in datasets:
        other = load_dataset(name, data_root, "all")
        featurizer = BankFeaturizer(
            FieldExtractor.from_passages(other.passages.values()), other.passages
        )
        found, _ = _examples_by_mode(
            other, ranker, [mode], {}, featurizer, first_stage, bank_size, "all", cache_dir,
            None, progress,
        )  # fmt: skip
        covered = sorted(q for q, e in found[mode].items() if e.has_support)
        for qid in random.Random(seed).sample(covered, min(limit, len(covered))):
            out.append(found[mode][qid])
            qids.append((other.name, qid, other.question_fingerprint(qid)))
    return out, qids


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
        "oracle": "metadata_oracle",
    }
    if gate:
        names["gated"] = f"gated:{ranker}"
    rows = {}
    for key, name in names.items():
        rows[name] = system_result(data, systems[key], qids, base)
        if labels is not None and key != "oracle":
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


def _fit_gate(
    data, ex, fits, model, train, validation, setting, seed, train_mode, val_mode, oof=False
):
    """The gate trained on cross-fitted rows of the training folds (each scored by a residual
    trained without it), both bank modes; with ``oof``, also each training fold's retrieved rows
    as ``(qids, logits, gains)`` with logits of a gate trained without that fold (else None)."""
    rows = []
    for test, inner_train, inner_val in _gate_splits(ex, train, validation, train_mode, val_mode):
        module, _ = fits.get(inner_train, inner_val, setting, seed)
        scorer = model(module.scorer)
        for mode in MODES:
            qids, f, gains = scorer.gate_rows(data, ex.of(mode, [test]))
            rows.append((test, mode, qids, f, gains))
    gate = _train_gate_on(rows, seed)
    if not oof:
        return gate, None
    out = []
    for fold in sorted({row[0] for row in rows}):
        held_out = _train_gate_on([row for row in rows if row[0] != fold], seed)
        out += [
            (qids, held_out.logits(f), gains)
            for test, mode, qids, f, gains in rows
            if test == fold and mode == "retrieved" and len(qids)
        ]
    return gate, out


def _train_gate_on(rows, seed):
    from fincrowd_ltr.training.gate_module import train_gate

    feats = np.concatenate([row[3] for row in rows])
    labels = np.concatenate([(row[4] > 1e-12).astype(np.float64) for row in rows])
    return train_gate(feats, labels, seed=seed)


def _gate_splits(ex, train, validation, train_mode, val_mode):
    """The gate's cross-fitting inside ``train``: (inner test fold, training examples, validation
    examples) per inner round."""
    for inner in FoldPlan.inner(train, validation):
        inner_val = validation if validation != inner.test else inner.train[0]
        yield inner.test, ex.train(inner.train), ex.of(val_mode, [inner_val])


def _final_round(data, plan):
    """The final model's calibration fold (the one with most covered questions), its round and
    the fold that validates its training."""
    covered = [sum(data.covered(q) for q in fold) for fold in plan.folds]
    calib = max(range(len(plan)), key=lambda f: (covered[f], -f))
    r = plan.final(calib)
    return calib, r, r.train[0]


def _best_setting(val_scores: list[list[float]]) -> tuple[int, list[float]]:
    """The grid setting with the best validation nDCG@10 averaged over the rounds (the first
    wins ties), and those averages."""
    mean_val = [float(np.mean(col)) for col in zip(*val_scores, strict=True)]
    return max(range(len(mean_val)), key=lambda i: (mean_val[i], -i)), mean_val


def _prefetch(fits, ex, plan, data, grid, seed, gate, train_mode, val_mode) -> None:
    """Train every residual the workflow will ask for, in parallel where it pays: first each
    round's grid, then (with the settings they choose) the gate's cross-fitting and the final
    model. The workflow then finds them fitted."""
    from fincrowd_ltr.training.fitting import select_residual

    rounds = plan.rounds()
    splits = [(ex.train(r.train), ex.of(val_mode, [r.validation])) for r in rounds]
    fits.prefetch([(t, v, s, seed) for t, v in splits for s in grid])
    jobs, val_scores = [], []
    for r, (train, val) in zip(rounds, splits, strict=True):
        _, index, scores = select_residual(train, val, grid, seed, fits)
        val_scores.append(scores)
        if gate:
            jobs += [
                (t, v, grid[index], seed)
                for _, t, v in _gate_splits(ex, r.train, r.validation, train_mode, val_mode)
            ]
    best = grid[_best_setting(val_scores)[0]]
    if gate:
        _, r, val = _final_round(data, plan)
        jobs.append((ex.train(r.train), ex.of(val_mode, [val]), best, seed))
        jobs += [
            (t, v, best, seed) for _, t, v in _gate_splits(ex, r.train, val, train_mode, val_mode)
        ]
    else:
        train = tuple(range(len(plan)))
        jobs.append((ex.train(train), ex.of(val_mode, [0]), best, seed))
    fits.prefetch(jobs)


def _fit_final(
    data, ex, fits, model, plan, setting, seed, gate, train_mode, val_mode, cap, min_q, domain,
    pooled=False,
):  # fmt: skip
    if not gate:
        train = tuple(range(len(plan)))
        module, _ = fits.get(ex.train(train), ex.of(val_mode, [0]), setting, seed)
        final = model(module.scorer)
        final.summary.train_banks = sum(e.has_support for e in ex.train(train))
        return final
    calib, r, val = _final_round(data, plan)  # the largest calibration set
    module, _ = fits.get(ex.train(r.train), ex.of(val_mode, [val]), setting, seed)
    gate_module, oof = _fit_gate(
        data, ex, fits, model, r.train, val, setting, seed, train_mode, val_mode, pooled
    )
    final = model(module.scorer, gate_module)
    final.calibrate(domain, data, ex.of("retrieved", [calib]), cap, min_q, cross_fitted=oof)
    final.summary.calibration_fold = calib
    final.summary.train_banks = sum(e.has_support for e in ex.train(r.train))
    final.summary.extra["calibration_qids"] = plan.qids([calib])
    return final


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
    pass to :func:`fit_correction` (the residual alone, no gate)."""
    data = load_dataset(dataset, kwargs.pop("data_root", None), kwargs.get("split", "all"))
    out = {}
    for family, dropped in {"none": [], **ABLATIONS}.items():
        grid = ({**(setting or {}), "drop_features": dropped},)
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
