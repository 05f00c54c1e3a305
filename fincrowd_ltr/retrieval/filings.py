"""Filing compatibility: how well a filing's fiscal period and type fit what a question asks.

A question about "FY2019 capital expenditure" is answered by the 2019 annual report; the 2020 annual
report restates 2019 in its comparative columns; a 10-Q or an earnings release of 2019 may carry it
too, but the question does not ask for a quarter. This module scores each filing (not each page) in
``[0, 1]`` from the corpus metadata (``period``, ``doc_type``) and the question text only:

- period: the filing's own fiscal year (the latest of its periods: a 10-K given the years its
  tables print, ``2014,2015,2016``, is the 2016 report) is one of the question's years -> 1; an
  annual filing of the year after (which restates it) -> ``RESTATED``; anything else -> 0;
- quarter: when the question names a quarter, a quarterly filing (or release) of another quarter of
  that year keeps only ``OTHER_QUARTER``;
- type: the filing type the question implies (annual: "10-K", "annual report", "fiscal year";
  quarterly: "10-Q", "quarter"; release: "8-K", "earnings release") halves filings of other types;
  with no hint, non-annual filings are halved (most financial questions are about annual figures).

A question that states no year gets no scores (``None``): the first stage falls back to its
ordering without filings. Filings without a period score 0. Missing fields never conflict: they
only forgo the lift.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from fincrowd_ltr.data.metadata import periods_of
from fincrowd_ltr.data.schema import Passage

VERSION = 3  # bump when the scores change (part of the bank cache key)
RESTATED = 0.5
OTHER_QUARTER = 0.25
OTHER_TYPE = 0.5
ANNUAL, QUARTERLY, RELEASE = "annual", "quarterly", "release"
_KIND = {"10k": ANNUAL, "10k_annualreport": ANNUAL, "20f": ANNUAL, "40f": ANNUAL, "10q": QUARTERLY}
_HINTS = {
    QUARTERLY: re.compile(r"(?i)\b(?:10-?q|quarters?|quarterly|q[1-4])\b"),
    ANNUAL: re.compile(
        r"(?i)\b(?:10-?k|20-?f|annual reports?|fiscal years?|full[- ]year|fy\s?'?\d{2,4})\b"
    ),
    RELEASE: re.compile(r"(?i)\b(?:8-?k|earnings (?:release|report|call)s?|press releases?)\b"),
}


def filing_kind(doc_type: str | None) -> str:
    """``annual``, ``quarterly`` or ``release`` (8-K, earnings releases and anything else)."""
    return _KIND.get((doc_type or "").lower().replace("-", ""), RELEASE)


def implied_kinds(question: str) -> frozenset[str]:
    """The filing kinds a question's wording points to (empty when it names none)."""
    return frozenset(kind for kind, pattern in _HINTS.items() if pattern.search(question))


def own_period(period: str | None, doc_type: str | None = None) -> str | None:
    """A filing's own period among its canonical periods: the latest, since earlier columns
    are comparatives (``2014,2015,2016`` -> ``2016``; ``2023Q3,2023Q2`` -> ``2023Q3``), of
    its kind's form where it gives one (an annual filing's years, a quarterly filing's or a
    release's quarters: a 10-Q given ``2023,2023Q3`` is ``2023Q3``); None when none states a
    year."""
    found = [p for p in periods_of(period) if p[:4].isdigit()]
    quarterly = filing_kind(doc_type) != ANNUAL
    of_kind = [p for p in found if ("Q" in p) == quarterly] or found
    return max(of_kind, key=lambda p: (p[:4], p)) if of_kind else None


def filing_score(
    period: str | None, doc_type: str | None, asked: frozenset[str], hint: frozenset[str]
) -> float:
    """Compatibility in ``[0, 1]`` of one filing (its canonical ``period``, the latest of
    several being its own) with the question's periods ``asked`` (``YYYY``/``YYYYQn``) and
    implied kinds ``hint``."""
    period = own_period(period, doc_type)
    if period is None:
        return 0.0
    year, kind = int(period[:4]), filing_kind(doc_type)
    years = {int(p[:4]) for p in asked}
    if year in years:
        score = 1.0
    elif kind == ANNUAL and year - 1 in years:
        score = RESTATED
    else:
        return 0.0
    quarters = {p for p in asked if "Q" in p}
    if quarters and "Q" in period and period not in quarters:
        score *= OTHER_QUARTER
    if hint:
        score *= 1.0 if kind in hint else OTHER_TYPE
    elif kind != ANNUAL:
        score *= OTHER_TYPE
    return score


class FilingPrior:
    """Per-passage filing compatibility over a fixed list of passages (an index's rows).

    Args:
        passages: The passages in index order.
    """

    def __init__(self, passages: Iterable[Passage]) -> None:
        filings: dict[tuple[str | None, str | None], int] = {}
        rows = []
        for p in passages:
            rows.append(filings.setdefault((p.period, p.doc_type), len(filings)))
        self.filings = list(filings)
        self.rows = np.array(rows, dtype=np.int64)

    def __call__(self, question: str, asked: frozenset[str]) -> np.ndarray | None:
        """Each passage's filing compatibility with ``question`` and its extracted periods
        ``asked``; ``None`` if it states no year."""
        if not asked:
            return None
        hint = implied_kinds(question)
        scores = np.array([filing_score(p, t, asked, hint) for p, t in self.filings])
        return scores[self.rows]
