"""One schema for every dataset: queries, passages with filing metadata, and graded qrels."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field


class DataError(ValueError):
    """Bad input data. The message names the file, line or field at fault; ``field`` names a
    request's field (``"candidates[3].id"``) where one is at fault, for services to return."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class RunWarning(UserWarning):
    """A run file's lines that are skipped (question ids the dataset does not hold)."""


# a synthetic question set over a corpus is named "<corpus>-synthetic" (in memory, or loaded from
# the folder `synthesize` wrote) and shares its corpus's `auto` first stage (the stage is a
# property of the corpus, not of who asks)
SYNTHETIC_SUFFIX = "-synthetic"


@dataclass(frozen=True)
class Passage:
    """A retrievable unit of text (a filing page, a table, a paragraph, a table row).

    Attributes:
        pid: Unique passage id within its dataset.
        text: The passage text.
        company: Company the filing belongs to, when known.
        document: Filing or report id (e.g. ``3M_2018_10K``), when known.
        period: Fiscal period of the filing (``"2018"`` or ``"2023Q2"``), when known.
        doc_type: Filing type (``10k``, ``10q``, ``8k``, ``earnings``, ...), when known.
        position: Page number or position inside the document, when known.
        is_table: True for tables or table rows, False for prose, None when unknown.
    """

    pid: str
    text: str
    company: str | None = None
    document: str | None = None
    period: str | None = None
    doc_type: str | None = None
    position: int | None = None
    is_table: bool | None = None

    def metadata(self) -> dict:
        """Return the metadata fields (everything but id and text) as a plain dict."""
        return {
            "company": self.company,
            "document": self.document,
            "period": self.period,
            "doc_type": self.doc_type,
            "position": self.position,
            "is_table": self.is_table,
        }


# the longest candidate text (with its title) `serve` accepts by default (--max-text-chars); the
# BEIR loader names longer passages
MAX_SERVED_TEXT_CHARS = 20_000


def titled(title: str | None, text: str, document: str | None = None) -> tuple[str, str | None]:
    """A passage's text and document with its title, as the package reads both (a BEIR
    record's, a served candidate's): the title on a first line of its own, and the document
    when ``document`` names none."""
    title = str(title or "").strip()
    if not title:
        return str(text), document
    return f"{title}\n{text}", title if document is None else document


@dataclass(frozen=True)
class Query:
    """A question with the metadata a grouping or split needs.

    Attributes:
        qid: Unique query id within its dataset.
        text: The question text.
        group: The unit that splits must keep together (company for FinanceBench, context for
            TAT-QA). Never shown to a retriever.
        company: The company the question is about, when the dataset says so (evaluation only).
    """

    qid: str
    text: str
    group: str
    company: str | None = None


def pages_fingerprint(passages: Mapping[str, Passage]) -> str:
    """A hash of every passage's id, text and metadata, in the mapping's order."""
    digest = hashlib.sha1()
    for pid, p in passages.items():
        digest.update(pid.encode("utf-8", "replace") + b"\0")
        digest.update(p.text.encode("utf-8", "replace") + b"\0")
        digest.update(json.dumps(p.metadata(), sort_keys=True, default=str).encode())
        digest.update(b"\1")
    return digest.hexdigest()[:16]


