"""Per-candidate features of a bank, the inputs of the residual correction.

For a query and its bank (candidates in bank order), each candidate gets:

- ``lexical``: BM25 of the candidate with the bank as the collection, z-scored within the bank;
- ``coverage``: the share of the query's observed fields that the candidate also observes
  (0 when the query observes none);
- ``concentration``: mean TF-IDF cosine to the candidate's 5 nearest competitors in the bank;
- ``<field>_match`` and ``<field>_conflict`` for the seven typed fields (1 or 0; an unknown field
  on either side gives 0 and 0);
- ``filing_fit``: the candidate's filing compatibility with the question's periods and implied
  filing type (:mod:`fincrowd_ltr.retrieval.filings`; 0 when either is unknown);
- ``text_period_match`` / ``text_period_conflict``: the periods printed on the page (its table
  columns and headers), not the filing's, against the question's;
- ``metric_row``: the question's metric stands next to a figure on the page;
- ``role_statement``, ``role_notes``, ``role_mdna``, ``role_other`` (cover, contents, exhibit):
  the page's role from its heading lines (:mod:`fincrowd_ltr.features.page_cues`).

``FAMILIES`` groups the features for ablations.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.features.lexical import VERSION as LEXICAL_VERSION
from fincrowd_ltr.features.lexical import TermCounter, bank_bm25, local_concentration
from fincrowd_ltr.features.page_cues import VERSION as CUES_VERSION
from fincrowd_ltr.features.page_cues import metric_row, page_role, text_periods
from fincrowd_ltr.fields.compatibility import Compatibility, compare_field, compare_period
from fincrowd_ltr.fields.extractor import FIELD_NAMES, FieldExtractor, FinancialFields
from fincrowd_ltr.retrieval.filings import VERSION as FILINGS_VERSION
from fincrowd_ltr.retrieval.filings import filing_score, implied_kinds

PAGE_ROLES = ("statement", "notes", "mdna", "other")
# the versions of the code that computes the features beside the extractor's: a checkpoint
# records them, and the feature cache's key holds them
FEATURE_VERSIONS: dict[str, int] = {
    "page_cues": CUES_VERSION,
    "filings": FILINGS_VERSION,
    "lexical": LEXICAL_VERSION,
}
FEATURE_NAMES: tuple[str, ...] = (
    "lexical",
    "coverage",
    "concentration",
    *(f"{name}_{kind}" for name in FIELD_NAMES for kind in ("match", "conflict")),
    "filing_fit",
    "text_period_match",
    "text_period_conflict",
    "metric_row",
    *(f"role_{role}" for role in PAGE_ROLES),
)
TYPED = 3  # column of the first typed-field feature
CONFLICT_COLUMNS = tuple(FEATURE_NAMES.index(f"{name}_conflict") for name in FIELD_NAMES)
PAGE = TYPED + 2 * len(FIELD_NAMES)  # column of the first page feature


def family_of(name: str) -> str:
    """The ablation family of a feature: ``lexical``, ``coverage``, ``concentration``, a field
    name (its match/conflict pair), ``filing``, ``text_period``, ``metric_row`` or ``role``."""
    if name == "filing_fit":
        return "filing"
    if name.startswith("role_"):
        return "role"
    return name.rsplit("_", 1)[0] if name.endswith(("_match", "_conflict")) else name


FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(family_of(n) for n in FEATURE_NAMES))


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
        self._cues: dict[str, tuple[str, frozenset[str], dict[frozenset[str], bool]]] = {}
        self._query_fields: dict[tuple[str, frozenset], FinancialFields] = {}

    def passage_fields(self, pid: str) -> FinancialFields:
        fields = self._fields.get(pid)
        if fields is None:
            fields = self._fields[pid] = self.extractor.extract_passage(self.passages[pid])
        return fields

    def page_cues(self, pid: str) -> tuple[str, frozenset[str], dict[frozenset[str], bool]]:
        """The page's role, the periods printed on it and, filled as questions ask, whether a
        metric set has a row on it (cached)."""
        cues = self._cues.get(pid)
        if cues is None:
            text = self.passages[pid].text
            cues = self._cues[pid] = (page_role(text), text_periods(text), {})
        return cues

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
        q_terms = self.terms.query_terms(query)
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
            out[:, TYPED + 2 * j] = [o is Compatibility.MATCH for o in found]
            out[:, TYPED + 1 + 2 * j] = [o is Compatibility.CONFLICT for o in found]
        self._page_features(query, q_fields, pids, out[:, PAGE:])
        return out

    def _page_features(
        self, query: str, q_fields: FinancialFields, pids: list[str], out: np.ndarray
    ) -> None:
        """Filing fit, printed periods, metric row and page role, written into ``out``."""
        hint = implied_kinds(query) if q_fields.period else frozenset()
        fits: dict[tuple, float] = {}
        for i, pid in enumerate(pids):
            passage = self.passages[pid]
            role, printed, rows = self.page_cues(pid)
            if q_fields.period:
                key = (passage.period, passage.doc_type)
                if key not in fits:
                    fits[key] = filing_score(*key, q_fields.period, hint)
                out[i, 0] = fits[key]
                found = compare_period(q_fields.period, printed)
                out[i, 1] = found is Compatibility.MATCH
                out[i, 2] = found is Compatibility.CONFLICT
            if q_fields.metric:
                out[i, 3] = metric_row(passage.text, q_fields.metric, rows)
            if role:
                out[i, 4 + PAGE_ROLES.index(role if role in PAGE_ROLES else "other")] = 1.0
