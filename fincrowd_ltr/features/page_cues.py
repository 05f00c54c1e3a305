"""What a page is, read from its own text: its role in the filing, the periods its columns report,
and whether a metric's line item stands next to numbers.

- Role: from the page's heading lines (the first ``HEAD`` characters), one of ``statement``
  (a primary financial statement), ``notes``, ``mdna`` (management's discussion), ``cover``
  (cover page, table of contents, signatures) or ``exhibit``; ``""`` when no cue is found.
- Text periods: the fiscal years and quarters printed on the page (a 2020 annual report's tables
  report 2019 and 2018 too), independent of the filing's own period in the metadata.
- Metric row: a surface form of the question's metric followed within ``ROW_REACH`` characters by a
  figure, not a bare year (PDF text puts table cells on separate lines, so "the same line" is a
  short reach).

Everything is deterministic and uses no gold or question-set vocabulary beyond the extractor's
metric forms.
"""

from __future__ import annotations

import re
from functools import lru_cache

from fincrowd_ltr.fields import vocabulary as V
from fincrowd_ltr.fields.extractor import FieldExtractor
from fincrowd_ltr.fields.matcher import first_words

VERSION = 1  # bump when any cue changes (part of the feature cache key)
HEAD = 400
ROW_REACH = 60
ROLES = ("statement", "notes", "mdna", "cover", "exhibit")

_SPACE = r"[\s\u00a0]+"
_ROLE_CUES = {
    "statement": re.compile(
        rf"(?i)\b(?:consolidated{_SPACE})?(?:statements?{_SPACE}of{_SPACE}(?:consolidated{_SPACE})?"
        rf"(?:income|operations|earnings|cash{_SPACE}flows?|comprehensive{_SPACE}(?:income|loss)"
        rf"|financial{_SPACE}position|(?:share|stock)holders.{{0,3}}equity|changes{_SPACE}in)"
        rf"|balance{_SPACE}sheets?)\b"
    ),
    "notes": re.compile(
        rf"(?i)\bnotes{_SPACE}to{_SPACE}(?:the{_SPACE})?(?:condensed{_SPACE})?(?:consolidated{_SPACE})?"
        rf"financial{_SPACE}statements\b|^\s*note{_SPACE}\d+\b",
        re.MULTILINE,
    ),
    "mdna": re.compile(
        rf"(?i)\bmanagement.{{0,2}}s{_SPACE}discussion{_SPACE}and{_SPACE}analysis\b|\bmd&a\b"
    ),
    "cover": re.compile(
        rf"(?i)\b(?:commission{_SPACE}file{_SPACE}number|securities{_SPACE}registered{_SPACE}pursuant"
        rf"|table{_SPACE}of{_SPACE}contents{_SPACE}(?:part|item)|signatures?\b{_SPACE}pursuant)"
    ),
    "exhibit": re.compile(rf"(?i)^\s*exhibit{_SPACE}\d", re.MULTILINE),
}
# a figure, not a year on its own (column headers and prose dates are not line-item values)
_FIGURE = r"[\s\u00a0$€£(]*-?(?!(?:19|20)\d\d(?![\d,.]))\d[\d,]*(?:\.\d+)?"


def page_role(text: str) -> str:
    """The page's role from its heading lines (``ROLES``), or ``""`` when no cue is found."""
    head = text[:HEAD]
    for role in ROLES:
        if _ROLE_CUES[role].search(head):
            return role
    return ""


def text_periods(text: str) -> frozenset[str]:
    """Fiscal years and quarters printed on the page (``YYYY``/``YYYYQn``)."""
    return FieldExtractor.periods(text, query=False)


@lru_cache(maxsize=256)
def _metric_row(metrics: frozenset[str]) -> tuple[re.Pattern, tuple[str, ...] | None] | None:
    """The metric-row pattern of ``metrics`` and the words its forms can start with (None when
    some form's first word cannot be enumerated)."""
    forms = [f for m in sorted(metrics) for f in V.METRICS.get(m, [])]
    if not forms:
        return None
    pattern = re.compile(
        rf"(?i)(?<![\w&])(?:{'|'.join(forms)})(?![\w&])[^\d]{{0,{ROW_REACH}}}?{_FIGURE}"
    )
    starts: set[str] = set()
    for form in forms:
        words = first_words(form)
        if words is None:
            return pattern, None
        starts |= words
    return pattern, tuple(sorted(starts))


def has_metric_row(text: str, metrics: frozenset[str]) -> bool:
    """True when one of ``metrics``' surface forms is followed closely by a figure. The pattern is
    tried only where a word its forms can start with occurs (searching a whole page for an
    alternation of every form costs ~0.1 ms; the result is the same)."""
    compiled = _metric_row(metrics)
    if compiled is None:
        return False
    pattern, starts = compiled
    lowered = text.lower()
    if starts is None or len(lowered) != len(text):
        return bool(pattern.search(text))
    for word in starts:
        at = lowered.find(word)
        while at >= 0:
            if pattern.match(text, at):
                return True
            at = lowered.find(word, at + 1)
    return False


def metric_row(text: str, metrics: frozenset[str], known: dict[frozenset[str], bool]) -> bool:
    """``has_metric_row(text, metrics)``, remembered in ``known`` (a page's cache, keyed by the
    metric set: questions about the same metrics read the page once)."""
    found = known.get(metrics)
    if found is None:
        found = known[metrics] = has_metric_row(text, metrics)
    return found
