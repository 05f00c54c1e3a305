"""The LlamaIndex node postprocessor with the real llama-index-core package."""

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from fincrowd_ltr.serving.llamaindex import FinCrowdPostprocessor  # noqa: E402
from fincrowd_ltr.serving.reranker import FinCrowdReranker  # noqa: E402
from tests.serving.conftest import BASE, QUERY, candidates  # noqa: E402


def _nodes(with_scores: bool) -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(text=c["text"], metadata=dict(c["metadata"]), id_=c["id"]),
            score=score if with_scores else None,
        )
        for c, score in zip(candidates(), BASE, strict=True)
    ]


def test_postprocessor_reorders_like_the_model(checkpoint):
    model = FinCrowdReranker.from_pretrained(checkpoint)
    post = FinCrowdPostprocessor(model=model, domain="open", top_n=3)
    nodes = _nodes(True)
    before = [dict(n.node.metadata) for n in nodes]
    kept = post.postprocess_nodes(nodes, QueryBundle(QUERY))
    expected = model.rerank(QUERY, candidates(), BASE, domain="open")
    assert [n.node.node_id for n in kept] == expected.ranking[:3]
    assert kept[0].node.metadata["fincrowd_gate_applied"] is True
    # issue 23: the caller's nodes are left alone and the explanation stays out of the prompt
    assert [n.node.metadata for n in nodes] == before
    from llama_index.core.schema import MetadataMode

    prompt = kept[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "fincrowd" not in prompt and "fincrowd" not in kept[0].node.get_content("embed")


def test_closed_gate_keeps_the_retriever_order(checkpoint):
    model = FinCrowdReranker.from_pretrained(checkpoint)
    post = FinCrowdPostprocessor(model=model, domain="closed")
    nodes = _nodes(False)
    kept = post.postprocess_nodes(nodes, QueryBundle(QUERY))
    assert [n.node.node_id for n in kept] == [n.node.node_id for n in nodes]


def test_a_node_without_a_score_is_said(checkpoint):
    from fincrowd_ltr.serving.adapters import BaseScoreWarning

    model = FinCrowdReranker.from_pretrained(checkpoint)
    nodes = _nodes(True)
    nodes[0].score = None
    with pytest.warns(BaseScoreWarning, match="1 of 6 documents have no score"):
        kept = FinCrowdPostprocessor(model=model, domain="closed").postprocess_nodes(
            nodes, QueryBundle(QUERY)
        )
    assert [n.node.node_id for n in kept] == [n.node.node_id for n in nodes]
