"""Pruning policies: which ranked candidates go to the packer, and in which priority.

- ``top-N``: the first N candidates;
- ``budget``: every candidate, in rank order, as many as the token budget holds (the packer cuts);
- ``constraint``: quotas first — for each period and each company the question asks for, its
  ``quota`` best-ranked candidates of that period or company — then the rest in rank order;
  near-duplicates of a passage already chosen (the same boilerplate in several years' filings)
  are skipped. With ``limit`` it keeps at most that many candidates, otherwise the budget decides.

A question that names no period and no company gets plain rank order (minus near-duplicates).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from fincrowd_ltr.data.metadata import passage_periods
from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.features.lexical import TermCounter, cosine_similarities
from fincrowd_ltr.fields import FieldExtractor

NEAR_DUPLICATE = 0.9  # TF-IDF cosine between candidates
DEFAULT_QUOTA = 2
_SPACE = re.compile(r"\s+")


def near_duplicate_of(texts: list[str], threshold: float = NEAR_DUPLICATE) -> list[int | None]:
    """For each text, the index of an earlier text it (nearly) duplicates — identical after
    whitespace and case folding, or TF-IDF cosine at least ``threshold`` — else None."""
    if not texts:
        return []
    counter = TermCounter()
    rows = [counter.counts(str(i), t) for i, t in enumerate(texts)]
    docs, _ = counter.matrix(rows, np.zeros(0, np.int64))
    sims = cosine_similarities(docs)
    folded = [_SPACE.sub(" ", t).strip().lower() for t in texts]
    out: list[int | None] = []
    for i in range(len(texts)):
        twin = next(
            (j for j in range(i) if folded[j] == folded[i] or sims[i, j] >= threshold), None
        )
        out.append(twin)
    return out


@dataclass(frozen=True)
class PruningPolicy:
    """A named pruning policy (see the module docstring)."""

    kind: str  # "top", "budget" or "constraint"
    limit: int | None = None
    quota: int = DEFAULT_QUOTA

    @property
    def name(self) -> str:
        if self.kind == "top":
            return f"top-{self.limit}"
        if self.kind == "constraint":
            return "constraint" + (f"-{self.limit}" if self.limit else "-budget")
        return "budget"

    def select(
        self, query: str, passages: list[Passage], extractor: FieldExtractor
    ) -> list[Passage]:
        """The candidates handed to the packer, in priority order (quota picks first for
        ``constraint``, rank order otherwise)."""
        if self.kind == "top":
            return passages[: self.limit]
        if self.kind == "budget":
            return list(passages)
        if self.kind != "constraint":
            raise ValueError(f"unknown pruning policy {self.kind!r}")
        twins = near_duplicate_of([p.text for p in passages])
        keep = [i for i, twin in enumerate(twins) if twin is None]
        fields = extractor.extract_query(query)
        wanted = [("period", v) for v in sorted(fields.period)] + [
            ("company", v) for v in sorted(fields.entity)
        ]
        chosen: list[int] = []
        for name, value in wanted:
            matches = [i for i in keep if _matches(passages[i], name, value, extractor)]
            chosen += [i for i in matches[: self.quota] if i not in chosen]
        chosen += [i for i in keep if i not in chosen]
        if self.limit is not None:
            chosen = chosen[: self.limit]
        return [passages[i] for i in chosen]


def _matches(passage: Passage, name: str, value: str, extractor: FieldExtractor) -> bool:
    if name == "company":
        return passage.company is not None and extractor.canonical_company(passage.company) == value
    return any(p.startswith(str(value)) for p in passage_periods(passage))


POLICIES = (
    PruningPolicy("top", 4),
    PruningPolicy("top", 8),
    PruningPolicy("top", 16),
    PruningPolicy("budget"),
    PruningPolicy("constraint", 8),
    PruningPolicy("constraint"),
)
