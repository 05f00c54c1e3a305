"""Bank-local lexical statistics: BM25 with the bank as the collection, and local concentration.

Term counts of every passage are computed once (``TermCounter``) and cached; a bank's statistics
are then a few sparse-matrix operations over its 100 rows, fast enough to run per request.

Terms are ordered by a fixed hash of their text (``term_key``), never by the order a process
first met them: a bank's columns, each row's entries and the query's terms come in that order,
and the similarity product runs on one BLAS thread, so the floating-point sums, and so the
features, are the same bits in every process on the same kind of CPU (a fresh featurizer, one
that served other banks first, a Dask worker). OpenBLAS picks its kernels by CPU type, so
machines of another type may differ in the last bits.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from bm25s.stopwords import STOPWORDS_EN
from scipy import sparse
from threadpoolctl import ThreadpoolController

TOKEN = re.compile(r"(?u)\b\w\w+\b")  # the bm25s default token pattern
STOPWORDS = frozenset(STOPWORDS_EN)
BM25_K1, BM25_B = 1.5, 0.75
CONCENTRATION_NEIGHBOURS = 5
DENSE_PRODUCT_CELLS = 2_000_000  # up to ~16 MB: 100 candidates x 20,000 shared terms
VERSION = 3  # in the feature cache key: bump when features move (2: term_key, 3: one BLAS thread)
_BLAS_LOCK = threading.Lock()  # BLAS's thread count is one per process


def _new_blas_lock() -> None:
    """A forked child starts with a free lock (another thread of the parent may have held it
    at the fork, and that thread does not exist in the child)."""
    global _BLAS_LOCK
    _BLAS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_blas_lock)


@functools.cache
def _blas() -> ThreadpoolController:
    """The process's thread-pool controller, made on first use (it inspects the loaded
    libraries)."""
    return ThreadpoolController()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which BLAS runs on one thread: a product's sums then do not depend on the
    thread count (and for a bank's small product one thread is also faster). The count is the
    process's, so callers on several threads take turns (a bank's product takes ~1 ms)."""
    with _BLAS_LOCK, _blas().limit(limits=1, user_api="blas"):
        yield


