"""On-disk cache of passage embeddings keyed by model, window policy and text hash.

Stored in one SQLite database per model and window policy (``embeddings.sqlite`` in the cache
folder): rows are only ever added (``INSERT OR IGNORE``), so two processes embedding at once (an
evaluation beside a server, two evaluations) each keep what the other wrote; SQLite's locking makes
every write atomic. A folder written by an earlier version (``vectors.npy`` + ``index.json``) is
imported once.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

import numpy as np

DB_FILE = "embeddings.sqlite"


def text_hash(text: str) -> str:
    """SHA-1 of the exact text (the cache key's text part)."""
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()


def _set_wal(db: sqlite3.Connection, attempts: int = 50) -> None:
    """Switch to write-ahead logging. The switch can fail at once with "database is locked" while
    another process opens the same new database (SQLite does not wait on its busy timeout
    there), so it is retried."""
    for attempt in range(attempts):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or attempt == attempts - 1:
                raise
            time.sleep(0.1)


class EmbeddingCache:
    """Window embeddings of texts: ``get(text) -> (n_windows, dim)`` float32 array or None.

    ``folder=None`` keeps it in memory only. New rows are buffered by :meth:`put` and written by
    :meth:`save` in one transaction.
    """

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._rows: dict[str, np.ndarray] = {}
        self._pending: dict[str, np.ndarray] = {}
        self._db: sqlite3.Connection | None = None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(folder / DB_FILE, timeout=600, isolation_level=None)
            _set_wal(self._db)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, rows INTEGER, "
                "dim INTEGER, data BLOB)"
            )
            self._import_legacy(folder)

    def _import_legacy(self, folder: Path) -> None:
        index_path = folder / "index.json"
        if not index_path.exists():
            return
        index = json.loads(index_path.read_text())
        vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        for key, (start, count) in index.items():
            self._pending[key] = np.asarray(vectors[start : start + count], dtype=np.float32)
        self.save()
        index_path.rename(folder / "index.imported.json")

    def __len__(self) -> int:
        if self._db is None:
            return len(self._rows)
        return self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] + len(self._pending)

    def get(self, text: str) -> np.ndarray | None:
        key = text_hash(text)
        row = self._rows.get(key)
        if row is None:
            row = self._pending.get(key)
        if row is None and self._db is not None:
            found = self._db.execute(
                "SELECT rows, dim, data FROM vectors WHERE key = ?", (key,)
            ).fetchone()
            if found is not None:
                rows, dim, data = found
                row = self._rows[key] = np.frombuffer(data, dtype=np.float32).reshape(rows, dim)
        return row

    def put(self, text: str, vectors: np.ndarray) -> None:
        array = np.ascontiguousarray(vectors, dtype=np.float32)
        if array.ndim == 1:
            array = array[None, :]
        key = text_hash(text)
        if self._db is None:
            self._rows[key] = array
        else:
            self._pending[key] = array

    def save(self) -> None:
        """Write buffered rows in one transaction (no-op in memory or when nothing is new)."""
        if self._db is None or not self._pending:
            return
        rows = [
            (k, v.shape[0], v.shape[1] if v.ndim > 1 else 0, v.tobytes())
            for k, v in self._pending.items()
        ]
        with self._db:  # one transaction; concurrent writers wait on SQLite's lock
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?, ?)", rows)
        self._rows.update(self._pending)
        self._pending.clear()
