"""Field extraction throughput (passages per second, one core): this checkout against the code
before the speed work (``_baseline.BASELINE_REF``), side by side.

Both sides extract the same random FinanceBench pages and TAT-QA passages in separate processes
(one core each, one process at a time), ``--repeats`` times per process; the sides take turns
``--rounds`` times, swapping who goes first each round (a shared machine's speed drifts within
minutes). The script prints each side's median over rounds, the median of the rounds' ratios with
their range, and whether both sides produced identical fields for every passage and question.

    .venv/bin/python benchmarks/extraction.py [--data-root ../shared/data] [--n 2000] [--repeats 5]
        [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import time
from pathlib import Path

from _baseline import rounds_arg

os.environ.setdefault("OMP_NUM_THREADS", "1")

TARGET = 2000.0


def measure(data_root: str | None, n: int, repeats: int) -> dict:
    """Rates (medians of ``repeats``) and a digest of the extracted fields, per corpus."""
    from fincrowd_ltr.data import load_dataset
    from fincrowd_ltr.fields import FieldExtractor

    out = {}
    fb = load_dataset("financebench", data_root, "all")
    extractor = FieldExtractor.from_passages(fb.passages.values())
    tq = load_dataset("tatqa", data_root, "all")
    rng = random.Random(0)
    for name, data in (("FinanceBench pages", fb), ("TAT-QA passages", tq)):
        passages = rng.sample(list(data.passages.values()), min(n, len(data.passages)))
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            fields = [extractor.extract_passage(p) for p in passages]
            rates.append(len(passages) / (time.perf_counter() - start))
        questions = [extractor.extract_query(q.text) for q in data.queries.values()]
        digest = hashlib.sha256(
            json.dumps([f.as_dict() for f in fields + questions], sort_keys=True).encode()
        ).hexdigest()
        chars = statistics.mean(len(p.text) for p in passages)
        out[name] = {"rate": statistics.median(rates), "chars": chars, "digest": digest}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--rounds", type=rounds_arg, default=3, help="turns each side takes (default 3)"
    )
    parser.add_argument(
        "--baseline", default=None, help="git ref of the 'before' side (default: BASELINE_REF)"
    )
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.data_root, args.n, args.repeats)))
        return
    from _baseline import BASELINE_REF, ROOT, alternate, checkout, measure_in, paired

    extra = [f"--n={args.n}", f"--repeats={args.repeats}"]
    if args.data_root:
        extra.append(f"--data-root={Path(args.data_root).resolve()}")
    ref = args.baseline or BASELINE_REF
    load = os.getloadavg()[0]
    here = Path(__file__).resolve()
    with checkout(ref) as old:
        befores, afters = alternate(
            lambda: measure_in(old, here, *extra),
            lambda: measure_in(ROOT, here, *extra),
            args.rounds,
        )
    print(f"machine load (1 min) {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(
        f"field extraction, passages/s on one core: medians over {args.rounds} rounds (the sides "
        f"taking turns) of the medians of {args.repeats} repeats; ratio: median of the rounds' "
        "ratios [their range]"
    )
    print(
        f"{'corpus':<20}{'chars':>7}{'before':>9}{'after':>9}{'ratio':>7}{'range':>14}"
        f"{'target':>8}{'identical fields':>18}"
    )
    for name in afters[0]:
        p = paired(befores, afters, lambda m, name=name: m[name]["rate"], higher_is_better=True)
        low, high = p["ratio_range"]
        same = len({m[name]["digest"] for m in befores + afters}) == 1
        print(
            f"{name:<20}{afters[0][name]['chars']:>7.0f}{p['before']:>9.0f}{p['after']:>9.0f}"
            f"{p['ratio']:>6.2f}x{f'[{low:.2f}, {high:.2f}]':>14}{TARGET:>8.0f}"
            f"{'yes' if same else 'NO':>18}"
        )
    print(f"before = {ref}, after = this checkout (uncommitted changes included)")


if __name__ == "__main__":
    main()