@dataclass
class Dataset:
    """Queries, passages and relevance judgements of one dataset split.

    Attributes:
        name: Dataset name (``financebench``, ``tatqa``, ...).
        queries: Queries by id, in file order.
        passages: Passages by id, in file order.
        qrels: ``qrels[qid][pid] = grade`` (grade > 0 is relevant).
        missing_gold: ``missing_gold[qid]`` lists gold references that are not in the corpus
            (kept and reported as coverage, never dropped).
        gold_equivalents: ``gold_equivalents[qid][pid] = gold_pid`` for passages whose text is an
            exact duplicate of a gold passage (relevance can be expanded to them).
        notes: Human-readable notes about corpus quirks found while loading.
        answer_figures: ``answer_figures[qid]`` the figures the gold answer needs (evaluation
            only; see :mod:`fincrowd_ltr.data.answers`).
    """

    name: str
    queries: dict[str, Query]
    passages: dict[str, Passage]
    qrels: dict[str, dict[str, int]]
    missing_gold: dict[str, list[str]] = field(default_factory=dict)
    gold_equivalents: dict[str, dict[str, str]] | None = None
    notes: list[str] = field(default_factory=list)
    # the figures each question's gold answer needs (evaluation only: answer support in packed
    # contexts, fincrowd_ltr.evaluation.answers); absent when the answer is not figure-based
    answer_figures: dict[str, list[str]] = field(default_factory=dict)

    def __repr__(self) -> str:  # the corpus itself would fill a notebook
        judged = sum(1 for q in self.queries if self.qrels.get(q))
        return (
            f"Dataset({self.name!r}: {len(self.queries)} queries, {judged} judged, "
            f"{len(self.passages)} passages, {len(self.notes)} notes)"
        )

    def corpus_fingerprint(self) -> str:
        """A hash of every passage's id, text and metadata (:func:`pages_fingerprint`, computed
        once; pages read from a sharded index keep theirs beside the index)."""
        cached = self.__dict__.get("_corpus_fingerprint")
        if cached is None:
            recorded = getattr(self.passages, "corpus_fingerprint", None)
            cached = recorded() if callable(recorded) else pages_fingerprint(self.passages)
            self.__dict__["_corpus_fingerprint"] = cached
        return cached

    def queries_fingerprint(self, with_qrels: bool) -> str:
        """A hash of the question ids and texts (and, with ``with_qrels``, their judgements)."""
        digest = hashlib.sha1()
        for qid, query in self.queries.items():
            digest.update(f"{qid}\0{query.text}\1".encode("utf-8", "replace"))
            if with_qrels:
                rels = sorted(self.qrels.get(qid, {}).items())
                digest.update(json.dumps(rels).encode())
        return digest.hexdigest()[:16]

    def question_fingerprint(self, qid: str) -> str:
        """The content identity of a question: its normalised text and the texts of its gold
        evidence. The same labelled question under another id, or loaded through another
        loader, has the same fingerprint; the same wording about other evidence (TAT-QA's
        repeated questions over different tables) does not."""
        text = " ".join(self.queries[qid].text.lower().split())
        gold = sorted(
            hashlib.sha1(
                " ".join(self.passages[p].text.split()).encode("utf-8", "replace")
            ).hexdigest()
            for p, g in self.qrels.get(qid, {}).items()
            if g > 0 and p in self.passages
        )
        return hashlib.sha1(json.dumps([text, gold]).encode("utf-8")).hexdigest()[:20]

    def question_key(self, qid: str) -> str:
        """A second identity of a question: its id and normalised text, whatever its evidence
        (a corpus re-extracted or re-chunked after training changes the gold texts, so the
        fingerprint alone would count a training question as unseen). ``k``-prefixed, so it
        never equals a fingerprint."""
        text = " ".join(self.queries[qid].text.lower().split())
        return "k" + hashlib.sha1(f"{qid}\n{text}".encode("utf-8", "replace")).hexdigest()[:19]

    def question_identities(self, qids) -> list[str]:
        """Every question's fingerprint and key (what a checkpoint records of the questions it
        saw), sorted."""
        return sorted(f(q) for q in qids for f in (self.question_fingerprint, self.question_key))

    def covered(self, qid: str) -> bool:
        """Whether all gold evidence of ``qid`` is in the corpus (the coverage rule)."""
        return bool(self.qrels.get(qid)) and not self.missing_gold.get(qid)

    def require_covered(self, purpose: str) -> None:
        """Raise DataError, with the dataset's notes, when no question has all its relevant
        passages in the corpus (nothing to ``purpose``: "measure", "train on", ...)."""
        if any(self.covered(q) for q in self.queries):
            return
        why = "; ".join(self.notes) or "check the qrels"
        raise DataError(
            f"{self.name}: no question has a relevant passage in the corpus, so there is nothing "
            f"to {purpose}; {why}"
            + ("" if self.queries else " (questions from its pages: `fincrowd synthesize`)")
        )

    def validate(self) -> None:
        """Check referential integrity; raise DataError naming the offending id."""
        for qid, rels in self.qrels.items():
            if qid not in self.queries:
                raise DataError(f"{self.name}: qrels name unknown query id {qid!r}")
            for pid in rels:
                if pid not in self.passages:
                    raise DataError(
                        f"{self.name}: qrels of query {qid!r} name unknown passage id {pid!r}"
                    )
        for qid, query in self.queries.items():
            if not query.text.strip():
                raise DataError(f"{self.name}: query {qid!r} has empty text")

    def subset(self, qids: list[str]) -> Dataset:
        """The same corpus with only the given queries (splits share the corpus)."""
        keep = set(qids)
        return Dataset(
            name=self.name,
            queries={q: v for q, v in self.queries.items() if q in keep},
            passages=self.passages,
            qrels={q: v for q, v in self.qrels.items() if q in keep},
            missing_gold={q: v for q, v in self.missing_gold.items() if q in keep},
            gold_equivalents=(
                None
                if self.gold_equivalents is None
                else {q: v for q, v in self.gold_equivalents.items() if q in keep}
            ),
            notes=list(self.notes),
        )
