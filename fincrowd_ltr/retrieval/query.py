"""Query processing for a financial first stage, without an LLM.

Steps (each can be switched on alone, for ablations):

- ``instructions``: drop answer-format and persona boilerplate ("Round your answer to two decimal
  places", "Give a response to the question by relying on ...", "Assume that you are ...");
- ``periods``: normalise fiscal-year spellings to the years filings print ("FY2018", "FY 18",
  "FY'18" -> "2018");
- ``synonyms``: append plain phrases from ``synonyms.txt`` for each metric the question names
  ("capital expenditure" -> "purchases of property, plant and equipment", ...); the list is plain
  text, separate from the extractor's patterns (which say what *not* to match, e.g. "deferred
  revenue", and must never be searched as words);
- ``keywords``: append the question's key phrases found by YAKE (Campos et al., 2020), a
  statistical keyword extractor without a model: the reviewed FinanceRAG system's "original query
  plus extracted keywords" expansion, without an LLM.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

from fincrowd_ltr.fields import FieldExtractor

STEPS = ("instructions", "periods", "synonyms", "keywords")
QUERY_STEPS = ("instructions", "periods", "synonyms")  # what "query" stands for in stage names
MAX_SYNONYMS = 6  # phrases added per metric
SYNONYMS_FILE = Path(__file__).with_name("synonyms.txt")
MAX_KEYWORDS = 5  # key phrases added by the keywords step
MAX_KEYWORD_WORDS = 3

# imperative boilerplate: one sentence (or clause up to the next full stop / question mark) each
_INSTRUCTION = re.compile(
    r"(?i)\b(?:round (?:your|the) answer|give a response to the question by|address the question"
    r" by|calculate what was asked by|respond to the question by|answer the following question"
    r"|answer the question by|assume that you are|we need to calculate a reasonable approximation"
    r"|please (?:answer|respond|provide))[^.?]*[.?]?"
)
_FISCAL_YEAR = re.compile(r"(?i)\bFY\s?'?(\d{4}|\d{2})\b")


def _year(match: re.Match) -> str:
    year = match.group(1)
    return year if len(year) == 4 else f"20{year}"


@lru_cache(maxsize=1)
def synonyms() -> dict[str, list[str]]:
    """``{metric: [phrase, ...]}`` from ``synonyms.txt``."""
    out: dict[str, list[str]] = {}
    for line in SYNONYMS_FILE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        metric, _, phrases = line.partition(":")
        out[metric.strip()] = [p.strip() for p in phrases.split(";") if p.strip()]
    return out


def synonyms_fingerprint() -> str:
    """A hash of the synonym list (part of the bank cache key)."""
    return hashlib.sha1(SYNONYMS_FILE.read_bytes()).hexdigest()[:12]


@lru_cache(maxsize=1)
def _yake():
    import yake

    return yake.KeywordExtractor(lan="en", n=MAX_KEYWORD_WORDS, top=MAX_KEYWORDS)


def keywords(text: str) -> list[str]:
    """The question's key phrases, best first (YAKE, English stopwords, up to 3 words)."""
    return [phrase for phrase, _ in _yake().extract_keywords(text)]


class QueryProcessor:
    """Rewrites a question for a lexical first stage.

    Args:
        extractor: Finds the metrics whose synonyms are added.
        steps: Which steps to apply, in ``STEPS`` order.
    """

    def __init__(self, extractor: FieldExtractor, steps: tuple[str, ...] = QUERY_STEPS) -> None:
        unknown = [s for s in steps if s not in STEPS]
        if unknown:
            raise ValueError(f"unknown query processing step(s) {unknown}; choose from {STEPS}")
        self.extractor = extractor
        self.steps = tuple(s for s in STEPS if s in steps)

    def __call__(self, query: str) -> str:
        text = query
        if "instructions" in self.steps:
            stripped = _INSTRUCTION.sub(" ", text).strip()
            text = stripped or text  # never strip a question to nothing
        if "periods" in self.steps:
            text = _FISCAL_YEAR.sub(_year, text)
        extra: list[str] = []
        if "synonyms" in self.steps:
            extra += [
                form
                for metric in sorted(self.extractor.extract_query(text).metric)
                for form in synonyms().get(metric, [])[:MAX_SYNONYMS]
            ]
        if "keywords" in self.steps:
            extra += keywords(text)  # key phrases of the question itself
        return " ".join(" ".join([text, *extra]).split())
