"""Shared fixtures: the real data root (tests that need it skip when it is absent, and fail in
CI), a tiny randomly initialised BERT for encoder tests and a log of residual fits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import fincrowd_ltr as fc

DATA_ROOT = Path(
    os.environ.get("FINCROWD_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
)


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The real data; in CI (``CI`` set) its absence fails the tests that need it, elsewhere
    they are skipped."""
    if not (DATA_ROOT / "financebench").is_dir():
        message = f"real data not found at {DATA_ROOT}"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI runs with ../shared beside the checkout")
        pytest.skip(message)
    return DATA_ROOT


@pytest.fixture(scope="session")
def financebench(data_root):
    from fincrowd_ltr.data import load_dataset

    return load_dataset("financebench", data_root, "all")


@pytest.fixture(scope="session")
def tatqa(data_root):
    from fincrowd_ltr.data import load_dataset

    return load_dataset("tatqa", data_root, "dev")


def tiny_config(vocab_size: int, layers: int):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )


@pytest.fixture(scope="session")
def tiny_bert():
    """A 2-layer BERT with random weights and the real MiniLM word-piece vocabulary."""
    import torch
    from transformers import AutoTokenizer, BertModel

    from fincrowd_ltr.retrieval.dense import minilm_path

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    return BertModel(tiny_config(tokenizer.vocab_size, 2)).eval(), tokenizer


@pytest.fixture(scope="session")
def tiny_masked_lm(tiny_bert):
    """A 1-layer masked-LM BERT with random weights (a stand-in for SPLADE-tiny)."""
    from transformers import BertForMaskedLM

    _, tokenizer = tiny_bert
    return BertForMaskedLM(tiny_config(tokenizer.vocab_size, 1)).eval(), tokenizer


# Builders of small corpora that tests across layers share.


def write_beir(root, companies=30):
    data = user_corpus(companies=companies)
    dump_beir(data, root)
    return data


def dump_beir(data, root) -> None:
    """A dataset as a BEIR folder (corpus with its metadata, queries with groups, qrels)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w") as fh:
        for p in data.passages.values():
            meta = {k: v for k, v in p.metadata().items() if v is not None}
            fh.write(json.dumps({"_id": p.pid, "text": p.text, "metadata": meta}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        for q in data.queries.values():
            fh.write(json.dumps({"_id": q.qid, "text": q.text, "group": q.group}) + "\n")
    (root / "qrels.tsv").write_text(
        "".join(f"{q}\t{p}\t{g}\n" for q, rels in data.qrels.items() for p, g in rels.items())
    )


def write_corpus(root, prefix="Company"):
    corpus, queries, qrels = [], [], []
    for c in range(12):
        company = f"{prefix}{c}"
        for year in (2019, 2020, 2021):
            corpus.append(
                {
                    "_id": f"{c}-{year}",
                    "text": f"{company} revenue for fiscal {year} rose strongly on demand",
                    "metadata": {"company": company, "period": year},
                }
            )
        queries.append(
            {
                "_id": f"q{prefix}{c}",
                "text": f"What was {company} revenue in FY2021?",
                "group": company,
            }
        )
        qrels.append(f"q{prefix}{c}\t{c}-2021\t1")
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels.tsv").write_text("\n".join(qrels) + "\n")


def user_corpus(prefix="Company", companies=16) -> fc.Dataset:
    """A user's filings: each company's revenue page for three fiscal years; questions ask
    for one year (the other years are the crowding distractors)."""
    passages, queries, qrels = {}, {}, {}
    for c in range(companies):
        name = f"{prefix}{c}"
        for year in (2019, 2020, 2021):
            pid = f"{name}-{year}"
            text = f"{name} revenue for fiscal {year} rose strongly on demand for cloud products"
            passages[pid] = fc.Passage(pid, text, company=name, period=str(year), doc_type="10k")
        qid = f"q-{name}"
        queries[qid] = fc.Query(qid, f"What was {name} revenue in FY2020?", group=name)
        qrels[qid] = {f"{name}-2020": 1}
    return fc.Dataset("mycorpus", queries, passages, qrels)


class FitLog:
    """What ``ResidualFits`` was asked while ``fit_log`` is active: every prefetched fit's key,
    every lookup's key and validation questions, and the keys a lookup had to train (not found
    from a prefetch)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.prefetched: set = set()
        self.asked: list = []
        self.validations: list[set[str]] = []
        self.trained: list = []


@pytest.fixture
def fit_log(monkeypatch) -> FitLog:
    from fincrowd_ltr.training.fitting import ResidualFits

    log = FitLog()
    prefetch, get = ResidualFits.prefetch, ResidualFits.get

    def recording_prefetch(self, jobs):
        log.prefetched.update(self.key(*job) for job in jobs)
        return prefetch(self, jobs)

    def recording_get(self, train, val, setting, seed=0):
        key, before = self.key(train, val, setting, seed), self.trained
        log.asked.append(key)
        log.validations.append({e.qid for e in val})
        out = get(self, train, val, setting, seed)
        if self.trained > before:
            log.trained.append(key)
        return out

    monkeypatch.setattr(ResidualFits, "prefetch", recording_prefetch)
    monkeypatch.setattr(ResidualFits, "get", recording_get)
    return log
