"""One decision path: on real FinanceBench banks, what ``evaluate --checkpoint --domain``
reports equals, candidate for candidate, what the in-process API, ``POST /rerank`` on a real
server and the torch-free ONNX runtime return for the same candidates and base scores."""

import json

import numpy as np
import pytest
import torch

from fincrowd_ltr import api
from fincrowd_ltr.features import FEATURE_NAMES
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.metrics import ndcg_at_k
from fincrowd_ltr.model import ResidualScorer
from fincrowd_ltr.model.correction import GatedCorrection, TrainingSummary
from fincrowd_ltr.model.gate import GateCalibration, IdentityGate
from fincrowd_ltr.model.gate_features import GATE_FEATURE_NAMES
from fincrowd_ltr.training.calibration import gate_rows
from tests.serving.conftest import post, start_server

pytestmark = pytest.mark.integration
N_QUESTIONS = 8


@pytest.fixture(scope="module")
def setup(financebench, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    tmp = tmp_path_factory.mktemp("parity")
    covered = [q for q in financebench.queries if financebench.covered(q)][:N_QUESTIONS]
    data = financebench.subset(covered)
    banks = api.build_banks(
        data, ["bm25"], first_stage="bm25", cache_dir=tmp / "cache", progress=False
    )
    torch.manual_seed(1)
    scorer = ResidualScorer(len(FEATURE_NAMES), alpha=2.0)
    gate = IdentityGate(len(GATE_FEATURE_NAMES))
    with torch.no_grad():
        scorer.weight.normal_()
        gate.linear.weight.normal_()
    companies = FieldExtractor.from_passages(data.passages.values()).companies
    model = GatedCorrection(
        scorer,
        gate,
        {"fb": GateCalibration(1.0, 0.5, 0.03, 10, 0.0, 0.0, 0.5)},
        companies,
        TrainingSummary(dataset="other", base_ranker="bm25"),
    )
    # a threshold between the banks' gate probabilities: some gates open, some stay closed
    _, feats, _ = gate_rows(model, data, model.examples(data, banks, "bm25"))
    p = np.sort(1 / (1 + np.exp(-np.array([model.runtime.gate_logit(f) for f in feats]))))
    model.domains["fb"].threshold = float((p[len(p) // 2 - 1] + p[len(p) // 2]) / 2)
    model.save_pretrained(tmp / "model", onnx=True)
    return data, banks, tmp / "model"


def _candidates(data, bank):
    return [
        {"id": p, "text": data.passages[p].text, "metadata": data.passages[p].metadata()}
        for p in bank.pids
    ]


def test_evaluate_api_http_and_onnx_decide_alike(setup):
    data, banks, folder = setup
    report = api.evaluate(data, "bm25", banks=banks, checkpoint=folder, domain="fb", cache_dir=None)
    model = GatedCorrection.from_pretrained(folder)
    evaluated = model.rerank_banks(data, banks, "bm25", domain="fb")
    gated = report["systems"]["gated:bm25"]
    opened = [evaluated[q].decision.applied for q in gated["per_query"]]
    assert gated["gate_open_share"] == pytest.approx(np.mean(opened))
    assert 0 < sum(opened) < len(opened), "the parity check needs open and closed gates"
    for qid, row in gated["per_query"].items():
        assert row["ndcg@10"] == pytest.approx(
            ndcg_at_k(evaluated[qid].ranking, data.qrels[qid], 10)
        )
        assert report["rankings"]["gated:bm25"][qid] == evaluated[qid].ranking  # the order itself

    onnx_model = GatedCorrection.from_pretrained(folder, runtime="onnx")
    proc, url, _ = start_server(folder, "--max-text-chars=200000")
    try:
        for qid, result in evaluated.items():
            bank = banks.banks[qid]
            cands, base = _candidates(data, bank), bank.scores["bm25"].tolist()
            query = data.queries[qid].text
            local = model.rerank(query, cands, base, domain="fb")
            onnx = onnx_model.rerank(query, cands, base, domain="fb")
            body = [{**c, "base_score": s} for c, s in zip(cands, base, strict=True)]
            status, served = post(
                url + "/rerank",
                json.dumps({"query": query, "domain": "fb", "candidates": body}).encode(),
            )
            assert status == 200, served
            for other in (local.ranking, onnx.ranking, served["ranking"]):
                assert other == result.ranking
            for gate in (local.gate, onnx.gate, served["gate"]):
                assert gate["applied"] == result.decision.applied
            assert np.allclose(onnx.scores, local.scores, atol=1e-9)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
