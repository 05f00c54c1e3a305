"""The LangChain adapter with the real langchain-core package."""

from langchain_core.documents import Document

from fincrowd_ltr.model.correction import GatedCorrection
from fincrowd_ltr.serving.langchain import FinCrowdCompressor
from tests.serving.conftest import BASE, QUERY, candidates


def _documents(with_scores: bool) -> list[Document]:
    docs = []
    for c, score in zip(candidates(), BASE, strict=True):
        meta = dict(c["metadata"])
        if with_scores:
            meta["relevance_score"] = score
        docs.append(Document(page_content=c["text"], metadata=meta, id=c["id"]))
    return docs


def test_compressor_reorders_like_the_reranker(checkpoint):
    reranker = GatedCorrection.from_pretrained(checkpoint)
    compressor = FinCrowdCompressor(reranker=reranker, domain="open", top_n=3)
    kept = compressor.compress_documents(_documents(True), QUERY)
    expected = reranker.rerank(QUERY, candidates(), BASE, domain="open")
    assert [d.id for d in kept] == expected.ranking[:3]
    assert kept[0].metadata["fincrowd_gate_applied"] is True
    assert kept[0].metadata["fincrowd_conflicts"] == []
    assert kept[0].metadata["relevance_score"] == BASE[int(expected.ranking[0][1:])]


def test_closed_gate_keeps_the_retriever_order(checkpoint):
    reranker = GatedCorrection.from_pretrained(checkpoint)
    compressor = FinCrowdCompressor(reranker=reranker, domain="closed")
    docs = _documents(False)  # no scores: the retriever's order is the base order
    assert [d.id for d in compressor.compress_documents(docs, QUERY)] == [d.id for d in docs]
    assert compressor.compress_documents([], QUERY) == []


def test_compressor_inside_a_contextual_compression_retriever(checkpoint):
    """What a LangChain user writes: the [langchain] extra is enough for it."""
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.retrievers import BaseRetriever

    class Fixed(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return _documents(True)

    reranker = GatedCorrection.from_pretrained(checkpoint)
    retriever = ContextualCompressionRetriever(
        base_compressor=FinCrowdCompressor(reranker=reranker, domain="open", top_n=2),
        base_retriever=Fixed(),
    )
    docs = retriever.invoke(QUERY)
    assert [d.id for d in docs] == reranker.rerank(QUERY, candidates(), BASE, "open").ranking[:2]


def test_the_ninth_walks_silent_adapter_inputs_are_said(checkpoint):
    """A misspelt filing key was dropped without the warning `rerank` gives, one missing score
    threw every score away without a word, and ``top_n=-1`` sliced off the last document."""
    import pytest

    from fincrowd_ltr.data.schema import DataError
    from fincrowd_ltr.model.correction import UnreadMetadataWarning
    from fincrowd_ltr.serving.adapters import BaseScoreWarning

    reranker = GatedCorrection.from_pretrained(checkpoint)
    # an uncalibrated domain with the identity fallback keeps the retriever's order
    kept = FinCrowdCompressor(reranker=reranker, domain="nowhere", fallback="identity")
    docs = _documents(True)
    base_order = sorted(docs, key=lambda d: -d.metadata["relevance_score"])
    assert [d.id for d in kept.compress_documents(docs, QUERY)] == [d.id for d in base_order]
    with pytest.raises(DataError, match="nowhere"):
        FinCrowdCompressor(reranker=reranker, domain="nowhere").compress_documents(docs, QUERY)
    compressor = FinCrowdCompressor(reranker=reranker, domain="closed")
    docs = _documents(True)
    del docs[2].metadata["relevance_score"]
    with pytest.warns(BaseScoreWarning, match="1 of 6 documents have no score"):
        kept = compressor.compress_documents(docs, QUERY)
    assert [d.id for d in kept] == [d.id for d in docs]  # the retriever's order, as said
    spelt = _documents(True)
    spelt[0].metadata["Company"] = spelt[0].metadata.pop("company", "Acme")
    with pytest.warns(UnreadMetadataWarning, match="'Company'.*did you mean 'company'"):
        compressor.compress_documents(spelt, QUERY)
    with pytest.raises(DataError, match="top_n must be a count"):
        FinCrowdCompressor(reranker=reranker, top_n=-1).compress_documents(docs, QUERY)
