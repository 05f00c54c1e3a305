"""Every page of a corpus as static-scorer window vectors, for a first stage that reads meaning
as well as words (the ``+static`` part of :mod:`fincrowd_ltr.retrieval.first_stage`).

The corpus's static scorer (:func:`~fincrowd_ltr.retrieval.static_tuning.static_model_for`:
distilled from MiniLM and tuned on the corpus's own pages, no question, no label) embeds each
page window by window once; a question then scores every page by its best window's cosine, one
product with the corpus's window vectors (~160,000 windows for FinanceBench's 49,942 pages), made
block by block for a batch of questions together (:meth:`PageVectors.scores_many`). The
vectors are cached under ``cache_dir/static/pages/``, keyed by the scorer, the pages' ids and
texts, the window policy and the scores' version.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from fincrowd_ltr.progress import Progress
from fincrowd_ltr.retrieval.static import SCORES_VERSION, StaticEncoder, bulk_tokenizing
from fincrowd_ltr.retrieval.windows import WindowPolicy

CHUNK = 2000  # pages embedded per call (bounds the word-piece lists held at once)
# word pieces of a build kept for the corpus's other static tables (~128 MB as uint16, MiniLM's
# vocabulary; 4x as int64 for a vocabulary over 65,536 pieces); beyond, a page's are released
# as it is embedded
KEEP_PIECES = 1 << 26
BLOCK_ROWS = 4096  # window vectors per block of a question product (6 MB at 384 dims: in cache)
BATCH_CELLS = 1 << 25  # question x window similarities held at once (128 MB of float32)
# bump when a question's page scores may change (2: products in row blocks, which BLAS may round
# apart from one whole-matrix product in the last bit): a static first stage's banks are rebuilt
PRODUCTS_VERSION = 2


class PageVectors:
    """Window vectors of the pages ``pids`` (in that order) and the question scores they give.

    Args:
        vectors: ``(n_windows, dim)`` unit vectors, each page's windows contiguous.
        starts: ``(n_pages,)`` index of each page's first window.
        encoder: The static encoder that made them (it embeds the questions).
        pids: The pages' ids in that order (what :meth:`windows` looks up), when known.
        piece_ids: Each page text's word-piece ids, when this process has just cut them (a
            build, up to ``KEEP_PIECES``): another table with the same pieces
            (:meth:`~fincrowd_ltr.retrieval.static.StaticEncoder.same_pieces`) embeds bank
            pages from them without tokenising them again.
    """

    def __init__(
        self,
        vectors: np.ndarray,
        starts: np.ndarray,
        encoder: StaticEncoder,
        pids: list[str] | None = None,
        piece_ids: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.vectors = vectors
        self.starts = np.asarray(starts, dtype=np.int64)
        self.encoder = encoder
        self.ends = np.append(self.starts[1:], len(vectors))
        self.filled = self.ends > self.starts  # a page without windows scores 0
        self.pids = pids
        self.piece_ids = piece_ids
        self._position: dict[str, int] | None = None

    def windows(self, pids: list[str]) -> list[np.ndarray]:
        """Each page's window vectors (views, as the encoder's ``window_vectors`` gives them)."""
        if self.pids is None:
            raise ValueError("these page vectors were made without their page ids")
        if self._position is None:
            self._position = {p: i for i, p in enumerate(self.pids)}
        at = [self._position[p] for p in pids]
        return [self.vectors[self.starts[i] : self.ends[i]] for i in at]

    @classmethod
    def build(
        cls,
        pids: list[str],
        passages,
        cache_dir: Path | None,
        corpus_key: str | None = None,
        progress: bool = False,
    ) -> PageVectors:
        """The corpus's static scorer's vectors of ``pids`` (read from the cache when there),
        cut into the default windows (:class:`~fincrowd_ltr.retrieval.windows.WindowPolicy`)."""
        from fincrowd_ltr.retrieval.static_tuning import static_model_for

        known: dict[str, np.ndarray] = {}  # the corpus's piece ids, when its scorer is built now
        model = static_model_for(
            passages, cache_dir, corpus_key, progress=progress, piece_ids=known
        )
        encoder = StaticEncoder(model, WindowPolicy())
        path = None
        if cache_dir is not None:
            key = _key(model, pids, passages, encoder)
            path = Path(cache_dir) / "static" / "pages" / f"{key}.npz"
            if path.is_file():
                with np.load(path) as saved:
                    return cls(saved["vectors"], saved["starts"], encoder, pids)
        parts, lengths, kept, room = [], [], {}, KEEP_PIECES
        bar = Progress(len(pids), "static page vectors (once per corpus)", progress, " pages")
        with bulk_tokenizing():
            for i in range(0, len(pids), CHUNK):
                texts = [passages[p].text for p in pids[i : i + CHUNK]]
                ids = [known[t] if t in known else kept.get(t) for t in texts]
                todo = [j for j, found in enumerate(ids) if found is None]
                cut = model.piece_arrays([texts[j] for j in todo])
                for j, found in zip(todo, cut, strict=True):
                    ids[j] = found
                for windows in encoder.window_vectors(texts, ids):
                    parts.append(windows)
                    lengths.append(len(windows))
                for t, found in zip(texts, ids, strict=True):
                    known.pop(t, None)  # the distillation's: released, or kept while there is room
                    if t not in kept and 0 < len(found) <= room:
                        kept[t], room = found, room - len(found)
                bar.update(len(texts))
        bar.close()
        dim = model.dim
        vectors = np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)
        lengths = np.asarray(lengths, dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, vectors=vectors, starts=starts)
            tmp.replace(path)
        return cls(vectors, starts, encoder, pids, kept or None)

    def scores(self, query: str) -> np.ndarray:
        """Each page's best window cosine with the question (float64; 0 for a page without
        windows)."""
        return next(self.scores_many([query]))

    def scores_many(self, queries: list[str]) -> Iterator[np.ndarray]:
        """:meth:`scores` of each question in turn, the same bits as one at a time, computed a
        batch at a time (``BATCH_CELLS`` similarities: 210 questions on FinanceBench): the window
        vectors are read in blocks of ``BLOCK_ROWS`` rows, and each block meets every question of
        the batch while it is in cache (one question at a time reads the whole matrix from
        memory per question, which bounds the product's speed); each question's product with
        each block is the same call whether it comes alone or with others."""
        if not self.filled.any():
            yield from (np.zeros(len(self.starts)) for _ in queries)
            return
        at = self.starts[self.filled]
        step = max(1, BATCH_CELLS // len(self.vectors))
        for lo in range(0, len(queries), step):
            part = self.encoder.encode_queries(queries[lo : lo + step])
            sims = np.empty((len(part), len(self.vectors)), dtype=np.float32)
            for start in range(0, len(self.vectors), BLOCK_ROWS):
                block = self.vectors[start : start + BLOCK_ROWS]
                for i, q in enumerate(part):
                    sims[i, start : start + len(block)] = block @ q
            for row in sims:
                best = np.zeros(len(self.starts))
                best[self.filled] = np.maximum.reduceat(row, at)
                yield best


def _key(model, pids: list[str], passages, encoder: StaticEncoder) -> str:
    """The cache key: the scorer, the pages' ids and texts in order, the window policy, the
    scores' version."""
    digest = hashlib.sha1(model.fingerprint().encode())
    digest.update(repr((encoder.policy, SCORES_VERSION)).encode())
    for pid in pids:
        digest.update(f"{pid}\0{passages[pid].text}\1".encode("utf-8", "replace"))
    return digest.hexdigest()[:16]
