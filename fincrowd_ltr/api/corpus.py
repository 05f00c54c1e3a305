"""Datasets and banks from names or in-memory objects: what every workflow starts from."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from fincrowd_ltr.data.beir import check_run, read_trec_run
from fincrowd_ltr.data.registry import load_dataset as _load_dataset
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.defaults import DEFAULT_CACHE  # noqa: E402
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.retrieval.bm25 import BM25Config
from fincrowd_ltr.retrieval.build import BankSpec
from fincrowd_ltr.retrieval.build import build_banks as _build_banks
from fincrowd_ltr.retrieval.rankers import ALL_RANKERS, RANKERS, RunScores
from fincrowd_ltr.retrieval.sharded import ShardedBM25, open_index
from fincrowd_ltr.retrieval.static_tuning import QuestionPairs
from fincrowd_ltr.retrieval.windows import WindowPolicy
from fincrowd_ltr.settings import DataSettings
from fincrowd_ltr.synthesis import page_table_questions

RUN = "run"


def load_dataset(
    name: str | Dataset,
    data_root: str | Path | None = None,
    split: str = "all",
    allow_unknown_qrels: bool = False,
    index: str | Path | ShardedBM25 | None = None,
) -> Dataset:
    """A dataset by name (``financebench``, ``tatqa``, ``finqa``, ``beir``, ``beir:DIR``) under
    the data root (``$FINCROWD_DATA``, else ``../shared/data``), or an in-memory ``Dataset``
    returned as it is. ``index``: a BEIR folder's sharded index (:func:`index_corpus`, or its
    folder): the pages are read from the indexed corpus files page by page, and every bank,
    fit and evaluation over the dataset searches that index (a corpus larger than memory).

    Example:
        >>> fb = load_dataset("financebench")  # doctest: +SKIP
        >>> mine = load_dataset("beir:/data/mine", index="runs/index")  # doctest: +SKIP
    """
    if isinstance(name, Dataset):
        if index is not None:
            raise DataError(
                "index= loads a dataset by name over the index's pages; a Dataset given is "
                "used as it is (build it over index.page_store())",
                "index",
            )
        return name
    pages = None if index is None else open_index(index).page_store()
    return _load_dataset(name, data_root, split, allow_unknown_qrels, pages)


def rankers_of(text: str | list[str]) -> list[str]:
    """Ranker names from a comma list (or ``all``: BM25, SPLADE and the MiniLM-based ones; the
    static ones are named); ``run`` is the user's own ranker."""
    names = text if isinstance(text, list) else [r.strip() for r in text.split(",") if r.strip()]
    if names == ["all"]:
        return list(ALL_RANKERS)
    unknown = [r for r in names if r not in (*RANKERS, RUN, "cross-encoder")]
    if unknown:
        raise DataError(f"unknown ranker(s) {unknown}; choose from {(*RANKERS, RUN)}")
    return names


def read_run(run: RunScores | str | Path | None, dataset: Dataset) -> RunScores | None:
    """A run given as a TREC file path or a mapping ``{qid: {pid: score}}`` (either checked
    against ``dataset``: unknown passage ids and non-finite scores are errors, questions it does
    not hold are skipped with a warning), or a callable."""
    if run is None or callable(run):
        return run
    if isinstance(run, Mapping):
        return check_run(run, dataset)
    if not isinstance(run, str | os.PathLike):
        raise DataError(
            f"run is a {type(run).__name__}: give a TREC run file's path, a mapping "
            "{qid: {pid: score}} or a callable (query, pids) -> scores"
        )
    return read_trec_run(Path(run), dataset)


