"""Candidate banks: the fixed top-k candidates of each query with every base ranker's score.

A bank's membership comes from the first stage (BM25 over the whole corpus); base rankers only
reorder it. Two modes: ``retrieved`` (as retrieved) and ``injected`` (gold passages that the
first stage missed replace the lowest-ranked non-gold candidates: the paper's controlled fixed
banks). Ordering by a ranker breaks ties by bank position (first-stage rank), then never again.

File format (JSON Lines): line 1 is a header ``{"format": "fincrowd-banks", "version": 1,
"dataset", "split", "mode", "size", "rankers": [...]}``; every further line is one bank
``{"qid", "candidates": [pid, ...], "first_stage": [float, ...], "scores": {ranker: [float,
...]}, "injected": [pid, ...]}`` with lists aligned to ``candidates``. The header's ``scorers``
names the version of a ranker's model where it can change (the static scorer's recipe): scores
of another version are recomputed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from fincrowd_ltr.data.jsonl import read_jsonl
from fincrowd_ltr.data.ranking import rank_order
from fincrowd_ltr.data.schema import DataError, Dataset, Query
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.rankers import (
    BaseRanker,
    EncoderRanker,
    HybridRanker,
    check_scores,
    score_bank,
)

BANK_FORMAT = "fincrowd-banks"
BANK_VERSION = 1
from fincrowd_ltr.defaults import BANK_MODES as MODES  # noqa: E402
from fincrowd_ltr.defaults import DEFAULT_BANK_SIZE  # noqa: E402

if TYPE_CHECKING:
    from fincrowd_ltr.retrieval.first_stage import FirstStage


@dataclass
class CandidateBank:
    """The candidates of one query, in first-stage order, with base scores per ranker."""

    qid: str
    pids: list[str]
    first_stage: np.ndarray
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    injected: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.pids)

    def order(self, ranker: str) -> np.ndarray:
        """Candidate indices by descending ``ranker`` score; ties by bank position."""
        if ranker not in self.scores:
            raise DataError(f"bank {self.qid!r} has no scores for ranker {ranker!r}")
        return rank_order(self.scores[ranker])

    def ranking(self, ranker: str) -> list[str]:
        """Passage ids ordered by ``ranker``."""
        return [self.pids[i] for i in self.order(ranker)]


@dataclass
class BankSet:
    """All banks of a dataset split in one mode."""

    dataset: str
    split: str
    mode: str
    size: int
    banks: dict[str, CandidateBank]
    key: str = ""  # content key of the cached file (empty: built in memory, not cached)
    notes: list[str] = field(default_factory=list)
    scorers: dict[str, str] = field(default_factory=dict)  # ranker -> version of its model

    @property
    def rankers(self) -> list[str]:
        names = None
        for bank in self.banks.values():
            names = set(bank.scores) if names is None else names & set(bank.scores)
        return sorted(names or [])

    def save(self, path: Path) -> None:
        """Write the documented JSONL format (atomically)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            header = {
                "format": BANK_FORMAT,
                "version": BANK_VERSION,
                "dataset": self.dataset,
                "split": self.split,
                "mode": self.mode,
                "size": self.size,
                "rankers": self.rankers,
                "scorers": self.scorers,
            }
            fh.write(json.dumps(header) + "\n")
            for bank in self.banks.values():
                fh.write(
                    json.dumps(
                        {
                            "qid": bank.qid,
                            "candidates": bank.pids,
                            "first_stage": bank.first_stage.tolist(),
                            "scores": {k: v.tolist() for k, v in bank.scores.items()},
                            "injected": bank.injected,
                        }
                    )
                    + "\n"
                )
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path, dataset: Dataset | None = None) -> BankSet:
        """Read a bank file; errors name the file, line and field. With ``dataset``, unknown
        query or passage ids are rejected."""
        header = None
        banks: dict[str, CandidateBank] = {}
        for lineno, row in read_jsonl(path):
            if header is None:
                if row.get("format") != BANK_FORMAT:
                    raise DataError(f"{path}:{lineno}: not a bank file (no {BANK_FORMAT} header)")
                if row.get("version") != BANK_VERSION:
                    raise DataError(
                        f"{path}:{lineno}: bank format version {row.get('version')} "
                        f"is not supported (expected {BANK_VERSION})"
                    )
                header = row
                continue
            for key in ("qid", "candidates", "first_stage", "scores"):
                if key not in row:
                    raise DataError(f"{path}:{lineno}: missing field {key!r}")
            qid, pids = str(row["qid"]), [str(p) for p in row["candidates"]]
            if not pids:
                raise DataError(f"{path}:{lineno}: bank of query {qid!r} is empty")
            if len(set(pids)) != len(pids):
                raise DataError(f"{path}:{lineno}: bank of query {qid!r} repeats a candidate")
            if dataset is not None:
                if qid not in dataset.queries:
                    raise DataError(f"{path}:{lineno}: unknown query id {qid!r}")
                unknown = [p for p in pids if p not in dataset.passages]
                if unknown:
                    raise DataError(f"{path}:{lineno}: unknown passage id {unknown[0]!r}")
            scores = {}
            for name, values in {"first_stage": row["first_stage"], **row["scores"]}.items():
                if len(values) != len(pids):
                    raise DataError(
                        f"{path}:{lineno}: field {name!r} has {len(values)} scores "
                        f"for {len(pids)} candidates"
                    )
                scores[name] = check_scores(
                    np.array(values, dtype=np.float64), f"{path}:{lineno}: field {name!r}"
                )
            first = scores.pop("first_stage")
            banks[qid] = CandidateBank(qid, pids, first, scores, list(row.get("injected", [])))
        if header is None:
            raise DataError(f"{path}: empty bank file (no header)")
        found = cls(header["dataset"], header["split"], header["mode"], int(header["size"]), banks)
        found.scorers = {str(k): str(v) for k, v in dict(header.get("scorers", {})).items()}
        return found

    def drop(self, ranker: str) -> None:
        """Forget every bank's scores of ``ranker`` (they came from another version of it)."""
        for bank in self.banks.values():
            bank.scores.pop(ranker, None)
        self.scorers.pop(ranker, None)


