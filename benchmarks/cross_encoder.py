"""Cross-encoder cost on this machine: pairs scored per second beside the bi-encoder embedding
the same pages (no cache), and LoRA training steps per second beside full fine-tuning of the same
model. Real FinanceBench pages and questions; medians of ``--repeats`` passes.

    .venv/bin/python benchmarks/cross_encoder.py [--data-root ../shared/data] [--pairs 64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _banks import financebench_banks

from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderConfig, Group
from fincrowd_ltr.crossencoder.training import CrossEncoderModule
from fincrowd_ltr.retrieval.dense import DenseEncoder


def _median_rate(fn, count: int, repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def _train_steps(model: CrossEncoder, groups: list[Group], steps: int) -> None:
    module = CrossEncoderModule(model)
    optimiser = module.configure_optimizers()
    for i in range(steps):
        batch = groups[(4 * i) % len(groups) :][:4]
        loss = _loss(module, batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()


def _loss(module: CrossEncoderModule, batch: list[Group]) -> torch.Tensor:
    logits = module._logits(batch)
    return torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data, banks = financebench_banks(args.data_root, args.cache_dir, 8)
    pairs = [(data.queries[b.qid].text, data.passages[p].text) for b in banks for p in b.pids]
    pairs = pairs[: args.pairs]
    config = CrossEncoderConfig()
    model = CrossEncoder.from_minilm(config)
    texts = [t for _, t in pairs]

    def score() -> None:
        for q, t in pairs:
            model.score(q, [t])

    def score_batched() -> None:
        model.score(pairs[0][0], texts)

    def embed() -> None:
        DenseEncoder().encode_passages(texts)  # a fresh in-memory cache: every page embedded

    ce = _median_rate(score_batched, len(pairs), args.repeats)
    ce_single = _median_rate(score, len(pairs), 1)
    bi = _median_rate(embed, len(pairs), args.repeats)
    print(f"threads {torch.get_num_threads()}, {len(pairs)} FinanceBench (question, page) pairs")
    print(
        f"cross-encoder (max {config.max_length} word pieces)  {ce:7.1f} pairs/s batched, "
        f"{ce_single:.1f} one at a time"
    )
    print(f"bi-encoder embedding the same pages (254-piece windows, max)  {bi:7.1f} pages/s")
    print(f"ratio cross-encoder / bi-encoder  {ce / bi:.2f}")
    groups = [
        Group(str(i), q, t, tuple(texts[(i + j) % len(texts)] for j in range(1, 8)))
        for i, (q, t) in enumerate(pairs[:16])
    ]
    lora = _median_rate(lambda: _train_steps(model, groups, args.steps), args.steps, args.repeats)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    # the same encoder with every weight trainable (shares the weights: measured last)
    full = CrossEncoder(model.encoder.get_base_model(), model.tokenizer, config)
    for p in full.parameters():
        p.requires_grad_(True)
    dense = _median_rate(lambda: _train_steps(full, groups, args.steps), args.steps, args.repeats)
    print(
        f"training steps/s (4 groups x 8 pairs): LoRA {lora:.3f}, full fine-tuning {dense:.3f}, "
        f"ratio {lora / dense:.2f}; LoRA trains {trainable:,} parameters"
    )


if __name__ == "__main__":
    main()
