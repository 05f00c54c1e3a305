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
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.data.splits import fold_split
from fincrowd_ltr.features import FEATURE_NAMES, BankFeaturizer
from fincrowd_ltr.features.examples import BankExample, make_examples, no_support_error
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.model.pairs import MAX_DISTRACTORS, Pairs, pair_index, stack_pairs
from fincrowd_ltr.model.residual import normalise_base
from fincrowd_ltr.retrieval.build import BankSpec, build_banks
from fincrowd_ltr.settings import BankSettings, DataSettings, FoldSettings, as_settings, plain
from fincrowd_ltr.synthesis import page_table_questions


@functools.lru_cache(maxsize=4)
def config_dataset(name: str, data_root: str | None, split: str) -> Dataset:
    """Datasets named in a config are loaded once per process (never modified after loading)."""
    return _load_dataset(name, data_root, split)


@functools.lru_cache(maxsize=4)
def _featurizer(name: str, data_root: str | None, split: str) -> BankFeaturizer:
    data = config_dataset(name, data_root, split)
    return BankFeaturizer(corpus_extractor(data.passages), data.passages)


def bank_pairs(example: BankExample, max_distractors: int = MAX_DISTRACTORS) -> Pairs:
    """The objective's pairs of one bank (bank index 0), remembered on the example."""
    key = ("pairs", max_distractors)
    if key not in example.derived:
        labels = torch.from_numpy(example.labels)[None]
        example.derived[key] = pair_index(
            labels, torch.from_numpy(example.base)[None], torch.ones_like(labels, dtype=torch.bool),
            max_distractors,
        )  # fmt: skip
    return example.derived[key]


def bank_base_normalised(example: BankExample) -> np.ndarray:
    """The bank's base scores normalised within the bank alone (as serving normalises one
    bank), remembered on the example."""
    if "base_normalised" not in example.derived:
        scores = torch.from_numpy(example.base)[None]
        example.derived["base_normalised"] = normalise_base(scores)[0].numpy()
    return example.derived["base_normalised"]


def collate(examples: list[BankExample]) -> dict:
    """Pad banks to the longest one; ``mask`` marks real candidates; ``base_normalised`` holds
    each bank's normalised base scores; ``pairs`` the objective's pairs at the default
    ``MAX_DISTRACTORS`` (without hard negatives)."""
    n = max(len(e.pids) for e in examples)
    d = examples[0].features.shape[1]
    # padded in numpy (a step's slice copies cost ~8x more as torch ops), then shared with torch
    features = np.zeros((len(examples), n, d), dtype=np.float64)
    base = np.zeros((len(examples), n), dtype=np.float64)
    normalised = np.zeros((len(examples), n), dtype=np.float64)
    labels = np.zeros((len(examples), n), dtype=np.int64)
    mask = np.zeros((len(examples), n), dtype=bool)
    for i, e in enumerate(examples):
        k = len(e.pids)
        features[i, :k] = e.features
        base[i, :k] = e.base
        normalised[i, :k] = bank_base_normalised(e)
        labels[i, :k] = e.labels
        mask[i, :k] = True
    batch = {
        "features": torch.from_numpy(features),
        "base": torch.from_numpy(base),
        "base_normalised": torch.from_numpy(normalised),
        "labels": torch.from_numpy(labels),
        "mask": torch.from_numpy(mask),
        "qids": [e.qid for e in examples],
        "pairs": stack_pairs([bank_pairs(e) for e in examples]),
    }
    if any(e.weight != 1.0 for e in examples):  # unit weights: the plain mean, bit for bit
        batch["weight"] = torch.tensor([e.weight for e in examples], dtype=torch.float64)
    return batch


# train and validate on retrieved banks unless a config says otherwise (the 0.2 default)
RETRIEVED = BankSettings(train_mode="retrieved", val_mode="retrieved")


