"""Window policies and the dense/sparse encoders, on a tiny random BERT (fast, offline)."""

import numpy as np
import pytest

from fincrowd_ltr.retrieval.dense import DenseEncoder
from fincrowd_ltr.retrieval.windows import WindowPolicy


def test_window_split_and_pooling():
    policy = WindowPolicy(pooling="max", window_tokens=8)
    assert [len(w) for w in policy.split(list(range(20)))] == [8, 8, 4]
    assert policy.split([]) == [[]]
    assert WindowPolicy(pooling="first", window_tokens=8).split(list(range(20))) == [list(range(8))]
    scores = np.array([0.1, 0.5, 0.3])
    assert policy.pool(scores) == 0.5
    assert WindowPolicy(pooling="mean").pool(scores) == pytest.approx(0.3)
    assert WindowPolicy(pooling="first").pool(scores) == 0.1
    with pytest.raises(ValueError):
        WindowPolicy(pooling="median")


def test_dense_encoder_windows_cache_and_scores(tiny_bert, tmp_path):
    model, tokenizer = tiny_bert
    policy = WindowPolicy(pooling="max", window_tokens=16)
    enc = DenseEncoder(model=model, tokenizer=tokenizer, policy=policy, cache_dir=tmp_path)
    long_text = "revenue grew strongly " * 20
    vectors = enc.encode_passages([long_text, "short text"])
    assert vectors[0].shape[0] > 1 and vectors[1].shape[0] == 1
    np.testing.assert_allclose(np.linalg.norm(vectors[0], axis=1), 1.0, rtol=1e-5)
    scores = enc.score("revenue", [long_text, "short text"])
    assert scores.dtype == np.float64 and np.all(np.abs(scores) <= 1 + 1e-6)
    # the cache reloads from disk and gives identical windows
    again = DenseEncoder(model=model, tokenizer=tokenizer, policy=policy, cache_dir=tmp_path)
    assert len(again.cache) == 2
    np.testing.assert_array_equal(again.cache.get(long_text), vectors[0])
    # padding in a batch does not change an embedding
    alone = enc.encode_windows([tokenizer("short text", add_special_tokens=False)["input_ids"]])
    np.testing.assert_allclose(alone[0], vectors[1][0], atol=1e-5)


def test_splade_scores_overlap_higher(tiny_masked_lm, tmp_path):
    from fincrowd_ltr.retrieval.splade import SpladeEncoder

    model, tokenizer = tiny_masked_lm
    policy = WindowPolicy(pooling="max", window_tokens=8)
    enc = SpladeEncoder(model=model, tokenizer=tokenizer, policy=policy, cache_dir=tmp_path)
    texts = ["alpha beta gamma delta epsilon zeta eta theta iota kappa", "alpha", "beta gamma"]
    vectors = enc.encode(texts)
    assert all(v.shape[0] == 2 and np.all(v[1] > 0) for v in vectors)
    scores = enc.score("alpha", ["alpha", "alpha"])
    assert scores[0] == pytest.approx(scores[1])
    # vectors of different sizes survive a save and reload
    again = SpladeEncoder(model=model, tokenizer=tokenizer, policy=policy, cache_dir=tmp_path)
    for text, vector in zip(texts, vectors, strict=True):
        np.testing.assert_array_equal(again.encode([text])[0], vector)


def test_embeddings_do_not_depend_on_the_batch_they_were_computed_in():
    """Issue 25: a cold cache (pages embedded in other batches) gave other dense scores than a
    warm one. The shipped MiniLM embeds the same pages alone, together, in reverse order and
    beside other pages: bit-identical vectors."""
    import numpy as np

    from fincrowd_ltr.retrieval.dense import DenseEncoder

    texts = [
        "Net revenue increased 5% to $32.8 billion in fiscal 2018.",
        "Total current assets | 2019 | 2018 | 1,204 | 1,118",
        "Capital expenditures were $1.6 billion, primarily for new stores and technology.",
        "The Company repurchased 12 million shares during the year.",
        "Operating income by segment: Americas 4,120; EMEA 1,876; Asia Pacific 912.",
        "Long-term debt due within one year was $750 million at December 31, 2021.",
    ] * 2
    texts[6:] = [t + " (restated)" for t in texts[6:]]  # other lengths beside the same texts
    enc = DenseEncoder(cache_dir=None, batch_size=4)
    together = enc.encode_chunk(texts)
    alone = [enc.encode_chunk([t])[0] for t in texts]
    reverse = enc.encode_chunk(texts[::-1])[::-1]
    padded_with_others = enc.encode_chunk(texts[:3] + ["x " * 200] + texts[3:])
    del padded_with_others[3]
    for other in (alone, reverse, padded_with_others):
        assert all(np.array_equal(a, b) for a, b in zip(together, other, strict=True))


def test_shared_minilm_encoders_embed_a_question_once(tmp_path, monkeypatch):
    """Encoders made by ``DenseEncoder.shared`` (the static scorer's teaching questions, its
    question reader) load the shipped MiniLM once and embed each question once, to the bits an
    encoder of their own gives; another window length keeps its own memo."""
    from fincrowd_ltr.retrieval.dense import DenseEncoder

    questions = ["What was revenue in 2021?", "Net income of the Americas segment in 2020?"]
    teaching = DenseEncoder.shared(cache_dir=tmp_path)
    reader = DenseEncoder.shared(WindowPolicy())
    assert teaching.model is reader.model and teaching._queries is reader._queries
    first = teaching.encode_queries(questions)
    with monkeypatch.context() as m:
        m.setattr(DenseEncoder, "encode_windows", lambda *a: pytest.fail("embedded again"))
        again = reader.encode_queries(questions[::-1])[::-1]
    own = DenseEncoder(cache_dir=None)
    assert own.model is not reader.model and own._queries is not reader._queries
    alone = np.stack([own.encode_queries([q])[0] for q in questions])
    assert np.array_equal(first, again) and np.array_equal(first, alone)
    short = DenseEncoder.shared(WindowPolicy(window_tokens=8))
    assert short._queries is not reader._queries
    assert not np.allclose(short.encode_queries(questions[1:]), first[1:])


def test_encoders_keep_only_the_newest_questions(tiny_bert, tiny_masked_lm, tmp_path, monkeypatch):
    """The question memo is bounded (a serving process reads questions without end); what
    leaves it is computed again, to the same vector."""
    import fincrowd_ltr.retrieval.windowed_encoder as windowed

    model, tokenizer = tiny_bert
    monkeypatch.setattr(windowed, "QUERY_MEMO", 2)
    encoder = DenseEncoder(model=model, tokenizer=tokenizer)
    questions = ["revenue in 2021", "net income in 2020", "segment margin", "cash in 2019"]
    first = encoder.encode_queries(questions)  # one call returns all four, then keeps two
    assert list(encoder._queries) == questions[-2:]
    np.testing.assert_allclose(encoder.encode_queries(questions[:1]), first[:1], rtol=1e-5)
    assert list(encoder._queries) == [questions[-1], questions[0]]
    from fincrowd_ltr.retrieval.splade import SpladeEncoder

    mlm, mlm_tokenizer = tiny_masked_lm
    splade = SpladeEncoder(model=mlm, tokenizer=mlm_tokenizer, cache_dir=tmp_path)
    for q in questions:
        splade.score(q, ["revenue grew"])
    assert list(splade._queries) == questions[-2:]
