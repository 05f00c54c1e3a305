"""Pages on disk: a corpus too large to hold, read by id from its own ``corpus.jsonl`` files.

A sharded index (:mod:`fincrowd_ltr.retrieval.sharded`) writes, per shard, the pages' ids and
metadata and each page's byte offset in the corpus file it came from (:func:`write_pages`).
:class:`PageStore` is a read-only mapping over those shards: its metadata is in memory (what
first stages need: company, period, filing type), a page's text is read from the corpus file
when asked for (what banks, scorers and features need). The corpus files must stay where they
were indexed.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from fincrowd_ltr.data.beir import passage_of
from fincrowd_ltr.data.jsonl import parse_line, require_file
from fincrowd_ltr.data.metadata import METADATA_FIELDS
from fincrowd_ltr.data.schema import DataError, Passage, pages_fingerprint

PAGES_FILE, OFFSETS_FILE = "pages.json", "offsets.npy"
FINGERPRINT_FILE = "fingerprint.json"  # the pages' fingerprint, beside the files' state it read
FINGERPRINT_FORMAT = "pages_fingerprint/1"  # what computed it: a new one is hashed again
CACHED_PAGES = 50_000  # pages whose text is kept after reading (a run's bank candidates)


def write_pages(
    folder: Path, source: str, passages: list[Passage], offsets: list[int], stat: tuple[int, int]
) -> None:
    """Record one shard's page ids, metadata and byte offsets in ``source``, and the file's
    size and modification time when the index was planned (``stat``): opening the store checks
    them, so a file appended to or edited since is noticed."""
    meta = {k: [getattr(p, k) for p in passages] for k in METADATA_FIELDS}
    record = {"path": source, "pids": [p.pid for p in passages], **meta}
    record.update(size=stat[0], mtime_ns=stat[1])
    (folder / PAGES_FILE).write_text(json.dumps(record))
    np.save(folder / OFFSETS_FILE, np.array(offsets, dtype=np.int64))


def _check_source(path: Path, info: dict) -> None:
    """Refuse a corpus file whose size changed since it was indexed (pages appended or edited:
    the index would miss them or read stale offsets); warn when only its modification time
    did (a copy, or an edit of the same length). Indexes that recorded neither pass."""
    if "size" not in info:
        return
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise DataError(f"{path}: the indexed corpus file is gone; it must stay where it was "
                        "indexed") from None  # fmt: skip
    if stat.st_size != info["size"]:
        raise DataError(
            f"{path}: {stat.st_size:,} bytes, {info['size']:,} when it was indexed: the corpus "
            "file changed since; index it again"
        )
    if stat.st_mtime_ns != info["mtime_ns"]:
        warnings.warn(
            f"{path}: modified since it was indexed (same size): if its pages were edited, "
            "index it again (the index scores the text it read)",
            stacklevel=4,
        )


class PageStore(Mapping[str, Passage]):
    """Every page of the shards under ``folder`` by id; texts read from the corpus on demand.

    Args:
        folder: A sharded index's folder (one sub-folder per shard).
        shards: The shard sub-folders in corpus order.
    """

    def __init__(self, folder: Path, shards: list[str]) -> None:
        self.folder = Path(folder)
        self.headers: dict[str, Passage] = {}  # text-less pages: the metadata, in corpus order
        self._where: dict[str, tuple[int, int]] = {}
        self._sources: list[Path] = []
        self._offsets: list[np.ndarray] = []
        for s, name in enumerate(shards):
            pages = require_file(self.folder / name / PAGES_FILE)
            try:
                info = json.loads(pages.read_text())
            except ValueError as err:
                raise DataError(f"{pages}: damaged ({err}); index the corpus again") from None
            self._sources.append(Path(info["path"]))
            _check_source(Path(info["path"]), info)
            self._offsets.append(np.load(self.folder / name / OFFSETS_FILE, mmap_mode="r"))
            for i, pid in enumerate(info["pids"]):
                if pid in self.headers:
                    raise DataError(f"{info['path']}: duplicate passage id {pid!r}")
                meta = {k: info[k][i] for k in METADATA_FIELDS}
                self.headers[pid] = Passage(pid=pid, text="", **meta)
                self._where[pid] = (s, i)
        self._cache: OrderedDict[str, Passage] = OrderedDict()
        self._fingerprint: str | None = None

    def corpus_fingerprint(self) -> str:
        """:func:`~fincrowd_ltr.data.schema.pages_fingerprint` of these pages (what keys every
        cache of banks and features), hashed once for an index and the state of its corpus
        files: recorded in the index folder with each file's size, modification and change
        times and inode, and hashed again (every page read) when any of them changed. A folder
        that cannot be written hashes them in every process (said once)."""
        if self._fingerprint is None:
            path = self.folder / FINGERPRINT_FILE
            state = self._files_state()
            try:
                recorded = json.loads(path.read_text())
            except (OSError, ValueError):
                recorded = None
            if not isinstance(recorded, dict) or recorded.get("state") != state:
                recorded = {"state": state, "fingerprint": pages_fingerprint(self)}
                if self._files_state() == state:  # no file changed while it was read
                    self._record(path, recorded)
            self._fingerprint = str(recorded["fingerprint"])
        return self._fingerprint

    @property
    def files(self) -> list[Path]:
        """The corpus files the pages are read from, in corpus order."""
        return list(dict.fromkeys(self._sources))

    def _files_state(self) -> dict:
        """What the recorded fingerprint is valid for: the corpus files as they are now."""
        files = []
        for source in self.files:
            try:
                stat = source.stat()
            except FileNotFoundError:
                raise DataError(f"{source}: the indexed corpus file is gone; it must stay where "
                                "it was indexed") from None  # fmt: skip
            files.append(
                [str(source), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
            )
        return {"format": FINGERPRINT_FORMAT, "shards": len(self._sources), "files": files}

    @staticmethod
    def _record(path: Path, recorded: dict) -> None:
        """Write the fingerprint aside and rename it: another process reads all of it or none."""
        written = path.with_name(f".{FINGERPRINT_FILE}.{os.getpid()}")
        try:
            written.write_text(json.dumps(recorded))
            os.replace(written, path)
        except OSError as err:
            written.unlink(missing_ok=True)
            warnings.warn(
                f"{path.parent}: cannot record the pages' fingerprint there ({err}): every "
                "process hashes every page again to key its caches",
                stacklevel=4,
            )

    def __getstate__(self) -> dict:
        raise TypeError("a PageStore is not sent to workers; send its folder")

    def __len__(self) -> int:
        return len(self.headers)

    def __iter__(self) -> Iterator[str]:
        return iter(self.headers)

    def __contains__(self, pid: object) -> bool:
        return pid in self.headers

    def values(self) -> Iterator[Passage]:  # type: ignore[override]
        """Every page with its text, in corpus order (each file read once, front to back)."""
        pids = iter(self.headers)
        for shard, source in enumerate(self._sources):
            with open(source, "rb") as fh:
                for offset in self._offsets[shard]:
                    fh.seek(int(offset))
                    yield self._checked(fh.readline(), next(pids), source, int(offset))

    @staticmethod
    def _checked(raw: bytes, pid: str, path: Path, offset: int) -> Passage:
        """The page record ``raw`` read at ``offset``, which must still be page ``pid``."""
        try:
            passage = passage_of(parse_line(raw, path, 0) or {}, path, 0)
        except DataError:
            passage = None
        if passage is None or passage.pid != pid:
            raise DataError(
                f"{path}: page {pid!r} is no longer at byte {offset}: the corpus file changed "
                "since it was indexed; index it again"
            )
        return passage

    def items(self) -> Iterator[tuple[str, Passage]]:  # type: ignore[override]
        """``(pid, page)`` pairs with texts, in corpus order."""
        for passage in self.values():
            yield passage.pid, passage

    def __getitem__(self, pid: str) -> Passage:
        held = self._cache.get(pid)
        if held is not None:
            self._cache.move_to_end(pid)
            return held
        if pid not in self._where:
            raise KeyError(pid)
        shard, row = self._where[pid]
        path, offset = self._sources[shard], int(self._offsets[shard][row])
        with open(path, "rb") as fh:
            fh.seek(offset)
            passage = self._checked(fh.readline(), pid, path, offset)
        self._cache[pid] = passage
        if len(self._cache) > CACHED_PAGES:
            self._cache.popitem(last=False)
        return passage
