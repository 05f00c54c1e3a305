"""Wall time of the whole FinanceBench crowding diagnosis for one base ranker, banks already
built, against the 5-minute budget, with the plain baseline evaluation of the same banks timed
side by side. Medians of ``--repeats`` runs.

    .venv/bin/python benchmarks/diagnose.py [--data-root ../shared/data] [--ranker dense]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.diagnostics.diagnose import diagnose
from fincrowd_ltr.evaluation.report import evaluate_bankset
from fincrowd_ltr.retrieval.build import BankSpec, build_banks
from fincrowd_ltr.synthesis import page_table_questions

BUDGET_S = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache"))
    parser.add_argument("--ranker", default="dense")
    parser.add_argument("--pool-depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = load_dataset("financebench", args.data_root, "all")
    ours, base = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        report = diagnose(data, "all", args.ranker, args.cache_dir, pool_depth=args.pool_depth)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        bankset = build_banks(
            data, "all", [args.ranker], BankSpec(), args.cache_dir, progress=False,
            static_pairs=page_table_questions(data),  # as diagnose reads the static rankers
        )  # fmt: skip
        evaluate_bankset(data, bankset, [args.ranker])
        base.append(time.perf_counter() - start)
    if report["seconds"]["banks"] > 0.25 * statistics.median(ours):
        print(f"note: bank loading/building took {report['seconds']['banks']:.1f} s of the run")
    mine, theirs = statistics.median(ours), statistics.median(base)
    print(f"diagnosis ({args.ranker}, pool depth {args.pool_depth}): {mine:.1f} s median")
    print(f"baseline evaluation of the same banks:     {theirs:.1f} s median")
    print(f"ratio diagnosis / baseline evaluation: {mine / theirs:.1f}x")
    print(f"ratio to the {BUDGET_S:.0f} s budget: {mine / BUDGET_S:.2f}")


if __name__ == "__main__":
    main()
