"""The device step of benchmarks/dense_tuning.py: LoRA-tune MiniLM on synthetic questions, score
the labelled banks.

Standalone (torch, transformers, peft, safetensors, numpy), because the device has those and not
the package's other dependencies. Reads the bundle that ``dense_tuning.py prep`` wrote (word-piece
windows of every page, the synthetic questions with their typed hard negatives, the fold plans,
MiniLM in float16) and writes ``scores.npz``: for each model, the pooled (max over windows) cosine
of every labelled question to every candidate of its bank, in bank order.

Training: in-batch negatives plus each question's typed hard negatives, InfoNCE at temperature
0.05 on max-over-windows page scores, pages relevant to a question masked from its negatives;
LoRA r=16 on every linear layer, AdamW 2e-4, 2 epochs, batch 64, bf16. Fixed before any run; no
labelled question is read by training.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
from _device_minilm import build_minilm, embed, embed_many, read_minilm

TEMPERATURE = 0.05
TRAIN_WINDOWS = 8  # windows per page in training (scoring uses all)


class Bundle:
    def __init__(self, folder: Path) -> None:
        arrays = np.load(folder / "bundle.npz")
        self.meta = json.loads((folder / "meta.json").read_text())
        ids, lens = arrays["window_ids"].astype(np.int64), arrays["window_len"]
        starts = np.concatenate([[0], np.cumsum(lens)])
        self.windows = [ids[starts[i] : starts[i + 1]] for i in range(len(lens))]
        per_page = arrays["page_windows"]
        first = np.concatenate([[0], np.cumsum(per_page)])
        self.page_windows = [list(range(first[i], first[i + 1])) for i in range(len(per_page))]
        qids, qlens = arrays["query_ids"].astype(np.int64), arrays["query_len"]
        qstarts = np.concatenate([[0], np.cumsum(qlens)])
        self.queries = [qids[qstarts[i] : qstarts[i + 1]] for i in range(len(qlens))]
        self.n_syn = self.meta["synthetic"]


def score_banks(model, b: Bundle, device, max_banks: int | None) -> np.ndarray:
    cls, sep = b.meta["cls"], b.meta["sep"]
    banks = b.meta["bank"][:max_banks]
    pages = sorted({p for bank in banks for p in bank})
    wins = [w for p in pages for w in b.page_windows[p]]
    vecs = embed_many(model, [b.windows[w] for w in wins], cls, sep, device)
    row = {w: i for i, w in enumerate(wins)}
    queries = embed_many(model, b.queries[b.n_syn : b.n_syn + len(banks)], cls, sep, device)
    out = []
    for qi, bank in enumerate(banks):
        for p in bank:
            w = vecs[[row[x] for x in b.page_windows[p]]]
            out.append(float((w @ queries[qi]).max()))
    return np.array(out, dtype=np.float32)


def step_loss(model, b: Bundle, questions: list[int], device) -> torch.Tensor:
    cls, sep, meta = b.meta["cls"], b.meta["sep"], b.meta
    pages = list(
        dict.fromkeys(
            p for q in questions for p in [meta["syn_positive"][q], *meta["syn_negatives"][q]]
        )
    )
    col = {p: i for i, p in enumerate(pages)}
    wins, owner = [], []
    for i, p in enumerate(pages):
        for w in b.page_windows[p][:TRAIN_WINDOWS]:
            wins.append(b.windows[w])
            owner.append(i)
    bf16 = device.type == "cuda"
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
        q = embed(model, [b.queries[x] for x in questions], cls, sep, device)
        w = embed(model, wins, cls, sep, device)
    sims = q @ w.T  # (questions, windows)
    owner_t = torch.tensor(owner, device=device)
    page_scores = torch.full((len(questions), len(pages)), -1e4, device=device)
    page_scores = page_scores.scatter_reduce(
        1, owner_t.expand(len(questions), -1), sims, reduce="amax", include_self=True
    )
    mask = torch.zeros_like(page_scores, dtype=torch.bool)
    target = []
    for i, x in enumerate(questions):
        target.append(col[meta["syn_positive"][x]])
        for p in meta["syn_relevant"][x]:
            if p in col and p != meta["syn_positive"][x]:
                mask[i, col[p]] = True
    logits = (page_scores / TEMPERATURE).masked_fill(mask, -1e4)
    return torch.nn.functional.cross_entropy(logits, torch.tensor(target, device=device))


def heldout_loss(model, b, held, device, batch) -> float:
    if not held:
        return float("nan")
    with torch.no_grad():
        losses = [
            float(step_loss(model, b, held[s : s + batch], device))
            for s in range(0, len(held), batch)
        ]
    return float(np.mean(losses))


def tune(base, b: Bundle, train: list[int], args, device, log):
    from peft import LoraConfig, get_peft_model

    rng = np.random.default_rng(0)
    train = list(rng.permutation(train))
    held, train = train[: len(train) // 20], train[len(train) // 20 :]
    config = LoraConfig(
        r=16, lora_alpha=32, lora_dropout=0.1, target_modules=["query", "key", "value", "dense"]
    )
    model = get_peft_model(base, config)
    steps = args.epochs * math.ceil(len(train) / args.batch)
    if args.max_steps:
        steps = min(steps, args.max_steps)
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=2e-4, weight_decay=0.01
    )
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    model.eval()
    before = heldout_loss(model, b, held, device, args.batch)
    model.train()
    done, losses = 0, []
    while done < steps:
        order = rng.permutation(train)
        for s in range(0, len(order), args.batch):
            if done >= steps:
                break
            loss = step_loss(model, b, [int(x) for x in order[s : s + args.batch]], device)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            done += 1
    model.eval()
    after = heldout_loss(model, b, held, device, args.batch)
    log(
        f"  {len(train)} training questions, {steps} steps, train loss {np.mean(losses[:5]):.3f}"
        f" -> {np.mean(losses[-5:]):.3f}; held-out synthetic loss {before:.3f} -> {after:.3f}"
    )
    return model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", default=".gpu")
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default="untuned,s0,transductive,s1,s2")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max-steps", type=int, default=0)
    parser.add_argument("--max-banks", type=int, default=None)
    parser.add_argument("--budget-s", type=float, default=420)
    args = parser.parse_args()

    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        line = f"[{time.time() - started:6.1f}s] {msg}"
        print(line, flush=True)
        with open(out / "log.txt", "a") as fh:
            fh.write(line + "\n")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    folder = Path(args.bundle)
    b = Bundle(folder)
    config, state = read_minilm(folder)
    utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    log(f"started {utc}; bundle made {b.meta.get('made')}")
    log(f"device {device}, {len(b.windows)} windows, {b.n_syn} synthetic questions")

    def fresh():
        return build_minilm(config, state, device)

    names = []
    for part in args.models.split(","):
        if part in ("untuned", "transductive"):
            names.append(part)
        else:
            names += [f"{part}f{f}" for f in range(5)]
    scores: dict[str, np.ndarray] = {}
    for name in names:
        if time.time() - started > args.budget_s:
            log(f"budget spent: {name} and later models skipped")
            break
        log(f"model {name}")
        model = fresh()
        if name != "untuned":
            if name == "transductive":
                train = list(range(b.n_syn))
            else:
                seed, fold = name[1:].split("f")
                folds = b.meta["syn_fold"][seed]
                train = [i for i in range(b.n_syn) if folds[i] != int(fold)]
            model = tune(model, b, train, args, device, log)
            if name == "transductive":
                model.save_pretrained(str(out / "adapter_transductive"))
        scores[name] = score_banks(model, b, device, args.max_banks)
        np.savez(out / "scores.npz", **scores)
        log(f"  scored {len(scores[name])} bank candidates")
    log("done")


if __name__ == "__main__":
    main()
