"""Answer support without a generator: does the packed context hold the figures the gold answer
needs?

The datasets say which figures an answer needs (the loaders put them in
``Dataset.answer_figures``, :mod:`fincrowd_ltr.data.answers`): FinQA's gold program's numeric
arguments, TAT-QA's arithmetic derivation or numeric span answers, FinanceBench answers that are
a figure and nothing else (``$1577.00``, ``8.70%``). A question whose answer is text, or a figure
computed from others that the dataset does not decompose, has none and is reported apart. A
figure counts as present when a number printed in the context equals it, or equals it after
rounding the finer of the two to the coarser one's decimals with at least three significant
digits left, in any of the scales filings print (units, thousands, millions, billions) and as a
percentage or a fraction; signs are ignored ("(1,234)" and "-1,234" both print 1,234). This is
*support*, not accuracy: an answer needs its figures in context, and having them does not make
it right.
"""

from __future__ import annotations

import math
import re

_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+(?:\.\d+)?")
SCALES = (1.0, 1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9, 100.0, 0.01)


def numbers_in(text: str) -> list[tuple[float, int]]:
    """Every number printed in ``text`` as ``(value, decimals shown)``, signs dropped."""
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group(0).replace(",", "")
        decimals = len(raw.split(".", 1)[1]) if "." in raw else 0
        out.append((float(raw), decimals))
    return out


def _significant(value: float, decimals: int) -> int:
    return len(f"{abs(value):.{decimals}f}".replace(".", "").lstrip("0"))


def _equal(figure: float, figure_decimals: int, value: float, decimals: int) -> bool:
    """Equal values, or equal after rounding the finer one to the coarser one's decimals when
    that still leaves at least three significant digits (so a printed "2" never stands for 1.6,
    while "12.5" stands for 12.46 and "1,577" for 1,577.00)."""
    if abs(figure - value) <= 1e-9 * max(1.0, abs(value)):
        return True
    d = min(figure_decimals, decimals)
    rounded = round(value, d)
    if abs(round(figure, d) - rounded) > 1e-9 * max(1.0, abs(rounded)):
        return False
    return _significant(rounded, d) >= 3


def _scaled(figure: float, decimals: int, scale: float) -> tuple[float, int]:
    shift = round(math.log10(scale))
    return figure * scale, max(0, decimals - shift)


class ContextNumbers:
    """The numbers of a packed context, for looking figures up."""

    def __init__(self, text: str) -> None:
        self.numbers = numbers_in(text)
        self._by_int: dict[int, list[tuple[float, int]]] = {}
        for value, decimals in self.numbers:
            self._by_int.setdefault(int(value), []).append((value, decimals))

    def holds(self, figure: str) -> bool:
        """Whether a number of the context equals ``figure`` (see the module docstring)."""
        found = numbers_in(str(figure))
        if not found:
            return False
        value, decimals = found[0]
        for scale in SCALES:
            target, target_decimals = _scaled(abs(value), decimals, scale)
            for key in (int(target) - 1, int(target), int(target) + 1):
                for number, shown in self._by_int.get(key, ()):
                    if _equal(target, target_decimals, number, shown):
                        return True
        return False


def support(context: str, figures: list[str]) -> float | None:
    """The share of ``figures`` the context holds (None when the answer needs none)."""
    if not figures:
        return None
    numbers = ContextNumbers(context)
    return sum(numbers.holds(f) for f in figures) / len(figures)
