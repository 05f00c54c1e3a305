"""Retrieval quality of the static scorer beside MiniLM, in one run over the same banks: R@10 and
nDCG@10 of the dense scorers alone (``dense`` = MiniLM, ``static``) and fused with the first stage
(``fused``, ``fused-static``), on every covered question, with 95% cluster-bootstrap intervals
(companies for FinanceBench, contexts for TAT-QA) and the paired difference to MiniLM.

No ranker here has a trained part chosen on these questions: the static scorer is distilled from
MiniLM and tuned on MiniLM's vectors of a seeded sample of corpus pages, and its page table is
taught where MiniLM's vectors of 2,000 of the corpus's synthetic questions point (no question
record, no label; ``fincrowd_ltr.retrieval.static_tuning``, ``fincrowd_ltr.synthesis.teaching``),
so every question is a test question. The pages and synthetic questions it is tuned on come
from the whole corpus, including the companies asked about (transductive and label-free, as
BM25's IDF is).

    .venv/bin/python benchmarks/static_quality.py [--dataset financebench] [--data-root ...]
"""

from __future__ import annotations

import argparse

import numpy as np

RANKERS = ("dense", "static", "fused", "fused-static")


def main() -> None:
    from fincrowd_ltr.api.corpus import build_banks, load_dataset
    from fincrowd_ltr.data.ranking import rank_order
    from fincrowd_ltr.metrics import bootstrap_ci, ndcg_at_k, recall_at_k

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="financebench")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--split", default="all")
    parser.add_argument("--first-stage", default="auto")
    parser.add_argument("--cache-dir", default=".cache")
    args = parser.parse_args()
    data = load_dataset(args.dataset, args.data_root, args.split)
    banks = build_banks(
        data,
        list(RANKERS),
        first_stage=args.first_stage,
        cache_dir=args.cache_dir,
        split=args.split,
    )
    qids = [q for q in data.queries if q in banks.banks and data.covered(q)]
    groups = [data.queries[q].group for q in qids]
    print(
        f"{data.name} ({args.split}): {len(qids)} covered questions, {len(set(groups))} groups; "
        f"first stage {args.first_stage}; 95% cluster-bootstrap intervals"
    )
    values = {}
    for ranker in ("first-stage", *RANKERS):
        rows = []
        for q in qids:
            bank = banks.banks[q]
            scores = bank.first_stage if ranker == "first-stage" else bank.scores[ranker]
            ranked = [bank.pids[i] for i in rank_order(scores)]
            rows.append(
                (recall_at_k(ranked, data.qrels[q], 10), ndcg_at_k(ranked, data.qrels[q], 10))
            )
        values[ranker] = np.array(rows)
    print(f"{'ranker':<14} {'R@10':>22} {'nDCG@10':>22}   difference to MiniLM (R@10)")
    for ranker, rows in values.items():
        cells = []
        for col in (0, 1):
            lo, hi = bootstrap_ci(rows[:, col], groups=groups)
            cells.append(f"{rows[:, col].mean():.3f} [{lo:.3f}, {hi:.3f}]")
        twin = {"static": "dense", "fused-static": "fused"}.get(ranker)
        diff = ""
        if twin:
            delta = rows[:, 0] - values[twin][:, 0]
            lo, hi = bootstrap_ci(delta, groups=groups)
            diff = f"{delta.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] vs {twin}"
        print(f"{ranker:<14} {cells[0]:>22} {cells[1]:>22}   {diff}")


if __name__ == "__main__":
    main()
