"""Today's code beside an earlier commit: a temporary git worktree of the baseline and a way
to run a benchmark function in a subprocess against either checkout."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the commit before the speed work (issue 15): "before" in every benchmark that compares code
BASELINE_REF = "06b7606"


@contextlib.contextmanager
def checkout(ref: str = BASELINE_REF) -> Iterator[Path]:
    """A detached worktree of ``ref``, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT)


class BaselineFailed(RuntimeError):
    """The 'before' side could not run (its code cannot read today's inputs)."""


def measure_in(source: Path, script: Path, *args: str) -> dict:
    """Run ``script --measure ARGS`` with ``source``'s package first on the path; its last stdout
    line is a JSON object."""
    env = {**os.environ, "PYTHONPATH": str(source), "OMP_NUM_THREADS": "1"}
    # a worktree lives in a temporary folder: the data beside this checkout, not beside it
    env.setdefault("FINCROWD_DATA", str((ROOT / ".." / "shared" / "data").resolve()))
    done = subprocess.run(
        [sys.executable, str(script), "--measure", *args],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise BaselineFailed(f"{source}: {script.name} failed\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def alternate(
    before: Callable[[], dict], after: Callable[[], dict], rounds: int
) -> tuple[list[dict], list[dict]]:
    """Each side measured ``rounds`` times, the two taking turns and swapping who goes first each
    round (before-after, after-before, ...), so that a shared machine whose speed drifts during
    the run slows both sides alike."""
    befores, afters = [], []
    for i in range(rounds):
        if i % 2:
            afters.append(after())
            befores.append(before())
        else:
            befores.append(before())
            afters.append(after())
    return befores, afters


def paired(befores: list[dict], afters: list[dict], key, higher_is_better: bool = False) -> dict:
    """Median of each side over rounds, and the median of the per-round ratios (before / after
    for times, after / before for rates: above 1 is faster), with their range."""
    b = [key(x) for x in befores]
    a = [key(x) for x in afters]
    ratios = [(y / x if higher_is_better else x / y) for x, y in zip(b, a, strict=True)]
    return {
        "before": statistics.median(b),
        "after": statistics.median(a),
        "ratio": statistics.median(ratios),
        "ratio_range": (min(ratios), max(ratios)),
    }


def rounds_arg(text: str) -> int:
    """``--rounds``: a positive integer (argparse type)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value
