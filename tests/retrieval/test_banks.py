"""Candidate banks: retrieval, injection, scoring, ordering, file round trip and bad files."""

import json

import numpy as np
import pytest

from fincrowd_ltr.data.schema import DataError, Dataset, Passage, Query
from fincrowd_ltr.retrieval.banks import BankSet, CandidateBank, retrieve_candidates, score_banks
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.fusion import ranks, reciprocal_rank_fusion
from fincrowd_ltr.retrieval.rankers import BM25Ranker, HybridRanker


@pytest.fixture
def toy():
    texts = {
        "a": "apple revenue grew in 2021",
        "b": "apple revenue fell in 2020",
        "c": "banana imports",
        "d": "cherry harvest",
        "e": "apple orchards and apple trees",
    }
    passages = {k: Passage(k, v) for k, v in texts.items()}
    queries = {"q": Query("q", "apple revenue", group="g")}
    return Dataset("toy", queries, passages, qrels={"q": {"d": 1}})


def test_retrieved_and_injected_banks(toy):
    index = BM25Index.build(toy.passages, progress=False)
    retrieved = retrieve_candidates(toy, index, size=2, mode="retrieved")
    assert len(retrieved.banks["q"]) == 2 and "d" not in retrieved.banks["q"].pids
    injected = retrieve_candidates(toy, index, size=2, mode="injected")
    bank = injected.banks["q"]
    assert len(bank) == 2 and "d" in bank.pids and bank.injected == ["d"]
    assert list(bank.first_stage) == sorted(bank.first_stage, reverse=True)


def test_scores_order_ties_and_round_trip(toy, tmp_path):
    index = BM25Index.build(toy.passages, progress=False)
    banks = retrieve_candidates(toy, index, size=5)
    score_banks(banks, toy, [BM25Ranker(index), HybridRanker([BM25Ranker(index)])], progress=False)
    bank = banks.banks["q"]
    np.testing.assert_allclose(bank.scores["bm25"], bank.first_stage)
    bank.scores["flat"] = np.zeros(len(bank))
    assert bank.ranking("flat") == bank.pids  # all ties: bank order is kept
    path = tmp_path / "banks.jsonl"
    banks.save(path)
    again = BankSet.load(path, toy)
    assert again.banks["q"].pids == bank.pids
    np.testing.assert_array_equal(again.banks["q"].scores["bm25"], bank.scores["bm25"])
    assert set(again.rankers) == {"bm25", "hybrid", "flat"}


def write_bank_file(path, row, header=None):
    header = header or {
        "format": "fincrowd-banks",
        "version": 1,
        "dataset": "toy",
        "split": "all",
        "mode": "retrieved",
        "size": 2,
        "rankers": ["x"],
    }
    path.write_text(json.dumps(header) + "\n" + row + "\n")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"qid": "q", "candidates": [], "first_stage": [], "scores": {}}', "is empty"),
        ('{"qid": "q", "candidates": ["a"], "first_stage": [NaN], "scores": {}}', "non-finite"),
        (
            '{"qid": "q", "candidates": ["a"], "first_stage": [1.0], "scores": {"x": [1, 2]}}',
            "has 2 scores for 1 candidates",
        ),
        (
            '{"qid": "zz", "candidates": ["a"], "first_stage": [1.0], "scores": {}}',
            "unknown query id 'zz'",
        ),
        (
            '{"qid": "q", "candidates": ["nope"], "first_stage": [1.0], "scores": {}}',
            "unknown passage id 'nope'",
        ),
        ('{"qid": "q", "candidates": ["a"], "scores": {}}', "missing field 'first_stage'"),
        (
            '{"qid": "q", "candidates": ["a", "a"], "first_stage": [1, 1], "scores": {}}',
            "repeats a candidate",
        ),
    ],
)
def test_bad_bank_files(toy, tmp_path, row, message):
    path = tmp_path / "b.jsonl"
    write_bank_file(path, row)
    with pytest.raises(DataError, match=rf"b\.jsonl:2: .*{message}"):
        BankSet.load(path, toy)


def test_bank_file_version_is_checked(tmp_path):
    path = tmp_path / "b.jsonl"
    write_bank_file(path, "{}", header={"format": "fincrowd-banks", "version": 99})
    with pytest.raises(DataError, match="version 99"):
        BankSet.load(path)


def test_missing_ranker_is_a_clear_error():
    bank = CandidateBank("q", ["a"], np.ones(1))
    with pytest.raises(DataError, match="no scores for ranker 'dense'"):
        bank.ranking("dense")


def test_rrf_and_ranks():
    np.testing.assert_array_equal(ranks(np.array([0.1, 0.9, 0.9])), [3, 1, 2])
    fused = reciprocal_rank_fusion([np.array([3.0, 2.0, 1.0]), np.array([1.0, 2.0, 3.0])], k=60)
    assert fused[1] == pytest.approx(2 / 62) and fused[0] == pytest.approx(fused[2])


