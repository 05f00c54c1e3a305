"""Fast matching of a vocabulary of regular expressions, anchored at the words that can start them.

Scanning a 3,000-character filing page with one large alternation per field costs milliseconds in
Python's ``re``. Almost every surface form starts with a literal word ("revenue", "(stock|share)
repurchase"), so :class:`TriggerMatcher` indexes forms by the set of words that can start them
(derived from the regex parse tree) and tries ``pattern.match`` only where such a word occurs in the
text. Forms whose first word cannot be enumerated are scanned with ``finditer`` as before.
"""

from __future__ import annotations

import functools
import re
import string
from collections import defaultdict

try:  # Python >= 3.11
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

WORD = re.compile(r"[a-z0-9]+")
BOUNDARY_BEFORE = r"(?<![\w&])"
BOUNDARY_AFTER = r"(?![\w&])"
_MAX_STATES = 256


def _alnum(code: int) -> bool:
    return chr(code).isascii() and chr(code).isalnum()


def first_words(pattern: str) -> set[str] | None:
    """All possible first words (runs of ``[a-z0-9]``) of strings matching ``pattern``, or None when
    they cannot be enumerated (a character class, unbounded repeat, or a non-word first char)."""
    try:
        tree = sre_parse.parse(pattern)
    except re.error:
        return None
    states = _walk(list(tree), {("", False)})
    if states is None or any(prefix == "" for prefix, _ in states):
        return None
    return {prefix for prefix, _ in states}


def first_chars(pattern: str) -> set[str] | None:
    """The punctuation characters strings matching ``pattern`` can start with, or None when one
    can start with a word character or the set cannot be enumerated."""
    try:
        tree = sre_parse.parse(pattern)
    except re.error:
        return None
    return _first_chars(list(tree))


def _first_chars(items) -> set[str] | None:
    c = sre_constants
    if not items:
        return None
    op, arg = items[0]
    if op is c.LITERAL:
        return None if _alnum(arg) else {chr(arg)}
    if op is c.BRANCH:
        out: set[str] = set()
        for alternative in arg[1]:
            sub = _first_chars(list(alternative))
            if sub is None:
                return None
            out |= sub
        return out
    if op is c.SUBPATTERN:
        return _first_chars(list(arg[-1]) + items[1:]) if arg[-1] else None
    return None


def _walk(items, states):
    for op, arg in items:
        if all(done for _, done in states):
            return states  # every first word is complete; the rest does not matter
        states = _step(op, arg, states)
        if states is None or len(states) > _MAX_STATES:
            return None
    return states


def _step(op, arg, states):
    c = sre_constants
    if op in (c.ASSERT, c.ASSERT_NOT, c.AT):
        return states  # zero-width
    if op is c.LITERAL:
        return _add_chars([arg], states)
    if op is c.IN:
        chars = []
        for kind, value in arg:
            if kind is c.LITERAL:
                chars.append(value)
            elif kind is c.RANGE and value[1] - value[0] < 26:
                chars.extend(range(value[0], value[1] + 1))
            else:
                return None
        return _add_chars(chars, states)
    if op is c.BRANCH:
        out = set()
        for alternative in arg[1]:
            sub = _walk(list(alternative), states)
            if sub is None:
                return None
            out |= sub
        return out
    if op is c.SUBPATTERN:
        return _walk(list(arg[-1]), states)
    if op in (c.MAX_REPEAT, c.MIN_REPEAT):
        low, high, sub = arg
        if high > 1:
            return None
        once = _walk(list(sub), states)
        if once is None:
            return None
        return once | states if low == 0 else once
    return None


def _add_chars(codes, states):
    out = set()
    for prefix, done in states:
        if done:
            out.add((prefix, True))
            continue
        for code in codes:
            if _alnum(code):
                out.add((prefix + chr(code).lower(), False))
            elif prefix:
                out.add((prefix, True))
            else:
                return None  # the form can start with a non-word character
    return out


