"""Shared fixtures: the real data root (tests that need it skip when it is absent, and fail in
CI) and a tiny randomly initialised BERT for encoder tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
