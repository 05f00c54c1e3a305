"""The Lightning module that trains the residual correction (``ResidualScorer``)."""

from __future__ import annotations

import lightning as L
import torch

from fincrowd_ltr.features import FEATURE_NAMES
from fincrowd_ltr.features.bank_features import CONFLICT_COLUMNS, family_of
from fincrowd_ltr.model import MAX_DISTRACTORS, ResidualScorer, pairwise_loss
from fincrowd_ltr.model.checkpoint import checked_feature_record, feature_code
from fincrowd_ltr.model.pairs import lambdarank_loss, listnet_loss
from fincrowd_ltr.settings import OBJECTIVES

# the sign a monotone residual's weight keeps, by feature-name suffix or name (0: free)
_SIGN = {"match": 1.0, "conflict": -1.0, "filing_fit": 1.0}

NDCG_K = 10


def batch_ndcg(
    scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, k: int = NDCG_K
) -> torch.Tensor:
    """nDCG@k per bank (binary gain, log2 discount, ties by bank position); banks without a
    supporting candidate score 0. Relevance outside the bank is not visible here, so this is the
    within-bank nDCG used for validation, not the reported metric."""
    scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    # stable descending sort keeps bank order among ties
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
    gains = torch.gather(labels.to(torch.float64) * mask, -1, order)[..., :k]
    discounts = 1.0 / torch.log2(torch.arange(2, gains.shape[-1] + 2, dtype=torch.float64))
    dcg = (gains * discounts).sum(-1)
    n_rel = (labels.bool() & mask).sum(-1)
    ideal = torch.stack([discounts[: min(int(r), k)].sum() for r in n_rel])
    return torch.where(n_rel > 0, dcg / ideal.clamp(min=1e-12), torch.zeros_like(dcg))


def _dropped(name: str, dropped: set[str]) -> bool:
    typed = name.endswith(("_match", "_conflict"))
    return name in dropped or family_of(name) in dropped or (typed and "compatibility" in dropped)


