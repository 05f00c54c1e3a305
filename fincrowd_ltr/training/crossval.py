"""Cross-validated evaluation of the residual over group folds (companies, contexts).

Each fold's residual is trained (with Lightning, early stopping on the next fold) on the other
folds' banks only, then scores its own held-out fold; the held-out rankings of all folds are pooled
and compared with the base order, so every reported question is scored by a residual that never saw
its company. Hyperparameters (alpha, weight decay) are chosen per fold on that fold's validation
groups, never on its test groups.
"""

from __future__ import annotations

import copy

import lightning as L
from lightning.pytorch.callbacks import Callback, EarlyStopping

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.evaluation.correction import (
    base_rankings,
    compare,
    corrected_rankings,
    metadata_oracle_rankings,
)
from fincrowd_ltr.training.data import BankDataModule
from fincrowd_ltr.training.module import ResidualModule
from fincrowd_ltr.training.trainer import quiet_trainer

MAX_EPOCHS = 60  # early stopping on the validation fold usually ends training sooner
MONITOR = "val_ndcg10"

# Candidate settings, the package default first (it wins ties). alpha bounds how far a candidate
# can move; weight decay keeps rare binary features from taking large weights.
HPARAM_GRID: tuple[dict, ...] = tuple(
    {"alpha": alpha, "weight_decay": decay}
    for alpha in (1.0, 0.5, 2.0, 4.0)
    for decay in (0.0, 1e-3, 1e-2)
)


class KeepBest(Callback):
    """Restore the weights of the best validation epoch when training ends (early stopping stops
    ``patience`` epochs after it)."""

    def __init__(self, monitor: str = MONITOR) -> None:
        self.monitor = monitor
        self.best_score = float("-inf")
        self._state: dict | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        score = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or score is None:
            return
        if float(score) > self.best_score:
            self.best_score = float(score)
            self._state = copy.deepcopy(pl_module.state_dict())

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._state is not None:
            pl_module.load_state_dict(self._state)


def train_fold(
    data_kwargs: dict, fold: int, model_kwargs: dict, max_epochs: int, seed: int
) -> tuple[ResidualModule, BankDataModule, float]:
    """Train one fold's residual; returns it (at its best validation epoch), its data module and
    that best validation nDCG@10."""
    L.seed_everything(seed, verbose=False)
    dm = BankDataModule(**{"test_fold": fold, **data_kwargs})
    model = ResidualModule(**model_kwargs)
    best = KeepBest()
    trainer = quiet_trainer(
        max_epochs, callbacks=[EarlyStopping(monitor=MONITOR, mode="max", patience=15), best]
    )
    trainer.fit(model, datamodule=dm)
    return model, dm, best.best_score


def select_fold(
    data_kwargs: dict,
    fold: int,
    model_kwargs: dict,
    grid: tuple[dict, ...],
    max_epochs: int,
    seed: int,
) -> tuple[ResidualModule, int, list[float]]:
    """Train every grid setting on one fold's training groups and keep the one with the best
    validation nDCG@10 (first wins ties); returns the model, its grid index and all scores."""
    best_model, best_index, scores = None, 0, []
    for i, setting in enumerate(grid):
        model, _, score = train_fold(
            data_kwargs, fold, {**model_kwargs, **setting}, max_epochs, seed
        )
        scores.append(score)
        if best_model is None or score > scores[best_index]:
            best_model, best_index = model, i
    assert best_model is not None
    return best_model, best_index, scores


def crossvalidate(
    dataset: str,
    ranker: str,
    data_root: str | None = None,
    split: str = "all",
    train_mode: str = "injected",
    val_mode: str | None = "retrieved",
    eval_modes: tuple[str, ...] = ("retrieved", "injected"),
    folds: int = 5,
    seed: int = 0,
    cache_dir: str = ".cache",
    model_kwargs: dict | None = None,
    max_epochs: int = MAX_EPOCHS,
    grid: tuple[dict, ...] | None = None,
    first_stage: str = "auto",
) -> dict:
    """Train on ``train_mode`` banks of the other folds, evaluate each held-out fold in every
    ``eval_modes`` bank mode; returns ``{mode: {"base": ..., "residual": ..., "oracle": ...}}``.

    Validation (early stopping, selection) uses ``val_mode`` banks of the validation groups:
    retrieved banks by default, the condition the correction is deployed in.
    With ``grid``, each fold trains every setting and keeps the best on its validation groups;
    ``report["selection"]`` records the choices and each setting's mean validation score."""
    model_kwargs = model_kwargs or {}
    grid = grid or ({},)
    common = {
        "dataset": dataset,
        "data_root": data_root,
        "split": split,
        "ranker": ranker,
        "cache_dir": cache_dir,
        "folds": folds,
        "seed": seed,
        "first_stage": first_stage,
    }
    pooled: dict[str, dict[str, dict]] = {
        m: {"base": {}, "residual": {}, "oracle": {}} for m in eval_modes
    }
    weights, chosen, val_scores = [], [], []
    data: Dataset | None = None
    for fold in range(folds):
        model, index, scores = select_fold(
            {**common, "bank_mode": train_mode, "val_bank_mode": val_mode},
            fold,
            model_kwargs,
            grid,
            max_epochs,
            seed,
        )
        weights.append(model.scorer.weight.detach().tolist())
        chosen.append(grid[index])
        val_scores.append(scores)
        for mode in eval_modes:
            held = BankDataModule(**common, bank_mode=mode, test_fold=fold)
            held.setup("test")
            data = held.dataset
            examples = [e for e in held.examples["test"] if data.covered(e.qid)]
            pooled[mode]["base"].update(base_rankings(examples))
            pooled[mode]["residual"].update(corrected_rankings(model.scorer, examples))
            pooled[mode]["oracle"].update(metadata_oracle_rankings(data, examples))
    assert data is not None
    report: dict = {
        "dataset": dataset,
        "ranker": ranker,
        "first_stage": first_stage,
        "train_mode": train_mode,
        "val_mode": val_mode or train_mode,
        "folds": folds,
        "fold_weights": weights,
        "selection": {
            "grid": list(grid),
            "chosen_per_fold": chosen,
            "mean_val_ndcg10": [sum(col) / len(col) for col in zip(*val_scores, strict=True)],
        },
        "modes": {},
    }
    for mode, systems in pooled.items():
        qids = sorted(systems["base"])
        base = systems["base"]
        report["modes"][mode] = {
            "n_queries": len(qids),
            "n_groups": len({data.queries[q].group for q in qids}),
            f"base:{ranker}": compare(data, base, base, qids),
            f"residual:{ranker}": compare(data, systems["residual"], base, qids),
            "metadata_oracle": compare(data, systems["oracle"], base, qids),
        }
    return report


def best_setting(report: dict) -> dict:
    """The grid setting with the best validation nDCG@10 averaged over folds (for the final model
    trained on every group)."""
    selection = report["selection"]
    scores = selection["mean_val_ndcg10"]
    return selection["grid"][max(range(len(scores)), key=lambda i: (scores[i], -i))]
