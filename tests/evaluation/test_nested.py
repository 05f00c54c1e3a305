"""Nested whole-system cross-validation: no outer fold's labels reach its own choices."""

import json

import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.api import nested
from fincrowd_ltr.cli import build_parser
from fincrowd_ltr.data.splits import FoldPlan
from tests.conftest import user_corpus


def test_each_fold_chooses_its_first_stage_on_the_other_folds_only(monkeypatch):
    data = user_corpus(companies=20)
    plan = FoldPlan.by_group(data, 5, 0)
    seen = []

    def spy(rows, qids, criteria):
        seen.append(list(qids))
        return next(iter(rows))

    monkeypatch.setattr(nested, "best", spy)
    chosen = nested.choose_first_stages(data, plan, ("bm25", "bm25+entity"))
    assert chosen == ["bm25"] * 5
    for k, qids in enumerate(seen):
        assert not set(qids) & set(plan.folds[k])  # the fold's own questions never choose
        others = {q for i, f in enumerate(plan.folds) if i != k for q in f}
        assert set(qids) == others


def test_nested_report_scores_every_covered_question_once_held_out():
    data = user_corpus(companies=20)
    report = fc.nested_cross_validation(
        data, "bm25", variants=("bm25", "bm25+entity"), folds=5, grid=None,
        min_calibration=1, cache_dir=None, progress=False,
    )  # fmt: skip
    plan = FoldPlan.by_group(data, 5, 0)
    assert [f["n_questions"] for f in report["folds"]] == [len(f) for f in plan.folds]
    assert [f["query_ids"] for f in report["folds"]] == [sorted(f) for f in plan.folds]
    assert all(f["first_stage"] in ("bm25", "bm25+entity") for f in report["folds"])
    base, residual = report["systems"]["base"], report["systems"]["residual"]
    assert base["n"] == residual["n"] == len(data.queries)
    delta = residual["recall@10"] - base["recall@10"]
    assert abs(residual["delta"]["recall@10"] - delta) < 1e-12
    lo, hi = residual["delta_bca95"]["ndcg@10"]
    assert lo <= residual["delta"]["ndcg@10"] <= hi
    assert residual["delta"]["ndcg@10"] > 0  # the asked year is lifted on held-out companies
    json.dumps(report)  # the report is plain JSON
    assert "| gated |" in report.to_markdown() and "nested cross-validation" in str(report)
    spread = nested.seed_spread([report, {**report, "seed": 1}])
    assert spread["spread"] == 0.0 and spread["seeds"] == [0, 1]


def test_nested_command_line():
    args = build_parser().parse_args(
        ["nested", "--dataset", "tatqa", "--ranker", "bm25", "--seeds", "0,1,2", "--no-select"]
    )
    assert args.seeds == "0,1,2" and not args.select and args.func.__name__ == "nested"


def test_nested_refuses_what_it_cannot_nest():
    data = user_corpus(companies=20)
    with pytest.raises(fc.DataError, match="gate=True"):
        fc.nested_cross_validation(data, "bm25", gate=False, cache_dir=None)
    with pytest.raises(fc.DataError, match="synthetic scope 'folds'"):
        fc.nested_cross_validation(
            data, "bm25", synthetic=fc.SyntheticSettings(n=10, scope="transductive"),
            cache_dir=None,
        )  # fmt: skip
    with pytest.raises(TypeError, match="sets first_stage per outer fold"):
        fc.nested_cross_validation(data, "bm25", first_stage="bm25", cache_dir=None)
