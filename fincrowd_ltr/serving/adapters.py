"""What the LangChain and LlamaIndex adapters hand to ``rerank``: candidates and base scores.

A framework's documents carry metadata of every kind (``source``, ``page``, a retriever's score),
so an adapter passes on only the typed fields the correction reads, and warns
(``UnreadMetadataWarning``) about keys that spell one of them another way (``"Company"``): such a
key loses its field otherwise. Base scores are the documents' own when every one has a score;
when only some have, the retriever's order is the base order and a ``BaseScoreWarning`` says so.
"""

from __future__ import annotations

import warnings

from fincrowd_ltr.data.metadata import unread_keys
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model.correction import UnreadMetadataWarning
from fincrowd_ltr.model.requests import METADATA_FIELDS


class BaseScoreWarning(UserWarning):
    """Some retrieved documents have a score and some do not: the retriever's order is used."""


def adapter_request(
    texts: list[str], metadatas: list[dict], scores: list, where: str
) -> tuple[list[dict], list[float]]:
    """The candidates (ids ``"0"``, ``"1"``, ... in retrieved order) and base scores of
    retrieved documents; ``scores`` holds each document's score or None."""
    near = {
        k
        for m in metadatas
        for k in m
        if k not in METADATA_FIELDS and str(k).strip().lower() in METADATA_FIELDS
    }
    if near:
        message = f"{where}: " + unread_keys(dict.fromkeys(sorted(near, key=str)))
        warnings.warn(message, UnreadMetadataWarning, stacklevel=3)
    given = [s is not None for s in scores]
    if all(given):
        base = [float(s) for s in scores]
    else:
        if any(given):
            warnings.warn(
                f"{where}: {given.count(False)} of {len(scores)} documents have no score, so the "
                "retriever's order is the base order (every document needs one to use them)",
                BaseScoreWarning,
                stacklevel=3,
            )
        base = [float(len(texts) - i) for i in range(len(texts))]
    candidates = [
        {"id": str(i), "text": text, "metadata": {k: m.get(k) for k in METADATA_FIELDS}}
        for i, (text, m) in enumerate(zip(texts, metadatas, strict=True))
    ]
    return candidates, base


def check_top_n(top_n: int | None, where: str) -> None:
    """Refuse a ``top_n`` that is not a count (a negative one would slice from the end)."""
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 0):
        raise DataError(f"{where}.top_n must be a count >= 0 or None; got {top_n!r}", "top_n")