QUERIES_PER_CHUNK = 64


def _search(query: Query, index, size: int) -> tuple[list[str], np.ndarray]:
    search = getattr(index, "search_query", None)
    return search(query, size) if search else index.search(query.text, size)


def _search_chunk(
    queries: list[Query], shared, size: int = DEFAULT_BANK_SIZE
) -> list[tuple[list[str], np.ndarray]]:
    # a first stage that searches a batch faster (one that searches by the question's record,
    # a user's run, keeps doing so)
    many = getattr(shared, "search_many", None)
    if many is not None and not hasattr(shared, "search_query"):
        return many([q.text for q in queries], size)
    return [_search(q, shared, size) for q in queries]


def _search_all(queries: list[Query], index, size: int) -> dict[str, tuple[list[str], np.ndarray]]:
    """Every question's top ``size`` (on the current engine's workers when it is distributed:
    the first stage goes to each worker once, questions in chunks)."""
    from fincrowd_ltr.engine import map_chunked

    search = functools.partial(_search_chunk, size=size)
    found = map_chunked(search, queries, QUERIES_PER_CHUNK, index, "first-stage retrieval", True)
    return {q.qid: r for q, r in zip(queries, found, strict=True)}


def retrieve_candidates(
    dataset: Dataset,
    index: BM25Index | FirstStage,
    size: int = DEFAULT_BANK_SIZE,
    mode: str = "retrieved",
) -> BankSet:
    """First-stage banks (no base ranker scores yet) for every query of ``dataset``; ``index``
    is the BM25 index or any first stage with ``search`` and ``score_ids``."""
    if mode not in MODES:
        raise DataError(f"unknown bank mode {mode!r}; choose from {MODES}")
    if size < 1:
        raise DataError("bank size must be at least 1")
    banks = {}
    found = _search_all(list(dataset.queries.values()), index, size)
    empty = sorted(q for q in dataset.queries if not found[q][0])
    if empty:
        raise DataError(
            f"empty bank for {len(empty)} questions (first: {', '.join(map(repr, empty[:3]))}): "
            "the first stage retrieved nothing (an empty corpus, or a run without scores for "
            "these questions)"
        )
    for qid, query in dataset.queries.items():
        pids, scores = found[qid]
        injected: list[str] = []
        if mode == "injected" and dataset.qrels.get(qid):
            gold = [p for p in dataset.qrels[qid] if dataset.qrels[qid][p] > 0]
            missing = [p for p in gold if p not in set(pids)]
            if missing:
                keep = [p for p in pids if p in gold]
                others = [p for p in pids if p not in gold]
                others = others[: max(0, size - len(keep) - len(missing))]
                pids = [p for p in pids if p in set(keep) | set(others)] + missing
                score = getattr(index, "score_query", None)
                scores = score(query, pids) if score else index.score_ids(query.text, pids)
                order = rank_order(scores)  # keep first-stage order
                pids, scores = [pids[i] for i in order], scores[order]
                injected = missing
        banks[qid] = CandidateBank(
            qid, list(pids), np.asarray(scores, dtype=np.float64), injected=injected
        )
    return BankSet(dataset.name, "", mode, size, banks)


def score_banks(
    bankset: BankSet, dataset: Dataset, rankers: list[BaseRanker], progress: bool = True
) -> None:
    """Add each ranker's scores to every bank (skipping rankers a bank already has); a ranker
    that can read what a bank carries does (``score_bank``: the fused ranker's first-stage
    part reads the bank's first-stage scores)."""
    for ranker in rankers:
        todo = [b for b in bankset.banks.values() if ranker.name not in b.scores]
        if not todo:
            continue
        parts = ranker.parts if isinstance(ranker, HybridRanker) else [ranker]
        for part in parts:
            if isinstance(part, EncoderRanker):
                part.prepare(
                    [p for b in todo for p in b.pids], [dataset.queries[b.qid].text for b in todo]
                )
        for bank in tqdm(
            todo,
            desc=f"scoring banks ({ranker.name})",
            unit=" banks",
            disable=not progress,
            mininterval=2.0,
        ):
            query = dataset.queries[bank.qid]
            bank.scores[ranker.name] = check_scores(
                score_bank(ranker, query, bank), f"ranker {ranker.name!r}, query {bank.qid!r}"
            )


__all__ = [
    "BANK_FORMAT",
    "BankSet",
    "CandidateBank",
    "DEFAULT_BANK_SIZE",
    "MODES",
    "retrieve_candidates",
    "score_banks",
]
