"""The static dense scorer: distillation, saving, batch invariance, tuning and its ranker
names (a tiny random BERT as the teacher; the real MiniLM word-piece vocabulary)."""

import os
import shutil

import numpy as np
import pytest

from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.retrieval.dense import minilm_path
from fincrowd_ltr.retrieval.static import StaticEncoder, StaticModel, distill_static
from fincrowd_ltr.retrieval.static_tuning import StaticTuning, tune_static
from fincrowd_ltr.retrieval.windows import WindowPolicy

TEXTS = [
    "Total revenue was $4.2 billion in fiscal 2022, up 8% from fiscal 2021.",
    "Operating expenses decreased in the Americas segment.",
    "",
    "Net cash provided by operating activities " * 60,
]


@pytest.fixture(scope="module")
def teacher_dir(tiny_bert, tmp_path_factory):
    """The tiny BERT saved as a model folder with MiniLM's tokenizer.json."""
    model, _ = tiny_bert
    folder = tmp_path_factory.mktemp("teacher")
    model.save_pretrained(folder)
    shutil.copy(minilm_path() / "tokenizer.json", folder / "tokenizer.json")
    return folder


@pytest.fixture(autouse=True)
def _fresh_distillations(monkeypatch):
    """Each test distils its corpora anew (the memo of the last distillation is per process)."""
    import fincrowd_ltr.retrieval.static_tuning as tuning

    monkeypatch.setattr(tuning, "_MADE", {})


@pytest.fixture(scope="module")
def static(teacher_dir):
    return distill_static(corpus=TEXTS * 3, dim=16, model_dir=teacher_dir)


def assert_same_banks(banks, other, rankers) -> None:
    """Both bank sets hold the same candidates with bit-identical ``rankers`` scores."""
    for qid, bank in banks.banks.items():
        assert bank.pids == other.banks[qid].pids
        for ranker in rankers:
            np.testing.assert_array_equal(bank.scores[ranker], other.banks[qid].scores[ranker])


class StandIn:
    """Stands in for ``DenseEncoder``: every encoder made or shared is ``teacher`` (a tiny
    random BERT standing in for MiniLM); ``calls`` records what each was asked with."""

    def __init__(self, teacher, calls: list | None = None) -> None:
        self.teacher, self.calls = teacher, calls if calls is not None else []

    def __call__(self, *args, **kw):
        self.calls.append(kw)
        return self.teacher

    shared = __call__


def test_distillation_gives_one_weighted_vector_per_piece(static, teacher_dir):
    assert static.vectors.shape == (30522, 16) and static.vectors.dtype == np.float32
    assert static.config["weighting"] == "corpus" and static.config["dim"] == 16
    # a piece the corpus repeats weighs less than one it never shows (SIF)
    frequent = static.token_ids(["operating"])[0][0]
    norms = np.linalg.norm(static.vectors, axis=1)
    assert norms[frequent] < np.median(norms)
    zipf = distill_static(corpus=None, dim=16, model_dir=teacher_dir)
    assert zipf.config["weighting"] == "zipf-rank"


def test_windows_are_unit_vectors_and_batch_invariant(static):
    encoder = StaticEncoder(static, WindowPolicy(window_tokens=16))
    together = encoder.window_vectors(TEXTS)
    alone = [encoder.window_vectors([t])[0] for t in TEXTS]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_array_equal(a, b)
    assert together[3].shape[0] > 1  # a long page is cut into windows
    np.testing.assert_allclose(np.linalg.norm(together[0], axis=1), 1.0, rtol=1e-5)
    assert not together[2].any()  # an empty text is a zero vector, not NaN
    scores = encoder.score("operating cash", TEXTS)
    assert scores.dtype == np.float64 and np.isfinite(scores).all()
    assert scores[3] == max(scores)  # max over windows: the page that repeats it wins


def test_the_encoder_memo_is_bounded_and_changes_no_score(static):
    """A long-running process can keep only the newest ``memo_size`` texts and queries."""
    unbounded = StaticEncoder(static, WindowPolicy(window_tokens=16))
    small = StaticEncoder(static, WindowPolicy(window_tokens=16), memo_size=2)
    none = StaticEncoder(static, WindowPolicy(window_tokens=16), memo_size=0)
    queries = ["operating cash", "revenue 2022", "net income", "operating cash"]
    for q in queries:
        expected = unbounded.score(q, TEXTS)
        np.testing.assert_array_equal(small.score(q, TEXTS), expected)
        np.testing.assert_array_equal(none.score(q, TEXTS), expected)
    assert len(unbounded._texts) == len(set(TEXTS)) and len(unbounded._queries) == 3
    assert len(small._texts) == len(small._queries) == 2 and not none._texts
    assert list(small._queries) == ["net income", "operating cash"]  # oldest first out
    with pytest.raises(ValueError, match="memo_size"):
        StaticEncoder(static, memo_size=-1)
    assert StaticEncoder(static).memo_size is None  # bank scoring keeps every page


def test_a_saved_model_scores_identically_and_bad_folders_name_the_file(static, tmp_path):
    static.save(tmp_path / "m")
    again = StaticModel.load(tmp_path / "m")
    assert again.fingerprint() == static.fingerprint()
    np.testing.assert_array_equal(
        StaticEncoder(again).score("revenue 2022", TEXTS),
        StaticEncoder(static).score("revenue 2022", TEXTS),
    )
    (tmp_path / "m" / "tokenizer.json").unlink()
    with pytest.raises(DataError, match="tokenizer.json: missing"):
        StaticModel.load(tmp_path / "m")


