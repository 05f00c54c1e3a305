"""The correction's cost per 100-candidate bank on one core (median, warm caches): this checkout
against the code before the speed work (``_baseline.BASELINE_REF``), side by side.

Two paths are timed on the same FinanceBench banks (BM25 first stage, BM25 base scores) with the
checkpoint ``--checkpoint`` and its calibrated domain:

- decision: bank features + residual + gate (``featurizer.features`` and ``decide``), the figure
  issue 15 targets (<= 5 ms);
- ``rerank()``: the Python serving call with candidate dicts (input checks, request cache,
  explanations).

Per-passage caches (fields, term counts) are warmed first, as in a serving process. Both sides check
they produce the same orders, gated and always-on. A baseline whose code cannot load this
checkout's checkpoint (other features or extractor) takes its own, ``--baseline-checkpoint``,
trained by that code; the orders then differ by construction and only the times compare.

The sides take turns ``--rounds`` times, swapping who goes first each round (before-after,
after-before, ...), and the ratio is the median of the rounds' ratios: a shared machine's speed
drifts by 20-30% within minutes, which a single before-then-after pair reads as a speed-up or a
slow-down of the code.

    .venv/bin/python benchmarks/correction.py [--data-root ../shared/data] [--banks 50]
        [--rounds 3] [--baseline REF --baseline-checkpoint DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from pathlib import Path

from _baseline import rounds_arg

os.environ.setdefault("OMP_NUM_THREADS", "1")

TARGET_MS = 5.0


def measure(args: argparse.Namespace) -> dict:
    """Median milliseconds per bank for both paths and a digest of the orders."""
    import torch
    from _banks import financebench_banks

    from fincrowd_ltr import GatedCorrection

    torch.set_num_threads(1)
    data, banks = financebench_banks(args.data_root, args.cache_dir, args.banks, ranker="bm25")
    model = GatedCorrection.from_pretrained(args.checkpoint, runtime=args.runtime)
    domain = args.domain or sorted(model.domains)[0]
    featurizer = model.featurizer(data.passages)

    def decision(bank, domain=domain):
        text = data.queries[bank.qid].text
        x = featurizer.features(text, bank.pids)
        return model.decide(
            x, bank.scores["bm25"], featurizer.query_fields(text, bank.pids), domain
        )

    requests = [
        (
            data.queries[b.qid].text,
            [
                {"id": p, "text": data.passages[p].text, "metadata": data.passages[p].metadata()}
                for p in b.pids
            ],
            b.scores["bm25"],
        )
        for b in banks
    ]
    # gated and always-on orders: a closed gate alone would compare only the base orders
    orders = [list(decision(b).order) for b in banks]
    orders += [list(decision(b, None).order) for b in banks]
    for query, candidates, scores in requests:  # warm the request cache
        model.rerank(query, candidates, scores, domain)
    timings: dict[str, list[float]] = {"decision": [], "rerank": []}
    for _ in range(args.repeats):
        for bank, (query, candidates, scores) in zip(banks, requests, strict=True):
            start = time.perf_counter()
            decision(bank)
            timings["decision"].append(time.perf_counter() - start)
            start = time.perf_counter()
            model.rerank(query, candidates, scores, domain)
            timings["rerank"].append(time.perf_counter() - start)
    digest = hashlib.sha256(json.dumps([[int(i) for i in o] for o in orders]).encode()).hexdigest()
    return {k: statistics.median(v) * 1e3 for k, v in timings.items()} | {"digest": digest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--checkpoint", default="checkpoints/default")
    parser.add_argument("--domain", default=None, help="default: the checkpoint's first domain")
    parser.add_argument(
        "--runtime", default="torch", choices=("torch", "onnx"),
        help="residual and gate in torch or the torch-free ONNX runtime (needs an --onnx export)",
    )  # fmt: skip
    parser.add_argument("--banks", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--rounds", type=rounds_arg, default=3, help="turns each side takes (default 3)"
    )
    parser.add_argument(
        "--baseline", default=None, help="git ref of the 'before' side (default: BASELINE_REF)"
    )
    parser.add_argument(
        "--baseline-checkpoint",
        default=None,
        help="checkpoint the 'before' side loads (default: --checkpoint)",
    )
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args)))
        return
    from _baseline import (
        BASELINE_REF,
        ROOT,
        BaselineFailed,
        alternate,
        checkout,
        measure_in,
        paired,
    )

    here = Path(__file__).resolve()
    extra = [
        f"--cache-dir={Path(args.cache_dir).resolve()}",
        f"--banks={args.banks}",
        f"--repeats={args.repeats}",
        f"--runtime={args.runtime}",
    ]
    if args.data_root:
        extra.append(f"--data-root={Path(args.data_root).resolve()}")
    if args.domain:
        extra.append(f"--domain={args.domain}")
    ref = args.baseline or BASELINE_REF
    own = Path(args.checkpoint).resolve()
    if not (own / "config.json").is_file():
        parser.exit(
            2,
            f"no correction checkpoint at {own}: `make reproduce` writes checkpoints/default, "
            "`make demo` checkpoints/demo (pass --checkpoint checkpoints/demo), `fincrowd fit "
            "--out DIR` any other\n",
        )
    theirs = Path(args.baseline_checkpoint).resolve() if args.baseline_checkpoint else own
    load = os.getloadavg()[0]

    def after() -> dict:
        try:
            return measure_in(ROOT, here, *extra, f"--checkpoint={own}")
        except BaselineFailed as err:  # this checkout's own failure is not the baseline's
            raise RuntimeError(str(err)) from None

    try:
        with checkout(ref) as old:
            (old / "benchmarks" / "_banks.py").write_text((here.parent / "_banks.py").read_text())
            befores, afters = alternate(
                lambda: measure_in(old, here, *extra, f"--checkpoint={theirs}"), after, args.rounds
            )
    except BaselineFailed as err:
        print(
            f"the 'before' side ({ref}) could not load {theirs}: its features or extractor differ "
            "from this checkout's. Pass --baseline-checkpoint DIR (a checkpoint trained by that "
            "code) or --baseline HEAD (this code's last commit); timing this checkout alone.\n"
            f"({str(err).splitlines()[-1]})"
        )
        befores, afters = [], [after() for _ in range(args.rounds)]
    print(f"machine load (1 min) {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    rounds = f"{args.banks} banks x {args.repeats}, {args.rounds} rounds"
    if not befores:
        print(f"{'path':<40}{'after':>8}   (median over rounds of the medians of {rounds})")
        for key in ("decision", "rerank"):
            print(f"{key:<40}{statistics.median(a[key] for a in afters):>8.2f}")
        return
    print(
        f"correction per 100-candidate bank, one core, ms: medians over rounds of the medians of "
        f"{rounds}, the sides taking turns; ratio: median of the rounds' ratios [their range]"
    )
    print(f"{'path':<40}{'before':>8}{'after':>8}{'ratio':>8}{'range':>14}")
    for key, label in (
        ("decision", "features + residual + gate (target 5)"),
        ("rerank", "rerank() with candidate dicts"),
    ):
        p = paired(befores, afters, lambda m, key=key: m[key])
        low, high = p["ratio_range"]
        print(
            f"{label:<40}{p['before']:>8.2f}{p['after']:>8.2f}{p['ratio']:>7.2f}x"
            f"{f'[{low:.2f}, {high:.2f}]':>14}"
        )
    if theirs == own:
        digests = {m["digest"] for m in befores + afters}
        print(f"same orders before and after: {'yes' if len(digests) == 1 else 'NO'}")
    else:
        print(f"orders not compared: the baseline loads its own checkpoint ({theirs})")
    print(f"before = {ref}, after = this checkout (uncommitted changes included)")


if __name__ == "__main__":
    main()
