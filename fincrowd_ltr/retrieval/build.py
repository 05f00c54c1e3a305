"""Build (or reload) the scored candidate banks of a dataset split, cached on disk."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.banks import (
    DEFAULT_BANK_SIZE,
    BankSet,
    retrieve_candidates,
    score_banks,
)
from fincrowd_ltr.retrieval.bm25 import BM25Config, BM25Index
from fincrowd_ltr.retrieval.first_stage import FirstStage, resolve_first_stage
from fincrowd_ltr.retrieval.rankers import make_rankers
from fincrowd_ltr.retrieval.windows import WindowPolicy


@dataclass(frozen=True)
class BankSpec:
    """Everything that determines a bank file's content."""

    size: int = DEFAULT_BANK_SIZE
    mode: str = "retrieved"
    bm25: BM25Config = BM25Config()
    dense_policy: WindowPolicy = WindowPolicy()
    first_stage: str = "bm25"

    def stage(self, dataset: Dataset) -> str:
        """The first stage this spec uses on ``dataset`` (``auto`` resolved per dataset)."""
        return resolve_first_stage(self.first_stage, dataset.name)

    def key(self, dataset: Dataset, split: str) -> str:
        digest = hashlib.sha1()
        parts = [
            self.size,
            self.mode,
            self.bm25.key(),
            self.dense_policy.key(),
            self.dense_policy.pooling,
        ]
        if self.stage(dataset) != "bm25":  # plain BM25 banks keep their earlier keys
            parts.append(self.stage(dataset))
        digest.update(json.dumps(parts).encode())
        for qid, query in dataset.queries.items():
            digest.update(f"{qid}\0{query.text}\1".encode())
        return (
            f"{dataset.name.replace(':', '_').replace('/', '_')}-{split}-{self.mode}-"
            f"{digest.hexdigest()[:12]}"
        )


def build_banks(
    dataset: Dataset,
    split: str,
    rankers: list[str],
    spec: BankSpec,
    cache_dir: Path | None,
    index: BM25Index | None = None,
    progress: bool = True,
) -> BankSet:
    """Banks for every query of ``dataset`` scored by ``rankers``; reuses and extends the cache."""
    path = (
        None
        if cache_dir is None
        else Path(cache_dir) / "banks" / f"{spec.key(dataset, split)}.jsonl"
    )
    bankset = BankSet.load(path, dataset) if path is not None and path.exists() else None
    missing = [r for r in rankers if bankset is None or r not in bankset.rankers]
    if bankset is not None and not missing:
        return bankset
    index = index or BM25Index.build(dataset.passages, spec.bm25, cache_dir, progress)
    if bankset is None:
        stage = index
        if spec.stage(dataset) != "bm25":
            extractor = FieldExtractor.from_passages(dataset.passages.values())
            stage = FirstStage(spec.stage(dataset), index, dataset.passages, extractor)
        bankset = retrieve_candidates(dataset, stage, spec.size, spec.mode)
        bankset.split = split
    built = make_rankers(missing, dataset.passages, index, cache_dir, spec.dense_policy, progress)
    score_banks(bankset, dataset, built, progress)
    if path is not None:
        bankset.save(path)
    return bankset
