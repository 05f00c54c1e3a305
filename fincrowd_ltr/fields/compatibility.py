"""Per-field compatibility between a query's fields and a candidate's: match, conflict, unknown."""

from __future__ import annotations

from enum import IntEnum

from fincrowd_ltr.fields.extractor import FIELD_NAMES, FinancialFields


class Compatibility(IntEnum):
    """Outcome of comparing one field. Unknown (either side unobserved) is never a conflict."""

    CONFLICT = -1
    UNKNOWN = 0
    MATCH = 1


def _years(values: frozenset[str]) -> set[str]:
    return {v[:4] for v in values}


def compare_period(query: frozenset[str], candidate: frozenset[str]) -> Compatibility:
    """Periods match when they share a year and, where both name a quarter, the quarter."""
    if not query or not candidate:
        return Compatibility.UNKNOWN
    for q in query:
        for c in candidate:
            if q[:4] != c[:4]:
                continue
            if "Q" in q and "Q" in c and q != c:
                continue
            return Compatibility.MATCH
    return Compatibility.CONFLICT


def compare_field(name: str, query: frozenset[str], candidate: frozenset[str]) -> Compatibility:
    """Compare one field: unknown if either side is empty, match if they intersect."""
    if name == "period":
        return compare_period(query, candidate)
    if not query or not candidate:
        return Compatibility.UNKNOWN
    return Compatibility.MATCH if query & candidate else Compatibility.CONFLICT


def compatibility(query: FinancialFields, candidate: FinancialFields) -> dict[str, Compatibility]:
    """Per-field compatibility of ``candidate`` with ``query`` (all seven fields)."""
    return {
        name: compare_field(name, getattr(query, name), getattr(candidate, name))
        for name in FIELD_NAMES
    }


def conflicts(query: FinancialFields, candidate: FinancialFields) -> tuple[str, ...]:
    """Names of the fields on which the candidate explicitly conflicts with the query."""
    return tuple(
        name
        for name, value in compatibility(query, candidate).items()
        if value is Compatibility.CONFLICT
    )
