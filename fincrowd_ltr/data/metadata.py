"""Candidate metadata read the way users write it, in one place for every entry point (Python
``rerank``, HTTP ``/rerank``, the BEIR loader).

The contract (docs/data.md): every field is optional and a missing one means *unknown* (never a
conflict).

- ``period``: a fiscal year or quarter, or several. Accepted: ``2016``, ``"2016"``, ``"FY2016"``,
  ``"FY 2016"``, ``"FY16"``, ``"fiscal 2016"``, ``"fiscal year 2016"``, a date (``"2016-12-31"``,
  ``"12/31/2016"``: its year), ``"Q3 2023"``, ``"2023Q3"``, ``"2023-Q3"``, ``"3Q23"``,
  ``"Q3 FY23"``, a range ``"2014-2016"`` / ``"2014 to 2016"`` (every year of it), and a list of
  any of these (a JSON list, or a string separated by ``,`` ``;`` or ``|``). Canonical form:
  ``"2016"`` / ``"2023Q3"``, several joined by ``","``. A 10-K reports several years: list them
  (or the range) to make every year its tables print compatible; a single year means the filing's
  own fiscal year, and the metadata wins over the years the text prints.
- ``company``: a name or ticker (a string or number); whitespace is collapsed and the extractor
  maps names and aliases it knows to one canonical name.
- ``doc_type``, ``document``: strings (numbers are accepted and written as strings).
- ``position``: a non-negative integer; ``is_table``: true or false.

A value of the wrong type or an unreadable period is a :class:`DataError` naming the field.
"""

from __future__ import annotations

import re
from functools import lru_cache

from fincrowd_ltr.data.schema import DataError

METADATA_FIELDS = ("company", "period", "doc_type", "document", "position", "is_table")
FIRST_YEAR, LAST_YEAR = 1900, 2100

_YEAR4 = r"(19\d{2}|20\d{2}|2100)"
_YY = r"(\d{2})"
_FY = rf"(?:fy|fiscal(?:\s+year)?)\s*'?(?:{_YEAR4}|{_YY})"
_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(rf"^{_YEAR4}$"), "year"),
    (re.compile(rf"^{_YEAR4}\.0+$"), "year"),
    (re.compile(rf"^{_FY}$"), "fy"),
    (re.compile(rf"^{_YEAR4}\s*[-/]?\s*q([1-4])$"), "year_quarter"),
    (re.compile(rf"^q([1-4])\s*[-/,]?\s*(?:fy\s*)?(?:{_YEAR4}|'?{_YY})$"), "quarter_year"),
    (re.compile(rf"^([1-4])q\s*(?:fy\s*)?(?:{_YEAR4}|'?{_YY})$"), "quarter_year"),
    (re.compile(rf"^{_YEAR4}-\d{{1,2}}-\d{{1,2}}$"), "year_first"),
    (re.compile(rf"^\d{{1,2}}[/.-]\d{{1,2}}[/.-]{_YEAR4}$"), "year_last"),
    (re.compile(rf"^[a-z]+\.?\s+\d{{1,2}},?\s+{_YEAR4}$"), "year_last"),  # June 30, 2016
    (re.compile(rf"^(?:fy\s*)?{_YEAR4}\s*(?:-|–|—|to|through)\s*(?:fy\s*)?{_YEAR4}$"), "range"),
]
_SEPARATORS = re.compile(r"[,;|]")


def _full_year(four: str | None, two: str | None) -> int:
    return int(four) if four else 2000 + int(two)


def _read_period(token: str, where: str) -> list[str]:
    text = re.sub(r"\s+", " ", token.strip().lower())
    for pattern, kind in _PATTERNS:
        m = pattern.match(text)
        if not m:
            continue
        g = m.groups()
        if kind in ("year", "year_first"):
            return [g[0]]
        if kind == "year_last":
            return [g[-1]]
        if kind == "fy":
            return [str(_full_year(g[0], g[1]))]
        if kind == "year_quarter":
            return [f"{g[0]}Q{g[1]}"]
        if kind == "quarter_year":
            return [f"{_full_year(g[1], g[2])}Q{g[0]}"]
        lo, hi = int(g[0]), int(g[1])
        if not lo <= hi <= lo + 30:
            raise DataError(
                f"{where}: period range {token!r} runs backwards or over 30 years", where
            )
        return [str(y) for y in range(lo, hi + 1)]
    raise DataError(
        f"{where}: cannot read period {token!r} (write e.g. 2016, FY2016, FY16, fiscal 2016, "
        "2016-12-31, Q3 2023, 2023Q3, 2014-2016, or a list of these)",
        where,
    )


