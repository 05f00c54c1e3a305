"""A LangChain document compressor: drop FinDeCrowd reranking into a retrieval chain.

``FinCrowdCompressor`` reorders the documents a retriever returns (and keeps the top ``top_n``).
Base scores come from ``Document.metadata[score_key]`` when every document has one (e.g. a
reranker's relevance score); otherwise the retriever's order is the base order (with a warning
when only some have one). Filing metadata (company, period, doc_type, ...) is read from the
documents' metadata (:mod:`fincrowd_ltr.serving.adapters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict

from fincrowd_ltr.serving.adapters import adapter_request, check_top_n
from fincrowd_ltr.serving.reranker import GatedCorrection


class FinCrowdCompressor(BaseDocumentCompressor):
    """Rerank retrieved documents with a FinCrowd checkpoint.

    Args:
        reranker: A loaded ``GatedCorrection``.
        domain: The gate calibration to apply.
        fallback: ``"identity"``: an uncalibrated domain keeps the retriever's order
            (``"error"``, the default: it raises), as ``rerank`` takes it.
        top_n: Documents to keep (all when None).
        score_key: Metadata key holding each document's base score.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: GatedCorrection
    domain: str | None = None
    fallback: str = "error"
    top_n: int | None = None
    score_key: str = "relevance_score"

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Any = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        check_top_n(self.top_n, "FinCrowdCompressor")
        candidates, scores = adapter_request(
            [d.page_content for d in documents],
            [d.metadata for d in documents],
            [d.metadata.get(self.score_key) for d in documents],
            "FinCrowdCompressor",
        )
        result = self.reranker.rerank(query, candidates, scores, self.domain, self.fallback)
        out = []
        for cid, score in list(zip(result.ranking, result.scores, strict=True))[: self.top_n]:
            doc = documents[int(cid)]
            metadata = {
                **doc.metadata,
                "fincrowd_score": score,
                "fincrowd_conflicts": result.explanation["candidates"][cid]["conflicts"],
                "fincrowd_gate_applied": result.gate["applied"],
            }
            out.append(Document(page_content=doc.page_content, metadata=metadata, id=doc.id))
        return out
