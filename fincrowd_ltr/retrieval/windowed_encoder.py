"""What the dense and sparse encoders share: cutting texts into windows, batching them by length,
caching one array per text, and a progress bar."""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from fincrowd_ltr.retrieval.embedding_cache import EmbeddingCache
from fincrowd_ltr.retrieval.windows import WindowPolicy

TEXTS_PER_CHUNK = 256
ANNOUNCE_TEXTS = 500  # embedding at least this many passages prints an estimate first
SAVE_EVERY_CHUNKS = 8
QUERY_MEMO = 20_000  # the newest questions whose vectors an encoder keeps in memory


class WindowedEncoder:
    """Base class: subclasses turn batches of windows into vectors (``encode_windows``) and the
    vectors of one text into the array that is cached for it (``combine``).

    Args:
        model: A ``transformers`` model in eval mode.
        tokenizer: Its tokenizer.
        policy: Window policy for long passages.
        cache_dir: Cache folder (``None``: memory only); ``kind`` and ``name`` name its subfolder.
        batch_size: Windows per forward pass.
    """

    def __init__(
        self,
        model,
        tokenizer,
        policy: WindowPolicy,
        cache_dir: Path | None,
        kind: str,
        name: str,
        batch_size: int,
    ) -> None:
        from fincrowd_ltr import engine as engines

        self.device_request = engines.current().device
        self.device = engines.resolve_device(self.device_request)
        self.model = model.eval().to(self.device)
        self.tokenizer = tokenizer
        self.policy = policy
        self.name = name
        self.batch_size = batch_size
        folder = None if cache_dir is None else Path(cache_dir) / kind / name / policy.key()
        self.cache = EmbeddingCache(folder)
        self._queries: dict[str, np.ndarray] = {}

    def encode_windows(self, windows: list[list[int]]) -> list[np.ndarray]:
        """One vector per window (subclasses)."""
        raise NotImplementedError

    def combine(self, vectors: list[np.ndarray]) -> np.ndarray:
        """The cached array of one text from its windows' vectors (subclasses)."""
        raise NotImplementedError

    def length_batches(self, windows: list[list[int]]):
        """Yield ``(indices, batch)`` of windows of one exact length (no padding), so a window's
        vector does not depend on which other texts it was embedded with: a cold cache and a
        warm one, or one text and a thousand, give bit-identical vectors (padding to a batch's
        longest window changed them by ~1e-7, enough to reorder near ties)."""
        cls_id, sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        for _, same in itertools.groupby(order, key=lambda i: len(windows[i])):
            same = list(same)
            for start in range(0, len(same), self.batch_size):
                idx = same[start : start + self.batch_size]
                batch = self.tokenizer.pad(
                    {"input_ids": [[cls_id, *windows[i], sep_id] for i in idx]},
                    return_tensors="pt",
                )
                yield idx, batch.to(self.device)

    def encode_chunk(self, texts: list[str]) -> list[np.ndarray]:
        """The cached arrays of ``texts`` computed from scratch (one chunk of
        :meth:`encode_texts`: windows of all its texts batched together by length)."""
        ids = self.tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)[
            "input_ids"
        ]
        windows, owner = [], []
        for i, token_ids in enumerate(ids):
            for window in self.policy.split(token_ids):
                windows.append(window)
                owner.append(i)
        vectors = self.encode_windows(windows)
        per_text: list[list[np.ndarray]] = [[] for _ in texts]
        for i, vector in zip(owner, vectors, strict=True):
            per_text[i].append(vector)
        return [self.combine(own) for own in per_text]

    def forget_old_queries(self) -> None:
        """Keep the vectors of the newest ``QUERY_MEMO`` questions only (a serving process reads
        questions without end)."""
        while len(self._queries) > QUERY_MEMO:
            del self._queries[next(iter(self._queries))]

    def encode_texts(self, texts: list[str], progress: bool = False) -> list[np.ndarray]:
        """Cached arrays for ``texts``, computing only the ones not cached yet (on the current
        engine's workers when it is distributed: :mod:`fincrowd_ltr.engine`)."""
        from fincrowd_ltr import engine as engines

        todo = [t for t in dict.fromkeys(texts) if self.cache.get(t) is None]
        chunks = [todo[i : i + TEXTS_PER_CHUNK] for i in range(0, len(todo), TEXTS_PER_CHUNK)]
        engine = engines.current()
        if progress and len(todo) >= ANNOUNCE_TEXTS:
            print(self._estimate(len(todo), engine.workers), file=sys.stderr, flush=True)
        started = time.perf_counter()
        if engine.distributed and len(chunks) > 1:
            results = engine.map(
                _encode_chunk, chunks, self.worker_copy(), f"encoding ({self.name})", progress
            )
            for part, arrays in zip(chunks, results, strict=True):
                for text, array in zip(part, arrays, strict=True):
                    self.cache.put(text, array)
            self.cache.save()
            self._record_rate(len(todo), time.perf_counter() - started, engine.workers)
            return [self.cache.get(t) for t in texts]
        bar = tqdm(
            total=len(todo),
            desc=f"encoding ({self.name})",
            unit=" passages",
            disable=not progress or not todo,
            mininterval=2.0,
        )
        for chunk, part in enumerate(chunks):
            for text, array in zip(part, self.encode_chunk(part), strict=True):
                self.cache.put(text, array)
            bar.update(len(part))
            if chunk % SAVE_EVERY_CHUNKS == SAVE_EVERY_CHUNKS - 1:
                self.cache.save()
        bar.close()
        self.cache.save()
        self._record_rate(len(todo), time.perf_counter() - started, 1)
        return [self.cache.get(t) for t in texts]

    def _rate_file(self) -> Path | None:
        folder = self.cache.folder
        return None if folder is None else folder / "rate.json"

    def _estimate(self, n: int, workers: int) -> str:
        """What is about to be embedded, and how long it took here last time (per worker)."""
        what = f"encoding {n} passages not in the cache with {self.name} on {self.device}"
        path = self._rate_file()
        try:
            rate = json.loads(path.read_text())[self.device] if path else None
        except (OSError, ValueError, KeyError):
            rate = None
        if not rate:
            return f"{what}: the bar shows an estimate after the first chunk"
        minutes = n / (rate * max(workers, 1)) / 60
        return (
            f"{what}: about {minutes:.0f} min at the {rate:.1f} passages/s per worker measured "
            "here last time"
        )

    def _record_rate(self, n: int, seconds: float, workers: int) -> None:
        path = self._rate_file()
        if path is None or n < ANNOUNCE_TEXTS or seconds <= 0:
            return
        try:
            rates = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            rates = {}
        rates[self.device] = n / seconds / max(workers, 1)
        path.write_text(json.dumps(rates))

    def worker_copy(self) -> WindowedEncoder:
        """This encoder without its cache (what an engine's workers receive; one per encoder,
        so an engine sends it to its workers once)."""
        held = self.__dict__.get("_worker_copy")
        if held is not None:
            return held
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.cache = EmbeddingCache(None)
        copy._queries = {}
        if self.device != "cpu":  # each worker picks its own device (see _encode_chunk)
            import copy as copying

            copy.model = copying.deepcopy(self.model).to("cpu")
            copy.device = "cpu"
        self._worker_copy = copy
        return copy


def _encode_chunk(texts: list[str], shared: WindowedEncoder) -> list[np.ndarray]:
    from fincrowd_ltr.engine import resolve_device

    device = resolve_device(shared.device_request)
    if device != shared.device:
        shared.model.to(device)
        shared.device = device
    return shared.encode_chunk(texts)
