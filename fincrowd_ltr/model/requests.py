"""A reranking request's pieces: candidates as callers send them, the result they get back, and
the bounded cache of request passages (their fields and term statistics) a served model keeps."""

from __future__ import annotations

from dataclasses import dataclass, field

from fincrowd_ltr.data.metadata import METADATA_FIELDS, normalise_metadata
from fincrowd_ltr.data.schema import DataError, Passage, titled
from fincrowd_ltr.features.bank_features import BankFeaturizer
from fincrowd_ltr.fields import FieldExtractor

CACHE_LIMIT = 200_000  # request passages whose fields and term counts are kept


@dataclass
class Candidate:
    """A candidate passage: id, text and optional metadata (company, period, doc_type, ...) and
    title (read as a BEIR corpus record's: on a first line before the text, and the document
    when the metadata names none)."""

    id: str
    text: str
    metadata: dict = field(default_factory=dict)
    title: str = ""


@dataclass
class RerankResult:
    """Ordered ids, their final scores, the gate's decision, the explanation and distribution
    shift warnings (:mod:`fincrowd_ltr.model.shift`; empty when the bank looks like training)."""

    ranking: list[str]
    scores: list[float]
    gate: dict
    explanation: dict
    warnings: list[str] = field(default_factory=list)


def parse_candidate(c: Candidate | dict, index: int) -> Candidate:
    """A checked candidate with its metadata in canonical form
    (:func:`~fincrowd_ltr.data.metadata.normalise_metadata`) and its ``title`` (a string, when
    given) joined to its text as the BEIR loader joins it; the caller's object is not changed.
    Any object with ``id`` and ``text`` attributes (and optionally ``metadata`` and ``title``)
    reads like a :class:`Candidate`."""
    is_dict = isinstance(c, dict)
    missing = [k for k in ("id", "text") if (k not in c if is_dict else not hasattr(c, k))]
    if missing:
        raise DataError(
            f"candidates[{index}]: missing field(s) {missing}", f"candidates[{index}].{missing[0]}"
        )
    if is_dict:
        cid, text, metadata = c["id"], c["text"], c.get("metadata") or {}
        title = c.get("title") or ""
    else:  # a Candidate, or any object with the same attributes
        cid, text, metadata = c.id, c.text, getattr(c, "metadata", {})
        title = getattr(c, "title", "") or ""
    where = f"candidates[{index}]"
    if cid is None or isinstance(cid, bool) or not str(cid).strip():  # None read as "None"
        raise DataError(f"{where}.id must be a non-empty id; got {cid!r}", f"{where}.id")
    for name, value in (("text", text), ("title", title)):
        if not isinstance(value, str):
            raise DataError(f"{where}.{name} must be a string", f"{where}.{name}")
    if not isinstance(metadata, dict):
        raise DataError(f"{where}.metadata must be an object", f"{where}.metadata")
    metadata = normalise_metadata(metadata, f"{where}.metadata")
    text, document = titled(title, text, metadata.get("document"))
    if document is not None:
        metadata = {**metadata, "document": document}
    return Candidate(str(cid) if is_dict else cid, text, metadata)


def request_passage(key: str, c: Candidate) -> Passage:
    """The passage of a parsed (normalised) candidate."""
    return Passage(key, c.text, **{k: c.metadata.get(k) for k in METADATA_FIELDS})


class RequestCache:
    """Request passages by content (text and metadata: the same text with other metadata is
    another passage), their featurizer and their explanation fields; emptied when it reaches
    ``CACHE_LIMIT`` passages (bounded memory in a long-running server)."""

    def __init__(self, extractor: FieldExtractor) -> None:
        self.extractor = extractor
        self.clear()

    def clear(self) -> None:
        self._keys: dict[tuple, str] = {}
        self.passages: dict[str, Passage] = {}
        self._field_dicts: dict[str, dict] = {}
        self.featurizer = BankFeaturizer(self.extractor, self.passages)

    def key(self, c: Candidate) -> str:
        """The cache key of a candidate; a new passage joins the cache."""
        identity = (c.text, tuple(str(c.metadata.get(k)) for k in METADATA_FIELDS))
        key = self._keys.get(identity)
        if key is None:
            if len(self.passages) >= CACHE_LIMIT:
                self.clear()
            key = self._keys[identity] = f"p{len(self._keys)}"
            self.passages[key] = request_passage(key, c)
        return key

    def fields(self, key: str) -> dict:
        """A cached passage's observed fields (for explanations)."""
        found = self._field_dicts.get(key)
        if found is None:
            as_dict = self.featurizer.passage_fields(key).as_dict()
            found = self._field_dicts[key] = {k: v for k, v in as_dict.items() if v}
        return found
