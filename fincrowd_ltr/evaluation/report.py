"""The evaluation report: metrics per system with paired-bootstrap intervals.

Shape (later capabilities add systems and fields)::

    {"dataset", "split", "bank_mode", "n_queries", "n_covered", "bank_size",
     "systems": {"base:<ranker>": {"recall@10", "recall@100", "ndcg@10", "mrr",
                                   "ci95": {metric: [lo, hi]}, "n": int, ...}},
     "systems_expanded_relevance": {...same, a passage whose text duplicates a gold passage
                                    counts as that gold passage (once)...},
     "top10_off_period_share": {...}, "top10_other_company_share": {...}}
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.metadata import passage_periods
from fincrowd_ltr.data.quirks import collapse_duplicates
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.metrics import METRICS, bootstrap_ci, per_query
from fincrowd_ltr.retrieval.banks import BankSet

TOP_K_CONTEXT = 10


def system_metrics(
    rankings: dict[str, list[str]],
    qrels: dict[str, dict[str, int]],
    qids: list[str],
    groups: list[str] | None = None,
) -> dict:
    """Mean metrics and 95% bootstrap intervals over ``qids`` for one system (resampling whole
    ``groups``, one entry per query, when given)."""
    rows = [per_query(rankings[q], qrels[q]) for q in qids]
    out: dict = {"n": len(qids)}
    ci = {}
    for name in METRICS:
        values = np.array([r[name] for r in rows], dtype=np.float64)
        out[name] = float(values.mean()) if len(values) else float("nan")
        ci[name] = list(bootstrap_ci(values, groups=groups))
    out["ci95"] = ci
    out["per_query"] = {q: r for q, r in zip(qids, rows, strict=True)}
    return out


def contamination(
    dataset: Dataset, rankings: dict[str, list[str]], qids: list[str], k: int = TOP_K_CONTEXT
) -> dict[str, float]:
    """Share of the top-``k`` from another fiscal period than the gold filing(s) (none of its
    periods among theirs: a 10-K given ``2014,2015,2016`` is not off-period for gold of
    ``2015,2016,2017``), or another company than the question's. Uses gold metadata: an
    evaluation diagnostic, not a feature."""
    off_period, other_company, counted_p, counted_c = 0, 0, 0, 0
    for qid in qids:
        gold_periods = frozenset().union(
            *(passage_periods(dataset.passages[p]) for p in dataset.qrels[qid])
        )
        company = dataset.queries[qid].company
        for pid in rankings[qid][:k]:
            passage = dataset.passages[pid]
            if gold_periods and passage.period is not None:
                counted_p += 1
                off_period += not passage_periods(passage) & gold_periods
            if company and passage.company is not None:
                counted_c += 1
                other_company += passage.company != company
    return {
        "off_period": off_period / counted_p if counted_p else float("nan"),
        "other_company": other_company / counted_c if counted_c else float("nan"),
    }


def evaluate_bankset(dataset: Dataset, bankset: BankSet, rankers: list[str]) -> dict:
    """Report every base ranker on the covered queries of ``bankset``."""
    qids = [q for q in dataset.queries if q in bankset.banks and dataset.covered(q)]
    report: dict = {
        "dataset": dataset.name,
        "split": bankset.split,
        "bank_mode": bankset.mode,
        "n_queries": len(dataset.queries),
        "n_covered": len(qids),
        "bank_size": bankset.size,
        "coverage_note": "metrics average over the questions whose gold evidence is all in the "
        "corpus (n_covered); the others are counted in n_queries",
        "interval_note": "95% percentile bootstrap over query groups (n_groups: FinanceBench's "
        "companies, TAT-QA's contexts, a BEIR question's group or company, else the pages of "
        "its answer), 2,000 resamples of whole groups",
        "n_groups": len({dataset.queries[q].group for q in qids}),
        "systems": {},
        "contamination@10": {},
        "rankings": {},  # every system's order of each question's bank (`pack --orders` reads it)
    }
    equivalents = dataset.gold_equivalents
    if equivalents is not None:
        report["systems_expanded_relevance"] = {}
    groups = [dataset.queries[q].group for q in qids]
    for ranker in rankers:
        rankings = {q: bankset.banks[q].ranking(ranker) for q in qids}
        system = f"base:{ranker}"
        report["systems"][system] = system_metrics(rankings, dataset.qrels, qids, groups)
        report["rankings"][system] = rankings
        if equivalents is not None:
            collapsed = {q: collapse_duplicates(rankings[q], equivalents[q]) for q in qids}
            report["systems_expanded_relevance"][system] = system_metrics(
                collapsed, dataset.qrels, qids, groups
            )
        if any(dataset.queries[q].company for q in qids) or any(
            dataset.passages[p].period for q in qids for p in dataset.qrels[q]
        ):
            report["contamination@10"][system] = contamination(dataset, rankings, qids)
    return report
