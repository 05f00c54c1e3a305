"""Generic BEIR-style corpora (``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``) and TREC runs.

This is how a user brings their own filings: one JSON object per passage with ``_id`` and
``text`` (optional ``title`` and ``metadata`` with ``company``, ``period``, ``doc_type``,
``document``, ``position``, ``is_table``, read as :mod:`fincrowd_ltr.data.metadata` says),
queries with ``_id`` and ``text`` (optional ``group``; without it ``metadata.company``, else
the question's relevant passages, so that questions answered by the same pages share a fold,
else the question alone), and qrels as
``query-id corpus-id score`` lines (a header line is allowed) in ``qrels.tsv`` or BEIR's
``qrels/<split>.tsv``. Their own base ranker's scores come as a TREC run file (``qid Q0 docid
rank score tag``). A folder without ``queries.jsonl`` is a corpus alone (what ``synthesize``
reads); one whose every question names a source page and a template (``fincrowd synthesize``
wrote it) is named ``<name>-synthetic``.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from fincrowd_ltr.data.jsonl import TEXT_ENCODING, read_jsonl, require_fields, require_file
from fincrowd_ltr.data.metadata import METADATA_FIELDS, normalise_metadata, unread_keys
from fincrowd_ltr.data.schema import (
    MAX_SERVED_TEXT_CHARS,
    SYNTHETIC_SUFFIX,
    DataError,
    Dataset,
    Passage,
    Query,
    RunWarning,
    titled,
)


def _fields(line: str) -> list[str]:
    """A qrels line's fields: split on tabs when that gives three or four (ids may then hold
    spaces; trailing empty fields dropped), else on any blanks."""
    tabbed = [x.strip() for x in line.rstrip("\r\n").split("\t")]
    while tabbed and not tabbed[-1]:
        tabbed.pop()
    return tabbed if len(tabbed) in (3, 4) and all(tabbed) else line.split()


def read_qrels(path: Path, lines: dict | None = None) -> dict[str, dict[str, int]]:
    """Read a qrels TSV (or TREC ``qid 0 docid grade``) file; header line allowed. ``lines``, if
    given, receives the line number of every ``(qid, pid)`` (for errors found later)."""
    require_file(path, "qrels file")
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding=TEXT_ENCODING) as fh:
        for lineno, line in enumerate(fh, start=1):
            parts = _fields(line)
            if not parts:
                continue
            if lineno == 1 and parts[0] in ("query-id", "query_id", "qid"):
                continue
            if len(parts) == 4:  # TREC qrels: qid iter docid grade
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3:
                raise DataError(f"{path}:{lineno}: expected 'query-id corpus-id score'")
            try:
                grade = int(float(parts[2]))
            except ValueError:
                raise DataError(f"{path}:{lineno}: score {parts[2]!r} is not a number") from None
            qrels.setdefault(parts[0], {})[parts[1]] = grade
            if lines is not None:
                lines[(parts[0], parts[1])] = lineno
    return qrels


def qrels_files(root: Path, split: str = "all") -> list[Path]:
    """The qrels files of a BEIR folder for ``split``: ``qrels.tsv`` when present, else
    ``qrels/<split>.tsv`` (every ``qrels/*.tsv`` for ``all``); none when the folder has neither."""
    if (root / "qrels.tsv").exists():
        return [root / "qrels.tsv"]
    folder = root / "qrels"
    if not folder.is_dir():
        return []
    if split == "all":
        return sorted(folder.glob("*.tsv"))
    if not (folder / f"{split}.tsv").exists():
        found = ", ".join(sorted(f.stem for f in folder.glob("*.tsv"))) or "none"
        raise DataError(f"{folder}: no {split}.tsv for split {split!r} (splits there: {found})")
    return [folder / f"{split}.tsv"]


def _unread_note(path: Path, unread: dict[str, int]) -> str:
    """Which metadata keys a corpus holds that nothing reads (a misspelt key loses its field)."""
    lines = {k: f"line {line}" for k, line in sorted(unread.items(), key=lambda kv: kv[1])}
    return f"{path}: {unread_keys(lines)}"


def passage_of(row: dict, path: Path, lineno: int) -> Passage:
    """The passage of one ``corpus.jsonl`` record (``_id``, ``text``, optional ``title`` and
    ``metadata``); errors name the file and line."""
    require_fields(path, lineno, row, ("_id", "text"))
    meta = normalise_metadata(row.get("metadata") or {}, f"{path}:{lineno}: field 'metadata'")
    kwargs = {k: meta.get(k) for k in METADATA_FIELDS}
    raw = "" if row["text"] is None else row["text"]  # null: no text, not the word "None"
    text, kwargs["document"] = titled(row.get("title"), raw, kwargs["document"])
    return Passage(pid=str(row["_id"]), text=text, **kwargs)


def _read_corpus(path: Path) -> tuple[dict[str, Passage], list[str]]:
    """The passages of ``corpus.jsonl`` and, when it holds metadata keys nothing reads, a note
    (also warned)."""
    passages: dict[str, Passage] = {}
    unread: dict[str, int] = {}  # metadata keys the loader does not read -> first line
    long: list[tuple[int, str, int]] = []  # texts `serve` refuses by default
    empty: list[tuple[int, str]] = []  # no text to read (`serve` refuses an empty one)
    unstrung: list[tuple[int, str]] = []  # a text that is not a string, read as its str()
    for lineno, row in read_jsonl(path):
        passage = passage_of(row, path, lineno)
        if passage.pid in passages:
            raise DataError(f"{path}:{lineno}: duplicate passage id {passage.pid!r}")
        passages[passage.pid] = passage
        if len(passage.text) > MAX_SERVED_TEXT_CHARS:
            long.append((lineno, passage.pid, len(passage.text)))
        if not passage.text.strip():
            empty.append((lineno, passage.pid))
        if not isinstance(row["text"], str | None):
            unstrung.append((lineno, passage.pid))
        for key in row.get("metadata") or {}:
            if key not in METADATA_FIELDS:
                unread.setdefault(str(key), lineno)
    if not passages:
        raise DataError(f"{path}: no passages (the file is empty)")
    notes = [_unread_note(path, unread)] if unread else []
    if long:
        line, pid, n = long[0]
        notes.append(
            f"{path}: {len(long)} passages longer than {MAX_SERVED_TEXT_CHARS:,} characters "
            f"(first: {pid!r}, line {line}, {n:,}): read whole here (encoders window by "
            "window), refused by `fincrowd serve` unless --max-text-chars allows them"
        )
    if empty:
        line, pid = empty[0]
        notes.append(
            f"{path}: {len(empty)} passages with no text (first: {pid!r}, line {line}): nothing "
            "ranks them but their metadata, and `fincrowd serve` refuses an empty text (one of "
            "spaces alone it serves)"
        )
    if unstrung:
        line, pid = unstrung[0]
        notes.append(
            f"{path}: {len(unstrung)} passages whose 'text' is not a string (first: {pid!r}, "
            f"line {line}): read as its string form"
        )
    for note in notes:
        warnings.warn(note, stacklevel=3)
    return passages, notes


def _read_queries(path: Path, notes: list[str]) -> tuple[dict[str, Query], bool]:
    """The questions of ``queries.jsonl`` (none, with a note, when the file is absent: a corpus
    alone) and whether every record carries the ``source`` and ``template`` that ``fincrowd
    synthesize`` writes. A question without ``group`` or ``metadata.company`` gets ``""``; its
    ``metadata.company`` is its company (read by evaluation diagnostics only)."""
    if not path.exists():  # a corpus and no questions: what `synthesize` starts from
        notes.append(f"{path.parent}: no queries.jsonl, a corpus without questions")
        return {}, False
    queries: dict[str, Query] = {}
    written = 0
    for lineno, row in read_jsonl(path):
        require_fields(path, lineno, row, ("_id", "text"))
        qid = str(row["_id"])
        if qid in queries:
            raise DataError(f"{path}:{lineno}: duplicate query id {qid!r}")
        if not str(row["text"]).strip():
            raise DataError(f"{path}:{lineno}: query {qid!r} has empty text")
        company = (row.get("metadata") or {}).get("company")
        group = row.get("group") or company
        if company:  # the form passages' companies take (evaluation compares the two)
            where = f"{path}:{lineno}: field 'metadata'"
            company = normalise_metadata({"company": company}, where).get("company")
        queries[qid] = Query(
            qid=qid,
            text=str(row["text"]),
            group=str(group or ""),
            company=str(company) if company else None,  # evaluation only (other-company share)
        )
        written += "source" in row and "template" in row
    if not queries:
        raise DataError(f"{path}: no queries (the file is empty)")
    return queries, written == len(queries)


def _corpus(
    root: Path, pages: Mapping[str, Passage] | None
) -> tuple[Mapping[str, Passage], list[str], str]:
    """The folder's passages, the notes on reading them, and what to call them in errors:
    ``corpus.jsonl``, or ``pages`` given (an index's) for a folder that must still exist."""
    if pages is None:
        passages, notes = _read_corpus(root / "corpus.jsonl")
        return passages, notes, "corpus.jsonl"
    if not root.is_dir():  # no corpus.jsonl to fail on: a misspelt folder loads no question
        raise DataError(f"{root}: no such BEIR folder (its queries.jsonl and qrels)")
    source = f"the index {pages.folder}" if hasattr(pages, "folder") else "the pages given"
    return pages, [], source


def _judgements(
    read: list, queries: dict, passages: Mapping[str, Passage], source: str, allow_unknown: bool
) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """The positive judgements of known passages per question, and the passages outside the
    corpus each question's judgements name (an error unless ``allow_unknown``)."""
    qrels: dict[str, dict[str, int]] = {}
    missing: dict[str, list[str]] = {}
    for qrels_path, lines, judged in read:
        for qid, rels in judged.items():
            if qid not in queries:
                line = lines[(qid, next(iter(rels)))]
                raise DataError(f"{qrels_path}:{line}: unknown query id {qid!r}")
            known = {pid: g for pid, g in rels.items() if pid in passages and g > 0}
            qrels.setdefault(qid, {}).update(known)
            absent = [pid for pid in rels if pid not in passages]
            if absent and not allow_unknown:
                raise DataError(
                    f"{qrels_path}:{lines[(qid, absent[0])]}: unknown passage id {absent[0]!r} "
                    f"(not in {source}); fix the qrels, or allow it "
                    "(load_dataset(..., allow_unknown_qrels=True), --allow-unknown-qrels) to "
                    "count such questions as not covered"
                )
            if absent:
                missing.setdefault(qid, []).extend(absent)
    return qrels, missing


def load_beir(
    root: Path,
    name: str | None = None,
    allow_unknown_qrels: bool = False,
    split: str = "all",
    pages: Mapping[str, Passage] | None = None,
) -> Dataset:
    """Load a BEIR-style folder. Relevance judgements come from ``qrels.tsv``, else from the
    standard ``qrels/<split>.tsv`` files (``split="all"``: every file there; another split: that
    file, and only the questions it judges). Qrels may be absent (queries then count as
    uncovered, and the dataset's notes say so), and so may ``queries.jsonl`` (a corpus alone). A
    folder of synthetic questions is named ``<name>-synthetic`` (module docstring).

    Raises:
        DataError: naming file and line, for malformed records, duplicate ids, an empty
            ``corpus.jsonl`` or ``queries.jsonl``, a split without its qrels file, and qrels
            naming an unknown query or passage. With ``allow_unknown_qrels``, judgements of
            unknown passages are counted in the dataset's notes and the question reported as not
            covered instead.

    ``pages``: the corpus when it is not ``corpus.jsonl`` (a sharded index's
    :class:`~fincrowd_ltr.data.store.PageStore`, read from disk page by page): the folder's
    questions and judgements over those pages, ``corpus.jsonl`` not read.
    """
    passages, notes, source = _corpus(root, pages)
    queries_path = root / "queries.jsonl"
    queries, synthetic = _read_queries(queries_path, notes)
    if synthetic:
        name = (name or root.name) + SYNTHETIC_SUFFIX
        notes.append(
            f"{queries_path}: every question names a source page and a template (written by "
            f"`fincrowd synthesize`): the dataset is {name!r}, and figures on it say how well "
            "the templates' questions are answered, not yours"
        )
    files = qrels_files(root, split)
    if not files and queries:
        notes.append(
            f"{root}: no qrels.tsv (or qrels/*.tsv): no question has a judged passage, so none "
            "is covered"
        )
    read = []  # (file, line of each judgement, judgements): every file read once
    for path in files:
        lines: dict[tuple[str, str], int] = {}
        read.append((path, lines, read_qrels(path, lines)))
    if split != "all" and files:
        if files[0].name == "qrels.tsv":
            said = (
                f"{files[0]}: one qrels file for every split, so split {split!r} is not applied: "
                f"every question loads (give qrels/{split}.tsv to hold a split apart)"
            )
            notes.append(said)
            warnings.warn(said, stacklevel=3)
        else:  # qrels/<split>.tsv: that split's questions only
            queries = {q: v for q, v in queries.items() if q in read[0][2]}
    qrels, missing = _judgements(read, queries, passages, source, allow_unknown_qrels)
    unjudged = [q for q in queries if not qrels.get(q) and q not in missing]
    if files and unjudged:
        notes.append(
            f"{len(unjudged)} of {len(queries)} questions have no positive judgement in the "
            f"qrels (first: {', '.join(map(repr, unjudged[:3]))}): they count as not covered"
        )
    if missing:
        n = sum(len(v) for v in missing.values())
        notes.append(
            f"{', '.join(map(str, files))}: {n} judgements name passages outside the corpus; "
            f"{len(missing)} questions count as not covered"
        )
    ungrouped = [qid for qid, query in queries.items() if not query.group]
    for qid in ungrouped:  # no group given: the pages of its answer
        queries[qid] = replace(queries[qid], group=" ".join(sorted(qrels.get(qid, ()))) or qid)
    if ungrouped:
        notes.append(
            f"{len(ungrouped)} of {len(queries)} questions give no `group` or "
            "`metadata.company`: each is grouped with the questions answered by the same pages "
            "(one with no judged page, alone; folds keep a group together; intervals resample "
            "groups, not companies)"
        )
    dataset = Dataset(
        name=name or root.name,
        queries=queries,
        passages=passages,
        qrels=qrels,
        missing_gold=missing,
        notes=notes,
    )
    dataset.validate()
    return dataset


def read_trec_run(path: str | Path, dataset: Dataset | None = None) -> dict[str, dict[str, float]]:
    """Read a TREC run file into ``run[qid][pid] = score``.

    With a ``dataset``, lines of questions it does not hold (another split's, say) are checked
    and skipped, with a warning that counts them; a run that scores none of its questions is an
    error.

    Raises:
        DataError: naming file and line for malformed lines, non-finite scores, passage ids
            the dataset lacks, or a passage listed twice for a question.
    """
    path = require_file(path, "run file")
    run: dict[str, dict[str, float]] = {}
    others: dict[str, dict[str, float]] = {}  # questions the dataset does not hold
    outside: dict[str, str] = {}  # their ids -> where each first appears
    with open(path, encoding=TEXT_ENCODING) as fh:
        for lineno, line in enumerate(fh, start=1):
            parts = line.split()
            if not parts:
                continue
            where = f"{path}:{lineno}"
            if len(parts) != 6:
                raise DataError(f"{where}: expected 'qid Q0 docid rank score tag'")
            qid, _, pid, _, score_text, _ = parts
            score = _run_score(score_text, where)
            into = run
            if dataset is not None:
                if pid not in dataset.passages:
                    raise DataError(f"{where}: unknown passage id {pid!r}")
                if qid not in dataset.queries:
                    outside.setdefault(qid, f"line {lineno}")
                    into = others
            if pid in into.setdefault(qid, {}):
                raise DataError(f"{where}: passage {pid!r} listed twice for query {qid!r}")
            into[qid][pid] = score
    if dataset is not None:
        _questions_outside(outside, run, dataset, str(path))
    return run


def check_run(run: Mapping, dataset: Dataset) -> dict[str, dict[str, float]]:
    """A run given as a mapping ``run[qid][pid] = score``, checked as a TREC file is: string
    ids, every passage id in ``dataset``, every score a finite number; questions the dataset
    does not hold (another split's) are skipped with a warning, and a run that scores none of
    its questions is an error.

    Raises:
        DataError: naming the entry (``run['q1']['p7']``) that breaks a rule.
    """
    checked: dict[str, dict[str, float]] = {}
    outside: dict[str, str] = {}
    for qid, scores in run.items():
        if not isinstance(qid, str):
            raise DataError(f"run[{qid!r}]: question ids are strings, not {type(qid).__name__}")
        if not isinstance(scores, Mapping):
            raise DataError(
                f"run[{qid!r}] is a {type(scores).__name__}, not a mapping of passage ids to scores"
            )
        row: dict[str, float] = {}
        for pid, score in scores.items():
            where = f"run[{qid!r}][{pid!r}]"
            if not isinstance(pid, str):
                raise DataError(f"{where}: passage ids are strings, not {type(pid).__name__}")
            if pid not in dataset.passages:
                raise DataError(f"{where}: unknown passage id {pid!r} (not in {dataset.name})")
            if isinstance(score, str | bytes):
                raise DataError(f"{where}: score {score!r} is text, not a number")
            row[pid] = _run_score(score, where)
        if qid in dataset.queries:
            checked[qid] = row
        else:
            outside.setdefault(qid, "")
    _questions_outside(outside, checked, dataset, "the run")
    return checked


def _run_score(score, where: str) -> float:
    """A run's score as a finite float, or an error naming ``where``."""
    if isinstance(score, bool | np.bool_):
        raise DataError(f"{where}: score {score!r} is a bool, not a number")
    try:
        value = float(score)
    except OverflowError:
        raise DataError(f"{where}: score is too large for a float") from None
    except (TypeError, ValueError):
        raise DataError(f"{where}: score {score!r} is not a number") from None
    if not math.isfinite(value):
        raise DataError(f"{where}: score is {value} (must be finite)")
    return value


def _questions_outside(outside: dict[str, str], kept: dict, dataset: Dataset, run: str) -> None:
    """Refuse a run that scores none of ``dataset``'s questions; warn, counting them, when some
    of its questions are not ``dataset``'s (``outside``: id -> where it first appears)."""
    n = len(outside)
    if outside:
        first, where = next(iter(outside.items()))
        example = f"e.g. {first!r}" + (f", {where}" if where else "")
    if not any(kept.values()):
        found = f"; {n} of its question ids are not {dataset.name}'s ({example})" if n else ""
        raise DataError(
            f"{run} scores none of the {len(dataset.queries)} questions of {dataset.name} as "
            f"loaded{found}: check the ids and the split"
        )
    if outside:
        total = n + len(kept)
        verb = "is not a question" if n == 1 else "are not questions"
        warnings.warn(
            f"{run}: {n} of its {total} question ids {verb} of {dataset.name} as loaded "
            f"({example}); their scores are skipped (another split's?)",
            RunWarning,
            stacklevel=_caller_outside_package(),
        )


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep


def _caller_outside_package() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside this package."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def write_trec_run(path: Path, run: dict[str, dict[str, float]], tag: str = "fincrowd") -> None:
    """Write ``run[qid][pid] = score`` as a TREC run file, ranked by score (ties by id)."""
    with open(path, "w", encoding="utf-8") as fh:
        for qid, scores in run.items():
            ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
            for rank, (pid, score) in enumerate(ranked, start=1):
                fh.write(f"{qid} Q0 {pid} {rank} {score:.10g} {tag}\n")