def normalise_period(value, where: str = "metadata.period") -> str | None:
    """The canonical period string of a metadata value (``"2016"``, ``"2023Q3"``, several
    joined by ``","``), ``None`` for a missing one; raises ``DataError`` naming ``where``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise DataError(f"{where} must be a year, a period string or a list; got {value!r}", where)
    if isinstance(value, int | float):
        if isinstance(value, float) and not value.is_integer():
            raise DataError(f"{where}: {value!r} is not a year", where)
        value = str(int(value))
    if isinstance(value, list | tuple):
        tokens = [normalise_period(v, f"{where}[{i}]") for i, v in enumerate(value)]
        found = [p for t in tokens if t for p in t.split(",")]
    elif isinstance(value, str):
        try:  # the whole string first: "June 30, 2016" is one date, "2016, 2015" two years
            found = _read_period(value, where) if value.strip() else []
        except DataError:
            tokens = [t for t in _SEPARATORS.split(value) if t.strip()]
            if len(tokens) < 2:
                raise
            found = [p for token in tokens for p in _read_period(token, where)]
    else:
        raise DataError(
            f"{where} must be a year, a period string or a list; got {type(value).__name__}", where
        )
    for period in found:
        if not FIRST_YEAR <= int(period[:4]) <= LAST_YEAR:
            raise DataError(
                f"{where}: year {period[:4]} is outside {FIRST_YEAR}-{LAST_YEAR}", where
            )
    return ",".join(dict.fromkeys(found)) or None


def periods_of(canonical: str | None) -> frozenset[str]:
    """The periods of a canonical period string."""
    return frozenset(canonical.split(",")) if canonical else frozenset()


@lru_cache(maxsize=4096)
def _canonical_periods(period: str) -> frozenset[str]:
    return periods_of(normalise_period(period))


def passage_periods(passage) -> frozenset[str]:
    """A passage's metadata period(s) read as the metadata contract says (a ``Passage`` built in
    Python may carry ``"FY2019"``, ``2019`` or ``"2018, 2019"``); empty when it has none; an
    unreadable one is an error naming the passage. The field extractor reads them the same way
    with its own copy (``_metadata_periods``): its source is hashed into every feature cache's
    and page table's key, so it moves to this one with its next real change."""
    if passage.period is None:
        return frozenset()
    try:
        return _canonical_periods(str(passage.period))
    except DataError as err:
        raise DataError(f"passage {passage.pid!r}: {err}", "period") from None


def _text(value, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DataError(f"{where} must be a string or number; got {type(value).__name__}", where)
    text = re.sub(r"\s+", " ", str(value)).strip()
    return text or None


_NAMED = ("company", "doc_type", "document", "period")


def _canonical(named: tuple, where: str) -> tuple[tuple[str, str], ...]:
    """The canonical company, doc_type, document and period that are present."""
    out = []
    for key, value in zip(_NAMED, named, strict=True):
        where_key = f"{where}.{key}"
        value = normalise_period(value, where_key) if key == "period" else _text(value, where_key)
        if value is not None:
            out.append((key, value))
    return tuple(out)


@lru_cache(maxsize=65_536, typed=True)  # typed: True and 1, 2016 and 2016.0 are kept apart
def _canonical_seen(company, doc_type, document, period) -> tuple[tuple[str, str], ...]:
    return _canonical((company, doc_type, document, period), "metadata")


def unread_keys(unread: dict[str, str | None]) -> str:
    """Metadata keys nothing reads, each with where it was first seen (if given) and the field
    it may misspell (``"'Period' (line 3; did you mean 'period'?)"``): a misspelt key loses its
    field silently otherwise."""
    named = []
    for key, where in unread.items():
        near = next((f for f in METADATA_FIELDS if f == key.strip().lower()), None)
        notes = [n for n in (where, near and f"did you mean {near!r}?") if n]
        named.append(f"{key!r}" + (f" ({'; '.join(notes)})" if notes else ""))
    return (
        f"metadata key(s) {', '.join(named)} are not read; the typed fields come from "
        f"{', '.join(METADATA_FIELDS)}"
    )


def normalise_metadata(metadata: dict, where: str = "metadata") -> dict:
    """A candidate's metadata in canonical form (see the module docstring); unknown keys are
    kept as given, missing or empty values dropped, wrong types a ``DataError`` naming the
    field (``where.period``)."""
    if not isinstance(metadata, dict):
        raise DataError(f"{where} must be an object", where)
    out = {k: v for k, v in metadata.items() if k not in METADATA_FIELDS}
    named = tuple(map(metadata.get, _NAMED))
    try:  # a served model sees the same few companies and periods again and again
        canonical = _canonical_seen(*named)
    except (TypeError, DataError):  # a list (unhashable), or an error to name with ``where``
        canonical = None
    out.update(_canonical(named, where) if canonical is None else canonical)
    position = metadata.get("position")
    if position is not None:
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise DataError(f"{where}.position must be a non-negative integer", f"{where}.position")
        out["position"] = position
    is_table = metadata.get("is_table")
    if is_table is not None:
        if not isinstance(is_table, bool):
            raise DataError(f"{where}.is_table must be true or false", f"{where}.is_table")
        out["is_table"] = is_table
    return out
