"""A silent, deterministic Lightning ``Trainer`` for the many small fits of cross-validation."""

from __future__ import annotations

import lightning as L


def quiet_trainer(max_epochs: int, **kwargs) -> L.Trainer:
    """No logger, checkpoint files, progress bar or summary; deterministic; extra ``kwargs``
    (callbacks, accelerator, ...) pass through."""
    return L.Trainer(
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        **kwargs,
    )
