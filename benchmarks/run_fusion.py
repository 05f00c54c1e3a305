"""An out-of-fold run (e.g. `fincrowd train-cross-encoder --run-out`) fused with the first
stage's own score by the package's reciprocal rank fusion, as `fused` fuses MiniLM, against
`fused` and each scorer alone, over the first stage's banks; paired deltas with company-cluster
bootstrap intervals (the package's) and better/worse counts by nDCG@10.

    .venv/bin/python benchmarks/run_fusion.py runs/s74/ce_syn_s0.trec \\
        --dataset financebench --data-root ../shared/data --first-stage auto --bank-size 100
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fincrowd_ltr as fc  # noqa: E402
from fincrowd_ltr.api import build_banks  # noqa: E402
from fincrowd_ltr.data.beir import read_trec_run  # noqa: E402
from fincrowd_ltr.metrics import bootstrap_ci, ndcg_at_k, recall_at_k  # noqa: E402
from fincrowd_ltr.retrieval.fusion import reciprocal_rank_fusion  # noqa: E402
from fincrowd_ltr.retrieval.rankers import scores_from_run  # noqa: E402

BASE = "fused"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("runs", nargs="+", type=Path, help="TREC runs scoring the banks")
    p.add_argument("--dataset", default="financebench")
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--split", default="all")
    p.add_argument("--first-stage", default="auto")
    p.add_argument("--bank-size", type=int, default=100)
    p.add_argument("--cache-dir", default=".cache")
    args = p.parse_args()
    data = fc.load_dataset(args.dataset, args.data_root, args.split)
    banks = build_banks(
        data, ["first-stage", "dense", BASE], first_stage=args.first_stage, size=args.bank_size,
        cache_dir=args.cache_dir, progress=False,
    )  # fmt: skip
    runs = {path.stem: read_trec_run(path, data) for path in args.runs}
    qids = [q for q in data.queries if data.covered(q) and q in banks.banks]
    groups = [data.queries[q].group for q in qids]
    rows: dict[str, list[tuple[float, float]]] = {}
    unscored = dict.fromkeys(runs, 0)
    for q in qids:
        bank = banks.banks[q]
        first = bank.scores["first-stage"]
        scores = {name: bank.scores[name] for name in ("first-stage", "dense", BASE)}
        for name, run in runs.items():
            got = run.get(q, {})
            own = scores_from_run(got, bank.pids)  # unscored: after every scored one
            unscored[name] += sum(pid not in got for pid in bank.pids)
            scores[name] = own
            scores[f"{name}+first-stage"] = reciprocal_rank_fusion([first, own])
        for name, s in scores.items():
            ranked = [bank.pids[i] for i in np.argsort(-s, kind="stable")]
            rows.setdefault(name, []).append(
                (recall_at_k(ranked, data.qrels[q], 10), ndcg_at_k(ranked, data.qrels[q], 10))
            )
    print(f"{len(qids)} covered questions, {len(set(groups))} groups")
    for name, n in unscored.items():
        if n:
            print(f"note: {name} leaves {n} bank candidates unscored (ranked after its scored)")
    base = np.array(rows[BASE])
    for name, values in rows.items():
        v = np.array(values)
        line = f"{name:28s} R@10 {v[:, 0].mean():.3f} nDCG@10 {v[:, 1].mean():.3f}"
        if name != BASE:
            for j, metric in enumerate(("R@10", "nDCG@10")):
                d = v[:, j] - base[:, j]
                lo, hi = bootstrap_ci(d, groups=groups)
                line += f" | {metric} vs {BASE} {d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]"
            better, worse = int((v[:, 1] > base[:, 1]).sum()), int((v[:, 1] < base[:, 1]).sum())
            line += f" | better {better} worse {worse}"
        print(line)


if __name__ == "__main__":
    main()