def term_key(term: str) -> int:
    """The term's place in every term order: a fixed 64-bit hash of its text."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")


class TermCounter:
    """Maps texts to sparse term-count rows over a growing vocabulary (lower-case, English
    stopwords removed, as the first-stage BM25); ids number terms as first met, and every order
    of terms follows ``term_key``."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self._keys = np.zeros(1024, dtype=np.uint64)  # term id -> term_key, grown by doubling
        self._rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._column = np.full(0, -1, dtype=np.int64)  # scratch: corpus term id -> bank column

    def tokens(self, text: str) -> list[int]:
        ids = []
        for token in TOKEN.findall(text.lower()):
            if token in STOPWORDS:
                continue
            idx = self.vocab.get(token)
            if idx is None:
                idx = self.vocab[token] = len(self.vocab)
                if idx == len(self._keys):
                    self._keys = np.concatenate([self._keys, np.zeros_like(self._keys)])
                self._keys[idx] = term_key(token)
            ids.append(idx)
        return ids

    def keys(self, ids: np.ndarray) -> np.ndarray:
        """The ``term_key`` of each term id."""
        return self._keys[ids]

    def in_key_order(self, ids: np.ndarray) -> np.ndarray:
        """Term ids sorted by ``term_key``."""
        return ids[np.argsort(self.keys(ids), kind="stable")]

    def query_terms(self, text: str) -> np.ndarray:
        """The distinct term ids of a text, in ``term_key`` order."""
        return self.in_key_order(np.unique(np.array(self.tokens(text), dtype=np.int64)))

    def counts(self, key: str, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(term ids in ``term_key`` order, counts) of a text, cached under ``key``."""
        row = self._rows.get(key)
        if row is None:
            ids, counts = np.unique(np.array(self.tokens(text), dtype=np.int64), return_counts=True)
            order = np.argsort(self.keys(ids), kind="stable")
            row = self._rows[key] = (ids[order], counts[order].astype(np.float64))
        return row

    def matrix(
        self, rows: list[tuple[np.ndarray, np.ndarray]], query_terms: np.ndarray
    ) -> tuple[sparse.csr_matrix, np.ndarray]:
        """Stack rows (from ``counts``) into a CSR matrix over the bank's own vocabulary (columns
        are the terms that occur in the bank, in ``term_key`` order, so bank statistics never
        touch the corpus-wide vocabulary and each row's entries stay sorted); returns it with the
        columns of ``query_terms`` that occur in the bank, in the order given."""
        indices = np.concatenate([ids for ids, _ in rows]) if rows else np.zeros(0, np.int64)
        data = np.concatenate([c for _, c in rows]) if rows else np.zeros(0)
        if len(self._column) < len(self.vocab):
            self._column = np.full(2 * len(self.vocab), -1, dtype=np.int64)
        present = np.zeros(len(self._column), dtype=bool)
        present[indices] = True
        terms = self.in_key_order(np.flatnonzero(present))  # rows are in this order already
        self._column[terms] = np.arange(len(terms))
        columns = self._column[indices]
        query_terms = query_terms[query_terms < len(present)]
        query_columns = self._column[query_terms]
        self._column[terms] = -1
        indptr = np.cumsum([0] + [len(ids) for ids, _ in rows])
        docs = sparse.csr_matrix((data, columns, indptr), shape=(len(rows), len(terms)))
        return docs, query_columns[query_columns >= 0]


def bank_bm25(
    docs: sparse.csr_matrix, query_terms: np.ndarray, k1: float = BM25_K1, b: float = BM25_B
) -> np.ndarray:
    """BM25 of each bank row for the query terms, with IDF and length statistics of the bank."""
    n = docs.shape[0]
    if n == 0 or len(query_terms) == 0:
        return np.zeros(n)
    lengths = np.bincount(
        np.repeat(np.arange(n), np.diff(docs.indptr)), weights=docs.data, minlength=n
    )
    avg = lengths.mean() if lengths.mean() > 0 else 1.0
    tf = docs[:, query_terms].toarray()
    df = (tf > 0).sum(axis=0)
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
    norm = k1 * (1.0 - b + b * lengths / avg)
    return ((tf * (k1 + 1.0)) / (tf + norm[:, None]) * idf).sum(axis=1)


def cosine_similarities(docs: sparse.csr_matrix) -> np.ndarray:
    """Dense ``(n, n)`` TF-IDF cosine similarities between the bank's rows (IDF of the bank)."""
    n = docs.shape[0]
    docs = docs.tocsr()
    rows = np.repeat(np.arange(n), np.diff(docs.indptr))
    df = np.bincount(docs.indices, minlength=docs.shape[1])
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    weighted = docs.data * idf[docs.indices]
    norms = np.sqrt(np.bincount(rows, weights=weighted * weighted, minlength=n))
    norms[norms == 0] = 1.0
    # a term in one row only never meets another row: keep it in the norm, drop it from the product
    shared_terms = np.flatnonzero(df >= 2)
    column = np.full(docs.shape[1], -1, dtype=np.int64)
    column[shared_terms] = np.arange(len(shared_terms))
    columns = column[docs.indices]
    shared = columns >= 0
    values = (weighted / norms[rows])[shared]
    if n * len(shared_terms) <= DENSE_PRODUCT_CELLS:  # a dense product is faster for a bank
        unit = np.zeros((n, len(shared_terms)))
        unit[rows[shared], columns[shared]] = values
        with one_blas_thread():
            sims = unit @ unit.T
    else:
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[shared], minlength=n))])
        unit = sparse.csr_matrix((values, columns[shared], indptr), shape=(n, len(shared_terms)))
        sims = (unit @ unit.T).toarray()
    np.fill_diagonal(sims, 1.0)  # the dropped terms belong to the diagonal only
    return sims


def local_concentration(
    docs: sparse.csr_matrix, neighbours: int = CONCENTRATION_NEIGHBOURS
) -> np.ndarray:
    """Mean TF-IDF cosine similarity of each row to its ``neighbours`` most similar other rows of
    the bank (fewer when the bank is smaller; 0 for a single candidate)."""
    n = docs.shape[0]
    if n < 2:
        return np.zeros(n)
    sims = cosine_similarities(docs)
    np.fill_diagonal(sims, -np.inf)
    k = min(neighbours, n - 1)
    top = -np.partition(-sims, k - 1, axis=1)[:, :k]
    return top.mean(axis=1)
