"""The gate's guarantee on held-out folds (issue 25): how often the chosen threshold's held-out
regression rate among orderable questions exceeded the cap, and what the guarantee costs in gain.

Each fold of a cross-validation report (``fincrowd fit --report R.json``) records its gate's
calibration rows and held-out test rows (logit, nDCG@10 gain, orderable). The same fits are
replayed under every calibration method (``ltt``: Learn-then-Test, binomial bound, cap held with
probability >= 1 - delta; ``crc``: conformal risk control, in expectation; ``empirical``: the cap
on the calibration rows only), so the methods differ only in their threshold.

    .venv/bin/python benchmarks/gate_guarantee.py runs/gg/fb_s0.json runs/gg/fb_s1.json ...

Held-out folds are small (FinanceBench: ~15 orderable questions per fold), so one regression is
already more than a 3% cap: the pooled held-out rate (all folds and seeds) with its Wilson interval
says more than the per-fold share.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from fincrowd_ltr.defaults import GATE_METHODS
from fincrowd_ltr.model.calibration import calibrate


def replay(fold: dict, method: str, cap: float, delta: float) -> dict:
    """The threshold ``method`` chooses on the fold's calibration rows, applied to its test rows."""
    cal, test = fold["rows"]["calibration"], fold["rows"]["test"]
    calibration = calibrate(
        np.array(cal["logits"]),
        np.array(cal["gains"]),
        cal["qids"],
        cap,
        min_queries=1,
        orderable=np.array(cal["orderable"], bool),
        delta=delta,
        method=method,
    )
    opened = calibration.opens(np.array(test["logits"])) if test["logits"] else np.array([], bool)
    gains = np.array(test["gains"])
    orderable = np.array(test["orderable"], bool)
    regressed = opened & (gains < -1e-12) & orderable
    return {
        "n_test": len(gains),
        "n_orderable": int(orderable.sum()),
        "regressions": int(regressed.sum()),
        "opened": int(opened.sum()),
        "gain_sum": float((gains * opened).sum()),
        "risk_bound": calibration.risk_bound,
        "n_calibration_orderable": calibration.n_orderable,
    }


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+", help="cross-validation reports (fincrowd fit)")
    parser.add_argument(
        "--caps", default="", help="caps to replay (comma list; default: each report's own)"
    )
    parser.add_argument("--delta", type=float, default=0.1)
    args = parser.parse_args()
    folds = []
    for path in args.reports:
        with open(path) as fh:
            report = json.load(fh)
        for fold in report["gated"]["folds"]:
            folds.append((path, fold))
    print(f"{len(folds)} held-out folds from {len(args.reports)} reports; delta {args.delta}")
    header = (
        f"{'method':<10}{'folds over cap':>16}{'pooled held-out regression (95% CI)':>40}"
        f"{'gate opened':>14}{'mean nDCG@10 gain':>20}{'median bound':>14}"
    )
    caps = [float(c) for c in args.caps.split(",") if c] or [folds[0][1]["regression_cap"]]
    for cap in caps:
        print(f"\ncap {cap}")
        print(header)
        for method in GATE_METHODS:
            _row(folds, method, cap, args.delta)


def _row(folds, method: str, cap: float, delta: float) -> None:
    """One method's line: folds over the cap, pooled held-out regression, opening, gain."""
    rows = [replay(fold, method, cap, delta) for _, fold in folds]
    over = sum(r["regressions"] / max(r["n_orderable"], 1) > cap + 1e-12 for r in rows)
    k = sum(r["regressions"] for r in rows)
    n = sum(r["n_orderable"] for r in rows)
    lo, hi = wilson(k, n)
    n_test = sum(r["n_test"] for r in rows)
    opened = sum(r["opened"] for r in rows) / max(n_test, 1)
    gain = sum(r["gain_sum"] for r in rows) / max(n_test, 1)
    bound = float(np.median([r["risk_bound"] for r in rows]))
    print(
        f"{method:<10}{f'{over}/{len(rows)}':>16}"
        f"{f'{k}/{n} = {k / max(n, 1):.3f} [{lo:.3f}, {hi:.3f}]':>40}"
        f"{opened:>14.3f}{gain:>+20.4f}{bound:>14.3f}"
    )


if __name__ == "__main__":
    main()
