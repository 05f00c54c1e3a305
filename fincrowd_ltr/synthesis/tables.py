"""Statement rows read from a page's own text: a line item, the period of each column and the
figure printed under it.

PDF text layers print a table one cell per line (the label, then ``$``, then the figure, column
by column) and plain-text tables print a row per line (cells apart by spaces or pipes); both are
read. A page's columns are the
first run of two or more year headers (``2015`` / ``2014`` / ``2013``, or ``2015 2014 2013`` on
one line); a row is a label line whose canonical metric the field extractor recognises (or,
with ``any_label``, any specific label: its metric is then the label itself, ``row:<label>``),
followed by exactly one figure per column. Anything else is skipped, never guessed: a page that
prints no year header, or a row with another number of figures, yields nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fincrowd_ltr.fields import FieldExtractor

_YEAR = r"(?:19[89]\d|20[0-3]\d)"
_HEADER_CELL = re.compile(rf"^(?:fiscal(?: year)?\s*|fy\s?)?({_YEAR})(?:\s*\(\w\))?$", re.I)
# two or more years at the start of a line (a trailing caption such as "(in millions)" allowed)
_HEADER_LINE = re.compile(rf"^(?:(?:fiscal\s*|fy\s?)?{_YEAR}(?:\s+|$)){{2,}}(?:\([^\d]*\))?$", re.I)
_FIGURE = re.compile(r"^[$€£(]*\s*-?\d[\d,]*(?:\.\d+)?\s*\)?%?$|^[—–-]$")
_CELL = re.compile(r"^\(?-?\d[\d,]*(?:\.\d+)?\)?%?$")
_CURRENCY_ONLY = re.compile(r"^[$€£]$")
MAX_LABEL_WORDS = 8
LABEL_METRIC = "row:"  # the prefix of a metric that is a row's own label (no vocabulary metric)
# labels that name no line item on their own: a row so labelled is never asked about by label
GENERIC_LABELS = frozenset({
    "total", "totals", "subtotal", "other", "others", "net", "balance", "less", "add", "and",
    "the", "for", "from", "beginning", "end", "year", "period", "ended",
})  # fmt: skip
# a label that dates a column or a balance ("Years Ended December 31,", "Balance at June 30")
_DATE_LABEL = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|ended|ending)\b|^(?:as of|at)\b",
    re.I,
)
_YEAR_CELL = re.compile(rf"^{_YEAR}$")
HEADER_WITHIN = 60  # the column header is looked for in a page's first lines


@dataclass(frozen=True)
class StatementRow:
    """One line item of a page: its printed label, canonical metric and one figure per column."""

    label: str
    metric: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class PageTable:
    """The statement rows of one page and the period of each of its columns."""

    pid: str
    periods: tuple[str, ...]
    rows: tuple[StatementRow, ...]


def figure_key(value: str) -> str:
    """A printed figure in a comparable form: ``$ (1,234.0)`` -> ``-1234.0``; dashes -> ``0``."""
    text = value.strip().replace("$", "").replace("€", "").replace("£", "").replace(",", "")
    text = text.replace(" ", "")
    if text in {"—", "–", "-"}:
        return "0"
    negative = text.startswith("(") or text.startswith("-")
    digits = text.strip("()-%")
    return ("-" if negative else "") + digits


def _lines(text: str) -> list[str]:
    out = []
    for raw in text.splitlines():
        line = " ".join(raw.replace("|", " ").split())  # plain-text tables: cells between pipes
        if line and not _CURRENCY_ONLY.match(line):
            out.append(line)
    return out


def _header(lines: list[str]) -> tuple[int, tuple[str, ...]] | None:
    """Where the column header ends and its periods, from the page's first lines."""
    limit = min(len(lines), HEADER_WITHIN)
    for i in range(limit):
        if _HEADER_LINE.match(lines[i]):
            return i + 1, tuple(re.findall(_YEAR, lines[i].split("(")[0]))
        years = []
        j = i
        while j < limit and (m := _HEADER_CELL.match(lines[j])):
            years.append(m.group(1))
            j += 1
        if len(years) >= 2:
            return j, tuple(years)
    return None


def read_table(
    pid: str,
    text: str,
    extractor: FieldExtractor,
    metrics: dict[str, str | None] | None = None,
    any_label: bool = False,
) -> PageTable | None:
    """The page's statement rows, or None when it prints no year header or no metric row.
    ``metrics`` memoises each label's metric across pages; ``any_label`` also reads rows whose
    label is no known metric (see :func:`label_metric`)."""
    lines = _lines(text)
    found = _header(lines)
    if found is None:
        return None
    start, periods = found
    if len(set(periods)) != len(periods):
        return None  # three- and six-month columns of the same years: not one period per column
    rows, n, i = [], len(periods), start
    while i < len(lines):
        line = lines[i]
        inline = _inline_row(line, n)
        if inline is not None:
            (label, values), i = inline, i + 1
        else:
            values = tuple(lines[i + 1 : i + 1 + n])
            if not re.search(r"[a-z]", line, re.I) or _FIGURE.match(line):
                i += 1
                continue
            if len(values) < n or not all(_FIGURE.match(v) for v in values):
                i += 1
                continue
            label, i = line, i + 1 + n
        row = _row(label, values, extractor, {} if metrics is None else metrics, any_label)
        if row is not None:
            rows.append(row)
    return PageTable(pid, periods, tuple(rows)) if rows else None


def _inline_row(line: str, n: int) -> tuple[str, tuple[str, ...]] | None:
    """A row printed on one line: a label, then exactly ``n`` figures (``$`` signs dropped)."""
    if not line[-1:].isdigit() and line[-1:] not in ")%":
        return None
    tokens = [t for t in line.split() if t not in {"$", "€", "£"}]
    cells: list[str] = []
    while tokens and len(cells) <= n and _CELL.match(tokens[-1].lstrip("$€£")):
        cells.append(tokens.pop().lstrip("$€£"))
    if len(cells) != n or not tokens or not re.search(r"[a-z]", tokens[-1], re.I):
        return None
    return " ".join(tokens), tuple(reversed(cells))


def label_metric(label: str) -> str | None:
    """A row label as its own metric (``"Stock-based compensation"`` -> ``"row:stock-based
    compensation"``), or None when the label names nothing on its own: only generic words
    ("Total", "Other"), no word of three letters, or a date ("Years Ended December 31,",
    "Balance at June 30")."""
    label = label.rstrip(" ,;:")
    words = re.findall(r"[a-z][a-z'&-]*", label.lower())
    if not any(len(w) >= 3 and w not in GENERIC_LABELS for w in words):
        return None
    if _DATE_LABEL.search(label):
        return None
    return LABEL_METRIC + " ".join(label.lower().split())


def _row(
    label: str,
    values: tuple[str, ...],
    extractor: FieldExtractor,
    memo: dict[str, str | None],
    any_label: bool = False,
) -> StatementRow | None:
    label = re.sub(r"\s*\(\d\)$", "", label.strip(" :.")).strip()
    if len(label.split()) > MAX_LABEL_WORDS or not label:
        return None
    if label not in memo:
        found = extractor.extract_query(label).metric
        memo[label] = next(iter(found)) if len(found) == 1 else None
    metric = memo[label]
    if metric is None and any_label and not all(_YEAR_CELL.match(v) for v in values):
        metric = label_metric(label)  # (a row of years is a column header read as a row)
    return None if metric is None else StatementRow(label, metric, values)
