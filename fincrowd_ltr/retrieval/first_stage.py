"""First stages: whole-corpus BM25, optionally with query processing and entity-aware retrieval.

Entity-aware retrieval reads the companies the question names (field extractor, with every company
the corpus metadata names) and ranks that company's passages first; the rest follow in BM25 order,
so a bank keeps its size. A question that names no company, or only companies the corpus lacks,
falls back to unrestricted BM25. Only the question text and the corpus metadata are used, never
the gold.

Filing-aware retrieval (``filing``, with ``entity``) then lifts the named company's pages by their
filing's compatibility with the question's fiscal period and implied filing type
(:mod:`fincrowd_ltr.retrieval.filings`): ``weight x compatibility x`` the question's best BM25 score
is added, so the right filing's pages lead while strong BM25 matches of other filings still make
the bank. Questions that state no year fall back to the entity-aware order.

Static-aware retrieval (``static=W``) then adds ``W x`` the question's best score so far ``x``
each page's cosine with the question under the corpus's static scorer (its best window;
:mod:`fincrowd_ltr.retrieval.page_vectors`), so that a page that says what the question asks in
other words can enter the bank. It comes after the company and filing lifts and is scaled by the
lifted maximum, so it mostly reorders the named company's pages, but a page of another company
close in meaning can pass that company's weakest ones. The scorer is built from the corpus alone
(no question, no label).

A first stage is named ``bm25`` followed by ``+step`` parts, any of ``instructions``, ``periods``,
``synonyms``, ``keywords`` (query processing, see :mod:`fincrowd_ltr.retrieval.query`), ``query``
(short for the first three), ``entity``, ``filing`` (or ``filing=W`` for a weight other than
``FILING_WEIGHT``) and ``static=W``; e.g. ``bm25+query+entity+filing``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fincrowd_ltr.data.schema import SYNTHETIC_SUFFIX, DataError, Dataset, Passage
from fincrowd_ltr.defaults import AUTO_FALLBACK, AUTO_FIRST_STAGE
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.retrieval.bm25 import BM25Index, top_k
from fincrowd_ltr.retrieval.filings import FilingPrior
from fincrowd_ltr.retrieval.query import QUERY_STEPS, STEPS, QueryProcessor

if TYPE_CHECKING:
    from fincrowd_ltr.retrieval.page_vectors import PageVectors

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
    "bm25+query+entity+filing=0.25",
    "bm25+query+entity+filing=0.5",
    "bm25+query+entity+filing",
    # the static scorer's weight: grid written after a probe of 0.05-1 on the 88 covered
    # FinanceBench questions (docs/results.md); the ablation chooses on training folds
    "bm25+query+entity+filing+static=0.1",
    "bm25+query+entity+filing+static=0.25",
    "bm25+query+entity+filing+static=0.5",
)
PARTS = (*STEPS, "query", "entity", "filing", "static")
FILING_WEIGHT = 1.0
STATIC_WEIGHT = 0.25
AUTO = "auto"
RUN = "run"  # a user's own run is the first stage (``build_banks(run=...)``)
# ``auto``: the first stage chosen on training folds for each dataset by
# ``fincrowd first-stage --dataset NAME`` (README, "First stage"). FinanceBench: every fold's
# training folds choose +static=0.25 (fold seeds 0-2; before the static variants joined, the
# filing-aware stage bm25+query+entity+filing). TAT-QA dev (no company names or filings,
# synonyms hurt): plain BM25, although its folds pick +static=0.1 by R@100 +0.001 [-0.002,
# +0.004]: a gain indistinguishable from zero does not pay for building a static scorer per
# corpus (minutes). Other corpora get plain BM25 until their own ablation says otherwise (on the
# FinQA subset the static term costs a little).
# The table is ``AUTO_FIRST_STAGE`` in ``defaults.py``, so that the command line's help reads it
# without importing this module.


def resolve_first_stage(name: str, dataset: str) -> str:
    """The first stage ``name`` stands for on ``dataset`` (``auto`` looks the dataset up; a
    synthetic question set, ``<corpus>-synthetic``, gets its corpus's)."""
    if name != AUTO:
        return name
    return AUTO_FIRST_STAGE.get(dataset.removesuffix(SYNTHETIC_SUFFIX), AUTO_FALLBACK)


@dataclass(frozen=True)
class StageParts:
    """What a first-stage name asks for: query steps, entity restriction, filing weight (0: off)."""

    steps: tuple[str, ...] = ()
    entity: bool = False
    filing: float = 0.0
    static: float = 0.0


_WEIGHTED = {"filing": FILING_WEIGHT, "static": STATIC_WEIGHT}


def _weight(part: str) -> float | None:
    """The weight of a ``filing``/``static`` part (``=W`` or the default); ``None`` if it is not
    positive."""
    head, eq, value = part.partition("=")
    if not eq:
        return _WEIGHTED[head]
    try:
        weight = float(value)
    except ValueError:
        weight = -1.0
    return weight if weight > 0 else None


def parse_first_stage(name: str) -> StageParts:
    """The parts of a first-stage name; errors list the parts one can write."""
    if name in (AUTO, RUN):
        return StageParts()
    head, *parts = name.split("+")
    kinds = [p.partition("=")[0] for p in parts]
    weights = {k: _weight(p) for k, p in zip(kinds, parts, strict=True) if k in _WEIGHTED}
    plain = [p for k, p in zip(kinds, parts, strict=True) if k not in _WEIGHTED]
    unknown = [p for p in plain if p not in PARTS]
    bad_weight = None in weights.values() or ("filing" in weights and "entity" not in parts)
    if head != "bm25" or unknown or len(set(kinds)) != len(kinds) or bad_weight:
        raise DataError(
            f"unknown first stage {name!r}: write 'auto', 'run' (your run's own top N), or "
            f"'bm25' then any of {', '.join('+' + p for p in PARTS)} (e.g. bm25+query+entity); "
            "'filing' needs 'entity'; 'filing' and 'static' take an optional positive weight "
            "(filing=0.25)"
        )
    steps = {s for p in plain for s in (QUERY_STEPS if p == "query" else (p,)) if s != "entity"}
    return StageParts(
        tuple(s for s in STEPS if s in steps),
        "entity" in parts,
        weights.get("filing", 0.0),
        weights.get("static", 0.0),
    )


class FirstStage:
    """A named first stage over a BM25 index.

    Args:
        name: ``bm25`` with ``+`` parts (see the module docstring); ``FIRST_STAGES`` lists the
            ablation's variants.
        index: The whole-corpus BM25 index.
        passages: The corpus (for company metadata).
        extractor: Field extractor (company names, metrics).
        pages: The static scorer's vectors of the index's pages (``index.pids`` order); needed
            by ``static`` (:func:`page_vectors_for`).
    """

    def __init__(
        self,
        name: str,
        index: BM25Index,
        passages: dict[str, Passage],
        extractor: FieldExtractor,
        pages: PageVectors | None = None,
    ) -> None:
        if name == AUTO:
            raise DataError("resolve the 'auto' first stage for a dataset first")
        parts = parse_first_stage(name)
        if parts.static and pages is None:
            raise DataError(
                f"first stage {name!r} reads the corpus's static scorer: build its page vectors "
                "(page_vectors_for)"
            )
        self.static_weight = parts.static
        self.pages = pages
        self.name = name
        self.index = index
        self.extractor = extractor
        self.process = QueryProcessor(extractor, parts.steps) if parts.steps else None
        self.filing_weight = parts.filing
        self.filings = FilingPrior(passages[p] for p in index.pids) if parts.filing else None
        self.by_company: dict[str, np.ndarray] = {}
        if parts.entity:
            rows: dict[str, list[int]] = {}
            for i, pid in enumerate(index.pids):
                company = passages[pid].company
                if company:
                    rows.setdefault(extractor.canonical_company(company), []).append(i)
            self.by_company = {c: np.array(r, dtype=np.int64) for c, r in rows.items()}

    def _scores(
        self, query: str, static: np.ndarray | None = None, static_term: bool = True
    ) -> np.ndarray:
        """First-stage scores of every passage: BM25 of the (processed) question, plus the filing
        lift and a constant that ranks the named company's passages above all others, then the
        static scorer's term (which may cross that line; ``static``: its page scores, when
        computed already; left out when not ``static_term``)."""
        text = self.process(query) if self.process is not None else query
        scores = self.index.scores(text)
        if self.by_company:
            fields = self.extractor.extract_query(query)
            named = [c for c in fields.entity if c in self.by_company]
            if named:
                rows = np.concatenate([self.by_company[c] for c in sorted(named)])
                fit = self.filings(query, fields.period) if self.filings is not None else None
                if fit is not None:
                    scores[rows] += self.filing_weight * float(scores.max()) * fit[rows]
                scores[rows] += float(scores.max() - scores.min()) + 1.0
        if self.static_weight and static_term:
            if static is None:
                static = self.pages.scores(query)
            scores += self.static_weight * float(scores.max()) * static
        return scores

    def search(self, query: str, k: int) -> tuple[list[str], np.ndarray]:
        """Top-``k`` passage ids and scores; ties broken by index order."""
        return self._top(self._scores(query), k)

    def search_many(self, queries: list[str], k: int) -> list[tuple[list[str], np.ndarray]]:
        """:meth:`search` of each question, the same results; the static scorer's products are
        computed for a batch of questions together (:meth:`PageVectors.scores_many`: the
        corpus's window vectors read once per batch), each page score dropped once its
        question's top ``k`` are taken."""
        if not self.static_weight:
            return [self.search(q, k) for q in queries]
        static = self.pages.scores_many(queries)
        return [self._top(self._scores(q, s), k) for q, s in zip(queries, static, strict=True)]

    def _top(self, scores: np.ndarray, k: int) -> tuple[list[str], np.ndarray]:
        order = top_k(scores, k)
        return [self.index.pids[i] for i in order], scores[order]

    def score_ids(self, query: str, pids: list[str], static_term: bool = True) -> np.ndarray:
        """First-stage scores of the given passages (without the static scorer's term when not
        ``static_term``: what a fusion with the static scorer reads, so that it counts once)."""
        return self._scores(query, static_term=static_term)[[self.index.position[p] for p in pids]]


def page_vectors_for(
    name: str,
    index: BM25Index,
    passages,
    cache_dir: Path | None,
    corpus_key: str | None = None,
    progress: bool = False,
) -> PageVectors | None:
    """The page vectors first stage ``name`` reads (``static``), else None."""
    if name in (AUTO, RUN) or not parse_first_stage(name).static:
        return None
    from fincrowd_ltr.retrieval.page_vectors import PageVectors

    return PageVectors.build(list(index.pids), passages, cache_dir, corpus_key, progress)


def make_first_stage(
    name: str,
    index: BM25Index,
    dataset: Dataset,
    extractor: FieldExtractor | None = None,
    cache_dir: Path | None = None,
    pages: PageVectors | None = None,
    progress: bool = False,
) -> BM25Index | FirstStage:
    """First stage ``name`` over ``index`` (plain ``bm25``: the index itself). Metadata comes
    from a page store's text-less headers where the corpus is one; a ``static`` stage reads
    ``pages`` when given (several stages of one corpus share them), else builds them."""
    if name == "bm25":
        return index
    headers = getattr(dataset.passages, "headers", dataset.passages)
    # the first stage reads entities, periods and metrics, never harvested segment names
    extractor = extractor or corpus_extractor(dataset.passages, harvest=False)
    if pages is None:
        key = dataset.corpus_fingerprint()
        pages = page_vectors_for(name, index, dataset.passages, cache_dir, key, progress)
    return FirstStage(name, index, headers, extractor, pages)


def make_first_stages(
    names: Iterable[str],
    index: BM25Index,
    dataset: Dataset,
    extractor: FieldExtractor | None = None,
    cache_dir: Path | None = None,
) -> Iterator[tuple[str, BM25Index | FirstStage]]:
    """Each first stage of ``names`` in turn, as :func:`make_first_stage` makes it; the
    ``static`` ones share one set of page vectors (built or read once)."""
    pages = None
    for name in names:
        stage = make_first_stage(name, index, dataset, extractor, cache_dir, pages)
        if isinstance(stage, FirstStage) and stage.pages is not None:
            pages = stage.pages
        yield name, stage
