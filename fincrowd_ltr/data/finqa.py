"""FinQA loader (original release format): sentences and table rows of each report page.

Passage ids are ``{filename}#text_{i}`` and ``{filename}#table_{i}``, where ``text_i`` indexes
``pre_text + post_text`` and ``table_i`` the table rows, exactly as FinQA's ``gold_inds``. The
company (ticker) and report year come from ``filename`` (``V/2008/page_17.pdf``).
"""

from __future__ import annotations

import re
from pathlib import Path

from fincrowd_ltr.data import files
from fincrowd_ltr.data.answers import program_figures
from fincrowd_ltr.data.jsonl import read_json
from fincrowd_ltr.data.schema import DataError, Dataset, Passage, Query

_FILENAME = re.compile(r"^(?P<ticker>[^/]+)/(?P<year>\d{4})/page_(?P<page>\d+)")


def split_files(root: Path, split: str) -> list[Path]:
    """``all`` = every ``*.json`` in ``root``; ``X`` = ``X.json``; or a path."""
    return files.split_files(root, split, "", ".json", "FinQA")


def load_finqa(root: Path, split: str = "all") -> Dataset:
    """Load FinQA records; one group per company (ticker)."""
    queries: dict[str, Query] = {}
    passages: dict[str, Passage] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, list[str]] = {}
    for path in split_files(root, split):
        records = read_json(path)
        if not isinstance(records, list):
            raise DataError(f"{path}: expected a list of records")
        for index, rec in enumerate(records):
            where = f"{path}: record {index}"
            try:
                filename, qid, qa = rec["filename"], rec["id"], rec["qa"]
                sentences = list(rec["pre_text"]) + list(rec["post_text"])
                rows = rec["table"]
            except (KeyError, TypeError) as err:
                raise DataError(f"{where}: missing field {err}") from None
            match = _FILENAME.match(filename)
            ticker = match.group("ticker") if match else None
            year = match.group("year") if match else None
            page = int(match.group("page")) if match else None
            common = {
                "company": ticker,
                "document": f"{ticker}/{year}",
                "period": year,
                "doc_type": "10k",
            }
            for i, sentence in enumerate(sentences):
                pid = f"{filename}#text_{i}"
                passages.setdefault(
                    pid, Passage(pid=pid, text=sentence, position=page, is_table=False, **common)
                )
            for i, row in enumerate(rows):
                pid = f"{filename}#table_{i}"
                text = " | ".join(str(cell) for cell in row)
                passages.setdefault(
                    pid, Passage(pid=pid, text=text, position=page, is_table=True, **common)
                )
            if qid in queries:
                raise DataError(f"{where}: duplicate record id {qid!r}")
            queries[qid] = Query(
                qid=qid, text=qa["question"], group=ticker or filename, company=ticker
            )
            rels = {}
            for key in qa.get("gold_inds") or {}:
                pid = f"{filename}#{key}"
                if pid not in passages:
                    raise DataError(f"{where}: gold index {key!r} is outside the page's units")
                rels[pid] = 1
            qrels[qid] = rels
            figures = program_figures(qa.get("program") or "")
            if figures:
                answers[qid] = figures
    dataset = Dataset(
        name="finqa", queries=queries, passages=passages, qrels=qrels, answer_figures=answers
    )
    dataset.validate()
    return dataset
