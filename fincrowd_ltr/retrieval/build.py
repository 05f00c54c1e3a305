"""Build (or reload) the scored candidate banks of a dataset, cached on disk by content.

A cached bank file is named by a key over everything its content depends on: the corpus (ids,
texts, metadata), the questions (ids, texts; and the judgements for gold-injected banks), the first
stage and its vocabulary, the BM25 settings, the dense window policy, the bank size and mode and the
format version. Change any of them and the cache misses.

A user's own ranker (``run``: a TREC run, a mapping or a callable) can score the banks or be the
first stage itself (``first_stage="run"``: its own top ``size`` candidates form each bank). Banks
that depend on a run are built in memory and never cached.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fincrowd_ltr.data.ranking import rank_order
from fincrowd_ltr.data.schema import SYNTHETIC_SUFFIX, DataError, Dataset, Query
from fincrowd_ltr.data.store import PageStore
from fincrowd_ltr.defaults import AUTO_FALLBACK
from fincrowd_ltr.fields.extractor import extractor_fingerprint
from fincrowd_ltr.retrieval.banks import (
    DEFAULT_BANK_SIZE,
    BankSet,
    retrieve_candidates,
    score_banks,
)
from fincrowd_ltr.retrieval.bm25 import BM25Config, BM25Index
from fincrowd_ltr.retrieval.filings import VERSION as FILINGS_VERSION
from fincrowd_ltr.retrieval.first_stage import (
    AUTO,
    RUN,
    make_first_stage,
    resolve_first_stage,
)
from fincrowd_ltr.retrieval.page_vectors import PRODUCTS_VERSION, PageVectors
from fincrowd_ltr.retrieval.query import synonyms_fingerprint
from fincrowd_ltr.retrieval.rankers import (
    NEEDS_FIRST_STAGE,
    QUESTION_READERS,
    RunRanker,
    RunScores,
    make_rankers,
    scorer_version,
    scores_from_run,
)
from fincrowd_ltr.retrieval.sharded import ShardedBM25, corpus_index
from fincrowd_ltr.retrieval.static import StaticEncoder
from fincrowd_ltr.retrieval.static_tuning import QuestionPairs
from fincrowd_ltr.retrieval.windows import WindowPolicy

CACHE_FORMAT = 2  # bump when what a bank file holds, or how it is made, changes


@dataclass(frozen=True)
class BankSpec:
    """How banks are made: size, mode, first stage and the rankers' settings
    (``static_questions``: who reads a question for the static rankers, ``minilm`` or
    ``static``; see :func:`~fincrowd_ltr.retrieval.rankers.load_encoder`)."""

    size: int = DEFAULT_BANK_SIZE
    mode: str = "retrieved"
    bm25: BM25Config = BM25Config()
    dense_policy: WindowPolicy = WindowPolicy()
    first_stage: str = "bm25"
    static_questions: str = "minilm"

    def __post_init__(self) -> None:
        if self.static_questions not in QUESTION_READERS:
            raise DataError(
                f"static_questions {self.static_questions!r}: choose from {QUESTION_READERS}",
                "static_questions",
            )

    def stage(self, dataset: Dataset) -> str:
        """The first stage this spec uses on ``dataset`` (``auto`` resolved per dataset)."""
        return resolve_first_stage(self.first_stage, dataset.name)

    def key(self, dataset: Dataset, split: str) -> str:
        """The content key of the bank file of ``dataset`` under this spec."""
        stage = self.stage(dataset)
        parts = [
            CACHE_FORMAT,
            self.size,
            self.mode,
            self.bm25.key(),
            self.dense_policy.key(),
            self.dense_policy.pooling,
            stage,
            extractor_fingerprint() if stage != "bm25" else None,
            FILINGS_VERSION if "filing" in stage else None,
            _static_version(dataset) if "static" in stage else None,
            synonyms_fingerprint() if "synonyms" in stage or "query" in stage else None,
            dataset.corpus_fingerprint(),
            dataset.queries_fingerprint(with_qrels=self.mode == "injected"),
        ]
        digest = hashlib.sha1(json.dumps(parts).encode()).hexdigest()[:16]
        name = dataset.name.replace(":", "_").replace("/", "_")
        return f"{name}-{split.replace('/', '_')}-{self.mode}-{digest}"


def _static_version(dataset: Dataset) -> str:
    """What a ``static`` first stage's scores depend on beyond the corpus: the scorer's recipe
    and the version of its scores."""
    from fincrowd_ltr.retrieval.static import SCORES_VERSION
    from fincrowd_ltr.retrieval.static_tuning import static_key

    key = f"{static_key(dataset.corpus_fingerprint())}/{SCORES_VERSION}"
    return f"{key}/products-{PRODUCTS_VERSION}"


class RunFirstStage:
    """A user's run as the first stage: each question's own top-``k`` scored candidates."""

    name = RUN

    def __init__(self, run: RunScores) -> None:
        if callable(run):
            raise DataError("a callable ranker cannot be a first stage; pass its scores as a run")
        self.run = run

    def search_query(self, query: Query, k: int) -> tuple[list[str], np.ndarray]:
        scores = self.run.get(query.qid, {})
        pids = list(scores)
        values = np.array([scores[p] for p in pids], dtype=np.float64)
        order = rank_order(values)[:k]
        return [pids[i] for i in order], values[order]

    def score_query(self, query: Query, pids: list[str]) -> np.ndarray:
        return scores_from_run(self.run.get(query.qid, {}), pids)


class FirstStages:
    """The BM25 indexes and first stages a run has built, kept for its later bank builds over
    the same corpus (a fit builds its labelled banks per mode and its synthetic banks: one index,
    one set of page vectors, one extractor instead of three). An index is keyed by the corpus's
    content (its fingerprint), the BM25 settings and the cache folder; a first stage by its name,
    its index, the corpus's content and the cache folder. A user's run is never kept here."""

    def __init__(self) -> None:
        self._indexes: dict[tuple, BM25Index | ShardedBM25] = {}
        self._stages: dict[tuple, object] = {}

    def index(
        self, dataset: Dataset, config: BM25Config, cache_dir: Path | None, progress: bool
    ) -> BM25Index | ShardedBM25:
        key = (dataset.corpus_fingerprint(), config.key(), str(cache_dir))
        if key not in self._indexes:
            self._indexes[key] = corpus_index(dataset.passages, config, cache_dir, progress)
        return self._indexes[key]

    def stage(
        self,
        name: str,
        index: BM25Index | ShardedBM25,
        dataset: Dataset,
        cache_dir: Path | None,
        progress: bool,
    ):
        key = (name, id(index), dataset.corpus_fingerprint(), str(cache_dir))
        if key not in self._stages:
            self._stages[key] = make_first_stage(
                name, index, dataset, cache_dir=cache_dir, progress=progress
            )
        return self._stages[key]


def build_banks(
    dataset: Dataset,
    split: str,
    rankers: list[str],
    spec: BankSpec,
    cache_dir: Path | None,
    index: BM25Index | ShardedBM25 | None = None,
    progress: bool = True,
    run: RunScores | None = None,
    stages: FirstStages | None = None,
    static_pairs: QuestionPairs | None = None,
) -> BankSet:
    """Banks for every query of ``dataset`` scored by ``rankers``; reuses and extends the cache.

    ``rankers`` may include ``run`` (scored from ``run``; candidates it lacks are counted in the
    bank set's notes). ``spec.first_stage == "run"`` makes the run the first stage. ``stages``
    keeps the index and first stage built here for the caller's next builds. ``static_pairs``:
    the corpus's label-free questions that teach the static rankers' page table where MiniLM's
    questions point (:func:`~fincrowd_ltr.retrieval.rankers.load_encoder`; the API passes its
    synthetic questions; without them, the table tuned on page windows alone).
    """
    stage_name = spec.stage(dataset)
    wants_run = "run" in rankers or stage_name == RUN
    if wants_run and run is None:
        raise DataError("ranker or first stage 'run' needs your ranker's scores (run=, --run FILE)")
    built_in = [r for r in rankers if r != "run"]
    cacheable = cache_dir is not None and stage_name != RUN
    key = spec.key(dataset, split) if cacheable else ""
    path = Path(cache_dir) / "banks" / f"{key}.jsonl" if cacheable else None
    bankset = BankSet.load(path, dataset) if path is not None and path.exists() else None
    versions = {
        r: scorer_version(r, dataset.corpus_fingerprint(), spec.static_questions, static_pairs)
        for r in built_in
    }
    for r, version in versions.items():
        if bankset is not None and version and bankset.scorers.get(r) != version:
            bankset.drop(r)
    missing = [r for r in built_in if bankset is None or r not in bankset.rankers]
    if bankset is None or missing:
        needs_stage = bankset is None or any(r in NEEDS_FIRST_STAGE for r in missing)
        needs_index = (
            needs_stage
            and stage_name != RUN
            or any(r == "bm25" or r.startswith("hybrid") for r in missing)
        )
        if needs_index and index is None:
            index = (
                corpus_index(dataset.passages, spec.bm25, cache_dir, progress)
                if stages is None
                else stages.index(dataset, spec.bm25, cache_dir, progress)
            )
        stage = None
        if needs_stage:
            if stage_name == RUN:
                stage = RunFirstStage(run)
            elif stages is not None:
                stage = stages.stage(stage_name, index, dataset, cache_dir, progress)
            else:
                # metadata from a page store's text-less headers (where the metadata names a
                # company by ticker, every company's first pages are read for the names)
                stage = make_first_stage(
                    stage_name, index, dataset, cache_dir=cache_dir, progress=progress
                )
        if bankset is None:
            bankset = retrieve_candidates(dataset, stage, spec.size, spec.mode)
            bankset.split = split
        built = make_rankers(
            missing,
            dataset.passages,
            index,
            cache_dir,
            spec.dense_policy,
            progress,
            stage,
            corpus_key=dataset.corpus_fingerprint(),
            static_questions=spec.static_questions,
            static_pairs=static_pairs,
        )
        _reuse_page_vectors(built, stage, bankset, dataset)
        score_banks(bankset, dataset, built, progress)
        bankset.scorers.update({r: v for r, v in versions.items() if v and r in missing})
        if path is not None:
            bankset.save(path)
    bankset.key = key
    if "run" in rankers:
        _score_run(bankset, dataset, run)
    note = _plain_auto_note(dataset, spec.first_stage, stage_name)
    if note and note not in bankset.notes:
        bankset.notes.append(note)
    return bankset


def _plain_auto_note(dataset: Dataset, asked: str, used: str) -> str | None:
    """On a corpus of the user's own (not a bundled dataset, whose ``auto`` was chosen by its
    own ablation, nor a synthetic folder), where ``auto`` is plain BM25 although most pages
    carry the company and period the filing-aware stage reads: say so."""
    from fincrowd_ltr.data.registry import DATASETS

    bundled = dataset.name in DATASETS or dataset.name.endswith(SYNTHETIC_SUFFIX)
    if asked != AUTO or used != AUTO_FALLBACK or bundled or not dataset.passages:
        return None
    half, filed = len(dataset.passages) / 2, 0
    stored = isinstance(dataset.passages, PageStore)  # read from an index: no page text here
    index = f" --index {dataset.passages.folder}" if stored else ""
    for p in (dataset.passages.headers if stored else dataset.passages).values():
        filed += bool(p.company and p.period)
        if filed >= half:
            return (
                "first stage 'auto' is plain BM25 on a corpus of your own, but most of its "
                "pages give a company and a period, which the filing-aware stage reads: "
                "compare stages on your labelled questions (`fincrowd first-stage --dataset "
                f"beir --data-root YOUR_CORPUS{index} --variants "
                "bm25,bm25+query+entity,bm25+query+entity+filing`) and pass the best as "
                "--first-stage"
            )
    return None


def _score_run(bankset: BankSet, dataset: Dataset, run) -> None:
    """Your run's scores on every bank, with notes counting the candidates it did not score
    and naming the questions it scored none of (their order stays the first stage's)."""
    ranker = RunRanker(run)
    score_banks(bankset, dataset, [ranker], progress=False)
    unscored = [n for n in ranker.missing.values() if n]
    if unscored:
        bankset.notes.append(
            f"your run did not score {sum(unscored)} bank candidates in {len(unscored)} of "
            f"{len(bankset.banks)} banks (mean {np.mean(unscored):.1f} in each of those); "
            "they rank after every scored candidate"
        )
    blank = [q for q, n in ranker.missing.items() if n and n == len(bankset.banks[q].pids)]
    if blank:
        bankset.notes.append(
            f"{len(blank)} questions have no score of your run for any of their bank's "
            f"candidates (first: {', '.join(map(repr, sorted(blank)[:3]))}): their `run` "
            "order is the first stage's, not your run's"
        )


def _reuse_page_vectors(rankers: list, stage, bankset: BankSet, dataset: Dataset) -> None:
    """A static ranker reads the bank pages' windows from the first stage's page vectors when
    the same model and windows made them, instead of embedding those pages again (2,000
    synthetic FinanceBench banks hold ~33,000 distinct pages; the vectors are the same); a
    static ranker with another table of the same word pieces embeds them from the pieces the
    first stage cut (tokenising is most of a static table's cost)."""
    pages = getattr(stage, "pages", None)
    if not isinstance(pages, PageVectors) or pages.pids is None:
        return
    encoders = [
        encoder
        for ranker in rankers
        for part in getattr(ranker, "parts", [ranker])
        if isinstance(encoder := getattr(part, "encoder", None), StaticEncoder)
    ]
    if not encoders:
        return
    pids = list(dict.fromkeys(p for bank in bankset.banks.values() for p in bank.pids))
    texts = [dataset.passages[p].text for p in pids]
    for encoder in encoders:
        if encoder.same_windows(pages.encoder):
            encoder.remember(texts, pages.windows(pids))
        elif pages.piece_ids and encoder.same_pieces(pages.encoder):
            encoder.remember_pieces(texts, pages.piece_ids)
