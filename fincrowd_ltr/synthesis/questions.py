"""Training questions synthesised from a corpus's own pages: no labels, no question records, no LLM.

Every statement row a page prints (:mod:`fincrowd_ltr.synthesis.tables`) states a line item, a
period per column and a figure, for the filing's company. Templates turn it into questions
("What was <company>'s <line item> in FY<year>?" and other phrasings, a FinanceBench-like form,
year-over-year changes, ratios of two rows of the same page); prose sentences that state a
metric's figure for a year give questions too. Relevance is the source page plus every page of
the same company that prints the same metric, period and figure (a 10-K's selected data and its
statements, next year's 10-K restating it), so a restatement is never a negative. The
constraint-violating pages the correction exists to push down are recorded with their type:
the same line item in another period, another line item of the same filing, the same line item
of another company.

Only ``Passage`` objects are read (text and metadata); a ``Dataset``'s questions and relevance
judgements are never touched (``tests/synthesis/test_synthesis.py`` proves it).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from fincrowd_ltr.data.schema import DataError, Dataset, Passage, Query
from fincrowd_ltr.data.splits import page_unit
from fincrowd_ltr.defaults import DEFAULT_LINE_ITEMS, LINE_ITEMS
from fincrowd_ltr.features.page_cues import ROW_REACH, has_metric_row
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields import vocabulary as V
from fincrowd_ltr.synthesis.tables import LABEL_METRIC, PageTable, figure_key, read_table

VERSION = 1  # bump when the questions written from the same corpus, seed and n change

TEMPLATES = ("line_item", "financebench", "how_much", "change", "ratio", "text_figure")
NEGATIVE_TYPES = ("other_period", "other_line_item", "other_company")
NEGATIVES_PER_TYPE = 5
# the statement a metric's line item is read from (the FinanceBench-like template names it)
_STATEMENT = {
    **dict.fromkeys(
        ("revenue", "cost_of_revenue", "gross_profit", "operating_income", "net_income", "eps",
         "income_tax", "interest_expense", "research_development", "sga", "restructuring",
         "depreciation_amortization", "ebitda"),
        "income statement",
    ),
    **dict.fromkeys(
        ("total_assets", "total_liabilities", "shareholders_equity", "debt", "cash", "inventory",
         "accounts_receivable", "accounts_payable", "working_capital", "goodwill"),
        "balance sheet",
    ),
    **dict.fromkeys(
        ("capital_expenditure", "operating_cash_flow", "free_cash_flow", "dividends",
         "share_repurchase"),
        "cash flow statement",
    ),
}  # fmt: skip
_UNIT_WORDS = {"thousands": "thousands", "millions": "millions", "billions": "billions"}
_SENTENCE = re.compile(r"(?<=[.;])\s+")
# a stated figure: "$32.8 billion", "$1,234", "5.2 million", "14%"
_AMOUNT = re.compile(
    r"\$\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s?(?:million|billion|%|percent)", re.I
)
_PROSE_YEAR = re.compile(r"\b(?:fiscal(?: year)?\s+|fy\s?)?((?:19[89]\d|20[0-3]\d))\b", re.I)
MAX_SENTENCE_CHARS = 300
MIN_FIGURE_DIGITS = 4  # a shorter figure ("12", "3.5") is too common to identify a page

Generator = Callable[[list[Passage]], Iterable[dict]]


@dataclass(frozen=True)
class SyntheticQuestion:
    """One synthesised question: its text, where it came from and what answers it."""

    qid: str
    text: str
    template: str
    company: str
    source: str  # the page it was written from
    metric: str = ""
    period: str = ""
    relevant: tuple[str, ...] = ()
    negatives: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["relevant"] = list(self.relevant)
        out["negatives"] = {k: list(v) for k, v in self.negatives.items()}
        return out


@dataclass
class Synthesis:
    """Synthesised questions over one corpus, and what was generated."""

    name: str
    passages: dict[str, Passage]
    questions: list[SyntheticQuestion]
    candidates: int = 0  # questions the templates could write before sampling
    difficulty: dict | None = None
    named_share: float = 1.0  # the share of drawn questions asked to name their company
    notes: list[str] = field(default_factory=list)  # fewer questions than asked, interim wording
    recipe: dict = field(default_factory=dict)  # what wrote them: ``synthesis_recipe``'s fields

    def dataset(self, groups: Iterable[str] | None = None) -> Dataset:
        """A ``Dataset`` over the same passages with the synthetic questions (group = company);
        ``groups`` keeps only questions of those companies."""
        keep = None if groups is None else set(groups)
        qs = [q for q in self.questions if keep is None or q.company in keep]
        return Dataset(
            name=self.name,
            queries={
                q.qid: Query(qid=q.qid, text=q.text, group=q.company, company=q.company) for q in qs
            },
            passages=self.passages,
            qrels={q.qid: dict.fromkeys(q.relevant, 1) for q in qs},
        )

    def report(self, sample: int = 12, seed: int = 0) -> dict:
        """Counts per template and company, a sample to read and the share of questions whose
        source page BM25 ranks first (too easy) or outside the top 100 (unreachable)."""
        per_template: dict[str, int] = defaultdict(int)
        per_company: dict[str, int] = defaultdict(int)
        negatives: dict[str, int] = defaultdict(int)
        for q in self.questions:
            per_template[q.template] += 1
            per_company[q.company] += 1
            for kind, pids in q.negatives.items():
                negatives[kind] += bool(pids)
        rng = random.Random(seed)
        shown = rng.sample(self.questions, min(sample, len(self.questions)))
        return {
            "name": self.name,
            "n_questions": len(self.questions),
            "n_candidates": self.candidates,
            "n_companies": len(per_company),
            "named_share": self.named_share,
            "notes": list(self.notes),
            "per_template": dict(sorted(per_template.items())),
            "per_company": dict(sorted(per_company.items())),
            "per_filing_kind": dict(sorted(_filing_kinds(self.questions, self.passages).items())),
            "questions_with_negatives": dict(sorted(negatives.items())),
            "mean_relevant": (
                sum(len(q.relevant) for q in self.questions) / len(self.questions)
                if self.questions
                else 0.0
            ),
            "difficulty": self.difficulty,
            "sample": [
                {"qid": q.qid, "text": q.text, "template": q.template, "source": q.source}
                for q in shown
            ],
        }

    def measure_difficulty(self, index, depth: int = 100) -> dict:
        """Where BM25 (``index``: a :class:`~fincrowd_ltr.retrieval.bm25.BM25Index` over the same
        passages) ranks each question's source page: first, within ``depth``, or beyond."""
        first = reachable = 0
        for q in self.questions:
            pids, _ = index.search(q.text, depth)
            first += bool(pids) and pids[0] in q.relevant
            reachable += any(p in q.relevant for p in pids)
        n = max(len(self.questions), 1)
        self.difficulty = {
            "depth": depth,
            "bm25_first_share": first / n,
            "unreachable_share": 1 - reachable / n,
            "n_questions": len(self.questions),
        }
        return self.difficulty


