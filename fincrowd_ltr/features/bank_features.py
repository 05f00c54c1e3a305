"""Per-candidate features of a bank, the inputs of the residual correction.

For a query and its bank (candidates in bank order), each candidate gets:

- ``lexical``: BM25 of the candidate with the bank as the collection, z-scored within the bank;
- ``coverage``: the share of the query's observed fields that the candidate also observes
  (0 when the query observes none);
- ``concentration``: mean TF-IDF cosine to the candidate's 5 nearest competitors in the bank;
- ``<field>_match`` and ``<field>_conflict`` for the seven typed fields (1 or 0; an unknown field
  on either side gives 0 and 0).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.features.lexical import TermCounter, bank_bm25, local_concentration
from fincrowd_ltr.fields.compatibility import Compatibility, compare_field
from fincrowd_ltr.fields.extractor import FIELD_NAMES, FieldExtractor, FinancialFields

FEATURE_NAMES: tuple[str, ...] = (
    "lexical",
    "coverage",
    "concentration",
    *(f"{name}_{kind}" for name in FIELD_NAMES for kind in ("match", "conflict")),
)


def zscore(values: np.ndarray) -> np.ndarray:
    """Standardise within a bank; a constant bank gives zeros."""
    values = np.asarray(values, dtype=np.float64)
    std = values.std()
    return (
        np.zeros_like(values)
        if std == 0 or not np.isfinite(std)
        else (values - values.mean()) / std
    )


def schema_coverage(query: FinancialFields, candidate: FinancialFields) -> float:
    """Share of the query's observed fields that the candidate observes too."""
    observed = query.observed()
    if not observed:
        return 0.0
    return sum(1 for name in observed if getattr(candidate, name)) / len(observed)


class BankFeaturizer:
    """Computes bank features, caching each passage's fields and term counts.

    Args:
        extractor: The field extractor (its version is part of a model's identity).
        passages: The corpus, by id.
    """

    def __init__(self, extractor: FieldExtractor, passages: dict[str, Passage]) -> None:
        self.extractor = extractor
        self.passages = passages
        self.terms = TermCounter()
        self._fields: dict[str, FinancialFields] = {}
        self._query_fields: dict[tuple[str, frozenset], FinancialFields] = {}

    def passage_fields(self, pid: str) -> FinancialFields:
        fields = self._fields.get(pid)
        if fields is None:
            fields = self._fields[pid] = self.extractor.extract_passage(self.passages[pid])
        return fields

    def query_fields(self, text: str, pids: list[str] | None = None) -> FinancialFields:
        """The question's fields, reading companies with the extractor's vocabulary plus the
        metadata companies of the candidates ``pids`` (see ``FieldExtractor.extract_query``)."""
        companies = frozenset() if pids is None else self.bank_companies(pids)
        key = (text, companies)
        fields = self._query_fields.get(key)
        if fields is None:
            fields = self._query_fields[key] = self.extractor.extract_query(text, companies)
        return fields

    def bank_companies(self, pids: list[str]) -> frozenset[str]:
        """Metadata companies of the candidates that the extractor's vocabulary lacks."""
        known = self.extractor.known_company
        return frozenset(
            str(c) for c in {self.passages[p].company for p in pids} if c and not known(str(c))
        )

    def bank_terms(self, pids: list[str], query: str = "") -> tuple[sparse.csr_matrix, np.ndarray]:
        """Term counts of the bank (rows in bank order, columns the bank's terms) and the columns
        of the query's terms."""
        q_terms = np.unique(np.array(self.terms.tokens(query), dtype=np.int64))
        rows = [self.terms.counts(p, self.passages[p].text) for p in pids]
        return self.terms.matrix(rows, q_terms)

    def features(self, query: str, pids: list[str]) -> np.ndarray:
        """``(len(pids), len(FEATURE_NAMES))`` float64 features, rows in bank order."""
        q_fields = self.query_fields(query, pids)
        docs, q_terms = self.bank_terms(pids, query)
        out = np.zeros((len(pids), len(FEATURE_NAMES)), dtype=np.float64)
        out[:, 0] = zscore(bank_bm25(docs, q_terms))
        out[:, 2] = local_concentration(docs)
        candidates = [self.passage_fields(pid) for pid in pids]
        observed = q_fields.observed()
        for j, name in enumerate(FIELD_NAMES):
            wanted = getattr(q_fields, name)
            if not wanted:
                continue  # unknown on the query side: no match, no conflict, no coverage
            values = [getattr(c, name) for c in candidates]
            outcomes: dict[frozenset, Compatibility] = {}  # banks repeat values (years, units)
            for value in set(values):
                if value:
                    outcomes[value] = compare_field(name, wanted, value)
            found = [
                outcomes.get(v, Compatibility.UNKNOWN) if v else Compatibility.UNKNOWN
                for v in values
            ]
            out[:, 1] += np.array([bool(v) for v in values], dtype=np.float64) / len(observed)
            out[:, 3 + 2 * j] = [o is Compatibility.MATCH for o in found]
            out[:, 4 + 2 * j] = [o is Compatibility.CONFLICT for o in found]
        return out
