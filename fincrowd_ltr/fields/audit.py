"""The hand-labelled audit of the field extractor: per-field precision, recall and F1.

Labels live in ``audit/labels.jsonl`` keyed by record id (no dataset text is stored):
``{"record": "<dataset>/<query|passage>/<id>", "labels": {field: [values], ...}}``. Only the
fields present in ``labels`` are scored for that record (FinanceBench pages take entity and
period from filing metadata, so those fields are not labelled there). Scores are micro-averaged
set overlaps per field; the headline is the mean of the seven field F1 scores.
The labelling conventions are in ``audit/CONVENTIONS.md``.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.data.jsonl import read_jsonl
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.fields.extractor import FIELD_NAMES, FieldExtractor, FinancialFields

SAMPLE_SEED = 13
FRESH_SEED = 16  # the second audit sample (issue 16), disjoint from the first
BLIND_SEED = 25  # the third (issue 25): two blind labellers, disjoint from both


def sample_records(datasets: dict[str, Dataset]) -> list[str]:
    """The audit sample: every FinanceBench question, 100 TAT-QA questions, 60 TAT-QA passages
    and 35 FinanceBench pages of 300-2,000 characters, drawn with a fixed seed."""
    rng = random.Random(SAMPLE_SEED)
    fb, tq = datasets["financebench"], datasets["tatqa"]
    records = [f"financebench/query/{q}" for q in fb.queries]
    records += [f"tatqa/query/{q}" for q in rng.sample(sorted(tq.queries), 100)]
    records += [f"tatqa/passage/{p}" for p in rng.sample(sorted(tq.passages), 60)]
    pages = sorted(p for p, v in fb.passages.items() if 300 <= len(v.text) <= 2000)
    records += [f"financebench/passage/{p}" for p in rng.sample(pages, 35)]
    return records


def sample_fresh_records(
    datasets: dict[str, Dataset], taken: set[str], seed: int = FRESH_SEED
) -> list[str]:
    """A fresh audit sample: 12 FinanceBench pages of 300-1,500 characters, 30 TAT-QA questions
    and 30 FinQA questions, none in ``taken`` (the earlier samples), drawn with ``seed``
    (``FRESH_SEED``: the sample labelled before extractor 1.2 changed anything;
    ``BLIND_SEED``: the blind sample of issue 25)."""
    rng = random.Random(seed)
    fb, tq, fq = datasets["financebench"], datasets["tatqa"], datasets["finqa"]
    pages = sorted(
        f"financebench/passage/{p}"
        for p, v in fb.passages.items()
        if 300 <= len(v.text) <= 1500 and f"financebench/passage/{p}" not in taken
    )
    tatqa = sorted(f"tatqa/query/{q}" for q in tq.queries if f"tatqa/query/{q}" not in taken)
    finqa = sorted(f"finqa/query/{q}" for q in fq.queries if f"finqa/query/{q}" not in taken)
    return rng.sample(pages, 12) + rng.sample(tatqa, 30) + rng.sample(finqa, 30)


def extract_record(
    record: str, datasets: dict[str, Dataset], extractor: FieldExtractor
) -> FinancialFields:
    """Run the extractor on one audit record (queries as queries, passages with metadata)."""
    name, kind, rid = record.split("/", 2)
    if name not in datasets:
        raise DataError(f"audit record {record!r}: unknown dataset {name!r}")
    ds = datasets[name]
    if kind == "query":
        if rid not in ds.queries:
            raise DataError(f"audit record {record!r}: unknown query id")
        return extractor.extract_query(ds.queries[rid].text)
    if kind == "passage":
        if rid not in ds.passages:
            raise DataError(f"audit record {record!r}: unknown passage id")
        return extractor.extract_passage(ds.passages[rid])
    raise DataError(f"audit record {record!r}: kind must be 'query' or 'passage'")


def score(labels: list[dict], predictions: dict[str, FinancialFields]) -> dict[str, dict]:
    """Micro precision/recall/F1 per field over the records that label it."""
    counts = defaultdict(lambda: [0, 0, 0, 0])  # tp, fp, fn, records
    for row in labels:
        pred = predictions[row["record"]]
        for field, gold in row["labels"].items():
            if field not in FIELD_NAMES:
                raise DataError(f"audit record {row['record']!r}: unknown field {field!r}")
            got, want = set(getattr(pred, field)), set(gold)
            c = counts[field]
            c[0] += len(got & want)
            c[1] += len(got - want)
            c[2] += len(want - got)
            c[3] += 1
    out = {}
    for field in FIELD_NAMES:
        tp, fp, fn, n = counts[field]
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        out[field] = {
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "records": n,
            "gold_values": tp + fn,
            "tp": tp,
            "fp": fp,
            "fn": fn,
        }
    return out


def pooled_f1(fields: dict[str, dict]) -> float:
    """Value-level F1 pooled over every field (each gold and predicted value counts once): beside
    the unweighted mean of the per-field F1s, which lets a field with two gold values move the
    average as much as one with three hundred."""
    tp = sum(s["tp"] for s in fields.values())
    fp = sum(s["fp"] for s in fields.values())
    fn = sum(s["fn"] for s in fields.values())
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0


def run_audit(labels_path: Path, data_root: str | Path | None = None) -> dict:
    """Print and return per-field precision/recall/F1 on the hand labels."""
    labels = []
    for lineno, row in read_jsonl(labels_path):
        if "record" not in row or "labels" not in row:
            raise DataError(f"{labels_path}:{lineno}: needs 'record' and 'labels'")
        labels.append(row)
    names = sorted({row["record"].split("/", 1)[0] for row in labels})
    datasets = {n: load_dataset(n, data_root, "all") for n in names}
    extractor = FieldExtractor.from_passages(
        p for ds in datasets.values() for p in ds.passages.values()
    )
    predictions = {
        row["record"]: extract_record(row["record"], datasets, extractor) for row in labels
    }
    result = score(labels, predictions)
    print(f"field audit: {len(labels)} hand-labelled records ({labels_path})")
    print(f"{'field':<14}{'precision':>10}{'recall':>10}{'F1':>8}{'records':>9}{'values':>8}")
    for field, s in result.items():
        print(
            f"{field:<14}{s['precision']:>10.3f}{s['recall']:>10.3f}{s['f1']:>8.3f}"
            f"{s['records']:>9}{s['gold_values']:>8}"
        )
    mean_f1 = sum(s["f1"] for s in result.values()) / len(result)
    pooled = pooled_f1(result)
    values = sum(s["gold_values"] for s in result.values())
    print(f"average field F1: {mean_f1:.3f} (unweighted mean of the {len(result)} fields)")
    print(f"pooled value-level F1: {pooled:.3f} ({values} gold values)")
    return {"fields": result, "average_f1": mean_f1, "pooled_f1": pooled, "n_records": len(labels)}


def dump_for_labelling(records: list[str], datasets: dict[str, Dataset], out: Path) -> None:
    """Write the sample's texts to a scratch file for a labeller (never commit it)."""
    with open(out, "w", encoding="utf-8") as fh:
        for record in records:
            name, kind, rid = record.split("/", 2)
            ds = datasets[name]
            item = ds.queries[rid] if kind == "query" else ds.passages[rid]
            meta = {} if kind == "query" else item.metadata()
            fh.write(json.dumps({"record": record, "meta": meta, "text": item.text}) + "\n")
