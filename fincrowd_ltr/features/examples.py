"""Banks as feature matrices: one :class:`BankExample` per bank, and their on-disk cache.

An example is one bank: its candidates' features, the frozen base scores of one ranker and binary
relevance labels. Features depend on the bank's candidates, the question and the extractor (its
version and vocabulary), never on the base ranker, so one cached matrix serves every ranker.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path

import numpy as np

from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.features.bank_features import FEATURE_NAMES, FEATURE_VERSIONS, BankFeaturizer
from fincrowd_ltr.fields.extractor import extractor_fingerprint
from fincrowd_ltr.retrieval.banks import BankSet


@dataclass
class BankExample:
    """One bank ready for the residual: rows in bank order."""

    qid: str
    pids: list[str]
    features: np.ndarray  # (n, d) float64
    base: np.ndarray  # (n,) float64
    labels: np.ndarray  # (n,) int64, 1 = supporting
    weight: float = 1.0  # the bank's weight in the objective (synthetic banks may weigh less)
    synthetic: bool = False  # a synthesised question's bank (never validation or test)
    draw: int = 0  # which of a synthesis's draws the question belongs to (synthetic banks)
    # values derived from this bank alone that a training loop keeps across epochs (its
    # objective's pairs, its normalised base scores), from ``base`` and ``labels``, which must
    # not change once a fit has read them; never saved; a copy (``dataclasses.replace``)
    # starts empty, one under another weight (``reweighted``) shares them
    derived: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def has_support(self) -> bool:
        return bool(self.labels.any())

    def reweighted(self, weight: float) -> BankExample:
        """The same bank under another objective weight; what is derived from the bank alone
        (its pairs and normalised base scores: labels and base scores, not the weight) is
        shared, not computed again."""
        copy = replace(self, weight=weight)
        copy.derived = self.derived
        return copy


NO_SUPPORT_ADVICE = (
    "train on gold-injected banks (train_mode='injected', --train-mode injected), larger "
    "banks (bank_size=, --bank-size) or "
    "another first stage"
)


def no_support_error(
    which: str = "", detail: str = "", advice: str = NO_SUPPORT_ADVICE, where: str = ""
) -> DataError:
    """The error for a training set (``which``: "of folds [2] ") none of whose banks holds a
    relevant candidate, as retrieved banks may leave it, naming the options to change
    (``advice``; ``where`` names the workflow)."""
    return DataError(
        f"{where}no training bank {which}holds a relevant candidate{detail}: the first stage "
        f"found none of these questions' relevant pages; {advice}",
        "train_mode",
    )


def labels_of(dataset: Dataset, qid: str, pids: list[str]) -> np.ndarray:
    """Binary relevance of ``pids`` for ``qid`` (grade > 0)."""
    rels = dataset.qrels.get(qid, {})
    return np.array([int(rels.get(p, 0) > 0) for p in pids], dtype=np.int64)


def vocabulary_key(featurizer: BankFeaturizer) -> str:
    """A fingerprint of what features depend on besides the bank: extractor version and
    vocabulary, and the feature names."""
    blob = json.dumps(
        [
            extractor_fingerprint(),
            *FEATURE_VERSIONS.values(),  # page cues, filings, lexical: the key's old order
            list(FEATURE_NAMES),
            sorted(featurizer.extractor.companies.items()),
            sorted(featurizer.extractor.segment_names.items()),
        ],
        sort_keys=True,
    )
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def make_examples(
    dataset: Dataset,
    bankset: BankSet,
    ranker: str,
    featurizer: BankFeaturizer,
    qids: list[str] | None = None,
    cache: Path | None = None,
) -> list[BankExample]:
    """Examples for ``qids`` (default: every bank) with ``ranker``'s base scores.

    With ``cache`` (a folder), the feature matrices of the whole bank set are read from (or
    written to) a file named by the bank set's content key and :func:`vocabulary_key`.
    """
    qids = qids if qids is not None else list(bankset.banks)
    if _cache_path(bankset, featurizer, cache) is None:  # no cache file: the asked banks only
        features = bank_features(dataset, bankset, featurizer, qids)
    else:
        features = _set_features(dataset, {"": bankset}, featurizer, cache)[""]
    return [_example(dataset, bankset, ranker, features, q) for q in qids]


def make_examples_together(
    dataset: Dataset,
    banksets: dict[str, BankSet],
    ranker: str,
    featurizer: BankFeaturizer,
    cache: Path | None = None,
) -> dict[str, list[BankExample]]:
    """:func:`make_examples` of every bank of several bank sets of one dataset (its retrieved
    and its gold-injected banks, say): the features that no cache holds are computed in one
    pass, where the sets' banks share their pages (and a pass of many banks forks)."""
    found = _set_features(dataset, banksets, featurizer, cache)
    return {
        name: [_example(dataset, b, ranker, found[name], q) for q in b.banks]
        for name, b in banksets.items()
    }


