"""A LlamaIndex node postprocessor: FinDeCrowd reranking inside a LlamaIndex query engine.

``FinCrowdPostprocessor`` reorders the retrieved nodes (and keeps the top ``top_n``). Base scores
are the nodes' own scores when every node has one, else the retriever's order (with a warning when
only some have one). Filing metadata
(company, period, doc_type, ...) is read from the nodes' metadata. The nodes returned are copies
whose metadata adds ``fincrowd_conflicts`` and ``fincrowd_gate_applied``, excluded from the LLM's
prompt and the embedding text; the caller's nodes are left unchanged.
"""

from __future__ import annotations

from llama_index.core.bridge.pydantic import ConfigDict
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model.correction import GatedCorrection
from fincrowd_ltr.serving.adapters import adapter_request, check_top_n


class FinCrowdPostprocessor(BaseNodePostprocessor):
    """Rerank retrieved nodes with a FinCrowd correction.

    Args:
        model: A loaded :class:`~fincrowd_ltr.model.correction.GatedCorrection`.
        domain: The gate calibration to apply (None: the always-on correction).
        fallback: ``"identity"``: an uncalibrated domain keeps the retriever's order
            (``"error"``, the default: it raises), as ``rerank`` takes it.
        top_n: Nodes to keep (all when None).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: GatedCorrection
    domain: str | None = None
    fallback: str = "error"
    top_n: int | None = None

    @classmethod
    def class_name(cls) -> str:
        return "FinCrowdPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        if query_bundle is None:
            raise DataError("FinCrowdPostprocessor needs the query (query_bundle)")
        check_top_n(self.top_n, "FinCrowdPostprocessor")
        candidates, scores = adapter_request(
            [n.node.get_content() for n in nodes],
            [n.node.metadata for n in nodes],
            [n.score for n in nodes],
            "FinCrowdPostprocessor",
        )
        result = self.model.rerank(
            query_bundle.query_str, candidates, scores, self.domain, self.fallback
        )
        out = []
        for cid, score in list(zip(result.ranking, result.scores, strict=True))[: self.top_n]:
            out.append(
                NodeWithScore(node=_annotated(nodes[int(cid)].node, result, cid), score=score)
            )
        return out


EXPLANATION_KEYS = ("fincrowd_conflicts", "fincrowd_gate_applied")


def _annotated(node, result, cid: str):
    """A copy of ``node`` carrying the explanation in metadata keys that LlamaIndex keeps out of
    the LLM's prompt and the embedding text (the caller's node is not changed)."""
    copy = node.model_copy(deep=True)
    copy.metadata["fincrowd_conflicts"] = result.explanation["candidates"][cid]["conflicts"]
    copy.metadata["fincrowd_gate_applied"] = result.gate["applied"]
    for excluded in (copy.excluded_llm_metadata_keys, copy.excluded_embed_metadata_keys):
        excluded.extend(k for k in EXPLANATION_KEYS if k not in excluded)
    return copy
