"""The Lightning data module that serves banks (:class:`~fincrowd_ltr.features.BankExample`) to
the residual: in memory (``examples=``, what the Python API passes) or built from a dataset named
in a config (``python train.py fit --config ...``)."""

from __future__ import annotations

import functools
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from fincrowd_ltr.data import load_dataset as _load_dataset
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.data.splits import fold_split
from fincrowd_ltr.features import FEATURE_NAMES, BankFeaturizer
from fincrowd_ltr.features.examples import BankExample, make_examples
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.banks import DEFAULT_BANK_SIZE
from fincrowd_ltr.retrieval.build import BankSpec, build_banks


@functools.lru_cache(maxsize=4)
def config_dataset(name: str, data_root: str | None, split: str) -> Dataset:
    """Datasets named in a config are loaded once per process (never modified after loading)."""
    return _load_dataset(name, data_root, split)


@functools.lru_cache(maxsize=4)
def _featurizer(name: str, data_root: str | None, split: str) -> BankFeaturizer:
    data = config_dataset(name, data_root, split)
    return BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)


def collate(examples: list[BankExample]) -> dict:
    """Pad banks to the longest one; ``mask`` marks real candidates."""
    n = max(len(e.pids) for e in examples)
    d = examples[0].features.shape[1]
    features = torch.zeros(len(examples), n, d, dtype=torch.float64)
    base = torch.zeros(len(examples), n, dtype=torch.float64)
    labels = torch.zeros(len(examples), n, dtype=torch.long)
    mask = torch.zeros(len(examples), n, dtype=torch.bool)
    for i, e in enumerate(examples):
        k = len(e.pids)
        features[i, :k] = torch.from_numpy(e.features)
        base[i, :k] = torch.from_numpy(e.base)
        labels[i, :k] = torch.from_numpy(e.labels)
        mask[i, :k] = True
    batch = {
        "features": features,
        "base": base,
        "labels": labels,
        "mask": mask,
        "qids": [e.qid for e in examples],
    }
    if any(e.weight != 1.0 for e in examples):  # unit weights: the plain mean, bit for bit
        batch["weight"] = torch.tensor([e.weight for e in examples], dtype=torch.float64)
    return batch


class BankDataModule(L.LightningDataModule):
    """Banks of one dataset and base ranker, split by group (company / context) into folds.

    Args:
        dataset: Dataset name (``financebench``, ``tatqa``, ``beir:DIR``, ...).
        data_root: Data folder (default ``$FINCROWD_DATA`` or ``../shared/data``).
        split: Which questions to load (``all`` or a split name).
        ranker: The base ranker whose frozen scores the residual corrects.
        bank_mode: ``retrieved`` or ``injected`` banks.
        bank_size: Candidates per bank.
        cache_dir: Index, embedding, bank and feature cache.
        folds: Number of group folds; ``test_fold`` is held out, the next fold validates.
        test_fold: The held-out fold; -1 trains on every group (validation: fold 0).
        seed: Seed of the fold assignment.
        batch_size: Banks per training step.
        val_bank_mode: Bank mode of the validation and test banks (default: ``bank_mode``), e.g.
            train on gold-injected banks but select and stop on retrieved ones, as deployed.
        parts: Explicit ``{"train", "val", "test"}`` query ids (overrides the fold arguments).
        first_stage: The first stage that retrieves the banks (see
            :mod:`fincrowd_ltr.retrieval.first_stage`).
        examples: In-memory ``{"train", "val", "test"}`` examples; with them nothing is loaded
            (the other data arguments are ignored).
    """

    def __init__(
        self,
        dataset: str = "financebench",
        data_root: str | None = None,
        split: str = "all",
        ranker: str = "dense",
        bank_mode: str = "retrieved",
        bank_size: int = DEFAULT_BANK_SIZE,
        cache_dir: str = ".cache",
        folds: int = 5,
        test_fold: int = 0,
        seed: int = 0,
        batch_size: int = 16,
        val_bank_mode: str | None = None,
        parts: dict[str, list[str]] | None = None,
        first_stage: str = "auto",
        examples: dict[str, list[BankExample]] | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["examples"])
        self.examples: dict[str, list[BankExample]] = {}
        self.skipped_without_support: dict[str, int] = {}
        self.feature_names = FEATURE_NAMES
        if examples is not None:
            for part in ("train", "val", "test"):
                given = list(examples.get(part, []))
                kept = [e for e in given if e.has_support] if part == "train" else given
                self.skipped_without_support[part] = len(given) - len(kept)
                self.examples[part] = kept

    def setup(self, stage: str | None = None) -> None:
        if self.examples:
            return
        hp = self.hparams
        data = config_dataset(hp.dataset, hp.data_root, hp.split)
        if hp.parts is not None:
            parts = {name: list(hp.parts.get(name, [])) for name in ("train", "val", "test")}
        elif hp.test_fold >= 0:
            parts = fold_split(data, hp.test_fold, hp.folds, hp.seed)
        else:  # train on every group; validate on fold 0 of the same groups (no test part)
            parts = fold_split(data, 0, hp.folds, hp.seed)
            parts = {
                "train": parts["train"] + parts["val"] + parts["test"],
                "val": parts["test"],
                "test": [],
            }
        train_examples = self._examples(data, hp.bank_mode)
        held_examples = (
            train_examples
            if hp.val_bank_mode in (None, hp.bank_mode)
            else self._examples(data, hp.val_bank_mode)
        )
        for part, qids in parts.items():
            source = train_examples if part == "train" else held_examples
            examples = [source[q] for q in qids if q in source]
            kept = [e for e in examples if e.has_support]
            self.skipped_without_support[part] = len(examples) - len(kept)
            # validation and test keep every bank: metrics count banks without support as 0
            self.examples[part] = kept if part == "train" else examples
        self.dataset = data

    def all_examples(self, mode: str) -> dict[str, BankExample]:
        """Every bank of the dataset in bank ``mode`` as examples, by query id."""
        return self._examples(
            config_dataset(self.hparams.dataset, self.hparams.data_root, self.hparams.split), mode
        )

    def featurizer(self) -> BankFeaturizer:
        hp = self.hparams
        return _featurizer(hp.dataset, hp.data_root, hp.split)

    def _examples(self, data: Dataset, mode: str) -> dict[str, BankExample]:
        hp = self.hparams
        spec = BankSpec(size=hp.bank_size, mode=mode, first_stage=hp.first_stage)
        bankset = build_banks(data, hp.split, [hp.ranker], spec, Path(hp.cache_dir), progress=False)
        featurizer = _featurizer(hp.dataset, hp.data_root, hp.split)
        examples = make_examples(data, bankset, hp.ranker, featurizer, cache=Path(hp.cache_dir))
        return {e.qid: e for e in examples}

    def train_features(self) -> torch.Tensor:
        """All training candidates' features (rows), for the standardisation statistics."""
        return torch.from_numpy(np.concatenate([e.features for e in self.examples["train"]]))

    def _loader(self, part: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.examples[part],
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            collate_fn=collate,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)


__all__ = ["BankDataModule", "BankExample", "collate", "config_dataset", "make_examples"]