class ResidualModule(L.LightningModule):
    """Trains ``ResidualScorer`` on supporting-versus-distracting pairs.

    Args:
        alpha: Correction scale.
        gamma: Activation sharpness.
        lr: Adam learning rate.
        weight_decay: L2 penalty on the residual weights.
        max_distractors: Distractors per bank in the objective.
        drop_features: Feature names or families (``lexical``, ``coverage``, ``concentration``,
            ``compatibility``, or a field name such as ``period``) to switch off (ablations).
        objective: ``pairwise`` (the paper's), ``listnet`` (listwise over the bank) or
            ``lambdarank`` (the pairs weighted by their nDCG@10 change).
        hard_negatives: Pair supports first with distractors that conflict with the question on
            exactly one typed field (pairwise objective only).
        monotone: Sign-constrained typed compatibility: after every step, weights of ``*_match``
            features (and ``filing_fit``) are kept >= 0 and of ``*_conflict`` features <= 0, so a
            match never lowers a candidate and a conflict never raises it (standardisation keeps
            a feature's direction).
    """

    def __init__(
        self,
        alpha: float = 1.0,
        gamma: float = 1.0,
        lr: float = 0.05,
        weight_decay: float = 0.0,
        max_distractors: int = MAX_DISTRACTORS,
        drop_features: list[str] | None = None,
        objective: str = "pairwise",
        hard_negatives: bool = False,
        monotone: bool = False,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; choose from {OBJECTIVES}")
        super().__init__()
        self.save_hyperparameters()
        self.feature_names = list(FEATURE_NAMES)
        dropped = set(drop_features or [])
        active = [not _dropped(name, dropped) for name in FEATURE_NAMES]
        self.scorer = ResidualScorer(len(FEATURE_NAMES), alpha=alpha, gamma=gamma, active=active)
        self._epoch: dict[str, list] = {}
        # the feature code's record its checkpoints carry: this version's, or a resumed
        # checkpoint's own (None: it recorded none), so that a run resumed under newer feature
        # code does not hide what its first epochs were trained on
        self._feature_record: dict | None = feature_code()
        signs = [_SIGN.get(name.rsplit("_", 1)[-1], _SIGN.get(name, 0)) for name in FEATURE_NAMES]
        self._signs = torch.tensor(signs, dtype=torch.float64) if monotone else None

    def on_train_batch_end(self, outputs, batch: dict, batch_idx: int) -> None:
        if self._signs is not None:
            with torch.no_grad():  # project onto the allowed signs (projected gradient descent)
                w = self.scorer.weight
                w.copy_(torch.where(w * self._signs < 0, torch.zeros_like(w), w))

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self._feature_record is not None:  # checked by the export
            checkpoint["fincrowd"] = self._feature_record

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        trainer = self._trainer
        if trainer is None:  # load_from_checkpoint: the export checks it, naming the file
            return
        where = getattr(trainer, "ckpt_path", None) or "the resumed checkpoint"
        self._feature_record = checked_feature_record(checkpoint.get("fincrowd"), where)

    def on_fit_start(self) -> None:
        datamodule = self.trainer.datamodule
        if datamodule is not None and hasattr(datamodule, "train_features"):
            self.scorer.fit_standardisation(datamodule.train_features())

    def forward(self, batch: dict) -> torch.Tensor:
        normalised = batch.get("base_normalised")
        return self.scorer(batch["features"], batch["base"], batch["mask"], normalised)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        final = self(batch)
        # collate's pairs, remembered per bank across epochs, are those of the default cap
        pairs = batch.get("pairs") if self.hparams.max_distractors == MAX_DISTRACTORS else None
        if self.hparams.objective == "listnet":
            loss = listnet_loss(final, batch["labels"], batch["mask"], batch.get("weight"))
        elif self.hparams.objective == "lambdarank":
            loss = lambdarank_loss(
                final,
                batch["labels"],
                batch["base"],
                batch["mask"],
                self.hparams.max_distractors,
                batch.get("weight"),
                pairs,
            )
        else:
            hard = None
            if self.hparams.hard_negatives:  # pairs of their own, hard distractors first
                hard = batch["features"][..., list(CONFLICT_COLUMNS)].sum(-1) == 1
                pairs = None
            loss = pairwise_loss(
                final,
                batch["labels"],
                batch["base"],
                batch["mask"],
                self.hparams.max_distractors,
                hard,
                batch.get("weight"),
                pairs,
            )
        self._epoch["train"].append((loss.detach() * len(batch["qids"]), len(batch["qids"])))
        return loss

    # Metrics are gathered per step and logged once per epoch (per-step logging was a third of
    # the time of the many small fits of cross-validation); values are bank-weighted means.
    def on_train_epoch_start(self) -> None:
        self._epoch["train"] = []

    def on_train_epoch_end(self) -> None:
        steps = self._epoch.pop("train", [])
        if steps:
            total = sum(n for _, n in steps)
            loss = torch.stack([s for s, _ in steps]).sum() / total
            self.log("train_loss", loss, prog_bar=True, batch_size=total)

    def _evaluate(self, batch: dict, prefix: str) -> None:
        final = self(batch)
        ndcg = batch_ndcg(final, batch["labels"], batch["mask"])
        base = batch_ndcg(batch["base"], batch["labels"], batch["mask"])
        self._epoch.setdefault(prefix, []).append((ndcg, base))

    def _log_epoch(self, prefix: str) -> None:
        steps = self._epoch.pop(prefix, [])
        if not steps:
            return
        ndcg = torch.cat([n for n, _ in steps])
        base = torch.cat([b for _, b in steps])
        size = len(ndcg)
        self.log(f"{prefix}_ndcg10", ndcg.mean(), batch_size=size, prog_bar=True, sync_dist=True)
        self.log(f"{prefix}_base_ndcg10", base.mean(), batch_size=size, sync_dist=True)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def on_validation_epoch_end(self) -> None:
        self._log_epoch("val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    def configure_optimizers(self):
        return torch.optim.Adam(
            self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )
