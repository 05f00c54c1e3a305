"""A silent, deterministic Lightning ``Trainer`` for the many small fits of cross-validation."""

from __future__ import annotations

import lightning as L


def quiet_trainer(max_epochs: int, **kwargs) -> L.Trainer:
    """No logger, checkpoint files, progress bar or summary; deterministic; extra ``kwargs``
    (callbacks, accelerator, ...) pass through."""
    import logging
    import warnings

    # cross-validation builds dozens of Trainers: their banners would bury the results
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*treespec.*")
    return L.Trainer(
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        **kwargs,
    )
