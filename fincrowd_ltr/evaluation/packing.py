"""Judging rankings by what the generator reads: pruning and packing each ranking, then measuring
the packed context.

Answer accuracy is not measured (no LLM runs here). What stands in for it is answer support (the
share of the figures the gold answer needs that the packed context holds:
:mod:`fincrowd_ltr.evaluation.answers`) and evidence-in-context:
the share of the question's gold passages inside the packed context, overall and for questions
that ask for several periods or companies; the share of packed tokens from another period than
the question asks (off-period); the share spent on near-duplicates of a passage already packed;
and, per assembly order, where the first gold passage sits.
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.evaluation.answers import support
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.metrics import bootstrap_ci
from fincrowd_ltr.packing.order import ORDERS, assemble
from fincrowd_ltr.packing.packer import Packer, Packing, fuse_groups, rank_halves_exceed
from fincrowd_ltr.packing.pruning import PruningPolicy, near_duplicate_of

INERT_NOTE = (
    "Assembly order never changes which passages are packed, so evidence-in-context is the same "
    "for every order; under 'document' order the ranking is discarded entirely and reordering "
    "the same survivors is inert (only pruning changes what the model reads). 'score' and "
    "'edges' keep rank information in the position of the evidence."
)
NOT_MEASURED = (
    "Answer accuracy is not measured: no generator runs here. Answer support stands in for it: "
    "the share of the figures the gold answer needs (FinQA program arguments, TAT-QA derivation "
    "operands and numeric answers, FinanceBench answers that are a figure) found in the packed "
    "context, beside the share of gold evidence inside it. An answer needs its figures in "
    "context; having them does not guarantee a correct answer."
)


def _off_period(packing: Packing, dataset: Dataset, wanted: frozenset) -> float | None:
    if not wanted or not packing.passages:
        return None
    off = 0
    for p in packing.passages:
        period = dataset.passages[p.citation.pid].period
        if period is not None and not any(str(period).startswith(w) for w in wanted):
            off += p.tokens
    return off / sum(p.tokens for p in packing.passages)


def _near_duplicate_share(packing: Packing) -> float:
    if not packing.passages:
        return 0.0
    twins = near_duplicate_of([p.text for p in packing.passages])
    spent = sum(p.tokens for p, t in zip(packing.passages, twins, strict=True) if t is not None)
    return spent / sum(p.tokens for p in packing.passages)


def _first_gold_position(packing: Packing, gold: set[str]) -> float | None:
    """Relative position (0 = first, 1 = last) of the first gold passage, None if none."""
    n = len(packing.passages)
    for i, p in enumerate(packing.passages):
        if p.citation.pid in gold:
            return i / (n - 1) if n > 1 else 0.0
    return None


def _mean_ci(values: list[float], groups: list[str]) -> dict:
    arr = np.array(values, dtype=np.float64)
    return {
        "mean": float(arr.mean()) if len(arr) else float("nan"),
        "ci95": list(bootstrap_ci(arr, groups=groups)) if len(arr) else [float("nan")] * 2,
        "n": len(arr),
    }


def evaluate_packing(
    dataset: Dataset,
    rankings: dict[str, list[str]],
    policy: PruningPolicy,
    packer: Packer,
    extractor: FieldExtractor,
    depth: int = 30,
) -> dict:
    """Pack every question's top-``depth`` under ``policy``; evidence-in-context and budget use."""
    qids = [q for q in rankings if dataset.covered(q)]
    share, partly, share_multi, groups, groups_multi = [], [], [], [], []
    off, off_groups, dup, tokens, dropped = [], [], [], [], []
    supported, all_figures, figure_groups = [], [], []
    position: dict[str, list[float]] = {o: [] for o in ORDERS}
    edge: dict[str, list[float]] = {o: [] for o in ORDERS}
    for qid in qids:
        query = dataset.queries[qid].text
        ranked = [dataset.passages[p] for p in rankings[qid][:depth]]
        rank_of = {p.pid: i + 1 for i, p in enumerate(ranked)}
        chosen = policy.select(query, ranked, extractor)
        packing = packer.pack(query, chosen, [rank_of[p.pid] for p in chosen])
        if packing.tokens > packer.budget:  # the packer's invariant; never expected
            raise AssertionError(f"{qid}: packed {packing.tokens} tokens over {packer.budget}")
        gold = {p for p, g in dataset.qrels[qid].items() if g > 0}
        # a split gold passage counts only whole: a part may not hold what answers
        inside = len(gold & set(packing.whole_pids)) / len(gold)
        group = dataset.queries[qid].group
        share.append(inside)
        partly.append(len(gold & set(packing.pids)) / len(gold) - inside)
        groups.append(group)
        fields = extractor.extract_query(query)
        if len(fields.period) >= 2 or len(fields.entity) >= 2:
            share_multi.append(inside)
            groups_multi.append(group)
        o = _off_period(packing, dataset, fields.period)
        if o is not None:
            off.append(o)
            off_groups.append(group)
        share_found = support(
            "\n".join(p.text for p in packing.passages), dataset.answer_figures.get(qid, [])
        )
        if share_found is not None:
            supported.append(share_found)
            all_figures.append(float(share_found == 1.0))
            figure_groups.append(group)
        dup.append(_near_duplicate_share(packing))
        tokens.append(packing.tokens)
        dropped.append(len(packing.dropped))
        for order in ORDERS:
            arranged = assemble(packing, order)
            pos = _first_gold_position(arranged, gold)
            if pos is not None:
                position[order].append(pos)
                ends = {arranged.passages[0].citation.pid, arranged.passages[-1].citation.pid}
                edge[order].append(float(bool(ends & gold)))
    return {
        "policy": policy.name,
        "n_queries": len(qids),
        "gold_in_context": _mean_ci(share, groups),  # whole passages
        "gold_partly_in_context": float(np.mean(partly)) if partly else float("nan"),
        "gold_in_context_multi_period_or_company": _mean_ci(share_multi, groups_multi),
        "off_period_token_share": _mean_ci(off, off_groups),
        # answer support: the share of the gold answer's figures the packed context holds, and
        # the share of questions holding all of them (questions with a figure-based answer only)
        "answer_figures_in_context": _mean_ci(supported, figure_groups),
        "all_answer_figures_in_context": _mean_ci(all_figures, figure_groups),
        "n_without_answer_figures": len(qids) - len(supported),
        "near_duplicate_token_share": float(np.mean(dup)) if dup else float("nan"),
        "max_packed_tokens": int(max(tokens)) if tokens else 0,
        "mean_packed_tokens": float(np.mean(tokens)) if tokens else 0.0,
        "mean_dropped": float(np.mean(dropped)) if dropped else 0.0,
        "orders": {
            o: {
                "first_gold_relative_position": float(np.mean(position[o]))
                if position[o]
                else float("nan"),
                "gold_at_an_end_share": float(np.mean(edge[o])) if edge[o] else float("nan"),
                "n_with_gold": len(position[o]),
            }
            for o in ORDERS
        },
    }


