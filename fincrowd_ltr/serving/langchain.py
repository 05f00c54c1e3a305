"""A LangChain document compressor: drop FinDeCrowd reranking into a retrieval chain.

``FinCrowdCompressor`` reorders the documents a retriever returns (and keeps the top ``top_n``).
Base scores come from ``Document.metadata[score_key]`` when every document has one (e.g. a
reranker's relevance score); otherwise the retriever's order is the base order. Filing metadata
(company, period, doc_type, ...) is read from the documents' metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict

from fincrowd_ltr.serving.reranker import METADATA_FIELDS, GatedCorrection


class FinCrowdCompressor(BaseDocumentCompressor):
    """Rerank retrieved documents with a FinCrowd checkpoint.

    Args:
        reranker: A loaded ``GatedCorrection``.
        domain: The gate calibration to apply.
        top_n: Documents to keep (all when None).
        score_key: Metadata key holding each document's base score.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: GatedCorrection
    domain: str | None = None
    top_n: int | None = None
    score_key: str = "relevance_score"

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Any = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        if all(self.score_key in d.metadata for d in documents):
            scores = [float(d.metadata[self.score_key]) for d in documents]
        else:  # the retriever's order is the base order
            scores = [float(len(documents) - i) for i in range(len(documents))]
        candidates = [
            {
                "id": str(i),
                "text": d.page_content,
                "metadata": {k: d.metadata.get(k) for k in METADATA_FIELDS},
            }
            for i, d in enumerate(documents)
        ]
        result = self.reranker.rerank(query, candidates, scores, domain=self.domain)
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
