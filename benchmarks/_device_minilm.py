"""MiniLM on the device, for the device scripts (torch, transformers, safetensors, numpy only):
the float16 weights a bundle carries (``_bundle.write_minilm``), and mean-pooled, normalised
embeddings of word-piece sequences, as ``DenseEncoder.encode_windows`` computes them (CLS and SEP
added; padded batches of similar length)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def read_minilm(folder: Path):
    """``(config, float32 state)`` of the bundle's ``model`` folder."""
    from safetensors.torch import load_file
    from transformers import BertConfig

    config = BertConfig.from_pretrained(str(Path(folder) / "model"))
    weights = load_file(str(Path(folder) / "model" / "model.safetensors"))
    return config, {k: v.float() for k, v in weights.items()}


def build_minilm(config, state: dict, device) -> torch.nn.Module:
    """A fresh model in eval mode; weights that do not fit stop the run."""
    from transformers import BertModel

    model = BertModel(config, add_pooling_layer="pooler.dense.weight" in state)
    missing, unexpected = model.load_state_dict(state, strict=False)
    stray = [k for k in [*missing, *unexpected] if "position_ids" not in k]
    if stray:
        raise SystemExit(f"the weights do not fit the model: {stray}")
    return model.to(device).eval()


def batch_of(seqs: list[np.ndarray], cls: int, sep: int, device) -> dict[str, torch.Tensor]:
    longest = max(len(s) for s in seqs) + 2
    ids = torch.zeros((len(seqs), longest), dtype=torch.long)
    mask = torch.zeros((len(seqs), longest), dtype=torch.long)
    for i, s in enumerate(seqs):
        row = [cls, *s.tolist(), sep]
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}


def embed(model, seqs: list[np.ndarray], cls: int, sep: int, device) -> torch.Tensor:
    """One normalised, mean-pooled vector per sequence (gradients flow when enabled)."""
    batch = batch_of(seqs, cls, sep, device)
    hidden = model(**batch).last_hidden_state
    m = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled.float(), dim=-1)


@torch.inference_mode()
def embed_many(model, seqs, cls, sep, device, batch: int = 512) -> torch.Tensor:
    """:func:`embed` over many sequences, in batches of sequences sorted by length."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out = torch.empty((len(seqs), model.config.hidden_size), device=device)
    for s in range(0, len(order), batch):
        idx = order[s : s + batch]
        out[idx] = embed(model, [seqs[i] for i in idx], cls, sep, device)
    return out
