"""The figures a gold answer needs, read from each dataset's own answer fields (evaluation only;
never shown to a model): FinQA's gold program's numeric arguments, TAT-QA's arithmetic
derivation or its numeric span answers, a FinanceBench answer that is a figure and nothing else.
:mod:`fincrowd_ltr.evaluation.answers` looks them up in packed contexts."""

from __future__ import annotations

import re

_ARGUMENT = re.compile(r"(?<![\w#])-?\d[\d,]*(?:\.\d+)?")
_FIGURE_ONLY = re.compile(
    r"^\s*(?:about|approximately|~)?\s*[-(]?\s*(?:us)?\$?\s*[-(]?\s*(\d[\d,]*(?:\.\d+)?)\s*\)?\s*"
    r"(?:%|percent|million|billion|thousand|m|bn|k|x|times)?\s*\)?\s*\.?\s*$",
    re.IGNORECASE,
)


def figure_of(answer) -> str | None:
    """The figure of an answer that is a figure and nothing else (``"$1,577.00"``, ``"8.7%"``),
    else None."""
    m = _FIGURE_ONLY.match(str(answer))
    return m.group(1).replace(",", "") if m else None


def program_figures(program: str) -> list[str]:
    """The numeric arguments of a FinQA program (``subtract(5829, 5735), divide(#0, 5735)``);
    constants (``const_100``) and step references (``#0``) are not figures of the filing."""
    found = []
    for m in _ARGUMENT.finditer(program.replace("const_", "const ")):
        start = m.start()
        if program.replace("const_", "const ")[max(0, start - 6) : start].endswith("const "):
            continue
        found.append(m.group(0).lstrip("-").replace(",", ""))
    return list(dict.fromkeys(found))


def tatqa_figures(question: dict) -> list[str]:
    """An arithmetic question's derivation operands, or a numeric span answer's figures."""
    kind = question.get("answer_type")
    if kind == "arithmetic":
        return list(dict.fromkeys(
            m.group(0).lstrip("-").replace(",", "")
            for m in _ARGUMENT.finditer(str(question.get("derivation") or ""))
        ))  # fmt: skip
    if kind in ("span", "multi-span"):
        answers = question.get("answer")
        items = answers if isinstance(answers, list) else [answers]
        figures = [figure_of(a) for a in items]
        return [f for f in figures if f] if all(figures) else []
    return []
