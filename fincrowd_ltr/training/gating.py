"""Fitting and evaluating the identity gate with cross-fitting.

Gate labels must come from residuals that never saw the labelled banks, so within the training
folds every fold ``j`` is scored by a residual trained on the other training folds
(cross-fitting). The gate is calibrated on a calibration fold whose groups are disjoint from the
residual's training groups and from the test fold.

For cross-validated figures each fold ``k`` is the test fold in turn, fold ``k + 1`` calibrates,
and the remaining folds train the residual and (cross-fitted) the gate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.data.splits import group_kfold
from fincrowd_ltr.diagnostics.crowding import label_failure
from fincrowd_ltr.evaluation.correction import base_rankings, compare, corrected_rankings
from fincrowd_ltr.evaluation.metrics import ndcg_at_k
from fincrowd_ltr.features.bank_features import FEATURE_NAMES, BankFeaturizer
from fincrowd_ltr.features.gate_features import gate_features
from fincrowd_ltr.fields.extractor import FIELD_NAMES
from fincrowd_ltr.model.gate import (
    DEFAULT_REGRESSION_CAP,
    MIN_CALIBRATION_QUERIES,
    GateCalibration,
    IdentityGate,
    calibrate,
)
from fincrowd_ltr.model.residual import ResidualScorer
from fincrowd_ltr.training.crossval import MAX_EPOCHS, select_fold, train_fold
from fincrowd_ltr.training.data import BankDataModule, BankExample
from fincrowd_ltr.training.gate_module import train_gate

RANKING_DEPTH = 30  # candidates of each held-out ranking kept in the report (for packing)
_CONFLICT = {name: FEATURE_NAMES.index(f"{name}_conflict") for name in FIELD_NAMES}


@dataclass
class GateRows:
    """Gate inputs and outcomes of scored banks (one row per query)."""

    qids: list[str]
    features: np.ndarray  # (queries, gate features)
    gains: np.ndarray  # residual minus base nDCG@10
    base: dict[str, list[str]]
    residual: dict[str, list[str]]

    @property
    def labels(self) -> np.ndarray:
        return (self.gains > 1e-12).astype(np.float64)

    @staticmethod
    def concat(parts: list[GateRows]) -> GateRows:
        return GateRows(
            [q for p in parts for q in p.qids],
            np.concatenate([p.features for p in parts]),
            np.concatenate([p.gains for p in parts]),
            {q: r for p in parts for q, r in p.base.items()},
            {q: r for p in parts for q, r in p.residual.items()},
        )


def gate_rows(
    dataset: Dataset,
    featurizer: BankFeaturizer,
    scorer: ResidualScorer,
    examples: list[BankExample],
) -> GateRows:
    """Score covered banks with ``scorer``: gate features, nDCG@10 gains and both orders."""
    examples = [e for e in examples if dataset.covered(e.qid)]
    base = base_rankings(examples)
    residual = corrected_rankings(scorer, examples)
    feats, gains = [], []
    for e in examples:
        observed = featurizer.query_fields(dataset.queries[e.qid].text).observed()
        feats.append(gate_features(scorer, e.features, e.base, observed))
        qrels = dataset.qrels[e.qid]
        gains.append(ndcg_at_k(residual[e.qid], qrels, 10) - ndcg_at_k(base[e.qid], qrels, 10))
    width = len(feats[0]) if feats else 0
    return GateRows(
        [e.qid for e in examples],
        np.array(feats, dtype=np.float64).reshape(len(examples), width),
        np.array(gains, dtype=np.float64),
        base,
        residual,
    )


def gated_rankings(
    rows: GateRows, gate: IdentityGate, calibration: GateCalibration
) -> tuple[dict[str, list[str]], dict[str, bool]]:
    """The residual order where the calibrated gate opens, exactly the base order elsewhere."""
    opened = calibration.opens(gate.logits(rows.features)) if rows.qids else np.zeros(0, bool)
    decisions = dict(zip(rows.qids, (bool(o) for o in opened), strict=True))
    return {q: rows.residual[q] if decisions[q] else rows.base[q] for q in rows.qids}, decisions


def crowded_queries(dataset: Dataset, examples: list[BankExample]) -> dict[str, dict]:
    """Crowding labels of the base order of (retrieved) banks, conflicts read from features."""
    out = {}
    for e in examples:
        if not dataset.covered(e.qid):
            continue
        conflicts = {
            pid: tuple(name for name, col in _CONFLICT.items() if e.features[i, col] > 0)
            for i, pid in enumerate(e.pids)
        }
        relevant = {p for p, g in dataset.qrels[e.qid].items() if g > 0}
        ranking = [e.pids[i] for i in np.argsort(-e.base, kind="stable")]
        out[e.qid] = label_failure(ranking, relevant, conflicts, depth=len(ranking))
    return out


def repair_rate(
    dataset: Dataset, labels: dict[str, dict], system: dict[str, list[str]]
) -> tuple[int, int]:
    """(repaired, crowded): crowded failures whose evidence the system puts in the top 10."""
    crowded = [q for q, lab in labels.items() if lab["status"] == "crowded" and q in system]
    repaired = sum(any(dataset.qrels[q].get(p, 0) > 0 for p in system[q][:10]) for q in crowded)
    return repaired, len(crowded)


class GateFitter:
    """Fits residuals and gates on chosen folds of one dataset and base ranker."""

    def __init__(
        self,
        dataset: str,
        ranker: str,
        data_root: str | None = None,
        split: str = "all",
        folds: int = 5,
        seed: int = 0,
        cache_dir: str = ".cache",
        train_mode: str = "injected",
        val_mode: str = "retrieved",
        gate_modes: tuple[str, ...] = ("retrieved", "injected"),
        first_stage: str = "auto",
    ) -> None:
        self.common = {
            "first_stage": first_stage,
            "dataset": dataset,
            "data_root": data_root,
            "split": split,
            "ranker": ranker,
            "cache_dir": cache_dir,
            "folds": folds,
            "seed": seed,
            "bank_mode": train_mode,
            "val_bank_mode": val_mode,
        }
        if folds < 4:
            raise DataError(
                f"the gate needs at least 4 group folds (test, calibration and two for "
                f"cross-fitting); got {folds}"
            )
        self.seed = seed
        self.gate_modes = gate_modes
        probe = BankDataModule(**self.common)
        probe.setup()
        self.data = probe.dataset
        self.featurizer = probe.featurizer()
        self.folds = group_kfold(self.data, folds, seed)
        self.examples = {m: probe.all_examples(m) for m in {*gate_modes, "retrieved"}}

    def qids(self, folds: list[int]) -> list[str]:
        return [q for f in folds for q in self.folds[f]]

    def examples_of(self, mode: str, folds: list[int]) -> list[BankExample]:
        return [self.examples[mode][q] for q in self.qids(folds) if q in self.examples[mode]]

    def fit_residual(
        self, train: list[int], val: int, grid: tuple[dict, ...]
    ) -> tuple[ResidualScorer, dict]:
        """The residual trained on ``train`` folds, stopped and selected on fold ``val``."""
        parts = {"train": self.qids(train), "val": self.qids([val]), "test": []}
        model, index, _ = select_fold(
            {**self.common, "parts": parts}, -1, {}, grid, MAX_EPOCHS, self.seed
        )
        return model.scorer, grid[index]

    def crossfit_rows(self, train: list[int], val: int, setting: dict) -> GateRows:
        """Gate rows of every training fold, each scored by a residual trained without it."""
        parts = []
        for j in train:
            inner = [f for f in train if f != j]
            inner_val = val if val != j else inner[0]
            split = {"train": self.qids(inner), "val": self.qids([inner_val]), "test": []}
            model, _, _ = train_fold(
                {**self.common, "parts": split}, -1, setting, MAX_EPOCHS, self.seed
            )
            for mode in self.gate_modes:
                parts.append(
                    gate_rows(self.data, self.featurizer, model.scorer, self.examples_of(mode, [j]))
                )
        return GateRows.concat(parts)

    def fit_gate(self, train: list[int], val: int, setting: dict) -> IdentityGate:
        rows = self.crossfit_rows(train, val, setting)
        return train_gate(rows.features, rows.labels, seed=self.seed)

    def calibrate(
        self,
        scorer: ResidualScorer,
        gate: IdentityGate,
        folds: list[int],
        cap: float = DEFAULT_REGRESSION_CAP,
        min_queries: int = MIN_CALIBRATION_QUERIES,
    ) -> GateCalibration:
        """Calibrate on the retrieved banks of ``folds`` (the deployment condition)."""
        rows = gate_rows(self.data, self.featurizer, scorer, self.examples_of("retrieved", folds))
        return calibrate(
            gate.logits(rows.features), rows.gains, rows.qids, cap, min_queries, self.data.name
        )


def crossvalidate_gated(
    fitter: GateFitter,
    grid: tuple[dict, ...],
    cap: float = DEFAULT_REGRESSION_CAP,
    eval_modes: tuple[str, ...] = ("retrieved", "injected"),
    min_queries: int = MIN_CALIBRATION_QUERIES,
) -> dict:
    """Base, always-on and gated orders on every held-out fold, pooled; with crowded-failure
    repair rates and the share of queries where the gate opened."""
    n = len(fitter.folds)
    pooled = {m: {"base": {}, "residual": {}, "gated": {}, "opened": {}} for m in eval_modes}
    per_fold = []
    for k in range(n):
        calib = (k + 1) % n
        train = [f for f in range(n) if f not in (k, calib)]
        scorer, setting = fitter.fit_residual(train, calib, grid)
        gate = fitter.fit_gate(train, calib, setting)
        calibration = fitter.calibrate(scorer, gate, [calib], cap, min_queries)
        summary = calibration.to_dict()
        summary["query_ids"] = len(summary["query_ids"])
        per_fold.append({"test_fold": k, "calibration_fold": calib, "setting": setting, **summary})
        for mode in eval_modes:
            rows = gate_rows(fitter.data, fitter.featurizer, scorer, fitter.examples_of(mode, [k]))
            gated, opened = gated_rankings(rows, gate, calibration)
            pooled[mode]["base"].update(rows.base)
            pooled[mode]["residual"].update(rows.residual)
            pooled[mode]["gated"].update(gated)
            pooled[mode]["opened"].update(opened)
    data = fitter.data
    ranker = fitter.common["ranker"]
    labels = crowded_queries(data, list(fitter.examples["retrieved"].values()))
    report: dict = {
        "dataset": data.name,
        "ranker": ranker,
        "regression_cap": cap,
        "folds": per_fold,
        "modes": {},
    }
    for mode, systems in pooled.items():
        qids = sorted(systems["base"])
        base = systems["base"]
        res: dict = {
            "n_queries": len(qids),
            "n_groups": len({data.queries[q].group for q in qids}),
            "gate_open_share": float(np.mean([systems["opened"][q] for q in qids])),
        }
        for name in ("base", "residual", "gated"):
            system = compare(data, systems[name], base, qids)
            if mode == "retrieved":
                repaired, crowded = repair_rate(data, labels, systems[name])
                system["crowded_repaired"], system["crowded_failures"] = repaired, crowded
                system["repair_rate"] = repaired / crowded if crowded else float("nan")
            res[f"{name}:{ranker}"] = system
        res["rankings"] = {
            f"{name}:{ranker}": {q: systems[name][q][:RANKING_DEPTH] for q in qids}
            for name in ("base", "residual", "gated")
        }
        report["modes"][mode] = res
    return report
