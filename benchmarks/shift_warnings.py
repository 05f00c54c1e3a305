"""How often the per-bank distribution-shift warning fires (issue 23), on banks of the
checkpoint's own first stage and on shifted ones.

For each ``DATASET:SPLIT:CHECKPOINT:FIRST_STAGE`` given, every covered bank is scored by the
always-on correction and checked with the per-request rule of ``rerank`` (mean standardised
feature beyond ``--thresholds``); prints the share of banks that warn.

    .venv/bin/python benchmarks/shift_warnings.py \\
        financebench:all:runs/syn/ck_fb_zero:bm25+query+entity+filing \\
        tatqa:dev:runs/syn/ck_tq_zero:bm25 financebench:all:runs/syn/ck_fb_zero:bm25 \\
        financebench:all:runs/syn/ck_tq_base:bm25+query+entity+filing

(the checkpoints were trained on the filing-aware stage, ``auto`` on FinanceBench until
2026-12-02; name the stage a checkpoint was trained on)
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from fincrowd_ltr import GatedCorrection
from fincrowd_ltr.api.corpus import build_banks, load_dataset
from fincrowd_ltr.model.shift import feature_warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="DATASET:SPLIT:CHECKPOINT:FIRST_STAGE")
    parser.add_argument("--thresholds", default="3,5")
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    thresholds = [float(t) for t in args.thresholds.split(",")]
    for spec in args.runs:
        dataset, split, checkpoint, stage = spec.split(":")
        model = GatedCorrection.from_pretrained(checkpoint)
        data = load_dataset(dataset, args.data_root, split)
        banks = build_banks(data, [model.base_ranker], first_stage=stage, split=split,
                            progress=False)  # fmt: skip
        qids = [q for q in data.queries if q in banks.banks and data.covered(q)]
        results = model.score_examples(data, model.examples(data, banks, model.base_ranker, qids))
        shares = [
            float(
                np.mean(
                    [bool(feature_warnings(r.decision.standardised, t)) for r in results.values()]
                )
            )  # fmt: skip
            for t in thresholds
        ]
        cells = ", ".join(f"beyond {t:g}: {s:.3f}" for t, s in zip(thresholds, shares, strict=True))
        trained = model.summary.first_stage
        print(f"{spec} (trained on {trained!r}; {len(results)} banks): {cells}")


if __name__ == "__main__":
    main()
