"""The label-free check: a fit's always-on correction on held-out companies' synthetic
questions, pooled over its gate folds' orderable rows, with a company-cluster interval."""

import math

import pytest

from fincrowd_ltr.evaluation.label_free import held_out_synthetic_check
from fincrowd_ltr.evaluation.reports import CrossValidationReport


def _fold(qids, gains, orderable):
    return {"rows": {"synthetic_test": {"qids": qids, "logits": [0.0] * len(qids),
                                        "gains": gains, "orderable": orderable}}}  # fmt: skip


def _printed(check) -> str:
    return str(CrossValidationReport(dataset="d", ranker="bm25", modes={},
                                     synthetic_held_out=check))  # fmt: skip


def test_pools_orderable_rows_of_every_fold_with_a_company_interval():
    folds = [
        _fold(["a1", "a2", "x"], [0.5, -0.25, 0.9], [True, True, False]),
        {"rows": {"calibration": {}}},  # a fold without held-out synthetic questions
        _fold(["b1", "c1"], [0.0, 0.25], [True, True]),
    ]
    groups = {"a1": "A", "a2": "A", "x": "A", "b1": "B", "c1": "C"}
    check = held_out_synthetic_check(folds, groups)
    assert check["n_questions"] == 5 and check["n_orderable"] == 4 and check["n_groups"] == 3
    assert check["ndcg@10_gain"] == pytest.approx((0.5 - 0.25 + 0.0 + 0.25) / 4)
    assert check["improved"] == pytest.approx(0.5) and check["harmed"] == pytest.approx(0.25)
    lo, hi = check["ci95"]
    assert lo <= check["ndcg@10_gain"] <= hi and lo < hi  # three companies: an interval
    line = _printed(check)
    assert "label-free check: the always-on correction on 4 orderable synthetic questions" in line
    assert "of 3 held-out companies" in line and "+0.125" in line and "harmed 25.0%" in line


def test_a_question_without_a_company_is_its_own_cluster():
    check = held_out_synthetic_check([_fold(["a", "b", "c"], [0.1, 0.2, 0.3], [True] * 3)],
                                     {"a": "A", "b": "A"})  # fmt: skip
    assert check["n_groups"] == 2


def test_no_held_out_synthetic_question_gives_no_check_and_no_line():
    assert held_out_synthetic_check([{"rows": {"calibration": {}}}], {}) is None
    assert held_out_synthetic_check([], {}) is None
    assert "label-free" not in str(CrossValidationReport(dataset="d", ranker="bm25", modes={}))


def test_only_unorderable_rows_state_no_gain():
    check = held_out_synthetic_check([_fold(["a"], [0.0], [False])], {"a": "A"})
    assert check["n_questions"] == 1 and check["n_orderable"] == 0
    assert math.isnan(check["ndcg@10_gain"]) and math.isnan(check["ci95"][0])
    assert "none of the 1 held-out synthetic questions" in _printed(check)


def test_one_held_out_company_prints_no_interval_and_survives_a_saved_report(tmp_path):
    check = held_out_synthetic_check([_fold(["a", "b"], [0.2, -0.1], [True, True])],
                                     {"a": "A", "b": "A"})  # fmt: skip
    assert math.isnan(check["ci95"][0])  # one cluster: no interval to state
    path = CrossValidationReport(dataset="d", ranker="bm25", modes={},
                                 synthetic_held_out=check).save(tmp_path / "r.json")  # fmt: skip
    line = str(CrossValidationReport.load(path))  # NaN saved as null, printed as a dash
    assert "nDCG@10 gain +0.050 [-, -], improved 50.0%, harmed 50.0%" in line