@dataclass(frozen=True)
class _Item:
    """A template's raw material before sampling."""

    template: str
    company: str
    source: str
    metric: str
    period: str
    text: str
    relevant: frozenset[str]
    figure: str = ""  # the figure as printed, when one figure answers the question
    unnamed: str = ""  # the same question about "the" company's figure ("" when none)


def synthesize(
    corpus: Dataset | Iterable[Passage],
    n: int = 500,
    seed: int = 0,
    *,
    companies: Iterable[str] | None = None,
    templates: Iterable[str] = TEMPLATES,
    generator: Generator | None = None,
    name: str = "synthetic",
    extractor: FieldExtractor | None = None,
    named_share: float = 1.0,
    line_items: str = DEFAULT_LINE_ITEMS,
) -> Synthesis:
    """Synthesise ``n`` training questions from a corpus's pages, deterministically.

    Args:
        corpus: A ``Dataset`` (only its passages are read) or passages.
        n: Questions to keep, drawn round-robin over companies so each company contributes.
        seed: Seed of the draw and of the phrasing.
        companies: Synthesise only from these companies' filings (e.g. the training folds'
            companies); default every company.
        templates: Which of ``TEMPLATES`` to use.
        generator: Your own question writer (an LLM, say): called with the passages, it returns
            records ``{"text", "relevant": [pids], "company"?, "source"?, "template"?}`` that are
            checked and added to the templates' questions.
        name: The synthetic dataset's name.
        extractor: The field extractor of these passages, when the caller has built it already
            (``FieldExtractor.from_passages``; built here otherwise).
        named_share: The share of questions that name their company ("What was Acme's revenue
            in 2019?"); the others ask about "the" company's figure ("What was the revenue in
            2019?"), as the questions of a corpus of one company's pages often do. The same
            questions are drawn whatever the share: only a drawn question's wording (and its
            other-company negatives) changes, so 1.0 (the default) writes exactly the questions
            it always wrote.
        line_items: ``"any"`` (default): every table row with a specific label ("Stock-based
            compensation", not "Total"), asked about by its own label where no metric of the field
            extractor names it (metric ``row:<label>``); ``"known"``: only rows whose label the
            extractor maps to one of its metrics (the default before 2026-12-04's evening).
    """
    _check_options(named_share, line_items)
    passages = dict(corpus.passages) if isinstance(corpus, Dataset) else _by_id(corpus)
    if not passages:
        raise DataError("synthesize: the corpus has no passages")
    unknown = sorted(set(templates) - set(TEMPLATES))
    if unknown:
        raise DataError(f"synthesize: unknown template(s) {unknown}; choose from {TEMPLATES}")
    keep = None if companies is None else set(companies)
    pool = [p for p in passages.values() if keep is None or page_unit(p) in keep]
    if extractor is None:
        extractor = FieldExtractor.from_passages(passages.values())
    tables = _tables(pool, extractor, any_label=line_items == "any")
    index = _RowIndex(passages, tables, pool)
    items = _table_items(passages, tables, index, set(templates), seed)
    if "text_figure" in templates:
        items += _text_items(pool, tables, extractor, seed)
    picked = [index.expand(item) for item in _draw(items, n, seed)]
    questions = _questions(picked, index, named_share, seed, extractor)
    interim = _interim_wording(questions, passages)
    if generator is not None:
        questions += _generated(generator, pool, passages, len(questions))
    notes = _shortfall(questions, n, len(items), pool) + interim
    recipe = synthesis_recipe(
        n, seed, companies=keep, templates=templates, generator=generator,
        named_share=named_share, line_items=line_items,
    )  # fmt: skip
    return Synthesis(
        name, passages, questions, candidates=len(items), named_share=named_share, notes=notes,
        recipe=recipe,
    )  # fmt: skip


