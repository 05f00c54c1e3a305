"""On-disk cache of passage embeddings keyed by model, window policy and text hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def text_hash(text: str) -> str:
    """SHA-1 of the exact text (the cache key's text part)."""
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()


class EmbeddingCache:
    """Window embeddings of texts: ``get(text) -> (n_windows, dim)`` float32 array or None.

    Stored as ``vectors.npy`` (all rows) and ``index.json`` (hash -> [first row, row count]) in
    ``folder``; :meth:`save` rewrites both atomically. ``folder=None`` keeps it in memory only.
    """

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._rows: dict[str, np.ndarray] = {}
        self._dirty = False
        if folder is not None and (folder / "index.json").exists():
            index = json.loads((folder / "index.json").read_text())
            vectors = np.load(folder / "vectors.npy", mmap_mode="r")
            for key, (start, count) in index.items():
                self._rows[key] = np.asarray(vectors[start : start + count])

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, text: str) -> np.ndarray | None:
        return self._rows.get(text_hash(text))

    def put(self, text: str, vectors: np.ndarray) -> None:
        self._rows[text_hash(text)] = np.asarray(vectors, dtype=np.float32)
        self._dirty = True

    def save(self) -> None:
        """Write the cache to disk (no-op in memory or when nothing changed)."""
        if self.folder is None or not self._dirty:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        index, blocks, start = {}, [], 0
        for key, rows in self._rows.items():
            index[key] = [start, len(rows)]
            blocks.append(rows)
            start += len(rows)
        tmp_vec = self.folder / "vectors.tmp.npy"
        np.save(tmp_vec, np.concatenate(blocks) if blocks else np.zeros((0, 0), np.float32))
        tmp_idx = self.folder / "index.tmp.json"
        tmp_idx.write_text(json.dumps(index))
        tmp_vec.replace(self.folder / "vectors.npy")
        tmp_idx.replace(self.folder / "index.json")
        self._dirty = False
