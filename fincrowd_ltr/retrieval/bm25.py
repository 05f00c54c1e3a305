"""BM25 over a whole corpus with bm25s, cached on disk by corpus fingerprint and settings."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import bm25s
import numpy as np

from fincrowd_ltr.data.schema import Passage


@dataclass(frozen=True)
class BM25Config:
    """BM25 settings. Defaults match the independent reference run (lowercase, English
    stopwords, no stemming, k1 1.5, b 0.75)."""

    k1: float = 1.5
    b: float = 0.75
    stopwords: str = "en"
    stemmer: str | None = None  # e.g. "english" (PyStemmer)

    def key(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


def corpus_fingerprint(passages: dict[str, Passage]) -> str:
    """A hash of passage ids and texts, so a cached index is never reused for another corpus."""
    digest = hashlib.sha1()
    for pid, passage in passages.items():
        digest.update(pid.encode("utf-8"))
        digest.update(b"\0")
        digest.update(passage.text.encode("utf-8", "replace"))
        digest.update(b"\1")
    return digest.hexdigest()[:16]


class BM25Index:
    """A bm25s index over every passage of a corpus.

    Args:
        pids: Passage ids in index order.
        retriever: A fitted ``bm25s.BM25``.
        config: The settings used to build it.
    """

    def __init__(self, pids: list[str], retriever: bm25s.BM25, config: BM25Config) -> None:
        self.pids = pids
        self.position = {pid: i for i, pid in enumerate(pids)}
        self.retriever = retriever
        self.config = config
        self._stemmer = _stemmer(config.stemmer)

    @classmethod
    def build(
        cls,
        passages: dict[str, Passage],
        config: BM25Config | None = None,
        cache_dir: Path | None = None,
        progress: bool = True,
    ) -> BM25Index:
        """Build (or load from ``cache_dir``) the index over all passages."""
        config = config or BM25Config()
        pids = list(passages)
        folder = None
        if cache_dir is not None:
            folder = Path(cache_dir) / "bm25" / f"{corpus_fingerprint(passages)}-{config.key()}"
            if (folder / "pids.json").exists():
                retriever = bm25s.BM25.load(str(folder))
                return cls(json.loads((folder / "pids.json").read_text()), retriever, config)
        tokens = bm25s.tokenize(
            [passages[p].text for p in pids],
            stopwords=config.stopwords,
            stemmer=_stemmer(config.stemmer),
            show_progress=progress,
        )
        retriever = bm25s.BM25(k1=config.k1, b=config.b)
        retriever.index(tokens, show_progress=progress)
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            retriever.save(str(folder))
            (folder / "pids.json").write_text(json.dumps(pids))
        return cls(pids, retriever, config)

    def _tokens(self, queries: list[str]):
        return bm25s.tokenize(
            queries,
            stopwords=self.config.stopwords,
            stemmer=self._stemmer,
            show_progress=False,
            return_ids=False,
        )

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every passage (index order) for one query, float64."""
        tokens = self._tokens([query])[0]
        return self.retriever.get_scores(tokens).astype(np.float64)

    def search(self, query: str, k: int) -> tuple[list[str], np.ndarray]:
        """Top-``k`` passage ids and scores; ties broken by index order (stable)."""
        scores = self.scores(query)
        order = top_k(scores, k)
        return [self.pids[i] for i in order], scores[order]

    def score_ids(self, query: str, pids: list[str]) -> np.ndarray:
        """BM25 scores of the given passages for one query."""
        scores = self.scores(query)
        return scores[[self.position[p] for p in pids]]


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first, ties by index; NaN ranks last. Which of
    the candidates tied at the k-th place make the cut is not defined (argpartition)."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if np.isnan(scores).any():
        scores = np.where(np.isnan(scores), -np.inf, scores)
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return top[np.lexsort((top, -scores[top]))]


def _stemmer(name: str | None):
    if not name:
        return None
    import Stemmer

    return Stemmer.Stemmer(name)