def bank_spec(spec: BankSpec | None = None, **shortcuts) -> BankSpec:
    """``spec`` (default: the ``auto`` first stage, the package's sizes and windows) with any of
    ``first_stage``, ``mode``, ``size``, ``static_questions``, ``stemmer``, ``dense_pooling``,
    ``dense_window`` changed; an unknown name is a ``TypeError``."""
    spec = spec or BankSpec(first_stage="auto")
    unknown = sorted(set(shortcuts) - set(SPEC_SHORTCUTS))
    if unknown:
        raise TypeError(f"unknown bank setting(s) {unknown}; choose from {SPEC_SHORTCUTS}")
    plain = {k: shortcuts[k] for k in _PLAIN_SHORTCUTS if k in shortcuts}
    if "stemmer" in shortcuts:
        plain["bm25"] = dataclasses.replace(spec.bm25, stemmer=shortcuts["stemmer"])
    window = {
        "pooling": shortcuts.get("dense_pooling"),
        "window_tokens": shortcuts.get("dense_window"),
    }
    window = {k: v for k, v in window.items() if v is not None}
    if window:
        plain["dense_policy"] = dataclasses.replace(spec.dense_policy, **window)
    return dataclasses.replace(spec, **plain)


def data_settings(data: DataSettings | None, shortcuts: dict) -> DataSettings:
    """``data`` (default: the package's) with ``split``, ``data_root`` and ``cache_dir`` taken
    out of ``shortcuts``."""
    where = {k: shortcuts.pop(k) for k in ("split", "data_root", "cache_dir") if k in shortcuts}
    return dataclasses.replace(data or DataSettings(), **where)


_PLAIN_SHORTCUTS = ("first_stage", "mode", "size", "static_questions")
SPEC_SHORTCUTS = (*_PLAIN_SHORTCUTS, "stemmer", "dense_pooling", "dense_window")


def build_banks(
    dataset: str | Dataset,
    rankers: str | list[str] = "bm25",
    spec: BankSpec | None = None,
    *,
    data: DataSettings | None = None,
    run: RunScores | str | Path | None = None,
    index=None,
    progress: bool = True,
    stages=None,
    extractor=None,
    **shortcuts,
) -> BankSet:
    """Candidate banks of every question, scored by ``rankers``.

    Args:
        dataset: A dataset name or an in-memory ``Dataset``.
        rankers: ``bm25``, ``dense``, ``splade``, ``hybrid`` and/or ``run`` (your ranker).
        spec: How banks are made (:class:`~fincrowd_ltr.retrieval.build.BankSpec`), or its
            fields as shortcuts: ``first_stage`` (``auto``, ``bm25[+steps]`` or ``run``: your
            run's own top ``size``), ``mode`` (``retrieved`` or ``injected``: gold replaces the
            lowest candidates), ``size``, ``stemmer``, ``dense_pooling``, ``dense_window``.
        data: Where the data and caches are (:class:`~fincrowd_ltr.settings.DataSettings`), or
            its fields as shortcuts: ``split``, ``data_root``, ``cache_dir``.
        run: Your ranker's scores: a TREC run file, ``{qid: {pid: score}}`` or a callable
            ``(query, pids) -> scores``; needed for ranker or first stage ``run``.
        index: A BM25 index of the corpus already built, e.g. :func:`index_corpus`'s sharded
            one for a corpus larger than memory (its pages: ``index.page_store()``).
        stages: A :class:`~fincrowd_ltr.retrieval.build.FirstStages` that keeps the index and
            first stage built here for your next calls over the same corpus.
        extractor: The corpus's :class:`~fincrowd_ltr.fields.FieldExtractor` when you have
            built it: the synthetic questions that teach the static rankers' page table use
            it instead of building another.

    Returns:
        The bank set; ``notes`` says how many candidates your run did not score.
    """
    data = data_settings(data, shortcuts)
    spec = bank_spec(spec, **shortcuts)
    corpus = load_dataset(dataset, data.data_root, data.split)
    teaching = page_table_questions(corpus, extractor=extractor)  # teaches the static page table
    return banks_of(corpus, rankers, spec, data, run, index, progress, stages, teaching)


