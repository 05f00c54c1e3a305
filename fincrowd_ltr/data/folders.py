"""Folders written whole: built in a temporary sibling and swapped in for the old one.

A checkpoint (:func:`fincrowd_ltr.model.checkpoint.replace_folder`) and a sharded index
(:func:`fincrowd_ltr.retrieval.sharded.build_sharded_index`) are written this way: no file of
the earlier folder survives, a failure leaves the earlier folder as it was, and a folder holding
files the writer does not own is refused before anything is written (they would be lost).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from fincrowd_ltr.data.schema import DataError


def swap_in_folder(
    directory: Path,
    write: Callable[[Path], None],
    owns: Callable[[str], bool],
    what: str,
    advice: str,
) -> Path:
    """Write ``directory`` anew with ``write(tmp)`` into a fresh sibling and swap it in. A file
    of an existing ``directory`` that ``owns(name)`` denies is refused first, naming ``what``
    the folder should hold and ``advice``; a failure (or interruption) restores the earlier
    folder."""
    directory = Path(directory)
    if directory.exists():
        if not directory.is_dir():
            raise DataError(f"{directory}: exists and is not a folder")
        foreign = sorted(p.name for p in directory.iterdir() if not owns(p.name))
        if foreign:
            raise DataError(
                f"{directory}: holds files that are not {what} ({', '.join(foreign)}); {advice}"
            )
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.{os.getpid()}.new")
    old = directory.with_name(f".{directory.name}.{os.getpid()}.old")
    for leftover in (tmp, old):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        if directory.exists():
            directory.rename(old)
        tmp.rename(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not directory.exists():
            old.rename(directory)  # the earlier folder back in its place
        raise
    shutil.rmtree(old, ignore_errors=True)
    return directory
