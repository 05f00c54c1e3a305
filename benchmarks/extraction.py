"""Field extraction throughput (passages per second, one core) against a plain regex baseline.

The baseline scans each field with one large alternation over the whole text (extractor 1.0's
approach); the extractor anchors matching at trigger words. Both run on the same passages in the
same process, alternating, and the script prints medians of the repeats and their ratio.

    .venv/bin/python benchmarks/extraction.py [--data-root ../shared/data] [--n 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from fincrowd_ltr.data import load_dataset  # noqa: E402
from fincrowd_ltr.fields import FieldExtractor  # noqa: E402
from fincrowd_ltr.fields import vocabulary as V  # noqa: E402
from fincrowd_ltr.fields.matcher import BOUNDARY_AFTER, BOUNDARY_BEFORE  # noqa: E402

TARGET = 2000.0


class PlainRegexBaseline:
    """One alternation per field scanned over the whole lower-cased text."""

    def __init__(self) -> None:
        self.fields = []
        for vocab in (V.METRICS, V.SEGMENTS, V.STATEMENTS, V.UNITS, V.CURRENCIES):
            names = list(vocab)
            parts = [f"(?P<g{i}>{'|'.join(vocab[n])})" for i, n in enumerate(names)]
            pattern = re.compile(f"{BOUNDARY_BEFORE}(?:{'|'.join(parts)}){BOUNDARY_AFTER}")
            self.fields.append((pattern, names))

    def extract(self, text: str) -> list[set[str]]:
        lowered = text.lower()
        return [
            {names[int(m.lastgroup[1:])] for m in pattern.finditer(lowered)}
            for pattern, names in self.fields
        ]


def rate(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return len(items) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fb = load_dataset("financebench", args.data_root, "all")
    tq = load_dataset("tatqa", args.data_root, "all")
    extractor = FieldExtractor.from_passages(fb.passages.values())
    baseline = PlainRegexBaseline()
    rng = random.Random(0)
    samples = {
        "FinanceBench pages": rng.sample(list(fb.passages.values()), args.n),
        "TAT-QA passages": rng.sample(list(tq.passages.values()), min(args.n, len(tq.passages))),
    }
    print(
        f"{'corpus':<20}{'mean chars':>11}{'extractor/s':>13}{'baseline/s':>12}{'ratio':>7}"
        f"{'vs target':>11}"
    )
    for name, passages in samples.items():
        ours, base = [], []
        for _ in range(args.repeats):
            ours.append(rate(extractor.extract_passage, passages))
            base.append(rate(lambda p: baseline.extract(p.text), passages))
        mine, theirs = statistics.median(ours), statistics.median(base)
        chars = statistics.mean(len(p.text) for p in passages)
        print(
            f"{name:<20}{chars:>11.0f}{mine:>13.0f}{theirs:>12.0f}{mine / theirs:>7.2f}"
            f"{mine / TARGET:>11.2f}"
        )
    print(f"medians of {args.repeats} repeats; target {TARGET:.0f} passages/s on one core")


if __name__ == "__main__":
    main()