def test_hybrid_shares_the_dense_ranker(toy, tmp_path):
    """One dense encoder per run: the hybrid must not embed the corpus a second time."""
    from fincrowd_ltr.retrieval.rankers import EncoderRanker, make_rankers

    index = BM25Index.build(toy.passages, progress=False)
    dense, hybrid = make_rankers(["dense", "hybrid"], toy.passages, index, tmp_path, progress=False)
    assert isinstance(dense, EncoderRanker) and hybrid.parts[1] is dense


def test_fused_ranker_is_rrf_of_the_first_stage_and_dense(toy, tmp_path):
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.rankers import make_rankers

    banks = build_banks(toy, "all", ["dense", "fused"], BankSpec(size=3), tmp_path, progress=False)
    for bank in banks.banks.values():
        expected = reciprocal_rank_fusion([bank.first_stage, bank.scores["dense"]])
        np.testing.assert_allclose(bank.scores["fused"], expected)
    index = BM25Index.build(toy.passages, progress=False)
    with pytest.raises(DataError, match="needs the first stage"):
        make_rankers(["fused"], toy.passages, index, tmp_path, progress=False)


def test_the_first_stage_ranker_is_the_banks_own_first_stage_score(toy, tmp_path):
    """``first-stage`` as a base ranker scores each candidate by the first stage that made the
    bank (added to cached banks that lack it), is the part ``fused`` fuses, and needs the
    stage."""
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.rankers import FirstStageRanker, make_rankers

    spec = BankSpec(size=3, first_stage="bm25+entity")
    build_banks(toy, "all", ["bm25"], spec, tmp_path, progress=False)  # cached without it
    banks = build_banks(toy, "all", ["bm25", "first-stage"], spec, tmp_path, progress=False)
    for bank in banks.banks.values():
        np.testing.assert_array_equal(bank.scores["first-stage"], bank.first_stage)
    index = BM25Index.build(toy.passages, progress=False)
    own, fused = make_rankers(["first-stage", "fused"], toy.passages, index, tmp_path,
                              progress=False, first_stage=index)  # fmt: skip
    assert isinstance(own, FirstStageRanker) and fused.parts[0] is own
    with pytest.raises(DataError, match="'first-stage' needs the first stage"):
        make_rankers(["first-stage"], toy.passages, index, tmp_path, progress=False)


def test_scores_of_another_scorer_version_are_recomputed(toy, tmp_path, monkeypatch):
    """A cached bank file keeps each changeable scorer's version (the static scorer's recipe);
    scores written by another version are dropped and recomputed, never reused."""
    from fincrowd_ltr.retrieval import build
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks

    first = build_banks(toy, "all", ["bm25"], BankSpec(size=3), tmp_path, progress=False)
    assert first.scorers == {}
    path = tmp_path / "banks" / f"{first.key}.jsonl"
    stale = BankSet.load(path)
    for bank in stale.banks.values():
        bank.scores["bm25"] = np.full(len(bank), 7.0)
    stale.scorers = {"bm25": "v1"}
    stale.save(path)
    monkeypatch.setattr(
        build, "scorer_version", lambda r, corpus, questions, pairs: "v2" if r == "bm25" else None
    )
    again = build_banks(toy, "all", ["bm25"], BankSpec(size=3), tmp_path, progress=False)
    assert again.scorers == {"bm25": "v2"} and BankSet.load(path).scorers == {"bm25": "v2"}
    for qid, bank in again.banks.items():
        np.testing.assert_array_equal(bank.scores["bm25"], first.banks[qid].scores["bm25"])


@pytest.mark.parametrize(
    "first_stage, mode",
    [
        ("bm25", "retrieved"),
        ("bm25+query+entity+filing", "retrieved"),
        ("bm25+entity", "injected"),
        ("run", "retrieved"),
    ],
)
def test_fused_scores_read_the_banks_first_stage_scores_bit_for_bit(first_stage, mode):
    """The fused ranker's first-stage part reads the scores the bank carries (what the first
    stage's search returned) instead of scoring the whole corpus again per bank: the same
    values ``score_ids`` gives, bit for bit, also for gold-injected banks and a user's run; the
    stage is asked once, to check that it made the banks."""
    from fincrowd_ltr.retrieval.build import RunFirstStage
    from fincrowd_ltr.retrieval.first_stage import make_first_stage
    from fincrowd_ltr.retrieval.rankers import FirstStageRanker, RunRanker
    from tests.conftest import user_corpus

    data = user_corpus(companies=6)
    index = BM25Index.build(data.passages, progress=False)
    if first_stage == "run":
        run = {q: {p: float(len(p) % 7) + 0.25 * i for i, p in enumerate(data.passages)}
               for q in data.queries}  # fmt: skip
        stage = RunFirstStage(run)
    else:
        stage = make_first_stage(first_stage, index, data)
    banks = retrieve_candidates(data, stage, size=2 if mode == "injected" else 5, mode=mode)
    assert any(b.injected for b in banks.banks.values()) == (mode == "injected")
    other = RunRanker(lambda query, pids: np.arange(len(pids), dtype=np.float64) % 2)
    fused = HybridRanker([FirstStageRanker(stage), other], name="fused")
    expected, distinct = {}, []
    for qid, bank in banks.banks.items():
        own = FirstStageRanker(stage).score(data.queries[qid], bank.pids)
        np.testing.assert_array_equal(bank.first_stage, own)
        read = FirstStageRanker(stage).score_bank(data.queries[qid], bank)
        np.testing.assert_array_equal(read, own)  # the values, not only their order
        distinct.append(len(set(own.tolist())) > 1)
        expected[qid] = reciprocal_rank_fusion([own, other.score(None, bank.pids)])
    # scores that order the banks, so that the fusion below tells orders apart (injected banks
    # of this corpus tie: there the equality above is the check)
    assert any(distinct) or mode == "injected"
    name = "score_query" if hasattr(stage, "score_query") else "score_ids"
    asked, real = [], getattr(stage, name)
    setattr(stage, name, lambda *a: asked.append(a) or real(*a))
    score_banks(banks, data, [fused], progress=False)
    assert len(asked) == 1  # the check of the first bank, not one corpus scoring per bank
    for qid, bank in banks.banks.items():
        np.testing.assert_array_equal(bank.scores["fused"], expected[qid])