def test_tuning_moves_window_vectors_towards_their_targets(static):
    rng = np.random.default_rng(0)
    windows = [static.token_ids([t])[0][:40] for t in TEXTS if t] * 8
    targets = np.tile(rng.normal(size=(len(windows) // 8, 24)), (8, 1))

    def agreement(model, mapping=None):
        got = model.embed(windows)
        got = got if mapping is None else got @ mapping
        got /= np.linalg.norm(got, axis=1, keepdims=True)
        want = targets / np.linalg.norm(targets, axis=1, keepdims=True)
        return float(np.mean(np.sum(got * want, axis=1)))

    tuned = tune_static(static, windows, targets, StaticTuning(epochs=30, lr=0.01, anchor=0.0))
    assert tuned.vectors.shape == (30522, 24) and tuned.config["tuned"]["epochs"] == 30
    assert agreement(tuned) > 0.9
    with pytest.raises(ValueError, match="target vectors"):
        tune_static(static, windows, targets[:-1])


def test_static_rankers_score_banks_beside_minilm(static, tmp_path):
    from fincrowd_ltr.retrieval.rankers import RANKERS, load_encoder

    assert {"static", "fused-static", "hybrid-static"} <= set(RANKERS)
    static.save(tmp_path / "m")
    encoder = load_encoder(str(tmp_path / "m"))
    assert isinstance(encoder, StaticEncoder)
    with pytest.raises(DataError, match="unknown dense scorer"):
        load_encoder("word2vec")
    with pytest.raises(DataError, match="built from a corpus"):
        load_encoder("static", passages={})
    assert Passage  # the passages mapping load_encoder takes


def test_contrastive_pairs_pull_each_question_to_its_own_page(static):
    pages = [
        "net revenue grew in the americas",
        "cash dividends paid to shareholders",
        "goodwill impairment charge recorded",
        "capital expenditures for new stores",
    ]
    questions = [
        "what were dividends paid",
        "how much goodwill impairment",
        "how much capital expenditure",
        "what was net revenue",
    ]
    order = [1, 2, 3, 0]  # question i asks about page order[i]
    pairs = [
        (static.token_ids([q])[0], [static.token_ids([pages[j]])[0]])
        for q, j in zip(questions, order, strict=True)
    ] * 8
    windows = [static.token_ids([p])[0] for p in pages]
    targets = np.eye(4, 8)  # the regression alone says nothing about the questions
    tuned = tune_static(
        static,
        windows * 4,
        np.tile(targets, (4, 1)),
        StaticTuning(epochs=40, lr=0.02, anchor=0.0, contrastive=1.0, batch_size=4, validation=0.0),
        pairs=pairs,
    )
    encoder = StaticEncoder(tuned)
    best = [int(np.argmax(encoder.score(q, pages))) for q in questions]
    assert best == order and tuned.config["tuned"]["epoch"] == 40


def test_fixed_question_vectors_move_only_the_pages(static):
    """Pairs whose question is a fixed vector (another model's, in the table's target space)
    teach the pages where those vectors point; pairs mixing both kinds are refused."""
    pages = [
        "net revenue grew in the americas",
        "cash dividends paid to shareholders",
        "goodwill impairment charge recorded",
        "capital expenditures for new stores",
    ]
    anchors = np.eye(4, 8)[[2, 0, 3, 1]]  # page j's questions point along axis anchors[j]
    pairs = [(anchors[j], [static.token_ids([pages[j]])[0]]) for j in range(4)] * 8
    windows = [static.token_ids([p])[0] for p in pages]
    settings = StaticTuning(
        epochs=40, lr=0.02, anchor=0.0, contrastive=1.0, batch_size=4, validation=0.0
    )
    tuned = tune_static(static, windows * 4, np.tile(np.eye(4, 8), (4, 1)), settings, pairs=pairs)
    before = [int(np.argmax(static.embed(windows)[:, :4] @ a[:4])) for a in anchors]
    best = [int(np.argmax(tuned.embed(windows) @ a)) for a in anchors]
    assert best == [0, 1, 2, 3] != before and tuned.config["tuned"]["fixed_questions"]
    with pytest.raises(ValueError, match="mix"):
        tune_static(static, windows, np.eye(4, 8), settings, pairs=[pairs[0], (windows[0], [])])


def test_pairs_per_epoch_bounds_the_contrastive_steps(static):
    """A fixed draw of pairs an epoch: drawing every pair is the same tuning as no bound, a
    smaller draw takes fewer contrastive steps (another table), and a draw under two is refused."""
    pages = ["net revenue grew in the americas", "cash dividends paid to shareholders"] * 4
    windows = [static.token_ids([p])[0] for p in pages]
    pairs = [(np.eye(8)[j % 8], [w]) for j, w in enumerate(windows)] * 4
    targets = np.tile(np.eye(2, 8), (4, 1))

    def tuned(per_epoch):
        settings = StaticTuning(
            epochs=3, anchor=0.0, contrastive=1.0, batch_size=4, validation=0.0,
            pairs_per_epoch=per_epoch,
        )  # fmt: skip
        return tune_static(static, windows, targets, settings, pairs=pairs).vectors

    everything = tuned(None)
    np.testing.assert_array_equal(tuned(len(pairs)), everything)
    assert not np.allclose(tuned(4), everything)
    with pytest.raises(ValueError, match="pairs_per_epoch"):
        StaticTuning(pairs_per_epoch=1)


def test_page_vectors_score_like_the_encoder_and_lift_pages_in_the_first_stage(
    static, tmp_path, monkeypatch
):
    """The corpus's page vectors (cached, read back) give each page its best window's cosine;
    ``+static=W`` adds W x the best score x that cosine, and needs the vectors."""
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.retrieval.bm25 import BM25Index
    from fincrowd_ltr.retrieval.first_stage import FirstStage, page_vectors_for
    from fincrowd_ltr.retrieval.page_vectors import PageVectors
    from fincrowd_ltr.retrieval.static_tuning import static_key

    passages = {f"p{i}": Passage(f"p{i}", text) for i, text in enumerate(TEXTS)}
    static.save(tmp_path / "static" / static_key("corpus"))  # the corpus's scorer, cached
    index = BM25Index.build(passages, progress=False)
    assert page_vectors_for("bm25+entity", index, passages, tmp_path, "corpus") is None
    pages = page_vectors_for("bm25+static=0.5", index, passages, tmp_path, "corpus")
    question = "operating expenses of the Americas segment"
    expected = StaticEncoder(static).score(question, [passages[p].text for p in index.pids])
    np.testing.assert_allclose(pages.scores(question), expected, rtol=1e-5, atol=1e-6)
    assert pages.scores(question)[list(index.pids).index("p2")] == 0.0  # the empty page
    with monkeypatch.context() as m:  # read back from the cache, not embedded again
        m.setattr(StaticEncoder, "window_vectors", lambda *a: pytest.fail("embedded again"))
        again = page_vectors_for("bm25+static", index, passages, tmp_path, "corpus")
    np.testing.assert_array_equal(again.scores(question), pages.scores(question))
    edited = {**passages, "p0": Passage("p0", "Operating expenses in the Americas segment.")}
    changed = page_vectors_for("bm25+static", index, edited, tmp_path, "corpus")
    assert len(list(tmp_path.glob("static/pages/*.npz"))) == 2  # new texts, new vectors
    assert changed.scores(question)[0] > pages.scores(question)[0]

    # pages without windows (anywhere, also last) score 0; the others their best window
    windows = np.eye(3, dtype=np.float32)
    encoder = StaticEncoder(static)
    encoder._queries["q"] = np.array([0.2, 0.9, 0.1], dtype=np.float32)
    by_hand = PageVectors(windows, np.array([0, 2, 2, 3]), encoder).scores("q")
    np.testing.assert_allclose(by_hand, [0.9, 0.0, 0.1, 0.0], rtol=1e-6)

    extractor = FieldExtractor.from_passages(passages.values())
    with pytest.raises(DataError, match="static scorer"):
        FirstStage("bm25+static=0.5", index, passages, extractor)
    plain = index.scores(question)
    lifted = FirstStage("bm25+static=0.5", index, passages, extractor, pages)._scores(question)
    np.testing.assert_allclose(lifted, plain + 0.5 * plain.max() * pages.scores(question))


def test_questions_scored_together_get_the_bits_of_each_alone(static, monkeypatch):
    """The first stage scores a batch of questions with the window vectors read block by block
    (each block meets every question while in cache): the same bits as each question alone,
    whatever the batch size (the block size is fixed: BLAS may round a block's last rows
    otherwise), and the full product's values; ``search_many`` gives ``search``'s results."""
    import fincrowd_ltr.retrieval.page_vectors as pv
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.retrieval.bm25 import BM25Index
    from fincrowd_ltr.retrieval.first_stage import FirstStage

    rng = np.random.default_rng(0)
    windows = rng.normal(size=(1301, static.dim)).astype(np.float32)  # no whole block count
    windows /= np.linalg.norm(windows, axis=1, keepdims=True)
    lengths = rng.integers(0, 4, size=520)  # pages without windows among them
    lengths[-1] += 1301 - lengths.sum()
    assert lengths[-1] >= 0
    starts = np.cumsum(lengths) - lengths
    encoder = StaticEncoder(static)
    questions = [f"{w} revenue in {2010 + i}" for i, w in enumerate(TEXTS[:4] * 3)]
    monkeypatch.setattr(pv, "BLOCK_ROWS", 97)  # 14 blocks, the last a part
    pages = pv.PageVectors(windows, starts, encoder)
    alone = [pages.scores(q) for q in questions]
    monkeypatch.setattr(pv, "BATCH_CELLS", 5 * len(windows))  # batches of 5 questions
    together = pv.PageVectors(windows, starts, encoder).scores_many(questions)
    for a, b, q in zip(alone, together, questions, strict=True):
        np.testing.assert_array_equal(a, b)
        full = windows @ encoder.encode_queries([q])[0]
        filled = lengths > 0
        want = np.zeros(len(lengths))
        want[filled] = np.maximum.reduceat(full, starts[filled])
        np.testing.assert_allclose(a, want, rtol=1e-6, atol=1e-7)

    passages = {f"p{i}": Passage(f"p{i}", text) for i, text in enumerate(TEXTS)}
    index = BM25Index.build(passages, progress=False)
    vectors = encoder.window_vectors([passages[p].text for p in index.pids])
    sizes = np.array([len(v) for v in vectors])
    few = pv.PageVectors(np.concatenate(vectors), np.cumsum(sizes) - sizes, encoder)
    stage = FirstStage(
        "bm25+static=0.5", index, passages, FieldExtractor.from_passages(passages.values()), few
    )
    for (pids, scores), q in zip(stage.search_many(questions, 3), questions, strict=True):
        want_pids, want_scores = stage.search(q, 3)
        assert pids == want_pids
        np.testing.assert_array_equal(scores, want_scores)


def test_bulk_tokenizing_turns_the_pool_on_only_over_the_cli_default(monkeypatch, static):
    """Inside ``bulk_tokenizing`` the CLI's default (pool off, bulk only) turns the pool on; it is
    off again afterwards, a user's own setting is never touched, and the counts and token ids are
    the same with the pool on or off."""
    from fincrowd_ltr.defaults import TOKENIZERS_BULK_ONLY
    from fincrowd_ltr.retrieval.static import bulk_tokenizing, piece_frequencies

    key, value = TOKENIZERS_BULK_ONLY
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv(key, value)
    with bulk_tokenizing():
        assert os.environ["TOKENIZERS_PARALLELISM"] == "true"
        with bulk_tokenizing():  # nested: still on, and the outer restore still wins
            pass
        assert os.environ["TOKENIZERS_PARALLELISM"] == "true"
        parallel_ids = static.token_ids(TEXTS * 50)
        parallel = piece_frequencies(static, TEXTS * 50, 30522)
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    assert static.token_ids(TEXTS * 50) == parallel_ids
    # piece by piece, as the counts were made before (np.add.at), gives the same frequencies
    counts = np.ones(30522)
    for ids in static.token_ids(TEXTS * 50):
        np.add.at(counts, np.asarray(ids, dtype=np.int64), 1)
    assert np.array_equal(parallel, counts / counts.sum())
    monkeypatch.delenv(key)  # the user's own "false": kept
    with bulk_tokenizing():
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"


def test_the_fingerprint_reads_content_not_the_build_time(static):
    """Two builds that differ only in how long they took key the same page vectors."""
    slow = StaticModel(static.vectors, static.tokenizer, {**static.config, "seconds": 99.0})
    fast = StaticModel(static.vectors, static.tokenizer, {**static.config, "seconds": 1.0})
    assert slow.fingerprint() == fast.fingerprint()
    other = StaticModel(static.vectors, static.tokenizer, {**static.config, "dim": 17})
    assert other.fingerprint() != fast.fingerprint()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_worker_forked_after_a_bulk_section_tokenises(monkeypatch, static):
    """After a bulk section has used the pool, a forked child (as the residual fits' workers)
    reads ``false`` and tokenises without it: it finishes, with the parent's ids (a child forked
    while the pool is on would hang)."""
    import signal

    from fincrowd_ltr.defaults import TOKENIZERS_BULK_ONLY
    from fincrowd_ltr.retrieval.static import bulk_tokenizing

    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv(*TOKENIZERS_BULK_ONLY)
    with bulk_tokenizing():
        expected = static.token_ids(TEXTS * 200)
    pid = os.fork()
    if pid == 0:  # the child: any failure or a hang ends it with a non-zero status
        code = 1
        try:
            signal.alarm(20)
            code = 0 if static.token_ids(TEXTS * 200) == expected else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_bank_scoring_reads_the_first_stages_page_vectors_and_scores_the_same(
    static, tmp_path, monkeypatch
):
    """With a ``+static`` first stage the static ranker takes the bank pages' windows from the
    first stage's page vectors (not embedded again) and gives bit-identical scores."""
    from fincrowd_ltr.retrieval import build
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.static_tuning import static_key
    from tests.conftest import user_corpus

    data = user_corpus(companies=6)
    static.save(tmp_path / "static" / static_key(data.corpus_fingerprint()))
    spec = BankSpec(size=8, first_stage="bm25+static=0.5")
    banked, calls, real = {}, [], StaticEncoder.window_vectors

    def counted(encoder, texts, piece_ids=None):
        calls.append(len(texts))
        return real(encoder, texts, piece_ids)

    for reuse in (False, True):
        calls.clear()
        with monkeypatch.context() as m:
            if not reuse:
                m.setattr(build, "_reuse_page_vectors", lambda *a: None)
            m.setattr(StaticEncoder, "window_vectors", counted)
            banked[reuse] = build_banks(data, "all", ["static", "fused-static"], spec, tmp_path)
            embedded = sum(calls)
        if reuse:  # only the questions' first windows (encode_queries) would embed anything
            assert embedded == 0
        else:
            assert embedded > 0
        shutil.rmtree(tmp_path / "banks")
    assert_same_banks(banked[True], banked[False], ("static", "fused-static"))
    # another window policy or model cuts or embeds texts otherwise: nothing is taken over
    encoder = StaticEncoder(static)
    assert encoder.same_windows(StaticEncoder(static))
    assert not encoder.same_windows(StaticEncoder(static, WindowPolicy(window_tokens=64)))
    other = StaticModel(static.vectors * 2, static.tokenizer, static.config)
    assert not encoder.same_windows(StaticEncoder(other))


def test_fused_static_counts_the_static_scorer_once(static, tmp_path):
    """Over a ``+static`` first stage, ``fused-static`` fuses the stage's score without its
    static term with the static ranker (the whole score is what the bank carries and
    ``first-stage`` reads; ``fused-static-whole``, the stand-in for MiniLM's ``fused``, fuses
    that whole score); over a stage without that term, the whole score. Its version says
    so, so that cached bank scores of the earlier fusion are recomputed (a checkpoint's
    recorded scorer, the static table and its reader, is the same for every static ranker)."""
    from fincrowd_ltr.retrieval.bm25 import BM25Index
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.fusion import reciprocal_rank_fusion
    from fincrowd_ltr.retrieval.rankers import scorer_recipe, scorer_version
    from fincrowd_ltr.retrieval.static_tuning import static_key
    from tests.conftest import user_corpus

    data = user_corpus(companies=6)
    static.save(tmp_path / "static" / static_key(data.corpus_fingerprint()))
    index = BM25Index.build(data.passages, progress=False)
    differs = 0
    for stage, lifted in (("bm25+static=5", True), ("bm25", False)):
        names = ["static", "fused-static", "fused-static-whole", "first-stage"]
        banks = build_banks(data, "all", names, BankSpec(size=8, first_stage=stage), tmp_path)
        for qid, bank in banks.banks.items():
            np.testing.assert_array_equal(bank.scores["first-stage"], bank.first_stage)
            text = data.queries[qid].text
            fused = bank.scores["fused-static"]
            once = index.score_ids(text, bank.pids) if lifted else bank.first_stage
            expected = reciprocal_rank_fusion([np.asarray(once), bank.scores["static"]])
            np.testing.assert_array_equal(fused, expected)
            whole = reciprocal_rank_fusion([bank.first_stage, bank.scores["static"]])
            np.testing.assert_array_equal(bank.scores["fused-static-whole"], whole)  # as fused
            differs += lifted and not np.array_equal(fused, whole)
    assert differs > 0  # the static term changed some first-stage order, and so the fusion
    # the first bank is checked against the stage's whole score: plain BM25 banks are not taken
    # for a +static stage's although their scores equal its score without the static term
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.retrieval.first_stage import FirstStage, page_vectors_for
    from fincrowd_ltr.retrieval.rankers import FirstStageRanker

    key = data.corpus_fingerprint()
    pages = page_vectors_for("bm25+static=5", index, data.passages, tmp_path, key)
    extractor = FieldExtractor.from_passages(data.passages.values())
    lifted = FirstStage("bm25+static=5", index, data.passages, extractor, pages)
    qid, bank = next(iter(banks.banks.items()))  # the last loop's plain BM25 banks
    with pytest.raises(DataError, match="not made by this first stage"):
        FirstStageRanker(lifted, static_term=False).score_bank(data.queries[qid], bank)
    assert "+once/" in scorer_version("fused-static") and "once" not in scorer_version("static")
    assert scorer_recipe("fused-static") == scorer_recipe("static")


def test_a_taught_table_embeds_bank_pages_from_the_first_stage_pieces(
    static, tmp_path, monkeypatch
):
    """The static ranker's page table taught by questions is another table of the same word
    pieces as the ``+static`` first stage's: it embeds the bank pages from the pieces the first
    stage cut (none tokenised again), with bit-identical scores."""
    from fincrowd_ltr.retrieval import build
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.static_tuning import QuestionPairs, static_key
    from tests.conftest import user_corpus

    data = user_corpus(companies=6)
    fp = data.corpus_fingerprint()
    pairs = QuestionPairs("synthetic-test", lambda: pytest.fail("the taught table is cached"))
    taught = StaticModel(static.vectors[::-1].copy(), static.tokenizer, static.config)
    spec = BankSpec(size=8, first_stage="bm25+static=0.5")
    banked, real, tokenised = {}, StaticModel.token_ids, []
    for reuse in (False, True):
        shutil.rmtree(tmp_path, ignore_errors=True)
        static.save(tmp_path / "static" / static_key(fp))  # the first stage's (windows only)
        taught.save(tmp_path / "static" / static_key(fp, questions=pairs.key))
        tokenised.clear()
        with monkeypatch.context() as m:
            if not reuse:
                m.setattr(build, "_reuse_page_vectors", lambda *a: None)
            m.setattr(StaticModel, "token_ids", lambda me, t: tokenised.extend(t) or real(me, t))
            banked[reuse] = build_banks(
                data, "all", ["static", "fused-static"], spec, tmp_path, static_pairs=pairs
            )
        pages = {t for bank in banked[reuse].banks.values() for t in bank.pids}
        texts = {data.passages[p].text for p in pages} - {""}
        again = [t for t in tokenised if t in texts]
        # the first stage cuts every page once; without the pieces, the taught table again
        assert len(again) == len(texts) * (1 if reuse else 2)
    assert_same_banks(banked[True], banked[False], ("static", "fused-static"))
    encoder = StaticEncoder(static)
    assert encoder.same_pieces(StaticEncoder(taught)) and not encoder.same_windows(
        StaticEncoder(taught)
    )
    assert not encoder.same_pieces(StaticEncoder(static, WindowPolicy(window_tokens=64)))


def test_target_sequences_are_what_sample_targets_embeds(tiny_bert):
    """The sequences a GPU can embed for the tuning are the recipe's own, in its order: each
    text's windows (short tails left out), then the seeded spans; vectors line up with them."""
    from fincrowd_ltr.retrieval.dense import DenseEncoder
    from fincrowd_ltr.retrieval.static_tuning import MIN_WINDOW, sample_targets, target_sequences

    model, tokenizer = tiny_bert
    policy = WindowPolicy(window_tokens=32)
    encoder = DenseEncoder(model=model, tokenizer=tokenizer, policy=policy, cache_dir=None)
    sequences, targets = sample_targets(TEXTS, 3, encoder)
    assert target_sequences(TEXTS, 3, tokenizer, policy) == sequences
    assert len(sequences) == len(targets)
    long_page = tokenizer(TEXTS[3], add_special_tokens=False)["input_ids"]
    windows = [w for w in policy.split(long_page) if len(w) >= MIN_WINDOW]
    spans = sequences[-2:]  # two spans of the one text longer than 40 pieces
    assert len(windows) > 1 and sequences[-2 - len(windows) : -2] == windows  # the last text's
    assert all(6 <= len(s) < 32 for s in spans)
    again = np.stack(encoder.encode_windows(sequences))
    np.testing.assert_allclose(again, targets, atol=1e-5)
    assert target_sequences(TEXTS, 4, tokenizer, policy)[-2:] != spans  # the seed draws them


def test_corpus_counts_read_every_piece_of_every_text(teacher_dir, static):
    """MiniLM's tokenizer.json truncates and pads at 128 pieces; the corpus's SIF counts read
    every piece (and no padding) without changing the caller's tokenizer, and hand back each
    text's ids as the static model cuts them."""
    from tokenizers import Tokenizer

    from fincrowd_ltr.retrieval.static import piece_frequencies

    shipped = Tokenizer.from_file(str(teacher_dir / "tokenizer.json"))
    assert shipped.truncation is not None and shipped.padding is not None
    long_text = "revenue " * 300
    ids: dict = {}
    frequencies = piece_frequencies(shipped, [long_text, "cash"], 30522, ids)
    counts = frequencies * (30522 + 301)  # add-one smoothing plus 301 pieces
    assert round(counts[shipped.token_to_id("revenue")]) == 301
    assert round(counts[shipped.token_to_id("[PAD]")]) == 1
    assert shipped.truncation is not None  # the caller's tokenizer is left as it was
    assert [list(ids[t]) for t in (long_text, "cash")] == static.token_ids([long_text, "cash"])


def test_a_cold_build_tokenises_the_corpus_once(teacher_dir, tmp_path, monkeypatch):
    """Building the corpus's scorer hands the page vectors the ids its counts read: the corpus
    is not tokenised again (with no room to keep ids, a text whose ids a chunk before used and
    released is), the vectors are the encoder's own, bit for bit, and the ids are kept for the
    corpus's other tables."""
    import fincrowd_ltr.retrieval.dense as dense
    import fincrowd_ltr.retrieval.page_vectors as page_vectors
    import fincrowd_ltr.retrieval.static as static_module
    import fincrowd_ltr.retrieval.static_tuning as tuning
    from fincrowd_ltr.retrieval.page_vectors import PageVectors

    real = static_module.distill_static
    monkeypatch.setattr(
        static_module, "distill_static", lambda **kw: real(dim=16, model_dir=teacher_dir, **kw)
    )  # the tiny teacher; no MiniLM targets or tuning (not what this test is about)
    monkeypatch.setattr(dense, "DenseEncoder", StandIn(None))
    monkeypatch.setattr(tuning, "sample_targets", lambda texts, seed, encoder: ([[1]], None))
    monkeypatch.setattr(tuning, "tune_static", lambda model, *args, **kw: model)
    passages = {f"p{i}": Passage(f"p{i}", text) for i, text in enumerate(TEXTS + TEXTS[:1])}
    pids = sorted(passages)  # p4 repeats p0's text, in a later chunk of two pages
    tokenised, real_ids, built = [], StaticModel.token_ids, {}

    def counted(me, texts):
        tokenised.extend(texts)
        return real_ids(me, texts)

    for room in (0, page_vectors.KEEP_PIECES):
        tuning._MADE.clear()  # distilled again: the ids come from the counts
        tokenised.clear()
        with monkeypatch.context() as m:
            m.setattr(page_vectors, "CHUNK", 2)
            m.setattr(page_vectors, "KEEP_PIECES", room)
            m.setattr(
                StaticModel, "token_ids", lambda me, t: tokenised.extend(t) or real_ids(me, t)
            )
            built[room] = PageVectors.build(pids, passages, tmp_path / str(room), "corpus")
        assert tokenised == ([TEXTS[0]] if room == 0 else [])
    assert built[0].piece_ids is None
    pages = built[page_vectors.KEEP_PIECES]
    np.testing.assert_array_equal(pages.vectors, built[0].vectors)
    texts = [passages[p].text for p in pids]
    model = pages.encoder.model
    cut = [t for t in TEXTS if t]  # (an empty page has nothing to keep)
    assert sorted(pages.piece_ids) == sorted(cut)
    assert [list(pages.piece_ids[t]) for t in cut] == model.token_ids(cut)
    expected = StaticEncoder(pages.encoder.model).window_vectors(texts)
    np.testing.assert_array_equal(pages.vectors, np.concatenate(expected))
    assert [len(w) for w in pages.windows(pids)] == [len(w) for w in expected]
    # ids given for some texts only: the others are tokenised
    partial = [None, *model.token_ids(texts[1:3]), None, None]
    for a, b in zip(StaticEncoder(model).window_vectors(texts, partial), expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_corpus_of_short_passages_keeps_the_distilled_scorer(teacher_dir, tmp_path, monkeypatch):
    """No sampled passage is long enough to give MiniLM targets (a corpus of short sentences):
    the corpus's scorer is the untuned distillation, with a warning, not a numpy error."""
    import fincrowd_ltr.retrieval.static as static_module
    from fincrowd_ltr.retrieval.static_tuning import static_model_for

    real = static_module.distill_static
    monkeypatch.setattr(
        static_module, "distill_static", lambda **kw: real(dim=16, model_dir=teacher_dir, **kw)
    )
    passages = {f"p{i}": Passage(f"p{i}", text) for i, text in enumerate(TEXTS[1:3])}
    with pytest.warns(UserWarning, match="not tuned on this corpus"):
        model = static_model_for(passages, tmp_path, "short")
    assert model.config["tuned"] is None and model.dim == 16
    assert StaticModel.load(next((tmp_path / "static").iterdir())).dim == 16  # cached
    with pytest.warns(UserWarning, match="not tuned on this corpus"):  # read back: said again
        assert static_model_for(passages, tmp_path, "short").dim == 16


def test_minilm_reads_the_questions_of_a_table_tuned_into_its_space(
    static, tiny_bert, tmp_path, monkeypatch
):
    """A table tuned on MiniLM's window vectors lives in MiniLM's space: by default MiniLM reads
    the questions (built when the first question comes) and the table the pages, in
    ``load_encoder`` and in bank scoring alike; ``questions="static"``, an untuned table,
    another teacher's, or an install without torch read both with the table, and a question
    vector of another size is refused by name."""
    import warnings

    import fincrowd_ltr.retrieval.dense as dense
    from fincrowd_ltr.retrieval import rankers
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.rankers import load_encoder
    from fincrowd_ltr.retrieval.static_tuning import static_key
    from tests.conftest import user_corpus

    model, tokenizer = tiny_bert
    teacher = dense.DenseEncoder(model=model, tokenizer=tokenizer)  # stands in for MiniLM
    built = []
    monkeypatch.setattr(dense, "DenseEncoder", StandIn(teacher, built))
    windows = [static.token_ids([t])[0][:40] for t in TEXTS if t]
    targets = np.stack(teacher.encode_windows(windows))
    settings = StaticTuning(epochs=2)
    tuned = tune_static(static, windows, targets, settings, teacher="all-MiniLM-L6-v2")
    tuned.save(tmp_path / "minilm-space")
    tune_static(static, windows, targets, settings).save(tmp_path / "other-teacher")
    static.save(tmp_path / "untuned")
    question, pages = "What was total revenue in fiscal 2022?", TEXTS

    asymmetric = load_encoder(str(tmp_path / "minilm-space"))
    assert built == [] and asymmetric.reads_questions_with == "all-MiniLM-L6-v2"  # not loaded
    got = asymmetric.score(question, pages)
    assert len(built) == 1 and asymmetric.reads_questions_with == teacher.name
    q = teacher.encode_queries([question])[0]
    want = [asymmetric.policy.pool(w @ q) for w in asymmetric.encode_texts(pages)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    symmetric = load_encoder(str(tmp_path / "minilm-space"), questions="static")
    assert symmetric.reads_questions_with == "static"
    assert not np.allclose(symmetric.score(question, pages), got)  # another question vector
    for folder in ("other-teacher", "untuned"):
        assert load_encoder(str(tmp_path / folder)).reads_questions_with == "static"
    with pytest.raises(DataError, match="unknown question reader"):
        load_encoder(str(tmp_path / "untuned"), questions="bert")

    # bank scoring takes the same path: the corpus's cached table, MiniLM reading questions
    data = user_corpus(companies=4)
    tuned.save(tmp_path / "static" / static_key(data.corpus_fingerprint()))
    banks = build_banks(data, "all", ["static"], BankSpec(size=6), tmp_path, progress=False)
    for qid, bank in banks.banks.items():
        text = data.queries[qid].text
        q = teacher.encode_queries([text])[0]
        windows = asymmetric.encode_texts([data.passages[p].text for p in bank.pids])
        np.testing.assert_allclose(
            bank.scores["static"], [asymmetric.policy.pool(w @ q) for w in windows], rtol=1e-6
        )
    assert banks.scorers["static"].endswith("/questions-minilm-1")

    # without torch the table reads questions, said once; a vector of another size is refused
    monkeypatch.setattr(rankers, "minilm_installed", lambda: False)
    with pytest.warns(UserWarning, match="not installed"):
        assert load_encoder(str(tmp_path / "minilm-space")).reads_questions_with == "static"
    assert rankers.scorer_version("static", "c").endswith("/questions-static")
    narrow = StaticEncoder(static, questions=teacher)  # a 16-d table, 32-d question vectors
    with pytest.raises(DataError, match="32-dimensional vectors, the static table 16"):
        narrow.encode_queries([question])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert StaticEncoder(tuned).reads_questions_with == "static"


def test_a_checkpoint_records_who_read_its_static_base_questions(
    static, tiny_bert, tmp_path, monkeypatch
):
    """``static_questions`` reaches the banks (their version names the reader), a fit records
    the reader of its static base (``summary.base_scorer``), evaluation builds the banks as
    training did unless told otherwise and then warns, and an unknown reader is refused."""
    import dataclasses
    import warnings

    import fincrowd_ltr as fc
    import fincrowd_ltr.retrieval.dense as dense
    from fincrowd_ltr.model.shift import scorer_warnings as scorer_warnings_of
    from fincrowd_ltr.model.summary import TrainingSummary
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.rankers import load_encoder, scorer_recipe
    from fincrowd_ltr.retrieval.static_tuning import static_key
    from fincrowd_ltr.settings import BankSettings
    from fincrowd_ltr.synthesis import page_table_questions
    from tests.conftest import user_corpus

    model, tokenizer = tiny_bert
    teacher = dense.DenseEncoder(model=model, tokenizer=tokenizer)  # stands in for MiniLM
    monkeypatch.setattr(dense, "DenseEncoder", StandIn(teacher))
    windows = [static.token_ids([t])[0][:40] for t in TEXTS if t]
    targets = np.stack(teacher.encode_windows(windows))
    tuned = tune_static(
        static, windows, targets, StaticTuning(epochs=2), teacher="all-MiniLM-L6-v2"
    )
    data = user_corpus()
    tuned.save(tmp_path / "static" / static_key(data.corpus_fingerprint()))
    taught = static_key(data.corpus_fingerprint(), questions=page_table_questions(data).key)
    tuned.save(tmp_path / "static" / taught)  # the table MiniLM's questions meet (API banks)
    tuned.save(tmp_path / "table")

    assert scorer_recipe("bm25") is None and scorer_recipe("fused", "static") is None
    assert scorer_recipe("fused-static", "static").endswith("/questions-static")
    spec = BankSpec(size=6, static_questions="static")
    banks = build_banks(data, "all", ["static"], spec, tmp_path, progress=False)
    assert banks.scorers["static"].endswith("/questions-static")
    table = load_encoder(str(tmp_path / "table"), questions="static")
    qid, bank = next(iter(banks.banks.items()))
    texts = [data.passages[p].text for p in bank.pids]
    np.testing.assert_allclose(
        bank.scores["static"], table.score(data.queries[qid].text, texts), rtol=1e-6
    )
    again = build_banks(data, "all", ["static"], BankSpec(size=6), tmp_path, progress=False)
    assert again.scorers["static"].endswith("/questions-minilm-1")  # rescored, not reused
    assert not np.allclose(again.banks[qid].scores["static"], bank.scores["static"])
    for bad in (lambda: BankSpec(static_questions="bert"),
                lambda: BankSettings(static_questions="bert")):  # fmt: skip
        with pytest.raises(DataError, match="static_questions"):
            bad()

    fitted, _ = fc.fit_correction(
        data, "static", folds=5, test_fold=0, min_calibration=2, cache_dir=tmp_path,
        first_stage="bm25", bank_size=6, static_questions="static", progress=False,
    )  # fmt: skip
    assert fitted.summary.base_scorer == scorer_recipe("static", "static")
    assert fitted.summary.static_questions == "static"
    folder = fitted.save_pretrained(tmp_path / "ckpt")
    loaded = fc.GatedCorrection.from_pretrained(folder)
    assert loaded.summary.base_scorer == fitted.summary.base_scorer

    def scorer_warnings(**reader):
        report = fc.evaluate(
            data, "static", checkpoint=folder, first_stage="bm25", size=6,
            cache_dir=tmp_path, progress=False, **reader,
        )  # fmt: skip
        return [w for w in report["warnings"] if "read the questions" in w or "of these banks" in w]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert scorer_warnings() == []  # built as training recorded: the table reads questions
        (told,) = scorer_warnings(static_questions="minilm")
    assert "questions-minilm-3" in told and "questions-static" in told
    with pytest.raises(DataError, match="static_questions"):  # given banks read otherwise
        fc.fit_correction(data, "static", folds=5, cache_dir=tmp_path, banks={"retrieved": banks})
    legacy = TrainingSummary.from_dict({"base_ranker": "static"})  # written before the record
    assert legacy.base_scorer is None and legacy.static_questions == "minilm"
    (unknown,) = scorer_warnings_of("static", None, again.scorers["static"])
    assert "does not record" in unknown and scorer_warnings_of("bm25", None, None) == []
    # a checkpoint fitted on a single draw's page table meets the mean of three: refit it
    version = f"{static_key('corpus')}/scores-9/questions-minilm-3"
    (redrawn,) = scorer_warnings_of("static", "scores-9/questions-minilm-2", version)
    assert "refit it" in redrawn
    assert scorer_warnings_of("static", "scores-9/questions-minilm-3", version) == []
    moved = loaded.with_base_ranker("fused-static")  # keeps the reader its training recorded
    assert moved.summary.base_scorer == scorer_recipe("fused-static", "static")
    old = dataclasses.replace(loaded.summary, base_scorer=None)
    loaded.summary = old  # a checkpoint written before the record: the reader stays unknown
    assert loaded.with_base_ranker("fused-static").summary.base_scorer is None


def test_questions_teach_a_second_page_table(teacher_dir, tiny_bert, tmp_path, monkeypatch):
    """The page table MiniLM's questions meet: taught by (question, page) pairs on top of the
    window tuning, cached under its own key beside the windows-only table (one distillation for
    both), its pairs made only when it is built; bank scores name which table scored them, and
    a pair whose page is not in the corpus is refused by name."""
    import fincrowd_ltr.retrieval.dense as dense
    import fincrowd_ltr.retrieval.static as static_module
    import fincrowd_ltr.retrieval.static_tuning as tuning
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks
    from fincrowd_ltr.retrieval.static_tuning import QuestionPairs, static_key, static_model_for
    from fincrowd_ltr.synthesis import page_table_questions
    from fincrowd_ltr.synthesis.teaching import TEACHING_SEEDS
    from tests.synthesis.test_synthesis import filings_corpus

    model, tokenizer = tiny_bert
    teacher = dense.DenseEncoder(model=model, tokenizer=tokenizer)  # stands in for MiniLM
    monkeypatch.setattr(dense, "DenseEncoder", StandIn(teacher))
    real, distilled = static_module.distill_static, []

    def distill(**kw):
        distilled.append(1)
        return real(dim=16, model_dir=teacher_dir, **kw)

    monkeypatch.setattr(static_module, "distill_static", distill)
    data = filings_corpus(companies=4)
    found = page_table_questions(data)
    assert found.key == page_table_questions(data).key  # named without writing them
    made = []
    pairs = QuestionPairs(found.key, lambda: made.append(1) or found.make())
    draws = found.make()
    assert len(draws) == len(TEACHING_SEEDS) and all(draws)  # one list of pairs per draw
    assert all(pid in data.passages for draw in draws for _, pid in draw)
    assert draws[0] != draws[1]  # the draws are different questions

    fp = data.corpus_fingerprint()
    plain = static_model_for(data.passages, tmp_path, fp)
    taught = static_model_for(data.passages, tmp_path, fp, questions=pairs)
    assert distilled == [1] and made == [1]  # one distillation; the pairs written once
    assert (tmp_path / "static" / static_key(fp, questions=found.key) / "config.json").is_file()
    assert static_key(fp, questions=found.key) != static_key(fp)
    assert taught.config["questions"] == found.key and "questions-minilm" in taught.config["recipe"]
    assert taught.config["tuned"]["pairs"] > 0 and taught.config["tuned"]["fixed_questions"]
    assert taught.config["tuned"]["pairs_per_epoch"] == tuning.QUESTIONS_TUNING.pairs_per_epoch
    assert len(taught.config["tuned"]["draws"]) == len(TEACHING_SEEDS)  # the mean of three
    assert "questions" not in plain.config and not np.allclose(taught.vectors, plain.vectors)
    again = static_model_for(data.passages, tmp_path, fp, questions=pairs)  # from the cache
    assert made == [1] and again.fingerprint() == taught.fingerprint()
    # the table is the element-wise mean of one table per draw, each taught from the start
    one_draw = [QuestionPairs(f"d{i}", lambda d=d: [d]) for i, d in enumerate(draws)]
    alone = [static_model_for(data.passages, tmp_path, fp, questions=q) for q in one_draw]
    assert np.allclose(taught.vectors, np.mean([m.vectors for m in alone], axis=0), atol=1e-6)
    assert not np.allclose(alone[0].vectors, alone[1].vectors)

    spec = BankSpec(size=6)
    windows_only = build_banks(data, "all", ["static"], spec, tmp_path, progress=False)
    by_questions = build_banks(
        data, "all", ["static"], spec, tmp_path, progress=False, static_pairs=pairs
    )
    assert windows_only.scorers["static"].endswith("/questions-minilm-1")
    assert by_questions.scorers["static"].endswith("/questions-minilm-3")
    qid = next(iter(by_questions.banks))
    assert not np.allclose(
        by_questions.banks[qid].scores["static"], windows_only.banks[qid].scores["static"]
    )
    with pytest.raises(DataError, match="not in the corpus"):
        bad = QuestionPairs("bad", lambda: [[("What was revenue?", "nowhere")]])
        static_model_for(data.passages, tmp_path, fp, questions=bad)
    with pytest.raises(TypeError, match="one list of \\(question, page id\\) pairs per teaching"):
        flat = QuestionPairs("flat", lambda: [("What was revenue?", next(iter(data.passages)))])
        static_model_for(data.passages, tmp_path, fp, questions=flat)  # the contract before
    with pytest.warns(UserWarning, match="no synthetic question could be written"):
        none = static_model_for(data.passages, tmp_path, fp, questions=QuestionPairs("0", list))
    assert none.config["tuned"]["pairs"] == 0
