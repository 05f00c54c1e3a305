"""Cross-validated evaluation of the residual over group folds (companies, contexts).

Each fold's residual is trained (with Lightning, early stopping on the next fold) on the other
folds' banks only, then scores its own held-out fold; the held-out rankings of all folds are pooled
and compared with the base order, so every reported question is scored by a residual that never saw
its company.
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.evaluation.correction import (
    base_rankings,
    compare,
    corrected_rankings,
    metadata_oracle_rankings,
)
from fincrowd_ltr.training.data import BankDataModule
from fincrowd_ltr.training.module import ResidualModule

MAX_EPOCHS = 60  # early stopping on the validation fold usually ends training sooner


def train_fold(
    data_kwargs: dict, fold: int, model_kwargs: dict, max_epochs: int, seed: int
) -> tuple[ResidualModule, BankDataModule]:
    """Train one fold's residual; returns it with its data module."""
    L.seed_everything(seed, verbose=False)
    dm = BankDataModule(**data_kwargs, test_fold=fold)
    model = ResidualModule(**model_kwargs)
    trainer = L.Trainer(
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        callbacks=[EarlyStopping(monitor="val_ndcg10", mode="max", patience=15)],
    )
    trainer.fit(model, datamodule=dm)
    return model, dm


def crossvalidate(
    dataset: str,
    ranker: str,
    data_root: str | None = None,
    split: str = "all",
    train_mode: str = "injected",
    eval_modes: tuple[str, ...] = ("retrieved", "injected"),
    folds: int = 5,
    seed: int = 0,
    cache_dir: str = ".cache",
    model_kwargs: dict | None = None,
    max_epochs: int = MAX_EPOCHS,
) -> dict:
    """Train on ``train_mode`` banks of the other folds, evaluate each held-out fold in every
    ``eval_modes`` bank mode; returns ``{mode: {"base": ..., "residual": ..., "oracle": ...}}``."""
    model_kwargs = model_kwargs or {}
    common = {
        "dataset": dataset,
        "data_root": data_root,
        "split": split,
        "ranker": ranker,
        "cache_dir": cache_dir,
        "folds": folds,
        "seed": seed,
    }
    pooled: dict[str, dict[str, dict]] = {
        m: {"base": {}, "residual": {}, "oracle": {}} for m in eval_modes
    }
    weights = []
    data: Dataset | None = None
    for fold in range(folds):
        model, dm = train_fold(
            {**common, "bank_mode": train_mode}, fold, model_kwargs, max_epochs, seed
        )
        weights.append(model.scorer.weight.detach().tolist())
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
        "train_mode": train_mode,
        "folds": folds,
        "fold_weights": weights,
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
