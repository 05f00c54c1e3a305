"""Gold passages that conflict on period with their own question, by how the period metadata was
written (issue 23): the FinQA subset as a user's BEIR corpus (company = ticker, period = report
year), its period written as users write it, read the way each fincrowd_ltr version reads it.

    .venv/bin/python benchmarks/metadata_forms.py [--data-root ../shared/data]

Rows: the year as loaded (``2016``); user forms (``FY2016``, ``fiscal 2016``, ``FY16``,
``2016-12-31``) taken as raw strings (before issue 23) and read through the metadata contract
(now); and the report's years as a list (``[2016, 2015, 2014]``: a 10-K prints three years), the
form docs/data.md recommends. A question whose gold passage conflicts on period cannot have that
passage lifted by the correction's period match.
"""

from __future__ import annotations

import argparse
import dataclasses

from fincrowd_ltr.data.metadata import normalise_period
from fincrowd_ltr.data.registry import load_dataset
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.compatibility import Compatibility, compare_period

FORMS = {
    "year as loaded": "{y}",
    "FY2016": "FY{y}",
    "fiscal 2016": "fiscal {y}",
    "FY16": "FY{yy}",
    "2016-12-31": "{y}-12-31",
}


def conflicts(data, extractor, period_of) -> tuple[int, int]:
    """(gold passages with a period conflict, gold passages compared)."""
    bad = total = 0
    for qid, rels in data.qrels.items():
        question = extractor.extract_query(data.queries[qid].text).period
        if not question:
            continue
        for pid in rels:
            passage = data.passages[pid]
            if not passage.period:
                continue
            period = period_of(passage.period)
            fields = extractor.extract_passage(dataclasses.replace(passage, period=period))
            total += 1
            bad += compare_period(question, fields.period) is Compatibility.CONFLICT
    return bad, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    data = load_dataset("finqa", args.data_root, "all")
    extractor = FieldExtractor.from_passages(data.passages.values())
    print(f"FinQA subset: {len(data.queries)} questions, {len(data.passages)} passages")
    print(f"{'period metadata':<28}{'read as raw string':>22}{'read by the contract':>24}")
    for name, form in FORMS.items():

        def written(y: str, form: str = form) -> str:
            return form.format(y=y, yy=y[2:])

        raw = conflicts(data, extractor, written)
        now = conflicts(data, extractor, lambda y, w=written: normalise_period(w(y)))
        print(f"{name:<28}{_share(raw):>22}{_share(now):>24}")
    listed = conflicts(data, extractor, lambda y: normalise_period([int(y) - k for k in range(3)]))
    print(f"{'[2016, 2015, 2014] (list)':<28}{'(rejected before)':>22}{_share(listed):>24}")


def _share(counts: tuple[int, int]) -> str:
    bad, total = counts
    return f"{bad}/{total} ({bad / max(total, 1):.1%})"


if __name__ == "__main__":
    main()
