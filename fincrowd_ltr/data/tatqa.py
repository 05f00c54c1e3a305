"""TAT-QA loader for any split file of its format (dev, test_gold, train).

Passages are each context's table (``is_table=True``) and each of its paragraphs. Gold is the
table when ``answer_from`` mentions the table, plus the paragraphs listed in ``rel_paragraphs``.
Questions of a file without gold fields (the unlabelled test file) load with empty qrels.
"""

from __future__ import annotations

from pathlib import Path

from fincrowd_ltr.data import files
from fincrowd_ltr.data.answers import tatqa_figures
from fincrowd_ltr.data.jsonl import read_json
from fincrowd_ltr.data.schema import DataError, Dataset, Passage, Query


def table_text(rows: list[list]) -> str:
    """Render table rows as lines of ``cell | cell`` (empty cells kept as blanks)."""
    return "\n".join(" | ".join(str(cell).strip() for cell in row) for row in rows)


def split_files(root: Path, split: str) -> list[Path]:
    """``all`` = every ``tatqa_dataset_*.json``; ``X`` = ``tatqa_dataset_X.json`` or a path."""
    return files.split_files(root, split, "tatqa_dataset_", ".json", "TAT-QA split")


def load_tatqa(root: Path, split: str = "all") -> Dataset:
    """Load TAT-QA contexts from ``root``; one group per context (its table uid)."""
    queries: dict[str, Query] = {}
    passages: dict[str, Passage] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    for path in split_files(root, split):
        contexts = read_json(path)
        if not isinstance(contexts, list):
            raise DataError(f"{path}: expected a list of contexts")
        for index, context in enumerate(contexts):
            where = f"{path}: context {index}"
            try:
                table = context["table"]
                table_uid = table["uid"]
                paragraphs = context["paragraphs"]
                questions = context["questions"]
            except (KeyError, TypeError) as err:
                raise DataError(f"{where}: missing field {err}") from None
            if table_uid in passages:
                raise DataError(f"{where}: duplicate table uid {table_uid!r}")
            passages[table_uid] = Passage(
                pid=table_uid,
                text=table_text(table["table"]),
                document=table_uid,
                position=0,
                is_table=True,
            )
            by_order: dict[str, str] = {}
            for para in paragraphs:
                pid = para["uid"]
                if pid in passages:
                    raise DataError(f"{where}: duplicate paragraph uid {pid!r}")
                passages[pid] = Passage(
                    pid=pid,
                    text=para["text"],
                    document=table_uid,
                    position=int(para["order"]),
                    is_table=False,
                )
                by_order[str(para["order"])] = pid
            for q in questions:
                qid = q["uid"]
                if qid in queries:
                    raise DataError(f"{where}: duplicate question uid {qid!r}")
                queries[qid] = Query(qid=qid, text=q["question"], group=table_uid)
                figures = tatqa_figures(q)
                if figures:
                    answers[qid] = figures
                rels: dict[str, int] = {}
                if "table" in str(q.get("answer_from", "")):
                    rels[table_uid] = 1
                for order in q.get("rel_paragraphs") or []:
                    pid = by_order.get(str(order))
                    if pid is None:
                        missing.setdefault(qid, []).append(f"{table_uid}/paragraph {order}")
                    else:
                        rels[pid] = 1
                qrels[qid] = rels
    dataset = Dataset(
        name="tatqa",
        queries=queries,
        passages=passages,
        qrels=qrels,
        missing_gold=missing,
        answer_figures=answers,
    )
    dataset.validate()
    return dataset
