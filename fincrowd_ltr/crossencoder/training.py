"""Training the cross-encoder: groups of one supporting passage and hard negatives from the banks
(labelled questions) or of a synthetic question's source page and its typed and bank negatives,
a listwise softmax loss (the positive against its negatives), LoRA parameters and the head only.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass
from itertools import chain, islice, zip_longest

import lightning as L
import torch
from torch.utils.data import DataLoader

from fincrowd_ltr.crossencoder.model import CrossEncoder
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.data.splits import held_units, page_unit
from fincrowd_ltr.defaults import CROSS_ENCODER_NEGATIVES
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.synthesis import Synthesis
from fincrowd_ltr.training.trainer import quiet_trainer

DEFAULT_NEGATIVES = CROSS_ENCODER_NEGATIVES
MAX_POSITIVES = 2  # groups per question: a question with many gold pages does not dominate
TYPED_NEGATIVES = 3  # of a synthetic group's negatives, at most this many constraint-violating


@dataclass
class Group:
    """One training group: a question, a supporting passage and its hard negatives (texts)."""

    qid: str
    query: str
    positive: str
    negatives: tuple[str, ...]


def hard_negative_groups(
    dataset: Dataset,
    bankset: BankSet,
    ranker: str,
    qids: list[str],
    negatives: int = DEFAULT_NEGATIVES,
    excluded: Collection[str] = (),
) -> list[Group]:
    """Groups for ``qids``: each gold passage (at most ``MAX_POSITIVES`` per question, whether
    or not the first stage found it) with the ``negatives`` highest-ranked non-supporting bank
    candidates by ``ranker`` (texts equal to a gold text are never negatives). Nothing of an
    ``excluded`` company trains: neither a question of it (folds by group may split one, see
    :func:`~fincrowd_ltr.data.splits.held_units`) nor a page of it as a negative."""
    excluded = set(excluded)
    groups = []
    for qid in qids:
        if qid not in bankset.banks or not dataset.qrels.get(qid):
            continue
        if excluded and held_units(dataset, [qid]) & excluded:
            continue
        gold = [p for p, grade in dataset.qrels[qid].items() if grade > 0 and p in dataset.passages]
        gold_texts = {dataset.passages[p].text for p in gold}
        ranked = bankset.banks[qid].ranking(ranker)
        negs = [
            dataset.passages[p].text
            for p in ranked
            if p not in gold
            and dataset.passages[p].text not in gold_texts
            and page_unit(dataset.passages[p]) not in excluded
        ][:negatives]
        if len(negs) < negatives:
            continue  # a full group keeps every batch rectangular
        query = dataset.queries[qid].text
        for pid in gold[:MAX_POSITIVES]:
            groups.append(Group(qid, query, dataset.passages[pid].text, tuple(negs)))
    return groups


def synthetic_groups(
    synthesis: Synthesis,
    bankset: BankSet,
    ranker: str,
    excluded: Collection[str] = (),
    negatives: int = DEFAULT_NEGATIVES,
) -> list[Group]:
    """One group per synthetic question of a company outside ``excluded``: its source page
    against up to ``TYPED_NEGATIVES`` typed negatives (pages on the question's topic that violate
    one constraint: other period, other company, other line item; taken round robin over the
    types) and then the highest-ranked other candidates of its bank by ``ranker``. A page of an
    ``excluded`` company, a page relevant to the question and a page whose text is the source's
    are never negatives; a question without a full group is skipped."""
    excluded = set(excluded)
    passages = synthesis.passages
    groups = []
    for q in synthesis.questions:
        if q.company in excluded or q.qid not in bankset.banks or q.source not in passages:
            continue
        source = passages[q.source].text

        def allowed(pid: str, q=q, source=source) -> bool:
            return (
                pid not in q.relevant
                and pid in passages
                and page_unit(passages[pid]) not in excluded
                and passages[pid].text != source
            )

        typed = chain(*zip_longest(*q.negatives.values()))  # round robin over the types
        chosen = list(islice(dict.fromkeys(filter(allowed, typed)), TYPED_NEGATIVES))
        ranked = filter(allowed, bankset.banks[q.qid].ranking(ranker))
        chosen += [p for p in ranked if p not in chosen][: negatives - len(chosen)]
        if len(chosen) < negatives:
            continue  # a full group keeps every batch rectangular
        texts = tuple(passages[p].text for p in chosen)
        groups.append(Group(q.qid, q.text, source, texts))
    return groups


class CrossEncoderModule(L.LightningModule):
    """Lightning wrapper: listwise softmax over (positive, negatives) per group.

    Args:
        model: The cross-encoder (LoRA-wrapped encoder and head).
        lr: AdamW learning rate of the trainable parameters.
        weight_decay: AdamW weight decay.
    """

    def __init__(self, model: CrossEncoder, lr: float = 3e-4, weight_decay: float = 0.01) -> None:
        super().__init__()
        self.model = model
        self.lr = lr
        self.weight_decay = weight_decay

    def _logits(self, groups: list[Group]) -> torch.Tensor:
        queries = [g.query for g in groups for _ in range(1 + len(g.negatives))]
        texts = [t for g in groups for t in (g.positive, *g.negatives)]
        logits = self.model(self.model.encode(queries, texts))
        return logits.view(len(groups), -1)

    def training_step(self, groups: list[Group], batch_idx: int) -> torch.Tensor:
        logits = self._logits(groups)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(groups), dtype=torch.long))
        self.log("train_loss", loss, batch_size=len(groups), prog_bar=True)
        return loss

    def validation_step(self, groups: list[Group], batch_idx: int) -> None:
        logits = self._logits(groups)
        target = torch.zeros(len(groups), dtype=torch.long)
        loss = torch.nn.functional.cross_entropy(logits, target)
        # reciprocal rank of the positive among its group
        rank = (logits > logits[:, :1]).sum(dim=1) + 1
        self.log("val_loss", loss, batch_size=len(groups))
        self.log("val_mrr", (1.0 / rank.float()).mean(), batch_size=len(groups))

    def configure_optimizers(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)


def _loader(groups: list[Group], batch_size: int, shuffle: bool, seed: int) -> DataLoader:
    return DataLoader(
        groups,
        batch_size=batch_size,
        shuffle=shuffle,
        collate_fn=list,
        generator=torch.Generator().manual_seed(seed),
    )


def train_cross_encoder(
    model: CrossEncoder,
    train: list[Group],
    val: list[Group] | None = None,
    max_epochs: int = 1,
    batch_size: int = 4,
    lr: float = 3e-4,
    seed: int = 0,
    max_groups: int | None = None,
) -> dict:
    """Fine-tune ``model`` in place; returns a summary (groups, epochs, last metrics).
    ``max_groups`` caps the training groups (a seeded sample) to bound CPU time."""
    if not train:
        raise DataError(
            "no training groups: no question has a gold passage in its bank with "
            f"{DEFAULT_NEGATIVES} negatives beside it (a deeper `depth`, or more covered questions)"
        )
    L.seed_everything(seed, verbose=False)
    if max_groups is not None and len(train) > max_groups:
        train = random.Random(seed).sample(train, max_groups)
    model.train()  # pretrained weights load in eval mode: dropout (LoRA's included) on
    module = CrossEncoderModule(model, lr=lr)
    trainer = quiet_trainer(max_epochs, num_sanity_val_steps=0)
    trainer.fit(
        module,
        _loader(train, batch_size, True, seed),
        _loader(val, batch_size, False, seed) if val else None,
    )
    model.eval()
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    return {
        "train_groups": len(train),
        "trained_qids": sorted({g.qid for g in train}),  # the questions the sample kept
        "val_groups": len(val or []),
        "epochs": max_epochs,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "metrics": metrics,
    }
