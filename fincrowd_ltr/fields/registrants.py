"""The names a corpus's own filings give the companies its metadata names by ticker.

A corpus whose metadata says ``UPS`` or ``BLL`` leaves a question about "United Parcel Service"
or "Ball Corporation" without an entity, and one that mixes ``AAPL`` with "Apple" holds two
companies. A filing names its registrant with a legal suffix ("United Parcel Service, Inc.",
"Ball Corporation"); the most frequent such name in a ticker's own pages whose letters hold the
ticker's in order, from the first ("u-p-s" in "united parcel service"), and that those pages
name at least as often as every other company's pages do ("Packaging" for ``PKG`` is a word of
everyone's filings), is read as that company's name. Only the corpus's pages and metadata are
read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from fincrowd_ltr.data.schema import Passage

_TICKER = re.compile(r"[A-Z][A-Z0-9]{0,4}(?:[.\-][A-Z])?")
PAGES_READ = 200  # of each ticker's pages, in corpus order: bounded work on a large corpus
MIN_MENTIONS = 2

_LEGAL = ("inc", "incorporated", "corporation", "corp", "company", "co", "plc", "ltd", "limited")
# a legal suffix after a word (read in lower case: some corpora are lower-cased); the name is
# among the five words before it
_SUFFIX = re.compile(rf"(?<=[\w.]),? (?:{'|'.join(_LEGAL)})\b")
_WORD = re.compile(r"[a-z0-9][\w&'\-.]*")
_JOINERS = frozenset(("and", "of", "the", "&"))
_NOT_IN_NAMES = frozenset((  # words of prose, never of a company's name
    "a", "an", "as", "at", "by", "for", "from", "in", "into", "is", "are", "its", "on", "or",
    "our", "per", "that", "their", "these", "this", "those", "to", "was", "were", "which",
    "with", "we", "us", "peer", "group", "subsidiaries", "subsidiary", "annual", "report",
))  # fmt: skip


def looks_like_ticker(name: str) -> bool:
    """``UPS``, ``BRK.B``, ``L``: upper-case letters (and digits), at most five."""
    return _TICKER.fullmatch(name) is not None


def _holds_ticker(name: str, ticker: str) -> bool:
    """Whether ``name`` starts with the ticker's first letter and holds its letters in order (a
    doubled letter once where two or more remain: "apple" holds AAPL)."""
    letters = "".join(ch for ch in name if ch.isalnum())
    wanted = [ch for ch in re.sub(r"[.\-][A-Z]$", "", ticker).lower() if ch.isalnum()]  # BRK.B
    collapsed = [ch for i, ch in enumerate(wanted) if i == 0 or ch != wanted[i - 1]]
    wanted = collapsed if len(collapsed) >= 2 else wanted
    if not letters or not wanted or letters[0] != wanted[0]:
        return False
    rest = iter(letters)
    return all(ch in rest for ch in wanted)


def _names_in(lowered: str, ticker: str) -> list[str]:
    """Each name before a legal suffix that holds ``ticker``: every tail of the words before it
    that starts with no joiner and holds no word of prose ("of united parcel service inc" ->
    "united parcel service")."""
    found = []
    for match in _SUFFIX.finditer(lowered):
        words = lowered[max(0, match.start() - 100) : match.start()].split()[-5:]
        while words and not _WORD.fullmatch(words[0]):
            words = words[1:]
        if not all(_WORD.fullmatch(w) for w in words):
            words = words[max(i for i, w in enumerate(words) if not _WORD.fullmatch(w)) + 1 :]
        for start in range(len(words)):
            tail = words[start:]
            if tail[0] in _JOINERS or tail[-1] in _JOINERS or not _NOT_IN_NAMES.isdisjoint(tail):
                continue
            if any(w.endswith(".") and len(w) > 3 for w in tail):  # a sentence ends inside
                continue
            name = " ".join(tail)
            if len(name) >= 3 and _holds_ticker(name, ticker):
                found.append(name)
    return found


def _as_written(name: str, ticker: str, texts: list[str]) -> str:
    """``name`` as the ticker's pages write it most often ("FedEx", "LKQ"); title case where they
    are all lower case; the ticker itself where the name is the ticker."""
    if name.replace(" ", "") == ticker.lower():
        return ticker
    spaced = re.escape(name).replace(r"\ ", r"\s+")
    pattern = re.compile(rf"(?<![\w&]){spaced}(?![\w&])", re.I)
    forms = Counter(m.group(0) for text in texts for m in pattern.finditer(text))
    cased = [(f != f.upper(), n, " ".join(f.split())) for f, n in forms.items() if f != f.lower()]
    if cased:  # mixed case before capitals ("Nike" before a heading's "NIKE"), then frequency
        return max(cased)[2]
    return " ".join(w if w in _JOINERS else w[:1].upper() + w[1:] for w in name.split())


def registrant_names(
    passages: Iterable[Passage],
    tickers: Iterable[str],
    texts: Mapping[str, Passage] | None = None,
) -> dict[str, str]:
    """Ticker -> company name, read from each ticker's own pages (the first ``PAGES_READ``): the
    most frequent ``<name>, <legal suffix>`` that holds the ticker (see the module docstring),
    named at least ``MIN_MENTIONS`` times, and named (as a whole word, any context) in the
    ticker's pages at least as often as in all other companies' pages together (each company's
    first ``PAGES_READ`` pages: bounded work on a large corpus). Ties go to the
    shorter name, then the first in alphabetical order; a ticker without one is left out.
    ``texts`` gives the pages' texts where ``passages`` are text-less headers (a page store)."""
    wanted = set(tickers)
    if not wanted:
        return {}
    read: Counter[str | None] = Counter()
    counts: dict[str, Counter[str]] = {t: Counter() for t in wanted}
    read_pages: list[tuple[str | None, str]] = []  # every company's first pages, for the word check
    written: dict[str, list[str]] = {t: [] for t in wanted}
    for passage in passages:
        ticker = passage.company
        if read[ticker] >= PAGES_READ:
            continue
        read[ticker] += 1
        text = passage.text if texts is None else texts[passage.pid].text
        lowered = " ".join(text.lower().split())
        read_pages.append((ticker, lowered))
        if ticker in wanted:
            counts[ticker].update(_names_in(lowered, ticker))
            written[ticker].append(text)
    best: dict[str, str] = {}
    for ticker, names in counts.items():
        ranked = sorted(names.items(), key=lambda item: (-item[1], len(item[0]), item[0]))
        if ranked and ranked[0][1] >= MIN_MENTIONS:
            best[ticker] = ranked[0][0]
    if not best:
        return {}
    pattern = re.compile(
        r"(?<![\w&])("
        + "|".join(re.escape(n) for n in sorted(set(best.values()), key=len)[::-1])
        + r")(?![\w&])"
    )
    own: Counter[str] = Counter()
    other: Counter[str] = Counter()
    owners = {name: {t for t, n in best.items() if n == name} for name in best.values()}
    for company, lowered in read_pages:
        for name in set(pattern.findall(lowered)):
            (own if company in owners[name] else other)[name] += 1
    return {t: _as_written(n, t, written[t]) for t, n in sorted(best.items()) if own[n] >= other[n]}