def synthesis_recipe(
    n: int,
    seed: int,
    *,
    companies: Iterable[str] | None = None,
    templates: Iterable[str] = TEMPLATES,
    generator: Generator | None = None,
    named_share: float = 1.0,
    line_items: str = DEFAULT_LINE_ITEMS,
) -> dict:
    """What :func:`synthesize` called with these arguments records as having written its
    questions (``Synthesis.recipe``): two syntheses of one corpus with equal recipes wrote the
    same questions."""
    return {
        "n": n,
        "seed": seed,
        "companies": None if companies is None else sorted(companies),
        "templates": sorted(templates),
        "generator": generator is not None,
        "named_share": named_share,
        "line_items": line_items,
    }


def _check_options(named_share: float, line_items: str) -> None:
    if line_items not in LINE_ITEMS:
        raise DataError(f"synthesize: line_items must be one of {LINE_ITEMS}, got {line_items!r}")
    if isinstance(named_share, str) or not 0.0 <= named_share <= 1.0:
        raise DataError(
            f"synthesize: named_share must be within [0, 1], got {named_share!r} (for 'auto', "
            "fincrowd_ltr.synthesize or named_share_of reads it from your questions)"
        )


def _tables(
    pool: list[Passage], extractor: FieldExtractor, any_label: bool
) -> dict[str, PageTable]:
    """The statement rows of every page that prints any (row passages read under their
    table's header row)."""
    memo: dict[str, str | None] = {}
    headers = _row_headers(pool)
    return {
        p.pid: t
        for p in pool
        if (t := read_table(p.pid, headers.get(p.pid, "") + p.text, extractor, memo, any_label))
        is not None
    }


def _questions(
    picked: list[_Item], index: _RowIndex, named_share: float, seed: int,
    extractor: FieldExtractor,
) -> list[SyntheticQuestion]:  # fmt: skip
    """The drawn items as questions, with their typed negatives and wording (named or not)."""
    rng = random.Random(seed + 2)
    questions = []
    for i, item in enumerate(picked):
        negatives = index.negatives(item, rng)
        text = item.text
        if not _names_company(named_share, seed, item, extractor):
            text = item.unnamed  # nothing in it rules out another company's page
            negatives = {k: v for k, v in negatives.items() if k != "other_company"}
        questions.append(
            SyntheticQuestion(
                qid=f"syn-{i:06d}",
                text=text,
                template=item.template,
                company=item.company,
                source=item.source,
                metric=item.metric,
                period=item.period,
                relevant=tuple(sorted(item.relevant)),
                negatives=negatives,
            )
        )
    return questions


