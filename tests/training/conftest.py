"""The training tests' shared helper: a Lightning fit on the toy corpus."""

import lightning as L

from fincrowd_ltr.settings import BankSettings, DataSettings, FoldSettings
from fincrowd_ltr.training.data import BankDataModule
from fincrowd_ltr.training.module import ResidualModule


def train(root, cache, strategy="auto", devices=1, batch_size=4):
    """Train on the toy corpus; the DDP test reuses this with two processes."""
    L.seed_everything(0)
    dm = BankDataModule(
        dataset="beir",
        ranker="bm25",
        source=DataSettings(data_root=str(root), cache_dir=str(cache)),
        banks=BankSettings(bank_size=6, train_mode="retrieved"),
        folds=FoldSettings(folds=3, test_fold=0),
        batch_size=batch_size,
    )
    model = ResidualModule(lr=0.1)
    trainer = L.Trainer(
        max_epochs=15,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        accelerator="cpu",
        strategy=strategy,
        devices=devices,
    )
    trainer.fit(model, datamodule=dm)
    return model, dm
