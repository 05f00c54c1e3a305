"""The field extractor of a corpus, built without holding every page's text at once."""

from __future__ import annotations

from collections.abc import Mapping

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.fields.extractor import FieldExtractor


def corpus_extractor(passages: Mapping[str, Passage], harvest: bool = True) -> FieldExtractor:
    """``FieldExtractor.from_passages(passages.values(), harvest=harvest)``, the same extractor,
    for pages read from disk too: a page store's text-less headers give the companies (their
    texts read for a ticker's name), and its pages stream once, front to back, for the segment
    names (``from_passages`` holds every page it is given)."""
    headers = getattr(passages, "headers", None)
    if headers is None:
        return FieldExtractor.from_passages(passages.values(), harvest=harvest)
    extractor = FieldExtractor.from_passages(headers.values(), texts=passages, harvest=False)
    if not harvest:
        return extractor
    return extractor.with_segment_names(extractor.harvest_segments(passages.values()))
