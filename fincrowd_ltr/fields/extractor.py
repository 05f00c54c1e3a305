"""Deterministic extraction of typed financial fields from queries and passages.

Seven fields are extracted: entity, metric, period, segment, table scope (statement type),
unit and currency. Each is a set of canonical values; an empty set means *unknown* (never a
conflict). Passage metadata (a filing's company and fiscal period) is used when present, the
text otherwise. Periods are ``"2018"`` (a fiscal or calendar year) or ``"2018Q2"``.

Text is read as PDF text layers print it (:func:`normalise`): words hyphenated across lines are
joined, footnote digits touching a word are dropped, accounting phrases printed without their
space are split ("NetIncome", "cashflow"), and every run of whitespace becomes one space, so that
phrases broken by line breaks match. In passages, generic segment words ("consumer") and a lone
region name count only when the text speaks of segments or regions; questions keep them.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from fincrowd_ltr.data.metadata import normalise_period, periods_of
from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.fields import vocabulary as V
from fincrowd_ltr.fields.matcher import TextIndex, TriggerMatcher
from fincrowd_ltr.fields.registrants import looks_like_ticker, registrant_names

FIELD_NAMES = ("entity", "metric", "period", "segment", "table_scope", "unit", "currency")
MIN_YEAR, MAX_YEAR = 1990, 2039
MIN_ALIAS_CHARS = 3  # shorter tickers (BA, KO, V) are too ambiguous to match in text

_QUARTER_WORDS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "1st": 1,
    "2nd": 2,
    "3rd": 3,
    "4th": 4,
}
_YEAR = r"(?:19[89]\d|20[0-3]\d)"
_FY = re.compile(r"\bfy\s?'?(\d{4}|\d{2})\b|\bfiscal(?: year)?\s+(\d{4})\b", re.I)
_QUARTER = re.compile(
    rf"\bq([1-4])\s*(?:of\s+)?(?:the\s+)?(?:fy|fiscal(?: year)?)?\s*'?({_YEAR}|\d{{2}})\b"
    rf"|\b(?:fy\s?)?({_YEAR})\s*q([1-4])\b"
    rf"|\b([1-4])q\s?'?(\d{{2}}|{_YEAR})\b"
    rf"|\b(first|second|third|fourth|1st|2nd|3rd|4th) (?:fiscal )?quarter (?:of |ended \w+ \d+, )?(?:fiscal )?(?:year )?({_YEAR})\b"
    rf"|\b(?:fiscal (?:year )?|fy ?)?({_YEAR}) (first|second|third|fourth|1st|2nd|3rd|4th) (?:fiscal )?quarter\b",
    re.I,
)
# month/day/year; a two-digit year only after a two-digit day (6/30/19, not 1/2/10)
_DATE = re.compile(
    r"(?<![\d/.])(?:0?[1-9]|1[0-2])/(?:(?:0?[1-9]|[12]\d|3[01])/(\d{4})"
    r"|(?:0[1-9]|[12]\d|3[01])/(\d{2}))(?![\d/])"
)
_YEAR_RANGE = re.compile(
    rf"(?:fy\s?)?({_YEAR})\s*(?:-|–|to|through)\s*(?:fy\s?)?({_YEAR})\b"
    rf"|between (?:fy\s?)?({_YEAR}) and (?:fy\s?)?({_YEAR})\b",
    re.I,
)
_BARE_YEAR = re.compile(rf"(?<![\d$.,/-])({_YEAR})(?![\d%])")
_SEGMENT_WORD = re.compile(r" segments?\b")
# the up-to-four words before " segment": searched back from each mention, not over the page
_SEGMENT_NAME = re.compile(r"(?<![\w'])(?:(?:[a-z][\w&\-]*|&) ){0,3}[a-z][\w&\-]*$")
_NAME_REACH = 160
_SEGMENT_STOP = {
    "the",
    "each",
    "our",
    "all",
    "other",
    "this",
    "that",
    "its",
    "a",
    "one",
    "which",
    "by",
    "per",
    "of",
    "for",
    "in",
    "from",
    "every",
    "two",
    "three",
    "four",
    "five",
    "same",
    "any",
    "to",
    "at",
    "on",
    "as",
    "with",
    "increase",
    "decrease",
    "change",
    "total",
    "single",
    "their",
    "these",
    "those",
    "my",
}
_SEGMENT_QUALIFIERS = {
    "reportable",
    "reporting",
    "operating",
    "business",
    "geographic",
    "geographical",
    "segment",
    "s",
}
_NAME_JOINERS = frozenset(("&", "and", "of"))
# words that describe segments rather than name them (harvested names must not contain one;
# a phrase's name starts after its last _SEGMENT_STOP word, so those never reach this check)
_NOT_NAMES = frozenset((
    "and", "or", "between", "among", "into", "have", "has", "been", "be", "is", "are", "was",
    "were", "we", "us", "does", "did", "not", "expect", "such", "how", "following", "respective",
    "multiple", "new", "annual", "contents", "key", "primary", "historical", "applicable",
    "revised", "reorganized", "largest", "smaller", "larger", "both", "changes", "changed",
    "reviews", "compares", "summarizes", "summarized", "table", "tables", "discussion", "below",
    "above", "results", "charged", "organized", "reported", "reports", "increased", "decreased",
    "required", "favorable", "unfavorable", "existing", "remaining", "current", "prior",
    "period", "adjusted", "updated", "particular", "more", "most", "less", "various", "certain",
    "several", "individual", "separate", "reportable", "operating", "business", "segment",
    "segments", "company", "income", "assets", "information", "detailed", "determining",
    "corporation", "six", "seven", "eight", "nine", "ten", "second", "third", "first", "within",
    "across", "under", "over", "include", "includes", "included", "including", "consists",
    "comprised",
))  # fmt: skip
_HYPHENATED = re.compile(r"(?<=[A-Za-z])-[ \t]*\n\s*(?=[a-z])")
_FOOTNOTE = re.compile(r"(?<=[a-z]{3})\d{1,2}\b")  # "revenue1" -> "revenue"; years have 4 digits
_DIGITS = frozenset("0123456789")
_FOOTNOTE_ANY = re.compile(r"[a-z]{3}\d{1,2}(?![a-z0-9])")
# accounting phrases a PDF text layer may print without their space ("NetIncome", "cashflow")
_MODIFIERS = ("net", "total", "gross", "operating", "cash", "free", "capital", "long", "short")
_HEADS = (
    "income", "revenue", "revenues", "sales", "profit", "margin", "assets", "liabilities",
    "equity", "flow", "flows", "debt", "expenditure", "expenditures", "term", "earnings", "loss",
)  # fmt: skip
_RUN_TOGETHER = re.compile(rf"\b({'|'.join(_MODIFIERS)})({'|'.join(_HEADS)})\b")
_JOINED = frozenset(m + h for m in _MODIFIERS for h in _HEADS)
_SEGMENT_CONTEXT = ("segment", "geographic", "region")
_GEOGRAPHIC = frozenset((
    "americas", "north_america", "latin_america", "united_states", "europe", "asia_pacific",
    "china", "japan",
))  # fmt: skip
_GENERIC_SEGMENTS = frozenset(
    ("consumer", "enterprise", "data_center", "gaming", "healthcare", "industrial")
)


@functools.lru_cache(maxsize=1)
def extractor_fingerprint() -> str:
    """The extractor version plus a hash of its code and vocabulary: cache keys change whenever a
    pattern does, even when the version was not bumped."""
    here = Path(__file__).parent
    digest = hashlib.sha1()
    for name in ("extractor.py", "vocabulary.py", "matcher.py", "registrants.py"):
        digest.update((here / name).read_bytes())
    return f"{V.EXTRACTOR_VERSION}-{digest.hexdigest()[:12]}"


def normalise(text: str) -> str:
    """Words hyphenated across lines joined, whitespace runs made one space (case kept)."""
    if "-\n" in text or "- \n" in text or "-\t" in text:
        text = _HYPHENATED.sub("", text)
    return " ".join(text.split())


def read_text(normalised: str) -> tuple[str, TextIndex]:
    """The lower-cased text the field patterns read, and its word index: ``normalised`` (see
    :func:`normalise`) with footnote digits dropped and run-together phrases split (checked on the
    words first: rare)."""
    lowered = normalised.lower()
    words = TextIndex(lowered)
    footnotes = any(w[-1] in _DIGITS and w[:3].isalpha() for w in words.words)
    if not _JOINED.isdisjoint(words.words) or (footnotes and _FOOTNOTE_ANY.search(lowered)):
        lowered = _RUN_TOGETHER.sub(r"\1 \2", _FOOTNOTE.sub("", lowered))
        words = TextIndex(lowered)
    return lowered, words


def _passage_segments(found: frozenset[str], lowered: str) -> frozenset[str]:
    """Segments of a passage: generic words count only in a text about segments or regions, and a
    lone region name only there too (a breakdown names two or more)."""
    if not found or any(c in lowered for c in _SEGMENT_CONTEXT):
        return found
    kept = found - _GENERIC_SEGMENTS
    regions = kept & _GEOGRAPHIC
    return kept - regions if len(regions) < 2 else kept


_TABLE_LINE = re.compile(r"^[\s$(€£¥]*-?[\d,.]+\)?%?\s*$")


def _year(text: str) -> int | None:
    value = int(text)
    if value < 100:
        value += 2000 if value < 50 else 1900
    return value if MIN_YEAR <= value <= MAX_YEAR else None


@dataclass(frozen=True)
class FinancialFields:
    """The typed fields of one query or passage; an empty set means unknown."""

    entity: frozenset[str] = frozenset()
    metric: frozenset[str] = frozenset()
    period: frozenset[str] = frozenset()
    segment: frozenset[str] = frozenset()
    table_scope: frozenset[str] = frozenset()
    unit: frozenset[str] = frozenset()
    currency: frozenset[str] = frozenset()
    is_table: bool | None = None

    def observed(self) -> tuple[str, ...]:
        """Names of the fields that are observed (non-empty)."""
        return tuple(name for name in FIELD_NAMES if getattr(self, name))

    def as_dict(self) -> dict:
        """JSON-friendly form (sorted lists)."""
        out = {f.name: sorted(getattr(self, f.name)) for f in fields(self) if f.name != "is_table"}
        out["is_table"] = self.is_table
        return out


def looks_like_table(text: str, min_share: float = 0.3) -> bool:
    """Layout heuristic for extracted PDF text: many lines that are just numbers."""
    lines = list(filter(str.strip, text.splitlines()))
    if len(lines) < 8:
        return "|" in text and text.count("|") >= 4
    numeric = len(list(filter(_TABLE_LINE.match, lines)))
    return numeric / len(lines) >= min_share


class FieldExtractor:
    """Deterministic typed-field extractor.

    Args:
        companies: canonical company name -> aliases. Defaults to the shipped vocabulary; use
            :meth:`from_passages` to add the companies a corpus's metadata names.

    Example:
        >>> fx = FieldExtractor()
        >>> sorted(fx.extract_query("What is the FY2018 capex of 3M (USD millions)?").period)
        ['2018']
    """

    def __init__(
        self,
        companies: dict[str, list[str]] | None = None,
        segments: dict[str, list[str]] | None = None,
    ) -> None:
        self.companies = {k: list(v) for k, v in (companies or V.COMPANIES).items()}
        self.segment_names = {k: sorted(set(v)) for k, v in (segments or {}).items() if v}
        self._named: dict[frozenset[str], TriggerMatcher | None] = {}
        self._metric = TriggerMatcher(V.METRICS)
        self._segment = TriggerMatcher(V.SEGMENTS)
        self._statement = TriggerMatcher(V.STATEMENTS)
        self._unit = TriggerMatcher(V.UNITS)
        self._amount = [
            (name, _AmountForm(form))
            for name, forms in V.MAGNITUDE_AMOUNTS.items()
            for form in forms
        ]
        self._currency = TriggerMatcher(V.CURRENCIES)
        self._build_entity_patterns()

    @classmethod
    def from_passages(
        cls,
        passages: Iterable[Passage],
        companies: dict[str, list[str]] | None = None,
        segments: dict[str, list[str]] | None = None,
        texts: Mapping[str, Passage] | None = None,
        harvest: bool = True,
    ) -> FieldExtractor:
        """An extractor whose entity vocabulary also covers every company in the metadata (a
        company named by ticker under the name its own filings give it, the ticker an alias:
        :func:`~fincrowd_ltr.fields.registrants.registrant_names`), and whose segment names
        include those the corpus's own filings write as ``<name> segment`` (see
        :meth:`harvest_segments`), added to ``segments``. ``texts`` gives the texts of text-less
        ``passages`` (a page store's headers) for the ticker names; segments need the texts.
        ``harvest=False`` skips the segment names (a reader of entities, periods and metrics
        only: a pass over every page saved)."""
        passages = list(passages)
        vocab = {k: list(v) for k, v in (companies or V.COMPANIES).items()}
        known = {form.lower(): k for k, v in vocab.items() for form in (k, *v)}
        added: list[str] = []
        for passage in passages:
            name = None if passage.company is None else str(passage.company)
            if name and name.lower() not in known:
                added.append(name)
                known[name.lower()] = name
        named = registrant_names(passages, [n for n in added if looks_like_ticker(n)], texts)
        for name in added:  # a ticker the filings name: that name, the ticker an alias
            full = named.get(name)
            if full is None:
                vocab.setdefault(name, [])
            else:  # a company the vocabulary or the metadata names (as written there), or new
                vocab.setdefault(known.get(full.lower(), full), []).append(name.lower())
        extractor = cls(vocab, segments)
        if not harvest:
            return extractor
        return extractor.with_segment_names(extractor.harvest_segments(passages))

    def with_segment_names(self, segments: dict[str, list[str]]) -> FieldExtractor:
        """This extractor with more harvested segment names (:meth:`harvest_segments`); the
        same extractor when they add none."""
        named = {k: set(v) for k, v in self.segment_names.items()}
        for key, names in segments.items():
            named.setdefault(key, set()).update(names)
        merged = {k: sorted(v) for k, v in named.items()}
        return self if merged == self.segment_names else FieldExtractor(self.companies, merged)

    def harvest_segments(self, passages: Iterable[Passage]) -> dict[str, list[str]]:
        """Segment names each company's own filings write as ``<name> segment`` ("our Connected
        Fitness operating segment"), keyed by the canonical metadata company ("" without one).
        The names then count wherever that company's text (or a question about it) names them,
        without the word "segment" (a table row, "revenue of connected fitness").

        A name is kept when it reads as a name: in text that has capitals, every word of it is
        capitalised where it is written ("Pharmacy Services segment", not "the new segment");
        in all lower-case text, it has none of the common words that describe segments rather
        than name them (``_NOT_NAMES``: "multiple", "following", "reportable", "we").
        """
        found: dict[str, set[str]] = {}
        for passage in passages:
            text = passage.text
            if "egment" not in text and "EGMENT" not in text:
                continue
            names = self._named_in(normalise(text))
            if names:
                key = self.canonical_company(passage.company) if passage.company else ""
                found.setdefault(key, set()).update(names)
        return {k: sorted(v) for k, v in sorted(found.items())}

    def _named_in(self, normalised: str) -> set[str]:
        lowered = normalised.lower()
        cased = len(lowered) == len(normalised) and normalised != lowered
        names = set()
        for name, start, end in self._segment_phrases(lowered):
            words = name.split()
            if any(w in _NOT_NAMES for w in words) or len(name) < 3:
                continue
            if cased and not all(
                w[:1].isupper() or w in _NAME_JOINERS for w in normalised[start:end].split()
            ):
                continue
            names.add(name)
        return names

    def _build_entity_patterns(self) -> None:
        self._canonical: dict[str, str] = {}
        for canonical, aliases in self.companies.items():  # the first company listed wins
            for form in (canonical, *aliases):
                self._canonical.setdefault(str(form).lower(), canonical)
        insensitive: dict[str, str] = {}
        sensitive: dict[str, str] = {}
        for canonical, aliases in self.companies.items():
            forms = {canonical.lower(), *(a.lower() for a in aliases)}
            stripped = _strip_suffix(canonical.lower())
            if len(stripped) >= MIN_ALIAS_CHARS:
                forms.add(stripped)
            for form in forms:
                if len(form) < MIN_ALIAS_CHARS:
                    # Short names with a digit (3M) are distinctive in upper case; short
                    # all-letter tickers (BA, KO, V) are too ambiguous to match at all.
                    if not form.isalpha():
                        sensitive[form.upper()] = canonical
                    continue
                if form in V.CASE_SENSITIVE_ALIASES:
                    sensitive[form.upper()] = canonical
                    sensitive[form[:1].upper() + form[1:]] = canonical
                else:
                    insensitive[form] = canonical
        self._alias_names = set(insensitive) | {form.lower() for form in sensitive}

        def by_canonical(forms: dict[str, str], suffix: str = "") -> dict[str, list[str]]:
            vocab: dict[str, list[str]] = {}
            for form, canonical in forms.items():
                vocab.setdefault(canonical, []).append(re.escape(form) + suffix)
            return vocab

        self._entity_ci = TriggerMatcher(by_canonical(insensitive, r"(?:['’]s)?"))
        self._entity_cs = TriggerMatcher(by_canonical(sensitive), case_sensitive=True)

    # --- single fields ---------------------------------------------------------------------
    def entities(
        self, text: str, lowered: str | None = None, words: TextIndex | None = None
    ) -> frozenset[str]:
        """Companies named in ``text`` (short or common-word tickers only in upper case)."""
        lowered = text.lower() if lowered is None else lowered
        words = TextIndex(lowered) if words is None else words
        found = set(self._entity_ci.find(lowered, words))
        if len(lowered) == len(text):  # offsets agree (lower() kept the length)
            found |= self._entity_cs.find(text, words, lowered=lowered)
        return frozenset(found)

    @staticmethod
    def periods(text: str, query: bool) -> frozenset[str]:
        """Fiscal periods: ``YYYY`` or ``YYYYQn``. Year ranges in queries are expanded."""
        found: set[str] = set()
        spans = []
        for m in _QUARTER.finditer(text):
            spans.append(m.span())
            if m.group(1):
                year, quarter = _year(m.group(2)), int(m.group(1))
            elif m.group(3):
                year, quarter = _year(m.group(3)), int(m.group(4))
            elif m.group(5):
                year, quarter = _year(m.group(6)), int(m.group(5))
            elif m.group(7):
                year, quarter = _year(m.group(8)), _QUARTER_WORDS[m.group(7).lower()]
            else:  # "the 2019 second quarter", "fiscal 2019 second quarter"
                year, quarter = _year(m.group(9)), _QUARTER_WORDS[m.group(10).lower()]
            if year:
                found.add(f"{year}Q{quarter}")
        for m in _FY.finditer(text):
            year = _year(m.group(1) or m.group(2))
            if year and not any(start <= m.start() < end for start, end in spans):
                found.add(str(year))
        if query:
            for m in _YEAR_RANGE.finditer(text):
                lo, hi = (
                    (int(m.group(1)), int(m.group(2)))
                    if m.group(1)
                    else (int(m.group(3)), int(m.group(4)))
                )
                if lo < hi <= lo + 10:
                    found.update(str(y) for y in range(lo, hi + 1))
        for m in _DATE.finditer(text) if "/" in text else ():  # 12/31/2016, 12/31/06
            year = _year(m.group(1) or m.group(2))
            if year:
                found.add(str(year))
        for m in _BARE_YEAR.finditer(text):
            # the year of "Q4 2019" belongs to the quarter, not to a separate period
            if not any(start <= m.start() < end for start, end in spans):
                found.add(m.group(1))
        return frozenset(found)

    def segments(
        self,
        lowered: str,
        words: TextIndex | None = None,
        companies: Iterable[str] | None = None,
        about_segments: bool = True,
    ) -> frozenset[str]:
        """Segments from the vocabulary, any ``<name> segment`` phrase, and the harvested names
        of ``companies`` (None: of every company the extractor knows). A one-word harvested name
        ("Corporate", "International") is ambiguous: it counts only for named ``companies`` and
        in a text ``about_segments``; names of two or more words count wherever they appear."""
        found = set(self._segment.find(lowered, words)) | self.segment_phrases(lowered)
        named = self._named_matcher(companies)
        if named is not None:
            single = companies is not None and about_segments
            found.update(n for n in named.find(lowered, words) if single or " " in n)
        return frozenset(found)

    def segment_phrases(self, lowered: str) -> set[str]:
        """Names written as ``<name> segment`` that the vocabulary does not already know."""
        return {name for name, _, _ in self._segment_phrases(lowered)}

    def _segment_phrases(self, lowered: str) -> list[tuple[str, int, int]]:
        """``(name, start, end)`` of each ``<name> segment`` phrase (offsets of the name)."""
        found: list[tuple[str, int, int]] = []
        if "segment" not in lowered:
            return found
        after = 0
        for mention in _SEGMENT_WORD.finditer(lowered):
            m = _SEGMENT_NAME.search(
                lowered, max(after, mention.start() - _NAME_REACH), mention.start()
            )
            after = mention.end()
            if m is None:
                continue
            names = m.group().split()
            while names and names[-1] in _SEGMENT_QUALIFIERS:
                names.pop()  # "AMD reporting segment": the qualifier is not the name
            if not names or names[-1] in _SEGMENT_STOP:
                continue  # "by segment", "each segment": no name
            # the name is the run of words after the last stop word ("increase in X and Y")
            cut = max((i + 1 for i, w in enumerate(names) if w in _SEGMENT_STOP), default=0)
            names = names[cut:]
            while names and names[0] in _NAME_JOINERS:
                names.pop(0)
            name = " ".join(names)
            if (
                not name
                or self._segment.find(name)
                or self._metric.find(name)
                or name in self._alias_names
            ):
                continue
            start = m.start() + m.group().rfind(name)
            found.append((name, start, start + len(name)))
        return found

    def _named_matcher(self, companies: Iterable[str] | None) -> TriggerMatcher | None:
        if not self.segment_names:
            return None
        keys = frozenset(self.segment_names if companies is None else companies)
        if keys not in self._named:
            names = {n for k in keys for n in self.segment_names.get(k, ())}
            self._named[keys] = (
                TriggerMatcher({n: [re.escape(n)] for n in sorted(names)}) if names else None
            )
        return self._named[keys]

    def units(self, lowered: str, words: TextIndex | None = None) -> frozenset[str]:
        """Magnitudes and kinds stated in words, plus amounts written with a magnitude word."""
        found = set(self._unit.find(lowered, words))
        found.update(
            name for name, form in self._amount if name not in found and form.search(lowered)
        )
        return frozenset(found)

    def currencies(self, lowered: str, words: TextIndex | None = None) -> frozenset[str]:
        """Currency codes and names, plus currency symbols (a bare ``$`` is USD)."""
        found = set(self._currency.find(lowered, words))
        # prefixed dollars (US$, A$, C$) are named by the vocabulary, not the bare symbol
        stripped = re.sub(r"(?:us|a|c)\$", "", lowered) if "$" in lowered else lowered
        found.update(code for symbol, code in V.CURRENCY_SYMBOLS.items() if symbol in stripped)
        return frozenset(found)

    # --- whole records ---------------------------------------------------------------------
    def extract_text(
        self,
        text: str,
        query: bool = False,
        entity: bool = True,
        period: bool = True,
        companies: Iterable[str] | None = None,
        candidates: Iterable[str] = (),
    ) -> FinancialFields:
        """Fields from text alone (``entity``/``period`` False skips fields given elsewhere).

        ``companies`` scopes the harvested segment names (:meth:`harvest_segments`); None takes
        the companies the text names, else ``candidates``' (metadata companies of the candidates),
        else every company's. A name in ``candidates`` the text names joins its entities.
        """
        normalised = normalise(text)
        lowered, words = read_text(normalised)
        entities: frozenset[str] = frozenset()
        if entity:  # names keep digits that touch words ("Company3"): the text before read_text
            plain = normalised.lower()
            entities = self.entities(normalised, plain, words if plain == lowered else None)
            candidates = [c for c in candidates if c]
            text_lowered = text.lower()
            named = {
                self.canonical_company(c)
                for c in candidates
                if str(c).lower() not in self._alias_names and _names(str(c), text_lowered)
            }
            entities = entities | named if named - entities else entities
        if companies is None and self.segment_names:
            companies = entities or {self.canonical_company(c) for c in candidates} or None
        about = query or not self.segment_names or any(c in lowered for c in _SEGMENT_CONTEXT)
        segment = self.segments(lowered, words, companies, about)
        if not query:
            segment = _passage_segments(segment, lowered)
        return FinancialFields(
            entity=entities,
            metric=self._metric.find(lowered, words),
            period=self.periods(text, query=query) if period else frozenset(),
            segment=segment,
            table_scope=self._statement.find(lowered, words),
            unit=self.units(lowered, words),
            currency=self.currencies(lowered, words),
            is_table=None if query else looks_like_table(text),
        )

    def extract_query(self, text: str, companies: Iterable[str] = ()) -> FinancialFields:
        """Fields of a question.

        ``companies`` are the candidates' own metadata companies: the question's entity also
        includes any of them it names, whether or not the vocabulary lists them (the rule every
        path follows: the extractor's vocabulary plus the candidates' own metadata). Harvested
        segment names count for the companies the question names, else the candidates'.
        """
        return self.extract_text(text, query=True, candidates=companies)

    def extract_passage(self, passage: Passage) -> FinancialFields:
        """Fields of a passage; metadata company and period win over the text."""
        company = self.canonical_company(passage.company) if passage.company else ""
        fx = self.extract_text(
            passage.text,
            entity=not passage.company,
            period=not passage.period,
            companies=(company,),
        )
        entity = frozenset({company}) if company else fx.entity
        period = _metadata_periods(passage.pid, passage.period) if passage.period else fx.period
        is_table = passage.is_table if passage.is_table is not None else fx.is_table
        return FinancialFields(
            entity=entity,
            metric=fx.metric,
            period=period,
            segment=fx.segment,
            table_scope=fx.table_scope,
            unit=fx.unit,
            currency=fx.currency,
            is_table=is_table,
        )

    def known_company(self, name: str) -> bool:
        """Whether ``name`` is a company (or alias) of the vocabulary."""
        return name.lower() in self._canonical

    def canonical_company(self, name: str) -> str:
        """Map a metadata company name (or alias) to its canonical vocabulary name."""
        name = str(name)
        return self._canonical.get(name.lower(), name)


@functools.lru_cache(maxsize=4096)
def _canonical_periods(period: str) -> frozenset[str]:
    return periods_of(normalise_period(period))


def _metadata_periods(pid: str, period) -> frozenset[str]:
    """A passage's metadata period(s) read as the metadata contract says (a ``Passage`` built in
    Python may carry ``"FY2019"``); an unreadable one is an error naming the passage."""
    try:
        return _canonical_periods(str(period))
    except DataError as err:
        raise DataError(f"passage {pid!r}: {err}", "period") from None


PASSAGES_PER_CHUNK = 2000


def extract_passages(
    extractor: FieldExtractor, passages: list[Passage], progress: bool = False
) -> list[FinancialFields]:
    """The fields of many passages, in order (on the current engine's workers when it is
    distributed: :mod:`fincrowd_ltr.engine`)."""
    from fincrowd_ltr.engine import map_chunked

    return map_chunked(
        _extract_chunk, passages, PASSAGES_PER_CHUNK, extractor, "field extraction", progress
    )


def _extract_chunk(passages: list[Passage], shared: FieldExtractor) -> list[FinancialFields]:
    return [shared.extract_passage(p) for p in passages]


class _AmountForm:
    """One amount form; a form that starts with a digit (``\\d ?million``) is searched from its
    word, with the digit checked behind it (scanning every digit of a filing page is slow)."""

    def __init__(self, form: str) -> None:
        self.digit = form.startswith((r"\d ?", r"\d "))
        self.optional_space = form.startswith(r"\d ?")
        self.pattern = re.compile(form[4 if self.optional_space else 3 :] if self.digit else form)

    def search(self, lowered: str) -> bool:
        if not self.digit:
            return self.pattern.search(lowered) is not None
        for match in self.pattern.finditer(lowered):
            start = match.start()
            before = lowered[start - 1] if start else ""
            if self.optional_space and before.isdecimal():
                return True
            if before == " " and start > 1 and lowered[start - 2].isdecimal():
                return True
        return False


def _strip_suffix(name: str) -> str:
    return re.sub(r"\b(corporation|corp|inc|company|co|plc|ltd|group)\.?$", "", name).strip()


@functools.lru_cache(maxsize=4096)
def _company_pattern(name: str) -> re.Pattern | None:
    forms = {name.lower(), _strip_suffix(name.lower())}
    forms = sorted(f for f in forms if len(f) >= MIN_ALIAS_CHARS)
    if not forms:
        return None
    return re.compile(r"(?<![\w&])(?:" + "|".join(re.escape(f) for f in forms) + r")(?![\w&])")


def _names(company: str, lowered: str) -> bool:
    """Whether the lower-cased text names ``company`` (its name or the name without a legal
    suffix, whole words)."""
    pattern = _company_pattern(company)
    return pattern is not None and pattern.search(lowered) is not None
