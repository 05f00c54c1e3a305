"""What the dense and sparse encoders share: cutting texts into windows, batching them by length,
caching one array per text, and a progress bar."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from fincrowd_ltr.retrieval.embedding_cache import EmbeddingCache
from fincrowd_ltr.retrieval.windows import WindowPolicy

TEXTS_PER_CHUNK = 256
SAVE_EVERY_CHUNKS = 8


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
        self.model = model.eval()
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
        """Yield ``(indices, padded batch)`` with windows of similar length together."""
        cls_id, sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = self.tokenizer.pad(
                {"input_ids": [[cls_id, *windows[i], sep_id] for i in idx]}, return_tensors="pt"
            )
            yield idx, batch

    def encode_texts(self, texts: list[str], progress: bool = False) -> list[np.ndarray]:
        """Cached arrays for ``texts``, computing only the ones not cached yet."""
        todo = [t for t in dict.fromkeys(texts) if self.cache.get(t) is None]
        bar = tqdm(
            total=len(todo),
            desc=f"encoding ({self.name})",
            unit=" passages",
            disable=not progress or not todo,
            mininterval=2.0,
        )
        for chunk, start in enumerate(range(0, len(todo), TEXTS_PER_CHUNK)):
            part = todo[start : start + TEXTS_PER_CHUNK]
            ids = self.tokenizer(part, add_special_tokens=False, truncation=False, verbose=False)[
                "input_ids"
            ]
            windows, owner = [], []
            for i, token_ids in enumerate(ids):
                for window in self.policy.split(token_ids):
                    windows.append(window)
                    owner.append(i)
            vectors = self.encode_windows(windows)
            per_text: list[list[np.ndarray]] = [[] for _ in part]
            for i, vector in zip(owner, vectors, strict=True):
                per_text[i].append(vector)
            for text, own in zip(part, per_text, strict=True):
                self.cache.put(text, self.combine(own))
            bar.update(len(part))
            if chunk % SAVE_EVERY_CHUNKS == SAVE_EVERY_CHUNKS - 1:
                self.cache.save()
        bar.close()
        self.cache.save()
        return [self.cache.get(t) for t in texts]
