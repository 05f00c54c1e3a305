"""The cross-encoder on a tiny random BERT: query-focused windows, LoRA-only training that learns
a toy relevance rule, adapter save/load, hard negatives from banks."""

import numpy as np
import pytest
import torch

from fincrowd_ltr.crossencoder import (
    CrossEncoder,
    CrossEncoderConfig,
    CrossEncoderRanker,
    Group,
    focus,
    hard_negative_groups,
    train_cross_encoder,
)
from fincrowd_ltr.data.schema import Query
from tests.conftest import tiny_config


@pytest.fixture()
def tiny_cross_encoder():
    from transformers import AutoTokenizer, BertModel

    from fincrowd_ltr.retrieval.dense import minilm_path

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    encoder = BertModel(tiny_config(tokenizer.vocab_size, 2))
    config = CrossEncoderConfig(max_length=32, focus_words=12, lora_r=4)
    return CrossEncoder.with_lora(encoder, tokenizer, config)


def test_focus_picks_the_window_with_the_question_terms():
    text = " ".join(["filler"] * 40 + ["capital", "expenditure", "was", "high"] + ["pad"] * 40)
    window = focus("What was the capital expenditure?", text, 10)
    assert "capital expenditure" in window and len(window.split()) == 10
    assert focus("anything", "short text", 10) == "short text"


def test_only_lora_and_head_train(tiny_cross_encoder):
    trainable = {n for n, p in tiny_cross_encoder.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("head.") for n in trainable)
    assert any(n.startswith("head.") for n in trainable)


def _groups():
    query = "What was the revenue?"
    pos = ["revenue grew to 5 million", "total revenue rose", "revenue fell slightly"]
    neg = ["the weather was mild", "a board meeting occurred", "employees number 300"]
    return [Group(f"q{i}", query, p, tuple(neg)) for i, p in enumerate(pos)] * 4


def test_training_learns_a_toy_relevance_rule_and_round_trips(tiny_cross_encoder, tmp_path):
    model = tiny_cross_encoder
    texts = ["revenue increased by 10 percent", "the weather was cold and wet"]
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    summary = train_cross_encoder(model, _groups(), max_epochs=15, batch_size=4, lr=5e-3)
    assert summary["train_groups"] == 12 and np.isfinite(summary["metrics"]["train_loss"])
    scores = model.score("What was the revenue?", texts)
    assert scores.dtype == np.float64 and scores[0] > scores[1]
    frozen = {n: p for n, p in model.named_parameters() if n in base_before and "head" not in n}
    assert all(torch.equal(frozen[n], base_before[n]) for n in frozen)  # encoder untouched
    model.save(tmp_path / "ce")
    assert (tmp_path / "ce" / "adapter").is_dir()
    from transformers import BertModel

    torch.manual_seed(0)  # the same random base weights as the fixture
    base = BertModel(tiny_config(model.tokenizer.vocab_size, 2))
    loaded = CrossEncoder.load(tmp_path / "ce", base, model.tokenizer)
    np.testing.assert_allclose(loaded.score("What was the revenue?", texts), scores, atol=1e-5)


def test_hard_negatives_come_from_the_bank_and_skip_gold(financebench):
    from fincrowd_ltr.retrieval.banks import BankSet, CandidateBank

    qid = next(q for q in financebench.queries if financebench.covered(q))
    gold = [p for p, g in financebench.qrels[qid].items() if g > 0]
    others = [p for p in list(financebench.passages)[:20] if p not in gold]
    pids = [*others[:3], gold[0], *others[3:12]]
    bank = CandidateBank(qid, pids, np.arange(len(pids), 0, -1.0), {"r": -np.arange(len(pids))})
    banks = BankSet(financebench.name, "all", "retrieved", len(pids), {qid: bank})
    groups = hard_negative_groups(financebench, banks, "r", [qid], negatives=5)
    texts = {financebench.passages[p].text: p for p in pids}
    assert groups and groups[0].positive == financebench.passages[gold[0]].text
    assert [texts[t] for t in groups[0].negatives] == others[:5]  # best-ranked non-gold first
    from fincrowd_ltr.data.splits import page_unit

    unit = page_unit(financebench.passages[others[0]])  # a held-out company's pages: never
    kept = hard_negative_groups(financebench, banks, "r", [qid], negatives=2, excluded={unit})
    units = {page_unit(financebench.passages[texts[t]]) for g in kept for t in g.negatives}
    assert unit not in units
    assert kept or all(page_unit(financebench.passages[p]) == unit for p in others)


def test_ranker_scores_bank_candidates(tiny_cross_encoder, financebench):
    pids = list(financebench.passages)[:3]
    query = Query("q", "revenue?", "g")
    scores = CrossEncoderRanker(tiny_cross_encoder, financebench.passages).score(query, pids)
    assert scores.shape == (3,) and np.isfinite(scores).all()


def test_evaluate_loads_a_saved_adapter_as_a_base_ranker(tmp_path, capsys):
    import json

    from fincrowd_ltr.cli import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rows = [{"_id": f"d{i}", "text": f"passage {i} on revenue and margins"} for i in range(6)]
    (corpus / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (corpus / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "revenue?"}) + "\n")
    (corpus / "qrels.tsv").write_text("q\td3\t1\n")
    trained = CrossEncoder.from_minilm(CrossEncoderConfig(max_length=32))
    trained.config.training = {"dataset": "beir", "query_ids": ["q"]}  # what `--out` records
    trained.save(tmp_path / "ce")
    out = tmp_path / "report.json"
    argv = [
        "evaluate",
        "--dataset",
        "beir",
        "--data-root",
        str(corpus),
        "--ranker",
        "bm25,cross-encoder",
        "--cross-encoder",
        str(tmp_path / "ce"),
        "--first-stage",
        "bm25",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    systems = report["systems"]
    assert set(systems) == {"base:bm25", "base:cross-encoder"}
    assert systems["base:cross-encoder"]["recall@100"] == 1.0
    # a twelfth walk: the adapter's own training questions were scored without a word
    assert any("trained on 1 of these questions" in n for n in report["notes"])
    (tmp_path / "ce" / "cross_encoder.json").write_text('{"format": \n')
    assert main(argv) == 2
    assert "cross_encoder.json:2: malformed JSON" in capsys.readouterr().err


def test_the_same_seed_draws_the_same_cross_encoder():
    """A twelfth walk: the first model of a process drew its LoRA and head weights before the
    training seeded anything, so the same seed gave another adapter and other scores."""
    config = CrossEncoderConfig(max_length=32)
    torch.manual_seed(123)  # whatever ran before
    first = CrossEncoder.from_minilm(config, seed=0).state_dict()
    torch.rand(5)
    again = CrossEncoder.from_minilm(config, seed=0).state_dict()
    other = CrossEncoder.from_minilm(config, seed=1).state_dict()
    assert first.keys() == again.keys()
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)