def split_and_fuse_check(dataset: Dataset, rankings: dict[str, list[str]], packer: Packer) -> dict:
    """How often the reviewed paper's rank halves (top 1-10, 11-20) still exceed the budget, and
    how many token-bounded groups the same top-20 needs instead."""
    qids = [q for q in rankings if dataset.covered(q)]
    triggered, exceeded, groups = 0, 0, []
    largest = 0
    for qid in qids:
        query = dataset.queries[qid].text
        top = [dataset.passages[p] for p in rankings[qid][:20]]
        halves = rank_halves_exceed(packer.counter, query, top, packer.budget)
        triggered += halves["split_triggered"]
        exceeded += halves["half_exceeds"]
        largest = max(largest, halves["tokens_top20"])
        if halves["split_triggered"]:
            fused = fuse_groups(packer, query, top)
            if any(g.tokens > packer.budget for g in fused):
                raise AssertionError(f"{qid}: a token-bounded group exceeds the budget")
            groups.append(len(fused))
    return {
        "n_queries": len(qids),
        "budget": packer.budget,
        "split_triggered": triggered,
        "rank_half_exceeds_budget": exceeded,
        "largest_top20_tokens": largest,
        "token_groups_when_split": {
            "mean": float(np.mean(groups)) if groups else float("nan"),
            "max": int(max(groups)) if groups else 0,
        },
    }
