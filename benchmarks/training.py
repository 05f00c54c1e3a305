"""Wall time of training the residual on every training bank of FinanceBench and TAT-QA dev
(one setting, early stopping), against the 2-minute budget, with the data setup (banks and
cached features loaded) timed side by side as the baseline. Medians of ``--repeats`` runs.

    .venv/bin/python benchmarks/training.py [--data-root ../shared/data] [--ranker dense]

Banks and feature caches must exist (``make demo`` builds them); run on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from fincrowd_ltr.training.crossval import MAX_EPOCHS, train_fold
from fincrowd_ltr.training.data import BankDataModule

BUDGET_S = 120.0
DATASETS = (("financebench", "all"), ("tatqa", "dev"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--ranker", default="dense")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    totals_train, totals_setup = [], []
    for _ in range(args.repeats):
        train_s = setup_s = 0.0
        for dataset, split in DATASETS:
            kwargs = {
                "dataset": dataset,
                "data_root": args.data_root,
                "split": split,
                "ranker": args.ranker,
                "cache_dir": args.cache_dir,
                "bank_mode": "injected",
                "val_bank_mode": "retrieved",
            }
            start = time.perf_counter()
            BankDataModule(**kwargs, test_fold=-1).setup("fit")
            setup_s += time.perf_counter() - start
            start = time.perf_counter()
            _, dm, _ = train_fold(kwargs, -1, {}, MAX_EPOCHS, seed=0)
            train_s += time.perf_counter() - start
            print(f"  {dataset}: {len(dm.examples['train'])} training banks")
        totals_train.append(train_s)
        totals_setup.append(setup_s)
    train_med, setup_med = statistics.median(totals_train), statistics.median(totals_setup)
    print(f"training on all training banks (both datasets): {train_med:.1f} s median")
    print(f"data setup alone (baseline, same banks):        {setup_med:.1f} s median")
    print(f"ratio training / setup: {train_med / setup_med:.1f}x")
    print(f"ratio to the {BUDGET_S:.0f} s budget: {train_med / BUDGET_S:.2f}")


if __name__ == "__main__":
    main()
