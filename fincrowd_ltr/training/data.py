"""Banks as training examples, and the Lightning data module that serves them.

An example is one bank: its candidates' features, frozen base scores of one ranker, and binary
relevance labels. Features are computed once per bank file and cached next to it.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from fincrowd_ltr.data import load_dataset as _load_dataset
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.data.splits import fold_split
from fincrowd_ltr.features import FEATURE_NAMES, BankFeaturizer
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.vocabulary import EXTRACTOR_VERSION
from fincrowd_ltr.retrieval.banks import DEFAULT_BANK_SIZE, BankSet
from fincrowd_ltr.retrieval.build import BankSpec, build_banks


@functools.lru_cache(maxsize=4)
def load_dataset(name: str, data_root: str | None, split: str) -> Dataset:
    """Datasets are loaded once per process: cross-validation builds many data modules over the
    same corpus (datasets are never modified after loading)."""
    return _load_dataset(name, data_root, split)


@functools.lru_cache(maxsize=4)
def _featurizer(name: str, data_root: str | None, split: str) -> BankFeaturizer:
    data = load_dataset(name, data_root, split)
    return BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)


@dataclass
class BankExample:
    """One bank ready for the residual: rows in bank order."""

    qid: str
    pids: list[str]
    features: np.ndarray  # (n, d) float64
    base: np.ndarray  # (n,) float64
    labels: np.ndarray  # (n,) int64, 1 = supporting

    @property
    def has_support(self) -> bool:
        return bool(self.labels.any())


def make_examples(
    dataset: Dataset,
    bankset: BankSet,
    ranker: str,
    featurizer: BankFeaturizer,
    qids: list[str] | None = None,
) -> list[BankExample]:
    """Examples for ``qids`` (default: every bank) with ``ranker``'s base scores."""
    out = []
    for qid in qids if qids is not None else list(bankset.banks):
        bank = bankset.banks[qid]
        rels = dataset.qrels.get(qid, {})
        out.append(
            BankExample(
                qid=qid,
                pids=bank.pids,
                features=featurizer.features(dataset.queries[qid].text, bank.pids),
                base=bank.scores[ranker],
                labels=np.array([int(rels.get(p, 0) > 0) for p in bank.pids], dtype=np.int64),
            )
        )
    return out


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
    return {
        "features": features,
        "base": base,
        "labels": labels,
        "mask": mask,
        "qids": [e.qid for e in examples],
    }


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
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.examples: dict[str, list[BankExample]] = {}
        self.skipped_without_support: dict[str, int] = {}
        self.feature_names = FEATURE_NAMES

    def setup(self, stage: str | None = None) -> None:
        if self.examples:
            return
        hp = self.hparams
        data = load_dataset(hp.dataset, hp.data_root, hp.split)
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
            load_dataset(self.hparams.dataset, self.hparams.data_root, self.hparams.split), mode
        )

    def featurizer(self) -> BankFeaturizer:
        hp = self.hparams
        return _featurizer(hp.dataset, hp.data_root, hp.split)

    def _examples(self, data: Dataset, mode: str) -> dict[str, BankExample]:
        hp = self.hparams
        spec = BankSpec(size=hp.bank_size, mode=mode, first_stage=hp.first_stage)
        bankset = build_banks(data, hp.split, [hp.ranker], spec, Path(hp.cache_dir), progress=False)
        featurizer = _featurizer(hp.dataset, hp.data_root, hp.split)
        cache = self._feature_cache(spec.key(data, hp.split))
        return {e.qid: e for e in self._load_or_make(cache, data, bankset, featurizer)}

    def _feature_cache(self, bank_key: str) -> Path:
        """Features depend on the bank and the extractor, not on the base ranker."""
        digest = hashlib.sha1(
            f"{bank_key}:{EXTRACTOR_VERSION}:{','.join(FEATURE_NAMES)}".encode()
        ).hexdigest()[:12]
        return Path(self.hparams.cache_dir) / "features" / f"{bank_key}-{digest}.npz"

    def _load_or_make(
        self, path: Path, data: Dataset, bankset: BankSet, featurizer: BankFeaturizer
    ) -> list[BankExample]:
        if path.exists():
            with np.load(path, allow_pickle=False) as stored:
                # read each array once: NpzFile re-reads an array on every item access
                qids, features = stored["qids"].tolist(), stored["features"]
            out = []
            for i, qid in enumerate(qids):
                bank = bankset.banks[qid]
                n = len(bank.pids)
                rels = data.qrels.get(qid, {})
                out.append(
                    BankExample(
                        qid,
                        bank.pids,
                        features[i, :n].copy(),
                        bank.scores[self.hparams.ranker],
                        np.array([int(rels.get(p, 0) > 0) for p in bank.pids]),
                    )
                )
            return out
        examples = make_examples(data, bankset, self.hparams.ranker, featurizer)
        path.parent.mkdir(parents=True, exist_ok=True)
        n = max(len(e.pids) for e in examples)
        features = np.zeros((len(examples), n, len(FEATURE_NAMES)))
        for i, e in enumerate(examples):
            features[i, : len(e.pids)] = e.features
        np.savez(path, qids=np.array([e.qid for e in examples]), features=features)
        return examples

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
