"""Does MiniLM fine-tuned on synthetic questions (no label read) make a better fused base?

Issue 26 item 3, measured on a GPU lent for one session; the package does not ship the tuned
scorer. Three steps, the middle one on the GPU:

1. ``prep`` (here, CPU): synthesise training questions from the FinanceBench corpus (the fit's
   own synthesis: 2,000 questions, seed 0), cut every page they and the labelled questions'
   banks need into the package's exact windows (word-piece ids), and write a bundle with the
   company fold plans of seeds 0-2 and MiniLM's weights in float16 (the device takes 64 MiB).
2. ``benchmarks/dense_tuning_gpu.py`` (device): one LoRA-tuned MiniLM per (fold seed, outer
   fold), trained only on synthetic questions of the other folds' companies, plus one on every
   company's (the transductive mode); each scores every labelled bank.
3. ``score`` (here): the fused base (reciprocal rank fusion of the first stage and the dense
   score, as ``fused``) with each question's dense score from the model that never saw its
   company's pages in training, against MiniLM's, with company-cluster bootstrap intervals.

    python benchmarks/dense_tuning.py prep --out .gpu
    python benchmarks/dense_tuning.py score --bundle .gpu --scores DIR/scores.npz
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from _bundle import stamp, write_minilm

FOLDS = 5
SEEDS = (0, 1, 2)
NEGATIVES = 3  # typed hard negatives per synthetic question


def _windows(tokenizer, policy, texts: list[str]) -> list[list[list[int]]]:
    ids = tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    return [policy.split(t) for t in ids]


def _typed_negatives(question, rng: np.random.Generator) -> list[str]:
    """Up to NEGATIVES pages, one type after another (other period, other company, ...)."""
    pools = [list(v) for _, v in sorted(question.negatives.items()) if v]
    for pool in pools:
        rng.shuffle(pool)
    out: list[str] = []
    while len(out) < NEGATIVES and any(pools):
        for pool in pools:
            if pool and len(out) < NEGATIVES:
                out.append(pool.pop())
    return out


def prep(args) -> None:
    from transformers import AutoTokenizer

    import fincrowd_ltr as fc
    from fincrowd_ltr.data.splits import group_fold
    from fincrowd_ltr.retrieval.dense import minilm_path
    from fincrowd_ltr.retrieval.windows import WindowPolicy

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = fc.load_dataset("financebench", args.data_root)
    found = fc.synthesize(data, args.n, seed=0, difficulty=False, cache_dir=args.cache_dir)
    banks = fc.build_banks(
        data, ["fused"], first_stage="auto", mode="retrieved", cache_dir=args.cache_dir
    )
    rng = np.random.default_rng(0)
    syn = []
    for q in found.questions:
        negatives = [p for p in _typed_negatives(q, rng) if p not in q.relevant]
        syn.append(
            {
                "qid": q.qid,
                "text": q.text,
                "company": q.company,
                "positive": q.source,
                "relevant": sorted(set(q.relevant) | {q.source}),
                "negatives": negatives,
            }
        )
    labelled = [
        {
            "qid": qid,
            "text": data.queries[qid].text,
            "company": data.queries[qid].group,
            "bank": bank.pids,
        }
        for qid, bank in banks.banks.items()
    ]
    pages = sorted(
        {p for s in syn for p in [s["positive"], *s["negatives"]]}
        | {p for q in labelled for p in q["bank"]}
    )
    index = {p: i for i, p in enumerate(pages)}
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    policy = WindowPolicy()
    page_windows = _windows(tokenizer, policy, [data.passages[p].text for p in pages])
    flat = [w for ws in page_windows for w in ws]
    query_texts = [s["text"] for s in syn] + [q["text"] for q in labelled]
    query_ids = tokenizer(
        query_texts, add_special_tokens=False, truncation=True, max_length=policy.window_tokens
    )["input_ids"]
    arrays = {
        "window_ids": np.concatenate([np.asarray(w, dtype=np.uint16) for w in flat]),
        "window_len": np.array([len(w) for w in flat], dtype=np.int32),
        "page_windows": np.array([len(ws) for ws in page_windows], dtype=np.int32),
        "query_ids": np.concatenate([np.asarray(q, dtype=np.uint16) for q in query_ids]),
        "query_len": np.array([len(q) for q in query_ids], dtype=np.int32),
    }
    np.savez_compressed(out / "bundle.npz", **arrays)
    meta = {
        "made": stamp(),
        "cls": tokenizer.cls_token_id,
        "sep": tokenizer.sep_token_id,
        "pages": len(pages),
        "synthetic": len(syn),
        "labelled": len(labelled),
        "syn_positive": [index[s["positive"]] for s in syn],
        "syn_relevant": [[index[p] for p in s["relevant"] if p in index] for s in syn],
        "syn_negatives": [[index[p] for p in s["negatives"]] for s in syn],
        "syn_fold": {
            str(seed): [group_fold(s["company"], FOLDS, seed) for s in syn] for seed in SEEDS
        },
        "bank": [[index[p] for p in q["bank"]] for q in labelled],
    }
    (out / "meta.json").write_text(json.dumps(meta))
    ids = {
        "pages": pages,
        "synthetic": [s["qid"] for s in syn],
        "labelled": [q["qid"] for q in labelled],
        "companies": [s["company"] for s in syn],
    }
    (out / "ids.json").write_text(json.dumps(ids))  # stays here: page ids, for the score step
    write_minilm(out)
    print(
        f"{len(syn)} synthetic questions, {len(labelled)} labelled banks, {len(pages)} pages, "
        f"{len(flat)} windows -> {out}"
    )


def score(args) -> None:
    import fincrowd_ltr as fc
    from fincrowd_ltr.data.splits import group_fold
    from fincrowd_ltr.metrics import bootstrap_ci, ndcg_at_k, recall_at_k
    from fincrowd_ltr.retrieval.fusion import reciprocal_rank_fusion

    bundle = Path(args.bundle)
    ids = json.loads((bundle / "ids.json").read_text())
    scores = np.load(args.scores)
    data = fc.load_dataset("financebench", args.data_root)
    banks = fc.build_banks(
        data, ["fused", "dense"], first_stage="auto", mode="retrieved", cache_dir=args.cache_dir
    )
    offsets = np.cumsum([0] + [len(banks.banks[q].pids) for q in ids["labelled"]])
    covered = [
        (i, q)
        for i, q in enumerate(ids["labelled"])
        if any(p in data.passages for p in data.qrels.get(q, {}))
    ]
    groups = [data.queries[q].group for _, q in covered]

    def metrics(dense_of) -> dict[str, np.ndarray]:
        rows = {"R@10": [], "nDCG@10": []}
        for i, q in covered:
            bank = banks.banks[q]
            fused = reciprocal_rank_fusion([bank.first_stage, dense_of(i, q)])
            order = [bank.pids[j] for j in np.argsort(-fused, kind="stable")]
            rows["R@10"].append(recall_at_k(order, data.qrels[q], 10))
            rows["nDCG@10"].append(ndcg_at_k(order, data.qrels[q], 10))
        return {k: np.array(v) for k, v in rows.items()}

    def from_model(name: str):
        return lambda i, q: scores[name][offsets[i] : offsets[i] + len(banks.banks[q].pids)]

    base = metrics(lambda i, q: banks.banks[q].scores["dense"])
    systems = {
        "MiniLM (CPU, the package's fused)": base,
        "MiniLM fp16 on the GPU (control)": metrics(from_model("untuned")),
    }
    if "transductive" in scores:
        systems["tuned, transductive (every company's pages)"] = metrics(from_model("transductive"))
    for seed in SEEDS:
        names = [f"s{seed}f{f}" for f in range(FOLDS)]
        if all(n in scores for n in names):

            def cross(i, q, seed=seed):
                fold = group_fold(data.queries[q].group, FOLDS, seed)
                return from_model(f"s{seed}f{fold}")(i, q)

            systems[f"tuned, company folds seed {seed}"] = metrics(cross)
    print(
        f"{len(covered)} covered questions, {len(set(groups))} companies; fused base = RRF("
        "first stage 'auto', dense); deltas against the first row, company-cluster bootstrap"
    )
    for name, m in systems.items():
        cells = []
        for k, v in m.items():
            d = v - base[k]
            lo, hi = bootstrap_ci(d, groups=groups)
            cells.append(f"{k} {v.mean():.3f} ({d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}])")
        print(f"{name:48s} " + "  ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--out", default=".gpu")
    p.add_argument("--n", type=int, default=2000)
    s = sub.add_parser("score")
    s.add_argument("--bundle", default=".gpu")
    s.add_argument("--scores", required=True)
    for q in (p, s):
        q.add_argument("--data-root", default=None)
        q.add_argument("--cache-dir", default=".cache")
    args = parser.parse_args()
    prep(args) if args.step == "prep" else score(args)


if __name__ == "__main__":
    main()
