"""Evaluating a correction against its base: paired deltas, regression and improvement rates,
and the metadata oracle that bounds what removing conflicting filings could gain."""

from __future__ import annotations

import numpy as np
import torch

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.evaluation.metrics import METRICS, bootstrap_ci, per_query
from fincrowd_ltr.model import ResidualScorer
from fincrowd_ltr.training.data import BankExample


def corrected_rankings(scorer: ResidualScorer, examples: list[BankExample]) -> dict[str, list[str]]:
    """Rankings by the corrected score (ties by bank position)."""
    out = {}
    with torch.no_grad():
        for e in examples:
            final = scorer(torch.from_numpy(e.features), torch.from_numpy(e.base)).numpy()
            order = np.argsort(-final, kind="stable")
            out[e.qid] = [e.pids[i] for i in order]
    return out


def base_rankings(examples: list[BankExample]) -> dict[str, list[str]]:
    return {e.qid: [e.pids[i] for i in np.argsort(-e.base, kind="stable")] for e in examples}


def _conflicts_with_gold(passage, companies: set[str], periods: set[str]) -> bool:
    if companies and passage.company is not None and passage.company not in companies:
        return True
    return bool(periods) and passage.period is not None and passage.period not in periods


def metadata_oracle_rankings(dataset: Dataset, examples: list[BankExample]) -> dict[str, list[str]]:
    """Base order with every candidate removed whose filing conflicts with the gold filing's
    company or period (uses gold metadata: an upper reference, not a system)."""
    out = {}
    for qid, ranked in base_rankings(examples).items():
        gold = [dataset.passages[p] for p in dataset.qrels.get(qid, {})]
        companies = {p.company for p in gold} - {None}
        periods = {p.period for p in gold} - {None}
        out[qid] = [
            pid
            for pid in ranked
            if not _conflicts_with_gold(dataset.passages[pid], companies, periods)
        ]
    return out


def compare(
    dataset: Dataset, system: dict[str, list[str]], base: dict[str, list[str]], qids: list[str]
) -> dict:
    """Metrics of ``system`` with intervals, paired deltas against ``base`` and the shares of
    questions whose nDCG@10 falls (regression) or rises (improvement)."""
    groups = [dataset.queries[q].group for q in qids]
    rows = {q: per_query(system[q], dataset.qrels[q]) for q in qids}
    base_rows = {q: per_query(base[q], dataset.qrels[q]) for q in qids}
    out: dict = {"n": len(qids), "ci95": {}, "delta": {}, "delta_ci95": {}}
    for name in METRICS:
        values = np.array([rows[q][name] for q in qids])
        deltas = values - np.array([base_rows[q][name] for q in qids])
        out[name] = float(values.mean()) if len(values) else float("nan")
        out["ci95"][name] = list(bootstrap_ci(values, groups=groups))
        out["delta"][name] = float(deltas.mean()) if len(deltas) else float("nan")
        out["delta_ci95"][name] = list(bootstrap_ci(deltas, groups=groups))
    nd = np.array([rows[q]["ndcg@10"] - base_rows[q]["ndcg@10"] for q in qids])
    out["regression_rate"] = float((nd < -1e-12).mean()) if len(nd) else float("nan")
    out["improvement_rate"] = float((nd > 1e-12).mean()) if len(nd) else float("nan")
    out["per_query"] = rows
    return out
