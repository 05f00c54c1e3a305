"""Training the identity gate with Lightning: class-balanced logistic loss on cross-fitted labels
(1 where the out-of-fold residual order beat the base order on nDCG@10)."""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model.gate import IdentityGate
from fincrowd_ltr.training.trainer import quiet_trainer

GATE_EPOCHS = 200


class GateModule(L.LightningModule):
    """Wraps ``IdentityGate``; one full batch per step (gate training sets are small).

    Args:
        n_features: Gate features per query.
        lr: Adam learning rate.
        weight_decay: L2 penalty (keeps the few labelled queries from driving large weights).
        pos_weight: Weight of positive labels (balances rare improvements).
    """

    def __init__(
        self, n_features: int, lr: float = 0.05, weight_decay: float = 1e-2, pos_weight: float = 1.0
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.gate = IdentityGate(n_features)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int):
        x, y = batch
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            self.gate(x),
            y,
            pos_weight=torch.tensor(self.hparams.pos_weight, dtype=torch.float64),
        )
        # one step per epoch: logged at the last only (logging every step was a third of a
        # gate fit; ``callback_metrics`` ends with the same last loss)
        trainer = self._trainer
        last = None if trainer is None else trainer.max_epochs
        if last is None or last < 0 or self.current_epoch == last - 1:
            self.log("gate_loss", loss, prog_bar=True, batch_size=len(y))
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )


def train_gate(
    features: np.ndarray, labels: np.ndarray, seed: int = 0, epochs: int = GATE_EPOCHS
) -> IdentityGate:
    """Fit a gate on ``features`` (queries x gate features) and binary ``labels``."""
    L.seed_everything(seed, verbose=False)
    x = torch.from_numpy(np.asarray(features, dtype=np.float64))
    y = torch.from_numpy(np.asarray(labels, dtype=np.float64))
    if len(y) == 0 or len(x) != len(y):
        raise DataError(
            f"a gate trains on rows with labels: got {len(x)} rows and {len(y)} labels", "labels"
        )
    positives = float(y.sum())
    pos_weight = (len(y) - positives) / positives if positives > 0 else 1.0
    module = GateModule(x.shape[1], pos_weight=pos_weight)
    module.gate.fit_standardisation(x)
    trainer = quiet_trainer(epochs, accelerator="cpu")
    # the full batch as the loader's one item (no per-row fetch and stack at every step), on
    # one thread: extra threads only contend with the residual fits running beside it, and the
    # sums do not depend on the thread count (on some hosts two threads move the weights by 1e-16)
    loader = DataLoader([(x, y)], batch_size=None, shuffle=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer.fit(module, train_dataloaders=loader)
    finally:
        torch.set_num_threads(threads)
    return module.gate
