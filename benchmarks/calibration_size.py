"""How many labelled questions does the gate's calibration need?

Takes a checkpoint that never saw the dataset's labelled questions (e.g. one trained on a
synthetic folder: ``fincrowd fit --dataset beir --data-root SYNTHETIC ...``), then for each size
k and each of ``--draws`` draws: calibrate a domain on the questions of randomly drawn groups
(companies, contexts) until k questions are reached, and evaluate the gated correction on every
other group's covered questions. Prints, per size, the median and range over draws of the gated
delta (Recall@10, nDCG@10 against the base), the regression rate and the share of draws where the
gated system fell below the base, with the always-on residual beside it.

    .venv/bin/python benchmarks/calibration_size.py --checkpoint runs/syn/ck_fb_zero \\
        --dataset financebench --first-stage bm25+query+entity+filing --sizes 10,20,40 --draws 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fincrowd_ltr as fc  # noqa: E402
from fincrowd_ltr.defaults import DEFAULT_REGRESSION_CAP  # noqa: E402


def draw_groups(data, qids: list[str], k: int, rng: random.Random) -> list[str]:
    """Questions of whole groups drawn at random until at least ``k`` are taken."""
    by_group: dict[str, list[str]] = {}
    for q in qids:
        by_group.setdefault(data.queries[q].group, []).append(q)
    groups = sorted(by_group)
    rng.shuffle(groups)
    taken: list[str] = []
    for g in groups:
        if len(taken) >= k:
            break
        taken += by_group[g]
    return taken


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--dataset", default="financebench")
    ap.add_argument("--split", default="all")
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--cache-dir", type=Path, default=Path(".cache"))
    ap.add_argument("--first-stage", default="auto")
    ap.add_argument(
        "--ranker", default=None,
        help="the base to correct (default: the checkpoint's); another than the checkpoint's "
        "is calibrated and evaluated with the model rebased on it (run: your --run)",
    )  # fmt: skip
    ap.add_argument("--run", type=Path, default=None, help="your ranker's TREC run")
    ap.add_argument("--sizes", default="10,20,40")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--regression-cap", type=float, default=DEFAULT_REGRESSION_CAP,
        help="the gate's cap on the share of orderable questions made worse",
    )  # fmt: skip
    ap.add_argument("--gate-method", default="ltt", help="ltt (a guarantee) or empirical")
    args = ap.parse_args()

    model = fc.GatedCorrection.from_pretrained(args.checkpoint)
    ranker = args.ranker or model.base_ranker
    print(f"base ranker {ranker} (checkpoint trained on {model.base_ranker})")
    model = model.with_base_ranker(ranker)
    data = fc.load_dataset(args.dataset, args.data_root, args.split)
    unseen = sorted(q for q in data.queries if data.covered(q) and q not in model.seen(data))
    print(f"{len(unseen)} covered questions the checkpoint never saw")
    common = {
        "first_stage": args.first_stage,
        "data_root": args.data_root,
        "split": args.split,
        "cache_dir": args.cache_dir,
        "run": args.run,
    }
    rng = random.Random(args.seed)
    print(f"gate {args.gate_method}, regression cap {args.regression_cap}")
    header = "size  draws  gated dR@10 med [min, max]   gated dnDCG@10 med   regression med"
    print(header + "   below base   residual dR@10")
    for k in [int(s) for s in args.sizes.split(",")]:
        rows = []
        for _ in range(args.draws):
            cal = draw_groups(data, unseen, k, rng)
            calibrated, _ = fc.calibrate_domain(
                model, "size-study", data, qids=cal, min_calibration=min(k, 10), save=False,
                regression_cap=args.regression_cap, gate_method=args.gate_method, **common,
            )  # fmt: skip
            report = fc.evaluate(
                data, ranker, checkpoint=calibrated, domain="size-study", progress=False,
                **common,
            )  # fmt: skip
            gated = report["systems"][f"gated:{ranker}"]
            residual = report["systems"][f"residual:{ranker}"]
            rows.append(
                (
                    gated["delta"]["recall@10"],
                    gated["delta"]["ndcg@10"],
                    gated["regression_rate"],
                    residual["delta"]["recall@10"],
                    len(cal),
                )
            )
        r10 = [r[0] for r in rows]
        print(
            f"{k:>4}  {len(rows):>5}  {statistics.median(r10):+.3f} [{min(r10):+.3f}, "
            f"{max(r10):+.3f}]        {statistics.median(r[1] for r in rows):+.3f}"
            f"               {statistics.median(r[2] for r in rows):.3f}"
            f"          {sum(r[1] < 0 for r in rows)}/{len(rows)}"
            f"          {statistics.median(r[3] for r in rows):+.3f}"
            f"   (calibration questions {min(r[4] for r in rows)}-{max(r[4] for r in rows)})"
        )


if __name__ == "__main__":
    main()
