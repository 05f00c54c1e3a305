"""``fincrowd fit-residual`` on FinanceBench before and after the redesign, side by side.

The baseline is the package at ``--baseline-ref`` (default ``d82135c``, the last release before
the gated correction became one model object), checked out into a temporary git worktree and run
with this virtual environment; the current code runs from this checkout. Both fit the gated
correction (5 company folds, the package defaults, ``--no-select``) on the same banks; each side
runs once to build its caches, then ``--repeats`` timed runs. The old code trained every
cross-validation fold's residual twice (once for the residual rows, again for the gated rows); the
new one fits each residual once.

    .venv/bin/python benchmarks/fit_residual.py [--data-root ../shared/data] [--ranker bm25]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(source: Path, args: argparse.Namespace, cache: Path, out: Path) -> float:
    cmd = [
        sys.executable,
        "-m",
        "fincrowd_ltr.cli",
        "fit-residual",
        "--dataset=financebench",
        f"--ranker={args.ranker}",
        "--first-stage=bm25",
        "--no-select",
        f"--cache-dir={cache}",
        f"--out={out}",
    ]
    if args.data_root:
        cmd.append(f"--data-root={args.data_root}")
    env = {**os.environ, "PYTHONPATH": str(source)}
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=source, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{source}: fit-residual failed\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--ranker", default="bm25")
    parser.add_argument("--baseline-ref", default="d82135c")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old), args.baseline_ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            times = {}
            for name, source in (("before", old), ("after", ROOT)):
                cache, out = Path(tmp) / f"cache-{name}", Path(tmp) / f"model-{name}"
                run(source, args, cache, out)  # builds the BM25 index, banks and features
                times[name] = [run(source, args, cache, out) for _ in range(args.repeats)]
                print(f"{name}: {statistics.median(times[name]):.1f} s median ({times[name]})")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
    before, after = statistics.median(times["before"]), statistics.median(times["after"])
    print(f"fit-residual, FinanceBench, {args.ranker} base, gated, 5 folds, package defaults")
    print(f"  before ({args.baseline_ref}): {before:7.1f} s")
    print(f"  after  (this checkout):  {after:7.1f} s")
    print(f"  ratio before / after: {before / after:.2f}x")


if __name__ == "__main__":
    main()
