"""First stages: whole-corpus BM25, optionally with query processing and entity-aware retrieval.

Entity-aware retrieval reads the companies the question names (field extractor, with every company
the corpus metadata names) and ranks that company's passages first; the rest follow in BM25 order,
so a bank keeps its size. A question that names no company, or only companies the corpus lacks,
falls back to unrestricted BM25. Only the question text and the corpus metadata are used, never
the gold.
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.bm25 import BM25Index, top_k
from fincrowd_ltr.retrieval.query import STEPS, QueryProcessor

FIRST_STAGES = ("bm25", "bm25+query", "bm25+entity", "bm25+query+entity")


class FirstStage:
    """A named first stage over a BM25 index.

    Args:
        name: One of ``FIRST_STAGES``.
        index: The whole-corpus BM25 index.
        passages: The corpus (for company metadata).
        extractor: Field extractor (company names, metrics).
    """

    def __init__(
        self, name: str, index: BM25Index, passages: dict[str, Passage], extractor: FieldExtractor
    ) -> None:
        if name not in FIRST_STAGES:
            raise DataError(f"unknown first stage {name!r}; choose from {FIRST_STAGES}")
        self.name = name
        self.index = index
        self.extractor = extractor
        self.process = QueryProcessor(extractor, STEPS) if "query" in name else None
        self.by_company: dict[str, np.ndarray] = {}
        if "entity" in name:
            rows: dict[str, list[int]] = {}
            for i, pid in enumerate(index.pids):
                company = passages[pid].company
                if company:
                    rows.setdefault(extractor.canonical_company(company), []).append(i)
            self.by_company = {c: np.array(r, dtype=np.int64) for c, r in rows.items()}

    def _scores(self, query: str) -> np.ndarray:
        """First-stage scores of every passage: BM25 of the (processed) question, plus a constant
        that ranks the named company's passages above all others."""
        text = self.process(query) if self.process is not None else query
        scores = self.index.scores(text)
        if self.by_company:
            named = [c for c in self.extractor.extract_query(query).entity if c in self.by_company]
            if named:
                rows = np.concatenate([self.by_company[c] for c in sorted(named)])
                scores[rows] += float(scores.max() - scores.min()) + 1.0
        return scores

    def search(self, query: str, k: int) -> tuple[list[str], np.ndarray]:
        """Top-``k`` passage ids and scores; ties broken by index order."""
        scores = self._scores(query)
        order = top_k(scores, k)
        return [self.index.pids[i] for i in order], scores[order]

    def score_ids(self, query: str, pids: list[str]) -> np.ndarray:
        """First-stage scores of the given passages."""
        return self._scores(query)[[self.index.position[p] for p in pids]]
