"""Strict readers for JSON and JSON Lines (plain or gzip); errors name the file and line."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from fincrowd_ltr.data.schema import DataError


def require_file(path: str | Path, what: str = "file") -> Path:
    """Return ``path`` (as a ``Path``) if it is a file, else raise DataError naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"expected {what} at {path} but it does not exist")
    return path


# how a user's text files are read: UTF-8, past a leading byte-order mark (editors on Windows)
TEXT_ENCODING = "utf-8-sig"


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=TEXT_ENCODING)
    return open(path, encoding=TEXT_ENCODING)


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, record)`` for each non-blank line; 1-based line numbers.

    Raises:
        DataError: if a line is not a JSON object, naming file and line.
    """
    require_file(path)
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            record = parse_line(line, path, lineno)
            if record is not None:
                yield lineno, record


def read_lines(path: Path, what: str = "file") -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` of a text file (plain or gzip, UTF-8, line ends dropped);
    a file that is not UTF-8 text is an error naming it."""
    require_file(path, what)
    with _open_text(path) as fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, start=1):
                yield lineno, line.rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: not UTF-8 text after line {lineno} ({err.reason})") from None


def parse_line(line: str | bytes, path: Path, lineno: int) -> dict | None:
    """One JSON Lines record (``None`` for a blank line); errors name the file and line."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        # JSON's messages give the column apart ("Invalid control character at")
        where = f" column {err.colno}" if isinstance(err, json.JSONDecodeError) else ""
        msg = getattr(err, "msg", None) or str(err)
        raise DataError(f"{path}:{lineno}: malformed JSON ({msg}{where})") from None
    if not isinstance(record, dict):
        raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
    return record


def read_json(path: Path):
    """Load a whole JSON file, naming the file and position of a syntax error."""
    require_file(path)
    with _open_text(path) as fh:
        try:
            return json.load(fh)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None


def require_fields(path: Path, lineno: int, record: dict, names: tuple[str, ...]) -> None:
    """Raise DataError naming file, line and field when a required field is absent."""
    for name in names:
        if name not in record:
            raise DataError(f"{path}:{lineno}: missing required field {name!r}")
