"""First stages: whole-corpus BM25, optionally with query processing and entity-aware retrieval.

Entity-aware retrieval reads the companies the question names (field extractor, with every company
the corpus metadata names) and ranks that company's passages first; the rest follow in BM25 order,
so a bank keeps its size. A question that names no company, or only companies the corpus lacks,
falls back to unrestricted BM25. Only the question text and the corpus metadata are used, never
the gold.

A first stage is named ``bm25`` followed by ``+step`` parts, any of ``instructions``, ``periods``,
``synonyms``, ``keywords`` (query processing, see :mod:`fincrowd_ltr.retrieval.query`), ``query``
(short for the first three) and ``entity``; e.g. ``bm25+query+entity``.
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.bm25 import BM25Index, top_k
from fincrowd_ltr.retrieval.query import QUERY_STEPS, STEPS, QueryProcessor

# the ablation's variants: the original query, each step alone, the steps together
FIRST_STAGES = (
    "bm25",
    "bm25+instructions",
    "bm25+periods",
    "bm25+synonyms",
    "bm25+keywords",
    "bm25+entity",
    "bm25+query",
    "bm25+query+keywords",
    "bm25+query+entity",
    "bm25+query+keywords+entity",
)
PARTS = (*STEPS, "query", "entity")
AUTO = "auto"
RUN = "run"  # a user's own run is the first stage (``build_banks(run=...)``)
# ``auto``: the first stage chosen on training folds for each dataset by
# ``fincrowd first-stage --dataset NAME`` (README, "First stage"): on FinanceBench every fold's
# training folds chose bm25+query+entity; on TAT-QA dev (no company names, synonyms hurt) plain
# BM25. Other corpora get plain BM25 until their own ablation says otherwise.
CHOSEN = {"financebench": "bm25+query+entity", "tatqa": "bm25"}
FALLBACK = "bm25"


def resolve_first_stage(name: str, dataset: str) -> str:
    """The first stage ``name`` stands for on ``dataset`` (``auto`` looks the dataset up)."""
    return CHOSEN.get(dataset, FALLBACK) if name == AUTO else name


def parse_first_stage(name: str) -> tuple[tuple[str, ...], bool]:
    """``(query processing steps, entity-aware)`` of a first-stage name; errors list the parts."""
    if name in (AUTO, RUN):
        return (), False
    head, *parts = name.split("+")
    unknown = [p for p in parts if p not in PARTS]
    if head != "bm25" or unknown or len(set(parts)) != len(parts):
        raise DataError(
            f"unknown first stage {name!r}: write 'auto', 'run' (your run's own top N), or "
            f"'bm25' then any of "
            f"{', '.join('+' + p for p in PARTS)} (e.g. bm25+query+entity)"
        )
    steps = {s for p in parts for s in (QUERY_STEPS if p == "query" else (p,)) if s != "entity"}
    return tuple(s for s in STEPS if s in steps), "entity" in parts


class FirstStage:
    """A named first stage over a BM25 index.

    Args:
        name: ``bm25`` with ``+`` parts (see the module docstring); ``FIRST_STAGES`` lists the
            ablation's variants.
        index: The whole-corpus BM25 index.
        passages: The corpus (for company metadata).
        extractor: Field extractor (company names, metrics).
    """

    def __init__(
        self, name: str, index: BM25Index, passages: dict[str, Passage], extractor: FieldExtractor
    ) -> None:
        if name == AUTO:
            raise DataError("resolve the 'auto' first stage for a dataset first")
        steps, entity = parse_first_stage(name)
        self.name = name
        self.index = index
        self.extractor = extractor
        self.process = QueryProcessor(extractor, steps) if steps else None
        self.by_company: dict[str, np.ndarray] = {}
        if entity:
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