def _check_parts(parts: dict[str, list[str]], data: Dataset) -> None:
    """Refuse named parts with question ids the dataset lacks, or without validation questions
    (early stopping and the best checkpoint read the validation score)."""
    for name, qids in parts.items():
        if name not in ("train", "val", "test"):
            raise DataError(f"data.parts.{name}: the parts are train, val and test", "parts")
        unknown = [q for q in qids if q not in data.queries]
        if unknown:
            raise DataError(
                f"data.parts.{name}: {len(unknown)} question ids {data.name} lacks (first: "
                f"{', '.join(map(repr, unknown[:3]))})",
                f"parts.{name}",
            )
    trained = set(parts.get("train", []))
    for name in ("val", "test"):
        shared = [q for q in parts.get(name, []) if q in trained]
        if shared:
            raise DataError(
                f"data.parts.{name}: {len(shared)} questions are also in data.parts.train "
                f"(first: {', '.join(map(repr, shared[:3]))}): a question that trains cannot "
                f"{'validate' if name == 'val' else 'test'} it",
                f"parts.{name}",
            )
    if not parts.get("val"):
        raise DataError(
            "data.parts.val is empty: early stopping and the best checkpoint read the "
            "validation questions' nDCG@10; name some",
            "parts.val",
        )


class BankDataModule(L.LightningDataModule):
    """Banks of one dataset and base ranker, split by group (company / context) into folds.

    Args:
        dataset: Dataset name (``financebench``, ``tatqa``, ``beir:DIR``, ...).
        ranker: The base ranker whose frozen scores the residual corrects.
        source: Where the data and caches are (split, data root, cache folder).
        banks: How banks are made: size, first stage, the training banks' mode (``train_mode``)
            and the validation and test banks' (``val_mode``), e.g. train on gold-injected banks
            but select and stop on retrieved ones, as deployed.
        folds: The group folds and which one is held out (the next fold validates).
        batch_size: Banks per training step.
        parts: Explicit ``{"train", "val", "test"}`` query ids (overrides ``folds``).
        examples: In-memory ``{"train", "val", "test"}`` examples; with them nothing is loaded
            (the other data arguments are ignored).
    """

    def __init__(
        self,
        dataset: str = "financebench",
        ranker: str = "dense",
        source: DataSettings = DataSettings(),
        banks: BankSettings = RETRIEVED,
        folds: FoldSettings = FoldSettings(),
        batch_size: int = 16,
        parts: dict[str, list[str]] | None = None,
        examples: dict[str, list[BankExample]] | None = None,
    ) -> None:
        super().__init__()
        # read the settings from these attributes (LightningCLI passes the config's mappings)
        self.source = as_settings(DataSettings, source)
        self.banks = as_settings(BankSettings, banks)
        self.folds = as_settings(FoldSettings, folds)
        # hyperparameters as plain values: a checkpoint loads with torch's weights_only
        self.save_hyperparameters(
            {
                "dataset": dataset,
                "ranker": ranker,
                "source": plain(self.source),
                "banks": plain(self.banks),
                "folds": plain(self.folds),
                "batch_size": batch_size,
                "parts": parts,
                # what an export needs to build this module again: whether its examples came
                # from memory (nothing to build) and where relative paths were read from
                "in_memory": examples is not None,
                "workdir": str(Path.cwd()),
            }
        )
        self.examples: dict[str, list[BankExample]] = {}
        self.skipped_without_support: dict[str, int] = {}
        self.feature_names = FEATURE_NAMES
        if examples is not None:
            for part in ("train", "val", "test"):
                given = list(examples.get(part, []))
                kept = [e for e in given if e.has_support] if part == "train" else given
                self.skipped_without_support[part] = len(given) - len(kept)
                self.examples[part] = kept

    def _named(self) -> tuple[str, str | None, str]:
        """The dataset's name, data root and split: the key of the per-process caches."""
        s = self.source
        return self.hparams.dataset, None if s.data_root is None else str(s.data_root), s.split

    def _data(self) -> Dataset:
        return config_dataset(*self._named())

    def setup(self, stage: str | None = None) -> None:
        if self.examples:
            return
        hp = self.hparams
        data = self._data()
        f = self.folds
        if hp.parts is not None:
            _check_parts({name: list(qids) for name, qids in hp.parts.items()}, data)
            parts = {name: list(hp.parts.get(name, [])) for name in ("train", "val", "test")}
        elif not -1 <= f.test_fold < f.folds or f.test_fold >= 0 and f.folds < 3:
            raise DataError(
                f"folds {f.folds}, test_fold {f.test_fold}: the held-out fold is one of the "
                "folds (0 to folds - 1) or -1 (none), and with one held out training needs "
                "two more, one to train and one to validate (data.folds of a config)",
                "folds",
            )
        elif f.test_fold >= 0:
            parts = fold_split(data, f.test_fold, f.folds, f.seed)
        else:  # train on every group; validate on fold 0 of the same groups (no test part)
            parts = fold_split(data, 0, f.folds, f.seed)
            parts = {
                "train": parts["train"] + parts["val"] + parts["test"],
                "val": parts["test"],
                "test": [],
            }
        b = self.banks
        train_examples = self._examples(data, b.train_mode)
        held_examples = (
            train_examples if b.val_mode == b.train_mode else self._examples(data, b.val_mode)
        )
        for part, qids in parts.items():
            source = train_examples if part == "train" else held_examples
            examples = [source[q] for q in qids if q in source]
            kept = [e for e in examples if e.has_support]
            self.skipped_without_support[part] = len(examples) - len(kept)
            if part == "train":
                self.examples[part] = kept
                continue
            # validation and test keep every covered question's bank (as `evaluate` does): one
            # without support scores 0 (the first stage missed it); an uncovered one is left out
            held = [e for e in examples if data.covered(e.qid)]
            if qids and not held:
                raise DataError(
                    f"the {part} part's {len(qids)} questions include no covered one (all of its "
                    "relevant pages in the corpus): nothing to measure; draw other folds "
                    "(another seed, fewer folds: data.folds of a config) or name other questions"
                )
            self.examples[part] = held
        self.dataset = data

    def all_examples(self, mode: str) -> dict[str, BankExample]:
        """Every bank of the dataset in bank ``mode`` as examples, by query id."""
        return self._examples(self._data(), mode)

    def featurizer(self) -> BankFeaturizer:
        return _featurizer(*self._named())

    def _examples(self, data: Dataset, mode: str) -> dict[str, BankExample]:
        cache_dir = self.source.cache_dir
        ranker, cache = self.hparams.ranker, None if cache_dir is None else Path(cache_dir)
        b = self.banks
        spec = BankSpec(
            size=b.bank_size,
            mode=mode,
            first_stage=b.first_stage,
            static_questions=b.static_questions,
        )
        featurizer = self.featurizer()
        pairs = page_table_questions(data, extractor=featurizer.extractor)  # teaches the table
        bankset = build_banks(
            data, self.source.split, [ranker], spec, cache, progress=False, static_pairs=pairs
        )
        examples = make_examples(data, bankset, ranker, featurizer, cache=cache)
        return {e.qid: e for e in examples}

    def train_features(self) -> torch.Tensor:
        """All training candidates' features (rows), for the standardisation statistics."""
        if not self.examples["train"]:
            skipped = self.skipped_without_support.get("train", 0)
            raise no_support_error(detail=f" ({skipped} banks without one)")
        return torch.from_numpy(np.concatenate([e.features for e in self.examples["train"]]))

    def _loader(self, part: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.examples[part],
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            collate_fn=collate,
        )

    def transfer_batch_to_device(
        self, batch: dict, device: torch.device, dataloader_idx: int
    ) -> dict:
        """Batches are built on the CPU: on it there is nothing to move (Lightning's generic
        transfer walks every field of every step's batch)."""
        if device.type == "cpu":
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)


__all__ = ["BankDataModule", "BankExample", "collate", "config_dataset", "make_examples"]