def _shortfall(
    questions: list[SyntheticQuestion], n: int, found: int, pool: list[Passage]
) -> list[str]:
    """Why fewer than ``n`` questions were written, when so."""
    notes = []
    if len(questions) < n:
        notes.append(
            f"{len(questions)} of the {n} questions asked for: the templates found {found} "
            "(statement-table rows with a line item, period columns and figures; sentences "
            "stating a figure for a period)"
            + (
                f", {found - len(questions)} of them repeating another question of the same "
                "company word for word (kept once)"
                if found > len(questions)
                else ""
            )
        )
    if pool and not any(_company(p) for p in pool):
        notes.append(
            "no page names its company or document (corpus metadata 'company' or 'document', "
            "or a title): questions are written per company, so none could be"
        )
    return notes


# A page's doc_type, lowercased without spaces, dashes, underscores or slashes, by prefix (not
# retrieval.filings.filing_kind, which scores any type it does not know as a release).
_KINDS = (
    ("annual", ("10k", "20f", "40f", "annual")),
    ("quarterly", ("10q",)),
    ("release", ("8k", "6k", "earnings", "release", "pressrelease")),
)
_INTERIM = ("quarterly", "release")


def filing_kind_of(doc_type: str | None) -> str:
    """``annual`` (10-K, 10-K/A, 20-F, annual report), ``quarterly`` (10-Q), ``release`` (8-K,
    6-K, earnings or press release), ``other`` (any other type) or ``unknown`` (none given)."""
    if not doc_type:
        return "unknown"
    name = re.sub(r"[\s\-_/]", "", doc_type.lower())
    return next((kind for kind, starts in _KINDS if name.startswith(starts)), "other")


def _filing_kinds(questions: list[SyntheticQuestion], passages: dict[str, Passage]) -> Counter:
    """Questions per filing kind of their source page (:func:`filing_kind_of`)."""
    return Counter(filing_kind_of(passages[q.source].doc_type) for q in questions)


def _interim_wording(questions: list[SyntheticQuestion], passages: dict[str, Passage]) -> list[str]:
    """A note when the templates' questions come from interim filings' pages: they name the
    column's year, not its quarter (a known limitation, NOTES.md)."""
    interim = sum(k for kind, k in _filing_kinds(questions, passages).items() if kind in _INTERIM)
    if not interim:
        return []
    return [
        f"{interim} of the templates' {len(questions)} questions come from interim filings' "
        "pages (10-Q, 8-K, earnings releases, by the pages' doc_type) and name only the "
        "column's year ('in fiscal 2023'), even where it is a quarter or a year to date: they "
        "teach that such a page answers a question about the year (a wording by quarter was "
        "measured worse, NOTES.md); where your corpus is mostly interim filings, read the "
        "sample before training on them"
    ]


def named_share_of(questions: Iterable[str], extractor: FieldExtractor) -> float:
    """The share of ``questions`` (texts) in which ``extractor`` reads a company: the
    ``named_share`` that makes synthetic questions name their company as often as yours do
    (FinanceBench's nearly all do, FinQA's rarely)."""
    texts = list(questions)
    if not texts:
        raise DataError(
            "named_share 'auto' reads the share from your questions' texts and none were given "
            "(the dataset has no questions): give a share in [0, 1]"
        )
    return sum(bool(extractor.extract_query(t).entity) for t in texts) / len(texts)


def _by_id(passages: Iterable[Passage]) -> dict[str, Passage]:
    out: dict[str, Passage] = {}
    for p in passages:
        if p.pid in out:
            raise DataError(f"synthesize: duplicate passage id {p.pid!r}")
        out[p.pid] = p
    return out


def _identifying(figure: str) -> bool:
    """Whether a figure has digits enough to identify the pages that print it."""
    return sum(ch.isdigit() for ch in figure) >= MIN_FIGURE_DIGITS


_company = page_unit  # the unit questions are grouped by