def banks_of(
    corpus: Dataset,
    rankers: str | list[str],
    spec: BankSpec,
    data: DataSettings,
    run: RunScores | str | Path | None,
    index,
    progress: bool,
    stages,
    teaching: QuestionPairs | None,
) -> BankSet:
    """:func:`build_banks` of a loaded corpus, with the questions that teach its static page
    table given (:func:`~fincrowd_ltr.synthesis.page_table_questions`: a fit lends its own
    synthesis)."""
    if index is not None and getattr(index, "config", spec.bm25) != spec.bm25:
        raise DataError(
            f"the index was built with BM25 settings {index.config}, not {spec.bm25} (stemmer)"
        )
    if index is not None:
        _check_index_corpus(index, corpus)
    names = rankers_of(rankers)
    cache = None if data.cache_dir is None else Path(data.cache_dir)
    run_scores = read_run(run, corpus)
    return _build_banks(
        corpus, data.split, names, spec, cache, index, progress, run_scores, stages, teaching
    )


def load_encoder(
    scorer: str | Path = "minilm",
    dataset: str | Dataset | None = None,
    *,
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE,
    dense_pooling: str = "max",
    dense_window: int = 254,
    progress: bool = True,
    questions: str = "minilm",
):
    """A dense encoder with ``score(query, texts)``: ``minilm`` (the shipped all-MiniLM-L6-v2),
    ``static`` (distilled from it and tuned on ``dataset``'s corpus without labels; built once
    per corpus, a few minutes, and cached) or a saved static scorer's folder. A static scorer
    tuned into MiniLM's space scores MiniLM's vector of the question against its own vectors of
    the pages (``questions="minilm"``, the default; the corpus's page table is then also taught
    where MiniLM's vectors of the corpus's own synthetic questions point) or reads both with
    its table (``questions="static"``: no torch).

    Example:
        >>> enc = load_encoder("static", "financebench")  # doctest: +SKIP
        >>> enc.model.save("my-static")  # torch-free: numpy, tokenizers, safetensors
    """
    from fincrowd_ltr.retrieval.rankers import load_encoder as _load_encoder

    data = None if dataset is None else load_dataset(dataset, data_root)
    return _load_encoder(
        scorer,
        WindowPolicy(pooling=dense_pooling, window_tokens=dense_window),
        None if cache_dir is None else Path(cache_dir),
        None if data is None else data.passages,
        None if data is None else data.corpus_fingerprint(),
        progress,
        questions,
        None if data is None else page_table_questions(data),
    )


def _check_index_corpus(index, corpus: Dataset) -> None:
    """Refuse an index of another corpus: every page it holds must be one of the corpus's
    (else banks hold pages the corpus lacks), and it must hold them all (else the first stage
    never finds the rest). Every id is looked at (~0.1 s for 400,000 pages)."""
    pids = index.pids
    missing = next((p for p in pids if p not in corpus.passages), None)
    if missing is not None or len(pids) != len(corpus.passages):
        raise DataError(
            f"the index holds {len(pids):,} pages and {corpus.name} {len(corpus.passages):,}"
            + (f" (the index's {missing!r} is not the corpus's)" if missing else "")
            + ": give the index of this corpus, or index it (index_corpus, fincrowd index)"
        )


def index_corpus(
    corpus: str | Path | list[str | Path],
    out: str | Path,
    *,
    shard_mb: float = 64,
    stemmer: str | None = None,
    progress: bool = True,
):
    """Index ``corpus.jsonl`` files too large for memory into shards on disk under ``out`` (on
    the current engine's workers, each reading its shard from storage) and open the index: a
    :class:`~fincrowd_ltr.retrieval.sharded.ShardedBM25` whose scores equal one BM25 index over
    every page. ``index.page_store()`` maps page ids to pages, texts read from the files.

    Example:
        >>> index = index_corpus("corpus.jsonl", "runs/index")  # doctest: +SKIP
        >>> ids, scores = index.search("FY2019 capital expenditure", 100)  # doctest: +SKIP
    """
    from fincrowd_ltr.retrieval.sharded import build_sharded_index

    paths = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    if shard_mb <= 0:
        raise DataError("shard size must be positive (--shard-mb)")
    return build_sharded_index(
        [Path(p) for p in paths],
        Path(out),
        BM25Config(stemmer=stemmer),
        int(shard_mb * 2**20),
        progress,
    )
