"""Workflow reports print themselves, save as strict JSON and load back, as plain mappings."""

import json

import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.evaluation.reports import AblationReport, EvaluationReport, WorkflowReport
from tests.conftest import user_corpus


def test_evaluation_report_prints_saves_and_loads(tmp_path):
    report = fc.evaluate(user_corpus(), "bm25", cache_dir=None, progress=False)
    assert isinstance(report, EvaluationReport)
    assert "base:bm25" in str(report) and "R@10" in str(report)
    assert report["systems"]["base:bm25"]["n"] == 16  # the JSON contract reads as before
    path = report.save(tmp_path / "r.json")
    back = EvaluationReport.load(path)
    assert isinstance(back, EvaluationReport) and str(back) == str(report)
    assert back["systems"]["base:bm25"]["recall@10"] == report["systems"]["base:bm25"]["recall@10"]
    assert "| base:bm25 |" in report.to_markdown()  # a Markdown table for the docs


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