def _row_headers(pool: list[Passage]) -> dict[str, str]:
    """For corpora that cut tables into one passage per row (header row first, as FinQA's and
    many BEIR conversions do): each row passage's header row text and a line break. A table is
    the table passages of one document at one position, in id order."""
    tables: dict[tuple, list[Passage]] = defaultdict(list)
    for p in pool:
        if p.is_table and p.document is not None and "\n" not in p.text.strip():
            tables[(p.document, p.position)].append(p)
    out = {}
    for rows in tables.values():
        if len(rows) < 2:
            continue
        rows.sort(key=lambda p: _natural(p.pid))
        for row in rows[1:]:
            out[row.pid] = rows[0].text + "\n"
    return out


def _natural(pid: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", pid)]


def _of(p: Passage) -> str:
    """Whose figure a question asks for: ``"Acme's "``, or ``"the "`` without a company."""
    return f"{p.company}'s " if p.company else "the "


def _names_company(share: float, seed: int, item: _Item, extractor: FieldExtractor) -> bool:
    """Whether a drawn question keeps its company's name: ``share`` of them, each drawn from its
    own seed (so that the draw of questions, their negatives and their wording otherwise stay
    as they are), and always where no wording without it exists or where that wording still
    names a company (a row label such as "net income attributable to Acme")."""
    if share >= 1.0 or not item.unnamed:
        return True
    if random.Random(f"{seed}/{item.source}/{item.text}").random() < share:
        return True
    return bool(extractor.extract_query(item.unnamed).entity)


def _period_words(year: str, rng: random.Random) -> str:
    return rng.choice((f"FY{year}", f"fiscal {year}", f"fiscal year {year}", year))


def _display(label: str) -> str:
    """A printed label inside a sentence: ``Net sales`` -> ``net sales``, ``EBITDA`` kept."""
    return label[0].lower() + label[1:] if label[1:2].islower() else label


class _RowIndex:
    """Which pages print which statement rows: relevance (same company, metric, period and
    figure) and the typed negatives of a question."""

    def __init__(
        self, passages: dict[str, Passage], tables: dict[str, PageTable], pool: list[Passage]
    ) -> None:
        self.passages, self.tables = passages, tables
        self.pages_of: dict[str, list[str]] = defaultdict(list)  # company -> every page
        for p in pool:
            self.pages_of[_company(p)].append(p.pid)
        self.stated: dict[tuple, set[str]] = defaultdict(set)
        self.rows_of: dict[tuple, set[str]] = defaultdict(set)  # (company, metric) -> pages
        self.by_metric_period: dict[tuple, set[str]] = defaultdict(set)
        self.documents: dict[str, set[str]] = defaultdict(set)
        for pid, table in tables.items():
            company = _company(passages[pid])
            self.documents[passages[pid].document or ""].add(pid)
            for row in table.rows:
                self.rows_of[(company, row.metric)].add(pid)
                for period, value in zip(table.periods, row.values, strict=True):
                    self.stated[(company, row.metric, period, figure_key(value))].add(pid)
                    self.by_metric_period[(row.metric, period)].add(pid)

    def expand(self, item: _Item) -> _Item:
        """``item`` with every page of its company that prints its figure next to the metric's
        line item (a row asked about by its label: that label) added to the relevant pages (a
        table the row reader cannot read, a prose restatement): such a page is never trained as
        a negative."""
        if not _identifying(item.figure):
            return item
        if item.metric.startswith(LABEL_METRIC):
            # the label as words, then the figure itself as a whole number within a row's reach
            row = re.compile(
                rf"(?<![\w&]){re.escape(item.metric[len(LABEL_METRIC) :])}(?![\w&])"
                rf"[^\d]{{0,{ROW_REACH}}}?(?<![\d,.]){re.escape(item.figure)}(?![\d,])"
            )

            def prints_row(text: str) -> bool:
                return bool(row.search(" ".join(text.lower().split())))
        else:
            metric = frozenset({item.metric})

            def prints_row(text: str) -> bool:
                return has_metric_row(text, metric)

        found = {
            p
            for p in self.pages_of.get(item.company, ())
            if item.figure in self.passages[p].text and prints_row(self.passages[p].text)
        }
        return dataclasses.replace(item, relevant=item.relevant | found)

    def negatives(self, item: _Item, rng: random.Random) -> dict[str, tuple[str, ...]]:
        """Pages that match the question's topic but violate one constraint, by type (at most
        ``NEGATIVES_PER_TYPE`` each)."""
        if item.source not in self.tables:
            return {}
        company, metric, period = item.company, item.metric, item.period
        document = self.passages[item.source].document or ""
        # a page that prints an identifying answer under another label is no safe negative
        answer = item.figure if _identifying(item.figure) else None
        found = {
            "other_period": [
                p for p in self.rows_of[(company, metric)] if period not in self.tables[p].periods
            ],
            "other_line_item": [
                p
                for p in self.documents.get(document, ())
                if p not in item.relevant
                and all(r.metric != metric for r in self.tables[p].rows)
                and not (answer and answer in self.passages[p].text)
            ],
            "other_company": [
                p
                for p in self.by_metric_period[(metric, period)]
                if _company(self.passages[p]) != company
            ],
        }
        return {
            kind: tuple(sorted(rng.sample(sorted(pids), min(NEGATIVES_PER_TYPE, len(pids)))))
            for kind, pids in found.items()
        }


def _table_items(
    passages: dict[str, Passage],
    tables: dict[str, PageTable],
    index: _RowIndex,
    templates: set[str],
    seed: int,
) -> list[_Item]:
    """Questions of every statement row (first column's period), with their relevant pages."""
    rng = random.Random(seed)
    items = []
    for pid in sorted(tables):
        table, page = tables[pid], passages[pid]
        company, of = _company(page), _of(page)
        if not company:
            continue
        unit = _unit(page.text)
        for k, row in enumerate(table.rows):
            period, value = table.periods[0], figure_key(row.values[0])
            relevant = frozenset(index.stated[(company, row.metric, period, value)])
            item = _phrase(rng, templates, page.company or "", row.label, row.metric, period, unit)
            if item is not None:
                template, text, unnamed = item
                items.append(
                    _Item(template, company, pid, row.metric, period, text, relevant,
                          row.values[0], unnamed)
                )  # fmt: skip
            if "change" in templates and len(table.periods) > 1:
                before = table.periods[1]
                also = index.stated[(company, row.metric, before, figure_key(row.values[1]))]
                # from the earlier column to the later, whichever way the table prints them
                start, end = sorted((before, period))
                rest = (
                    f"{_display(row.label)} change from "
                    f"{_period_words(start, rng)} to {_period_words(end, rng)}?"
                )
                both = (relevant & also) | {pid}
                items.append(
                    _Item("change", company, pid, row.metric, period, f"By how much did {of}{rest}",
                          both, unnamed=_without(page.company, f"By how much did the {rest}"))
                )  # fmt: skip
            if "ratio" in templates and k + 1 < len(table.rows):
                other = table.rows[k + 1]
                if other.metric != row.metric:
                    rest = (
                        f"ratio of {_display(row.label)} to "
                        f"{_display(other.label)} in {_period_words(period, rng)}?"
                    )
                    unnamed = _without(page.company, f"What was the {rest}")
                    items.append(
                        _Item("ratio", company, pid, row.metric, period, f"What was {of}{rest}",
                              frozenset({pid}), unnamed=unnamed)
                    )  # fmt: skip
    return items


def _phrase(rng, templates, company, label, metric, period, unit) -> tuple[str, str, str] | None:
    """One of the single-row templates, chosen at random among those enabled (``company``:
    the name to write, ``""`` when the corpus names none): the template, the question, and the
    same question without the company (``""`` when the corpus names none)."""
    choices = [t for t in ("line_item", "financebench", "how_much") if t in templates]
    if not choices:
        return None
    template = rng.choice(choices)
    item, when = _display(label), _period_words(period, rng)
    if template == "line_item":
        text = f"What was {{}}{item} in {when}?"
        return (
            template,
            text.format(f"{company}'s " if company else "the "),
            _without(company, text.format("the ")),
        )
    if template == "how_much":
        text = f"How much {item} did {{}} report for {when}?"
        return (
            template,
            text.format(company or "the company"),
            _without(company, text.format("the company")),
        )
    scale = f" (in USD {unit})" if unit else ""
    statement = _STATEMENT.get(metric, "financial statements")
    text = f"What is the FY{period} {item}{scale}{{}}? Please base your answer on the {statement}."
    return (
        template,
        text.format(f" for {company}" if company else ""),
        _without(company, text.format("")),
    )


def _without(company: str | None, text: str) -> str:
    """The company-less wording, where the corpus names a company (else there is no other)."""
    return text if company else ""


def _unit(text: str) -> str:
    lowered = text[:600].lower()
    for unit, forms in V.UNITS.items():
        if unit in _UNIT_WORDS and any(re.search(form, lowered) for form in forms):
            return _UNIT_WORDS[unit]
    return ""


def _text_items(
    pool: list[Passage], tables: dict[str, PageTable], extractor: FieldExtractor, seed: int
) -> list[_Item]:
    """Questions from prose sentences that state one metric's figure for one year."""
    rng = random.Random(seed + 1)
    items = []
    for page in sorted(pool, key=lambda p: p.pid):
        company = _company(page)
        if not company or page.pid in tables:
            continue
        for sentence in _SENTENCE.split(" ".join(page.text.split())):
            if len(sentence) > MAX_SENTENCE_CHARS or not _AMOUNT.search(sentence):
                continue
            years = set(_PROSE_YEAR.findall(sentence))
            if len(years) != 1:
                continue
            lowered = sentence.lower()
            amount = _AMOUNT.search(sentence)
            metrics = extractor.extract_query(sentence).metric
            if len(metrics) != 1:
                continue
            metric = next(iter(metrics))
            surface = _surface(metric, lowered)
            if surface is None:
                continue
            year = years.pop()
            rest = f"{surface} in {_period_words(year, rng)}?"
            figure = re.sub(r"^\$\s?|\s?(?:million|billion|%|percent)$", "", amount.group(0))
            items.append(
                _Item("text_figure", company, page.pid, metric, year, f"What was {_of(page)}{rest}",
                      frozenset({page.pid}), figure, _without(page.company, f"What was the {rest}"))
            )  # fmt: skip
            break  # one question per page
    return items


def _surface(metric: str, lowered: str) -> str | None:
    for form in V.METRICS.get(metric, []):
        m = re.search(rf"(?<![\w&]){form}(?![\w&])", lowered)
        if m:
            return m.group(0)
    return None


def _draw(items: list[_Item], n: int, seed: int) -> list[_Item]:
    """``n`` items round-robin over companies, and within a company over templates (each
    queue shuffled with ``seed``); duplicate texts of a company are kept once."""
    rng = random.Random(seed)
    queues: dict[str, dict[str, list[_Item]]] = defaultdict(lambda: defaultdict(list))
    seen: set[tuple[str, str]] = set()
    for item in items:
        if (item.company, item.text) not in seen:
            seen.add((item.company, item.text))
            queues[item.company][item.template].append(item)
    cycles = []
    for i, company in enumerate(sorted(queues)):
        per_template = [queues[company][t] for t in sorted(queues[company])]
        for queue in per_template:
            rng.shuffle(queue)
        cycles.append(_Cycle(per_template, start=i))  # companies start on different templates
    out: list[_Item] = []
    while len(out) < n and any(c.left for c in cycles):
        for cycle in cycles:
            if cycle.left and len(out) < n:
                out.append(cycle.next())
    return out


class _Cycle:
    """Takes items from several queues in turn."""

    def __init__(self, queues: list[list[_Item]], start: int = 0) -> None:
        self.queues, self.turn = queues, start

    @property
    def left(self) -> bool:
        return any(self.queues)

    def next(self) -> _Item:
        while not self.queues[self.turn % len(self.queues)]:
            self.turn += 1
        item = self.queues[self.turn % len(self.queues)].pop()
        self.turn += 1
        return item


def _generated(
    generator: Generator, pool: list[Passage], passages: dict[str, Passage], start: int
) -> list[SyntheticQuestion]:
    """A user generator's records, checked (text, relevant passage ids that exist)."""
    out = []
    for i, record in enumerate(generator(pool)):
        where = f"generator record {i}"
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"synthesize: {where}: field 'text' must be a non-empty string")
        relevant = record.get("relevant")
        if not isinstance(relevant, list | tuple) or not relevant:
            raise DataError(f"synthesize: {where}: field 'relevant' must list passage ids")
        missing = [p for p in relevant if p not in passages]
        if missing:
            raise DataError(f"synthesize: {where}: field 'relevant' names unknown ids {missing}")
        source = record.get("source", relevant[0])
        if not isinstance(source, str) or source not in passages:
            raise DataError(f"synthesize: {where}: field 'source' names no passage: {source!r}")
        company = record.get("company") or _company(passages[source])
        out.append(
            SyntheticQuestion(
                qid=f"syn-{start + i:06d}",
                text=text.strip(),
                template=str(record.get("template", "generator")),
                company=company,
                source=source,
                relevant=tuple(sorted(relevant)),
            )
        )
    return out
