"""FinanceBench loader: questions, document information and the page corpus.

Passage ids are ``{doc_name}:{page_num}`` with ``page_num`` 0-based, exactly as
``evidence_page_num`` in the question file. Questions whose gold pages are not in the page corpus
are kept and listed in ``Dataset.missing_gold`` (the coverage report), never dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from tqdm.auto import tqdm

from fincrowd_ltr.data import files
from fincrowd_ltr.data.answers import figure_of
from fincrowd_ltr.data.jsonl import read_jsonl, require_fields
from fincrowd_ltr.data.quirks import (
    alias_documents,
    duplicate_groups,
    gold_equivalents,
    text_keys,
)
from fincrowd_ltr.data.schema import DataError, Dataset, Passage, Query

QUESTION_FIELDS = ("financebench_id", "company", "question", "evidence")
DOC_INFO_FILE = "financebench_document_information.jsonl"
PAGES_FILE = "financebench_pages_pymupdf.jsonl.gz"
_NON_QUESTION_FILES = {DOC_INFO_FILE, PAGES_FILE}
_DOC_NAME = re.compile(r"^(?P<prefix>[A-Z0-9&]+)_(?P<period>\d{4}(?:Q\d)?)_(?P<type>[A-Za-z0-9]+)")


def page_id(doc_name: str, page_num: int) -> str:
    """The passage id of a FinanceBench page."""
    return f"{doc_name}:{page_num}"


def question_files(root: Path, split: str) -> list[Path]:
    """Question files for ``split``: ``all`` = every ``financebench*.jsonl`` question file."""
    if split == "all":
        return files.split_files(
            root,
            split,
            "financebench",
            ".jsonl",
            "FinanceBench question",
            exclude=frozenset(_NON_QUESTION_FILES),
        )
    return files.split_files(root, split, "financebench_", ".jsonl", "FinanceBench question")


def _doc_metadata(doc_name: str, info: dict[str, dict], prefix_company: dict[str, str]) -> dict:
    """Company, period and type of a filing; parsed from its name when doc info lacks it."""
    match = _DOC_NAME.match(doc_name)
    period = match.group("period") if match else None
    if doc_name in info:
        row = info[doc_name]
        year = str(row.get("doc_period")) if row.get("doc_period") is not None else None
        # 10-Q names carry the quarter (2023Q2); doc info only carries the year.
        if period and year and period.startswith(year):
            year = period
        return {
            "company": row.get("company"),
            "period": year or period,
            "doc_type": str(row.get("doc_type", "")).lower() or None,
        }
    if match is None:
        return {"company": None, "period": None, "doc_type": None}
    prefix = match.group("prefix")
    return {
        "company": prefix_company.get(prefix, prefix),
        "period": period,
        "doc_type": match.group("type").lower(),
    }


def load_financebench(root: Path, split: str = "all", progress: bool = True) -> Dataset:
    """Load FinanceBench from ``root`` (the folder holding its files).

    Args:
        root: Folder with the question file(s), document information and page corpus.
        split: ``all`` (every question file found), a name ``X`` for ``financebench_X.jsonl``,
            or a path to a question file of the same format.
        progress: Show a progress bar while reading the page corpus.

    Returns:
        The dataset with page passages, page-level qrels, coverage and corpus-quirk notes.
    """
    info = _document_information(root / DOC_INFO_FILE)
    passages, filings = _pages(root / PAGES_FILE, info, progress)
    queries, qrels, answers, missing = _questions(root, split, passages)
    keys = text_keys(passages)
    groups = duplicate_groups(passages, keys)
    aliases = alias_documents(passages, keys)
    not_in_info = sorted({p.document for p in passages.values()} - set(info))
    notes = [
        f"{len(passages)} pages from {filings} filings",
        f"{sum(len(g) for g in groups)} pages in {len(groups)} groups of identical text "
        "(relevance is also reported expanded to these duplicates)",
        f"{len(not_in_info)} filings missing from document information (metadata parsed from "
        f"their names): {', '.join(not_in_info)}",
        "filings with identical pages under two names: "
        + (", ".join(f"{a} = {b}" for a, b in aliases) or "none"),
        f"{len(missing)} of {len(queries)} questions have gold pages outside the page corpus",
    ]
    dataset = Dataset(
        name="financebench",
        queries=queries,
        passages=passages,
        qrels=qrels,
        missing_gold=missing,
        gold_equivalents=gold_equivalents(qrels, groups),
        notes=notes,
        answer_figures=answers,
    )
    dataset.validate()
    return dataset


def _document_information(path: Path) -> dict[str, dict]:
    """The document information rows by filing name (the first row of a name wins)."""
    info: dict[str, dict] = {}
    for lineno, row in read_jsonl(path):
        require_fields(path, lineno, row, ("doc_name", "company"))
        info.setdefault(row["doc_name"], row)
    return info


def _pages(path: Path, info: dict[str, dict], progress: bool) -> tuple[dict[str, Passage], int]:
    """Every page of the corpus with its filing's metadata, and the number of filings."""
    prefix_company = {}
    for name, row in info.items():
        match = _DOC_NAME.match(name)
        if match:
            prefix_company.setdefault(match.group("prefix"), row["company"])
    passages: dict[str, Passage] = {}
    meta_cache: dict[str, dict] = {}
    lines = read_jsonl(path)
    if progress:
        lines = tqdm(lines, desc="FinanceBench pages", unit=" pages", mininterval=2.0)
    for lineno, row in lines:
        require_fields(path, lineno, row, ("doc_name", "page_num", "text"))
        doc = row["doc_name"]
        if doc not in meta_cache:
            meta_cache[doc] = _doc_metadata(doc, info, prefix_company)
        pid = page_id(doc, int(row["page_num"]))
        if pid in passages:
            raise DataError(f"{path}:{lineno}: duplicate page id {pid!r}")
        passages[pid] = Passage(
            pid=pid,
            text=row["text"] or "",
            document=doc,
            position=int(row["page_num"]),
            **meta_cache[doc],
        )
    return passages, len(meta_cache)


def _questions(root: Path, split: str, passages: dict[str, Passage]) -> tuple:
    """``(queries, qrels, answer figures, missing gold)`` of the split's question files; gold
    pages outside the corpus are listed, never dropped silently."""
    queries: dict[str, Query] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    for path in question_files(root, split):
        for lineno, row in read_jsonl(path):
            require_fields(path, lineno, row, QUESTION_FIELDS)
            qid = str(row["financebench_id"])
            if qid in queries:
                raise DataError(f"{path}:{lineno}: duplicate question id {qid!r}")
            queries[qid] = Query(
                qid=qid, text=row["question"], group=row["company"], company=row["company"]
            )
            rels: dict[str, int] = {}
            for item in row["evidence"]:
                if "doc_name" not in item or "evidence_page_num" not in item:
                    raise DataError(
                        f"{path}:{lineno}: evidence item lacks doc_name/evidence_page_num"
                    )
                pid = page_id(item["doc_name"], int(item["evidence_page_num"]))
                rels[pid] = 1
                if pid not in passages:
                    missing.setdefault(qid, []).append(pid)
            qrels[qid] = {pid: g for pid, g in rels.items() if pid in passages}
            figure = figure_of(row.get("answer", ""))
            if figure:
                answers[qid] = [figure]
    return queries, qrels, answers, missing
