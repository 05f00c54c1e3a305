"""Features plus residual for one 100-candidate bank, given base scores, against the dense base
ranker scoring the same bank (one core, medians; the dense side re-embeds the bank's pages).

    .venv/bin/python benchmarks/residual.py [--data-root ../shared/data] [--banks 20]

Field extraction and term counts of a passage are computed once per corpus and cached (as in
serving); the timed path is bank statistics, compatibility, standardisation and the residual.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)

from _banks import financebench_banks  # noqa: E402

from fincrowd_ltr.features import FEATURE_NAMES, BankFeaturizer  # noqa: E402
from fincrowd_ltr.fields import FieldExtractor  # noqa: E402
from fincrowd_ltr.model import ResidualScorer  # noqa: E402
from fincrowd_ltr.retrieval.dense import DenseEncoder  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--banks", type=int, default=200)
    parser.add_argument("--dense-banks", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    data, banks = financebench_banks(args.data_root, args.cache_dir, args.banks)
    featurizer = BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)
    scorer = ResidualScorer(len(FEATURE_NAMES))
    for bank in banks:  # warm the per-passage caches, as a serving process would be
        featurizer.features(data.queries[bank.qid].text, bank.pids)
    ours = []
    for _ in range(args.repeats):
        for bank in banks:
            start = time.perf_counter()
            x = featurizer.features(data.queries[bank.qid].text, bank.pids)
            with torch.no_grad():
                scorer(torch.from_numpy(x), torch.from_numpy(bank.first_stage))
            ours.append(time.perf_counter() - start)
    encoder = DenseEncoder(cache_dir=None)  # no cache: the base ranker's real cost
    dense = []
    for bank in banks[: args.dense_banks]:
        start = time.perf_counter()
        encoder.cache._rows.clear()
        encoder.score(data.queries[bank.qid].text, [data.passages[p].text for p in bank.pids])
        dense.append(time.perf_counter() - start)
    mine, theirs = statistics.median(ours), statistics.median(dense)
    print(
        f"features + residual per 100-candidate bank: {mine * 1e3:.2f} ms median "
        f"({len(banks)} banks x {args.repeats} passes; target <= 5 ms)"
    )
    print(
        f"dense base ranker on the same banks:        {theirs * 1e3:.0f} ms median "
        f"({len(dense)} banks)"
    )
    print(f"ratio: {mine / theirs * 100:.3f}% of the dense base (target < 2%)")


if __name__ == "__main__":
    main()
