"""Bank features on every core of this machine: forked workers that inherit the featurizer.

A cold fit featurises thousands of banks (2,000 synthetic questions x 100 pages) in one
process, on one core. Here the banks are cut into spans that forked workers featurise with the
parent's :class:`~fincrowd_ltr.features.bank_features.BankFeaturizer` (inherited, not sent).
The output equals one process's bit for bit: a bank's term matrix numbers its columns by the
order in which terms were first seen, so this process first counts every bank's terms in the
order one process would, and the workers only read that vocabulary. What the workers extract
(page fields and cues) comes back into the parent's caches.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from fincrowd_ltr.engine import stop_pool
from fincrowd_ltr.features.bank_features import BankFeaturizer

PARALLEL_BANKS = 200  # fewer banks than this are featurised in this process (forking costs ~1 s)
SPAN = 50  # banks per task

_FORKED: list = []  # (featurizer, banks) while a pool runs


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


def featurize_banks(
    featurizer: BankFeaturizer, banks: list[tuple[str, list[str]]], workers: int | None = None
) -> list[np.ndarray]:
    """Feature matrices of ``banks`` (``(question text, candidate ids)`` pairs), in order.

    Args:
        featurizer: The corpus's featurizer (its caches grow as in one process).
        banks: The banks to featurise.
        workers: Processes to use; ``None``: one per core when there are at least
            ``PARALLEL_BANKS`` banks and the platform forks, else this process alone.
    """
    workers = _workers(len(banks), workers)
    if workers <= 1:
        return [featurizer.features(query, pids) for query, pids in banks]
    terms, passages = featurizer.terms, featurizer.passages
    for query, pids in banks:  # the vocabulary one process would build, in its order
        terms.tokens(query)
        for pid in pids:
            terms.counts(pid, passages[pid].text)
    spans = [(start, min(start + SPAN, len(banks))) for start in range(0, len(banks), SPAN)]
    _FORKED[:] = [featurizer, banks]
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init
    )
    out: list[np.ndarray] = []
    try:
        for rows, extracted in pool.map(_featurize_span, spans):
            out += rows
            featurizer.adopt(extracted)
    except BaseException:  # interrupted, or a bank failed: stop the rest now
        stop_pool(pool)
        raise
    finally:
        _FORKED.clear()
    pool.shutdown()
    return out


def _workers(n_banks: int, workers: int | None) -> int:
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1  # spawned workers would have to be sent the corpus
    if multiprocessing.current_process().daemon:
        return 1  # a pool's worker cannot start processes of its own
    if workers is None:
        workers = cores() if n_banks >= PARALLEL_BANKS else 1
    return max(1, min(workers, -(-n_banks // SPAN)))


def _worker_init() -> None:
    # end on SIGTERM, leave Ctrl-C to the parent (which stops the pool); one BLAS thread each
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - an optional helper
        return
    threadpool_limits(1)


def _featurize_span(span: tuple[int, int]) -> tuple[list[np.ndarray], tuple[dict, dict]]:
    featurizer, banks = _FORKED
    marks = featurizer.extraction_marks()
    rows = [featurizer.features(query, pids) for query, pids in banks[span[0] : span[1]]]
    return rows, featurizer.extracted_since(marks)
