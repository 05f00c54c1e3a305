"""Splitting a passage that is over budget at sentence or table-row boundaries.

A line that looks like a table row (a ``|`` or tab separator, or mostly numbers) is one unit;
other lines are cut into sentences. Units are packed greedily into parts of at most ``limit``
tokens; a single unit longer than ``limit`` (a giant table cell, a run-on sentence) is the only
thing ever cut inside, at a token boundary.
"""

from __future__ import annotations

import re

from fincrowd_ltr.packing.tokens import TokenCounter

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_NUMBER = re.compile(r"\(?-?\$?\d[\d,]*\.?\d*%?\)?")


def is_table_row(line: str) -> bool:
    """Whether a line reads as a table row: a cell separator, or at least two numbers making up
    at least a quarter of its words (prose with a few figures stays prose)."""
    if "|" in line or "\t" in line:
        return True
    words = line.split()
    numbers = sum(bool(_NUMBER.fullmatch(w)) for w in words)
    return numbers >= 2 and numbers >= 0.25 * len(words)


def units(text: str) -> list[tuple[str, str]]:
    """``(unit, separator before it)`` pairs; joining them restores the text up to whitespace."""
    out: list[tuple[str, str]] = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        pieces = [line] if is_table_row(line) else _SENTENCE_END.split(line)
        for i, piece in enumerate(p for p in pieces if p.strip()):
            out.append((piece.strip(), "\n" if i == 0 else " "))
    return out


def _pieces(unit: str, limit: int, counter: TokenCounter) -> list[str]:
    """The unit itself, or (over ``limit``) consecutive token-exact cuts of it."""
    pieces = []
    while counter.count(unit) > limit:
        head, unit = counter.cut(unit, limit)
        pieces.append(head)
    return [*pieces, unit] if unit else pieces


def split_passage(text: str, limit: int, counter: TokenCounter) -> list[str]:
    """Parts of ``text`` of at most ``limit`` tokens each, cut at unit boundaries."""
    if limit < 1:
        raise ValueError(f"split limit must be at least one token; got {limit}")
    parts: list[str] = []
    current = ""
    for unit, sep in units(text):
        for piece in _pieces(unit, limit, counter):
            joined = f"{current}{sep}{piece}" if current else piece
            if counter.count(joined) <= limit:
                current = joined
            else:
                parts.append(current)
                current = piece
            sep = " "  # later pieces continue the same unit
    if current:
        parts.append(current)
    return parts
