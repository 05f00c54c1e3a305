"""Per-corpus feature state as an explicit object: the segment names a corpus's own filings write
(harvested once) and the bank featurizer built on them.

Whoever scores banks of a corpus owns one :class:`CorpusFeaturizers` and hands it to the models
that need it (a cross-validation shares one between every fold's model, so the corpus is
harvested once); a model built without one holds its own. Nothing is kept at module level.
"""

from __future__ import annotations

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.features.bank_features import BankFeaturizer
from fincrowd_ltr.fields import FieldExtractor


def _extractor_key(extractor: FieldExtractor) -> tuple:
    """What a featurizer's output depends on in an extractor: its companies and segment names."""
    return (
        tuple(sorted((k, tuple(v)) for k, v in extractor.companies.items())),
        tuple(sorted((k, tuple(v)) for k, v in extractor.segment_names.items())),
    )


class CorpusFeaturizers:
    """Bank featurizers by corpus (the ``passages`` mapping, by identity) and extractor content.

    Args:
        limit: Corpora held at once (the oldest are dropped).
    """

    def __init__(self, limit: int = 4) -> None:
        self.limit = limit
        self._segments: dict[tuple, tuple[dict, dict[str, list[str]]]] = {}
        self._featurizers: dict[tuple, tuple[dict, BankFeaturizer]] = {}

    def segments(
        self, extractor: FieldExtractor, passages: dict[str, Passage]
    ) -> dict[str, list[str]]:
        """The segment names ``passages``' filings write for ``extractor``'s companies."""
        key = (id(passages), _extractor_key(extractor)[0])
        held = self._segments.get(key)
        if held is None or held[0] is not passages:
            self._make_room(self._segments)
            held = self._segments[key] = (passages, extractor.harvest_segments(passages.values()))
        return held[1]

    def remember_segments(
        self, extractor: FieldExtractor, passages: dict[str, Passage], names: dict[str, list[str]]
    ) -> None:
        """Keep ``names``, harvested from ``passages`` by an extractor with ``extractor``'s
        companies (``FieldExtractor.from_passages`` does), instead of harvesting them again."""
        self._make_room(self._segments)
        self._segments[(id(passages), _extractor_key(extractor)[0])] = (passages, names)

    def featurizer(self, extractor: FieldExtractor, passages: dict[str, Passage]) -> BankFeaturizer:
        """The featurizer of ``passages`` with ``extractor`` and the corpus's own segment names."""
        key = (id(passages), _extractor_key(extractor))
        held = self._featurizers.get(key)
        if held is None or held[0] is not passages:
            self._make_room(self._featurizers)
            named = extractor.with_segment_names(self.segments(extractor, passages))
            held = self._featurizers[key] = (passages, BankFeaturizer(named, passages))
        return held[1]

    def clear(self) -> None:
        self._segments.clear()
        self._featurizers.clear()

    def _make_room(self, held: dict) -> None:
        while len(held) >= self.limit:
            held.pop(next(iter(held)))


__all__ = ["CorpusFeaturizers"]