def test_a_fused_ranker_over_another_first_stage_is_refused(toy):
    """Banks carry their own first stage's scores: a fused ranker built with another stage
    would silently fuse those, so the first bank it reads is checked against its stage."""
    from fincrowd_ltr.retrieval.rankers import FirstStageRanker

    index = BM25Index.build(toy.passages, progress=False)
    banks = retrieve_candidates(toy, index, size=3)
    for bank in banks.banks.values():
        bank.first_stage = bank.first_stage[::-1].copy()  # as another stage would have scored
    fused = HybridRanker([FirstStageRanker(index), BM25Ranker(index)], name="fused")
    with pytest.raises(DataError, match="not made by this first stage"):
        score_banks(banks, toy, [fused], progress=False)


def test_first_stages_build_the_index_and_stage_once_for_every_bank_build(monkeypatch, tmp_path):
    """A fit's bank builds (each mode, then another Dataset over the same corpus, as the
    synthetic questions' is) share one index and one first stage through ``FirstStages``, and
    give the banks a build without it gives."""
    import fincrowd_ltr.retrieval.build as build
    from fincrowd_ltr.retrieval.build import BankSpec, FirstStages
    from tests.conftest import user_corpus

    data = user_corpus(companies=6)
    other = Dataset(
        name="other", queries=dict(data.queries), passages=dict(data.passages), qrels=data.qrels
    )
    made, indexes = [], []
    real_stage, real_index = build.make_first_stage, BM25Index.build
    monkeypatch.setattr(
        build, "make_first_stage", lambda *a, **k: made.append(1) or real_stage(*a, **k)
    )
    monkeypatch.setattr(
        BM25Index,
        "build",
        classmethod(lambda cls, *a, **k: indexes.append(1) or real_index(*a, **k)),
    )
    stages = FirstStages()
    shared = {}
    for name, dataset, mode in (
        ("a", data, "retrieved"),
        ("b", data, "injected"),
        ("c", other, "retrieved"),
    ):
        spec = BankSpec(first_stage="bm25+entity+filing", mode=mode, size=5)
        shared[name] = build.build_banks(
            dataset, "all", ["bm25"], spec, None, progress=False, stages=stages
        )
    assert len(made) == 1 and len(indexes) == 1
    for name, dataset, mode in (
        ("a", data, "retrieved"),
        ("b", data, "injected"),
        ("c", other, "retrieved"),
    ):
        spec = BankSpec(first_stage="bm25+entity+filing", mode=mode, size=5)
        alone = build.build_banks(dataset, "all", ["bm25"], spec, None, progress=False)
        assert alone.banks.keys() == shared[name].banks.keys()
        for qid, bank in alone.banks.items():
            assert bank.pids == shared[name].banks[qid].pids
            np.testing.assert_array_equal(
                bank.scores["bm25"], shared[name].banks[qid].scores["bm25"]
            )
    assert len(made) == 4 and len(indexes) == 4  # without it, each build makes its own
    # another corpus (one page's text edited), another stage name: built anew, never reused
    edited = dict(data.passages)
    pid = next(iter(edited))
    edited[pid] = Passage(pid, edited[pid].text + " restated", company=edited[pid].company)
    changed = Dataset(name="changed", queries=dict(data.queries), passages=edited, qrels=data.qrels)
    spec = BankSpec(first_stage="bm25+entity+filing", mode="retrieved", size=5)
    build.build_banks(changed, "all", ["bm25"], spec, None, progress=False, stages=stages)
    assert len(made) == 5 and len(indexes) == 5
    spec = BankSpec(first_stage="bm25+entity", mode="retrieved", size=5)
    build.build_banks(data, "all", ["bm25"], spec, None, progress=False, stages=stages)
    assert len(made) == 6 and len(indexes) == 5  # the same corpus's index, a new stage