class TriggerMatcher:
    """Which canonical values of a vocabulary occur in a text.

    Args:
        vocab: canonical value -> list of regular expressions (matched on lower-cased text between
            word boundaries).
    """

    def __init__(self, vocab: dict[str, list[str]], case_sensitive: bool = False) -> None:
        self.case_sensitive = case_sensitive
        grouped: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        always: dict[str, list[str]] = defaultdict(list)
        for canonical, forms in vocab.items():
            for form in forms:
                words = first_words(form)
                if words is None:
                    always[canonical].append(form)
                else:
                    for word in words:
                        grouped[word][canonical].append(form)
        # per trigger word: one pattern for any form that can start with it (to skip the
        # word's occurrences where nothing matches), then one per canonical value
        self.index: dict[str, tuple[re.Pattern, tuple[tuple[str, re.Pattern], ...]]] = {
            word: (
                _bounded([form for forms in values.values() for form in forms]),
                tuple((canonical, _bounded(forms)) for canonical, forms in values.items()),
            )
            for word, values in grouped.items()
        }
        names = list(always)
        parts = [f"(?P<g{i}>{'|'.join(always[n])})" for i, n in enumerate(names)]
        self._always_names = names
        self._always = (
            re.compile(f"{BOUNDARY_BEFORE}(?:{'|'.join(parts)}){BOUNDARY_AFTER}") if parts else None
        )
        # forms that start with a punctuation mark ("(in millions"): tried only where the mark is
        starts = [first_chars(form) for forms in always.values() for form in forms]
        self._always_starts = (
            re.compile("[" + re.escape("".join(set().union(*starts))) + "]")
            if starts and all(starts)
            else None
        )

    def find(
        self, text: str, index: TextIndex | None = None, lowered: str | None = None
    ) -> frozenset[str]:
        """Canonical values found in ``text``.

        Args:
            text: The text (lower-cased already unless the matcher is case-sensitive).
            index: A :class:`TextIndex` of the lower-cased text, shared across matchers.
            lowered: The lower-cased text, when ``text`` is not (case-sensitive matchers).
        """
        lowered = text if lowered is None else lowered
        index = TextIndex(lowered) if index is None else index
        found: set[str] = set()
        for word in index.words & self.index.keys():
            any_form, values = self.index[word]
            starts = [pos for pos in index.positions(word) if any_form.match(text, pos)]
            if not starts:
                continue
            if len(values) == 1:
                found.add(values[0][0])
                continue
            for canonical, pattern in values:
                if canonical not in found and any(pattern.match(text, pos) for pos in starts):
                    found.add(canonical)
        if self._always_starts is not None:
            for mark in self._always_starts.finditer(text):
                match = self._always.match(text, mark.start())
                if match:
                    found.add(self._always_names[int(match.lastgroup[1:])])
        elif self._always is not None:
            for match in self._always.finditer(text):
                found.add(self._always_names[int(match.lastgroup[1:])])
        return frozenset(found)


class TextIndex:
    """The ``[a-z0-9]+`` words of a lower-cased text, with their offsets computed on demand."""

    def __init__(self, lowered: str) -> None:
        self.text = lowered
        # = set(WORD.findall(lowered)), faster: every byte but [a-z0-9] becomes a space (and a
        # non-ASCII character one "?" first), then a plain split
        self.words = set(lowered.encode("ascii", "replace").translate(_SPACES).decode().split())
        self._positions: dict[str, list[int]] = {}

    def positions(self, word: str) -> list[int]:
        """Offsets where ``word`` occurs as a whole word."""
        cached = self._positions.get(word)
        if cached is None:
            text = self.text
            cached = [
                start
                for start in map(_start, _word_pattern(word).finditer(text))
                if not start or text[start - 1] not in _WORD_CHARS
            ]
            self._positions[word] = cached
        return cached


_start = re.Match.start
_SPACES = bytes(c if chr(c) in string.ascii_lowercase + string.digits else 32 for c in range(256))
_WORD_CHARS = frozenset(string.ascii_letters + string.digits)


@functools.lru_cache(maxsize=4096)
def _word_pattern(word: str) -> re.Pattern:
    # literal first so that re's fast literal search applies; the left boundary is checked after
    return re.compile(re.escape(word) + r"(?![a-z0-9])")


def _bounded(forms: list[str]) -> re.Pattern:
    return re.compile(f"{BOUNDARY_BEFORE}(?:{'|'.join(forms)}){BOUNDARY_AFTER}")
