"""Workflow reports print themselves, save as strict JSON and load back, as plain mappings."""

import json

import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.evaluation.reports import (
    AblationReport,
    CrossValidationReport,
    EvaluationReport,
    WorkflowReport,
)
from fincrowd_ltr.metrics import recall_at_k
from tests.conftest import user_corpus


def test_evaluation_report_prints_saves_and_loads(tmp_path):
    report_data = user_corpus()
    report = fc.evaluate(report_data, "bm25", cache_dir=None, progress=False)
    assert isinstance(report, EvaluationReport)
    assert "base:bm25" in str(report) and "R@10" in str(report)
    assert report["systems"]["base:bm25"]["n"] == 16  # the JSON contract reads as before
    path = report.save(tmp_path / "r.json")
    back = EvaluationReport.load(path)
    assert isinstance(back, EvaluationReport)

    def table(r):  # saving may add notes (undefined values written as null); both print theirs
        return [line for line in str(r).splitlines() if not line.startswith("note: ")]

    assert table(back) == table(report)
    assert all(f"note: {n}" in str(back) for n in back["notes"])
    assert back["systems"]["base:bm25"]["recall@10"] == report["systems"]["base:bm25"]["recall@10"]
    assert "| base:bm25 |" in report.to_markdown()  # a Markdown table for the docs
    # every question's order is kept (a user compares serving with it, `pack --orders` reads it)
    rankings = back["rankings"]["base:bm25"]
    assert set(rankings) == set(report["systems"]["base:bm25"]["per_query"])
    for qid, ranking in rankings.items():
        row = report["systems"]["base:bm25"]["per_query"][qid]
        assert row["recall@10"] == recall_at_k(ranking, report_data.qrels[qid], 10)


def test_ablation_report_is_typed():
    report = fc.first_stage_ablation(user_corpus(), "bm25,bm25+entity", folds=4, cache_dir=None)
    assert isinstance(report, AblationReport)
    assert "chosen per fold" in str(report)
    assert report.to_markdown().startswith("```text")


def test_a_bad_report_file_is_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"systems": ')
    with pytest.raises(fc.DataError, match="bad.json: malformed JSON"):
        WorkflowReport.load(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(fc.DataError, match="a report is a JSON object"):
        WorkflowReport.load(bad)
    with pytest.raises(fc.DataError, match="no report there"):
        WorkflowReport.load(tmp_path / "missing.json")
    from fincrowd_ltr.evaluation.reports import EvaluationReport

    bad.write_text(json.dumps({"pools": {}}))  # another workflow's report (the ninth walk)
    with pytest.raises(fc.DataError, match="not a report EvaluationReport can read"):
        EvaluationReport.load(bad)


def test_cross_validation_report_prints_held_out_and_gated_rows():
    row = {
        "recall@10": 0.5, "ndcg@10": 0.4, "delta": {"recall@10": 0.1},
        "delta_ci95": {"recall@10": [-0.05, 0.2]}, "regression_rate": 0.1,
        "n_orderable": 8, "regression_rate_orderable": 0.125,
        "crowded_failures": 2, "crowded_repaired": 1,
    }  # fmt: skip
    report = CrossValidationReport(
        dataset="d", ranker="bm25",
        modes={"retrieved": {"n_queries": 10, "n_groups": 3, "residual:bm25": row}},
        gated={"modes": {"retrieved": {"gate_open_share": 0.25, "gated:bm25": row}}},
    )  # fmt: skip
    text = str(report)
    assert "d bm25: held-out folds, retrieved banks (10 questions, 3 groups)" in text
    assert "gate opened on 0.250" in text and "repaired 1/2 crowded" in text
    assert "0.125 of 8 orderable (0.100 of all)" in text
