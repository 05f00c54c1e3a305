"""Wall time of training one residual on every training bank of FinanceBench and TAT-QA dev
(one setting, early stopping), against the 2-minute budget, with the data setup (banks and
cached features loaded) timed side by side as the baseline. Medians of ``--repeats`` runs.

    .venv/bin/python benchmarks/training.py [--data-root ../shared/data] [--ranker dense]

Banks and feature caches must exist (``make demo`` builds them); run on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from fincrowd_ltr import api
from fincrowd_ltr.features import BankFeaturizer
from fincrowd_ltr.features.examples import make_examples
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.training.fitting import fit_residual

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
            start = time.perf_counter()
            data = api.load_dataset(dataset, args.data_root, split)
            featurizer = BankFeaturizer(
                FieldExtractor.from_passages(data.passages.values()), data.passages
            )
            parts = {}
            for mode in ("injected", "retrieved"):
                banks = api.build_banks(
                    data, [args.ranker], mode=mode, split=split, cache_dir=args.cache_dir
                )
                parts[mode] = make_examples(
                    data, banks, args.ranker, featurizer, cache=args.cache_dir
                )
            setup_s += time.perf_counter() - start
            start = time.perf_counter()
            _, _, n = fit_residual(
                parts["injected"], parts["retrieved"][: len(parts["retrieved"]) // 5]
            )
            train_s += time.perf_counter() - start
            print(f"  {dataset}: {n} training banks")
        totals_train.append(train_s)
        totals_setup.append(setup_s)
    train_med, setup_med = statistics.median(totals_train), statistics.median(totals_setup)
    print(f"training on all training banks (both datasets): {train_med:.1f} s median")
    print(f"data setup alone (baseline, same banks):        {setup_med:.1f} s median")
    print(f"ratio training / setup: {train_med / setup_med:.1f}x")
    print(f"ratio to the {BUDGET_S:.0f} s budget: {train_med / BUDGET_S:.2f}")


if __name__ == "__main__":
    main()
