import math

import numpy as np
import pytest

from fincrowd_ltr.metrics import (
    bootstrap_ci,
    first_relevant_rank,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
)


def test_hand_computed_values():
    ranked = ["a", "b", "c", "d"]
    qrels = {"b": 1, "d": 1, "z": 1}  # z is relevant but not ranked
    assert recall_at_k(ranked, qrels, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, qrels, 10) == pytest.approx(2 / 3)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(dcg / ideal)
    assert reciprocal_rank(ranked, qrels) == pytest.approx(0.5)
    assert first_relevant_rank(ranked, qrels) == 2
    assert reciprocal_rank(["x"], qrels) == 0.0


def test_zero_grade_is_not_relevant_and_empty_qrels_raise():
    assert recall_at_k(["a"], {"a": 0, "b": 1}, 1) == 0.0
    with pytest.raises(ValueError):
        ndcg_at_k(["a"], {"a": 0}, 10)


def test_bootstrap_interval_contains_mean_and_is_deterministic():
    values = np.random.default_rng(1).random(200)
    lo, hi = bootstrap_ci(values)
    assert lo < values.mean() < hi
    assert (lo, hi) == bootstrap_ci(values)
    assert bootstrap_ci(np.ones(10)) == (1.0, 1.0)


def test_metrics_agree_with_ir_measures_on_a_real_run(tatqa):
    """Our metrics against ir_measures on a BM25 run over the real TAT-QA dev corpus."""
    ir_measures = pytest.importorskip("ir_measures")
    from fincrowd_ltr.retrieval.bm25 import BM25Index

    index = BM25Index.build(tatqa.passages, progress=False)
    qids = list(tatqa.queries)[:200]
    run, ours = {}, {"R@10": [], "nDCG@10": [], "RR": []}
    for qid in qids:
        pids, _ = index.search(tatqa.queries[qid].text, 100)
        # strictly decreasing scores so both tools see exactly our tie-broken order
        run[qid] = {pid: float(100 - i) for i, pid in enumerate(pids)}
        ours["R@10"].append(recall_at_k(pids, tatqa.qrels[qid], 10))
        ours["nDCG@10"].append(ndcg_at_k(pids, tatqa.qrels[qid], 10))
        ours["RR"].append(reciprocal_rank(pids, tatqa.qrels[qid]))
    qrels = {q: tatqa.qrels[q] for q in qids}
    measures = [ir_measures.R @ 10, ir_measures.nDCG @ 10, ir_measures.RR]
    theirs = ir_measures.calc_aggregate(measures, qrels, run)
    assert theirs[ir_measures.R @ 10] == pytest.approx(np.mean(ours["R@10"]), abs=1e-9)
    assert theirs[ir_measures.nDCG @ 10] == pytest.approx(np.mean(ours["nDCG@10"]), abs=1e-9)
    assert theirs[ir_measures.RR] == pytest.approx(np.mean(ours["RR"]), abs=1e-9)


def test_duplicates_of_gold_count_once_without_moving_ranks():
    from fincrowd_ltr.data.quirks import collapse_duplicates

    ranked = ["x", "dup_of_g", "g", "y"]
    collapsed = collapse_duplicates(ranked, {"dup_of_g": "g"})
    assert collapsed[:2] == ["x", "g"] and collapsed[2] != "g" and collapsed[3] == "y"
    assert recall_at_k(collapsed, {"g": 1}, 2) == 1.0
    assert ndcg_at_k(collapsed, {"g": 1}, 10) == pytest.approx(1 / math.log2(3))


def test_cluster_bootstrap_is_wider_when_groups_are_correlated():
    values = np.repeat([0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0], 10)  # 8 groups of 10 equal values
    groups = [str(i // 10) for i in range(80)]
    lo_q, hi_q = bootstrap_ci(values)
    lo_g, hi_g = bootstrap_ci(values, groups=groups)
    assert hi_g - lo_g > 1.5 * (hi_q - lo_q)
    assert lo_g < values.mean() < hi_g
    with pytest.raises(ValueError):
        bootstrap_ci(values, groups=groups[:5])


def test_tied_scores_follow_our_rule_and_match_ir_measures_where_the_rules_agree(tatqa):
    """Tie rule: equal scores keep input (first-stage) position. trec_eval, behind ir_measures,
    breaks ties by document id, descending. With ties laid out in that order the two agree."""
    ir_measures = pytest.importorskip("ir_measures")
    from fincrowd_ltr.data.ranking import rank_order
    from fincrowd_ltr.retrieval.bm25 import BM25Index

    index = BM25Index.build(tatqa.passages, progress=False)
    qids = list(tatqa.queries)[:150]
    run, ours, n_ties = {}, {"R@10": [], "nDCG@10": []}, 0
    for qid in qids:
        pids, scores = index.search(tatqa.queries[qid].text, 100)
        coarse = np.round(scores)  # many ties
        by_id = sorted(range(len(pids)), key=lambda i: pids[i], reverse=True)
        order = sorted(by_id, key=lambda i: -coarse[i])  # stable: ids descending among ties
        pids, coarse = [pids[i] for i in order], coarse[order]
        n_ties += len(coarse) - len(set(coarse.tolist()))
        ranked = [pids[i] for i in rank_order(coarse)]
        assert ranked == pids  # ties keep input position
        run[qid] = dict(zip(pids, coarse.tolist(), strict=True))
        ours["R@10"].append(recall_at_k(ranked, tatqa.qrels[qid], 10))
        ours["nDCG@10"].append(ndcg_at_k(ranked, tatqa.qrels[qid], 10))
    assert n_ties > 1000
    qrels = {q: tatqa.qrels[q] for q in qids}
    theirs = ir_measures.calc_aggregate([ir_measures.R @ 10, ir_measures.nDCG @ 10], qrels, run)
    assert theirs[ir_measures.R @ 10] == pytest.approx(np.mean(ours["R@10"]), abs=1e-9)
    assert theirs[ir_measures.nDCG @ 10] == pytest.approx(np.mean(ours["nDCG@10"]), abs=1e-9)


def test_bca_interval_agrees_with_scipy_and_shifts_with_skew():
    from scipy import stats

    x = np.random.default_rng(1).exponential(size=40)  # right-skewed gains
    lo, hi = bootstrap_ci(x, n_resamples=20000, method="bca")
    ref = stats.bootstrap((x,), np.mean, method="BCa", n_resamples=20000, random_state=0)
    assert abs(lo - ref.confidence_interval.low) < 0.02
    assert abs(hi - ref.confidence_interval.high) < 0.03
    plo, phi = bootstrap_ci(x, n_resamples=20000)
    assert lo > plo and hi > phi  # BCa moves right with a right skew
    groups = [str(i // 3) for i in range(40)]
    glo, ghi = bootstrap_ci(x, groups=groups, method="bca")
    assert glo < x.mean() < ghi
    assert bootstrap_ci(np.ones(10), method="bca") == (1.0, 1.0)
    with pytest.raises(ValueError, match="bca"):
        bootstrap_ci(x, method="student")