def _set_features(
    dataset: Dataset, banksets: dict[str, BankSet], featurizer: BankFeaturizer, cache: Path | None
) -> dict[str, dict[str, np.ndarray]]:
    """Every bank's features of each set: read from the cache, the rest computed in one pass
    (and written to the cache)."""
    paths = {name: _cache_path(b, featurizer, cache) for name, b in banksets.items()}
    found = {
        name: None if paths[name] is None else _read_cached(paths[name], b)
        for name, b in banksets.items()
    }
    todo = [name for name, features in found.items() if features is None]
    banks = {
        (name, q): (dataset.queries[q].text, bank.pids)
        for name in todo
        for q, bank in banksets[name].banks.items()
    }
    rows = _features(banks, featurizer, dataset.passages) if banks else {}
    for name in todo:
        qids = list(banksets[name].banks)
        found[name] = {q: rows[name, q] for q in qids}
        if paths[name] is not None:
            _write_cached(paths[name], qids, found[name])
    return found


def _example(
    dataset: Dataset, bankset: BankSet, ranker: str, features: dict[str, np.ndarray], qid: str
) -> BankExample:
    bank = bankset.banks[qid]
    labels = labels_of(dataset, qid, bank.pids)
    return BankExample(qid, bank.pids, features[qid], bank.scores[ranker], labels)


def _cache_path(bankset: BankSet, featurizer: BankFeaturizer, cache: Path | None) -> Path | None:
    if cache is None or not bankset.key:
        return None
    return Path(cache) / "features" / f"{bankset.key}-{vocabulary_key(featurizer)}.npz"


def _read_cached(path: Path, bankset: BankSet) -> dict[str, np.ndarray] | None:
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as stored:
        # read each array once: NpzFile re-reads an array on every item access
        qids, matrix = stored["qids"].tolist(), stored["features"]
    return {
        q: matrix[i, : len(bankset.banks[q].pids)].copy()
        for i, q in enumerate(qids)
        if q in bankset.banks
    }


def _write_cached(path: Path, qids: list[str], rows: dict[str, np.ndarray]) -> None:
    n = max((len(rows[q]) for q in qids), default=0)
    matrix = np.zeros((len(qids), n, len(FEATURE_NAMES)))
    for i, q in enumerate(qids):
        matrix[i, : len(rows[q])] = rows[q]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, qids=np.array(qids), features=matrix)
    tmp.replace(path)  # never a half-written cache file


BANKS_PER_CHUNK = 50
# fewer banks are featurised in this process: forking a process that holds a corpus costs
# ~1-2 s (FinanceBench: 108 banks 4.4 s in place, 4.7 forked; 216 banks 8.8 s, 5.1 forked)
FORK_BANKS = 200


def bank_features(
    dataset: Dataset, bankset: BankSet, featurizer: BankFeaturizer, qids: list[str]
) -> dict[str, np.ndarray]:
    """Feature matrices of the banks of ``qids`` (on the current engine's workers when it is
    distributed: each chunk of banks travels with its own passages and the extractor; locally,
    many banks are featurised in forked processes, one per core, each inheriting the
    featurizer: features are the same bits in every process)."""
    banks = {q: (dataset.queries[q].text, bankset.banks[q].pids) for q in qids}
    return _features(banks, featurizer, dataset.passages)


def _features(banks: dict, featurizer: BankFeaturizer, passages: dict) -> dict:
    """:func:`bank_features` of ``banks`` (any key: ``(question, pids)``), keys kept."""
    from fincrowd_ltr import engine as engines

    engine = engines.current()
    keys = list(banks)
    if not engine.distributed and len(keys) >= FORK_BANKS:
        # banks that lead with the same page mostly share their pages: each worker's part
        # holds whole runs of them, so that few pages are read by both workers
        order = sorted(keys, key=lambda k: banks[k][1][:1])
        parts = engines.split_evenly(order, engines.worker_count())
        jobs = [[banks[k] for k in part] for part in parts]
        found = engines.fork_map(_local_features, jobs, featurizer)
        rows = dict(zip(chain(*parts), chain(*found), strict=True))
        return {k: rows[k] for k in keys}
    if not engine.distributed or len(keys) <= BANKS_PER_CHUNK:
        return {k: featurizer.features(*banks[k]) for k in keys}
    chunks = []
    for start in range(0, len(keys), BANKS_PER_CHUNK):
        chunk = [banks[k] for k in keys[start : start + BANKS_PER_CHUNK]]
        pages = {p: passages[p] for _, pids in chunk for p in pids}
        chunks.append((chunk, pages))
    results = engine.map(_features_chunk, chunks, featurizer.extractor, "bank features", True)
    return {
        k: x
        for start, rows in zip(range(0, len(keys), BANKS_PER_CHUNK), results, strict=True)
        for k, x in zip(keys[start : start + BANKS_PER_CHUNK], rows, strict=True)
    }


def _local_features(
    banks: list[tuple[str, list[str]]], featurizer: BankFeaturizer
) -> list[np.ndarray]:
    return [featurizer.features(query, pids) for query, pids in banks]


def _features_chunk(chunk: tuple, shared) -> list[np.ndarray]:
    banks, passages = chunk
    return _local_features(banks, BankFeaturizer(shared, passages))
