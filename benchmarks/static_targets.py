"""Is the static scorer short of MiniLM targets? Tune it on many more pages' MiniLM vectors.

The static scorer is tuned to MiniLM's vectors of 400 sampled pages (``TUNING_PAGES``), because
MiniLM reads 4-8 pages/s on 2 cores; its agreement with MiniLM plateaus at ~0.76 cosine and its
fused base trails MiniLM's by ~0.1 R@10 on FinanceBench (issue 24). On a lent GPU the targets of
``--pages`` pages cost seconds. Three steps, the middle one on the device:

1. ``prep`` (here): the word-piece sequences the recipe embeds for a seeded sample of pages
   (:func:`~fincrowd_ltr.retrieval.static_tuning.target_sequences`, the same sampling as
   ``static_model_for``) and MiniLM in float16 (the device takes 64 MiB).
2. ``benchmarks/static_targets_gpu.py`` (device): MiniLM's vector of each sequence, float16.
3. ``build`` (here): distil and tune the static scorer on those targets with the default recipe
   (``StaticTuning()``), save it where ``--cache-dir`` keeps the corpus's default scorer (a
   separate cache: the default one is left alone), then the fused-static base and first-stage
   recall over the 88 covered questions beside the same figures from ``--baseline-cache``.

    python benchmarks/static_targets.py prep --pages 12000 --out .gpu2
    python benchmarks/static_targets.py build --vectors DIR --cache-dir .cache_static12k
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from _bundle import stamp, write_minilm


def _sample(passages: dict, pages: int, seed: int = 0) -> list[str]:
    ids = sorted(passages)
    rng = np.random.default_rng(seed)
    return [ids[i] for i in sorted(rng.choice(len(ids), min(pages, len(ids)), replace=False))]


def prep(args) -> None:
    from transformers import AutoTokenizer

    import fincrowd_ltr as fc
    from fincrowd_ltr.retrieval.dense import minilm_path
    from fincrowd_ltr.retrieval.static_tuning import target_sequences
    from fincrowd_ltr.retrieval.windows import WindowPolicy

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = fc.load_dataset("financebench", args.data_root)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    chosen = _sample(data.passages, args.pages)
    seqs = target_sequences([data.passages[p].text for p in chosen], 0, tokenizer, WindowPolicy())
    np.savez_compressed(
        out / "sequences.npz",
        ids=np.concatenate([np.asarray(s, dtype=np.uint16) for s in seqs]),
        lengths=np.array([len(s) for s in seqs], dtype=np.int32),
    )
    meta = {"cls": tokenizer.cls_token_id, "sep": tokenizer.sep_token_id, "pages": len(chosen)}
    meta["made"] = stamp()
    (out / "meta.json").write_text(json.dumps(meta))
    write_minilm(out)
    print(f"{len(chosen)} pages, {len(seqs)} sequences -> {out}")


def _figures(data, cache_dir: str) -> dict:
    """Figures of the windows-only table saved under ``cache_dir`` (the one this script tunes;
    the API's static rankers read the question-taught table instead, which it does not make)."""
    from fincrowd_ltr.metrics import ndcg_at_k, recall_at_k
    from fincrowd_ltr.retrieval.build import BankSpec, build_banks

    spec = BankSpec(first_stage="auto", mode="retrieved")
    banks = build_banks(
        data, "all", ["fused-static", "static"], spec, Path(cache_dir), progress=False
    )
    rows: dict[str, list[float]] = {}
    groups = []
    for qid, bank in banks.banks.items():
        qrels = data.qrels.get(qid, {})
        if not any(p in data.passages for p in qrels):
            continue
        groups.append(data.queries[qid].group)
        rows.setdefault("first stage R@100", []).append(recall_at_k(bank.pids, qrels, 100))
        for ranker in ("fused-static", "static"):
            order = bank.ranking(ranker)
            rows.setdefault(f"{ranker} R@10", []).append(recall_at_k(order, qrels, 10))
            rows.setdefault(f"{ranker} nDCG@10", []).append(ndcg_at_k(order, qrels, 10))
    return {"groups": groups, **{k: np.array(v) for k, v in rows.items()}}


def build(args) -> None:
    from transformers import AutoTokenizer

    import fincrowd_ltr as fc
    from fincrowd_ltr.metrics import bootstrap_ci
    from fincrowd_ltr.retrieval.dense import minilm_path
    from fincrowd_ltr.retrieval.static import distill_static
    from fincrowd_ltr.retrieval.static_tuning import (
        StaticTuning,
        static_key,
        target_sequences,
        tune_static,
    )
    from fincrowd_ltr.retrieval.windows import WindowPolicy

    data = fc.load_dataset("financebench", args.data_root)
    folder = Path(args.vectors)
    targets = np.concatenate(
        [np.load(f).astype(np.float32) for f in sorted(folder.glob("vectors_*.npy"))]
    )
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    chosen = _sample(data.passages, args.pages)
    seqs = target_sequences([data.passages[p].text for p in chosen], 0, tokenizer, WindowPolicy())
    if len(seqs) != len(targets):
        raise SystemExit(f"{len(seqs)} sequences but {len(targets)} vectors: other --pages?")
    model = distill_static(corpus=(p.text for p in data.passages.values()))
    model = tune_static(model, seqs, targets, StaticTuning(seed=0), progress=True)
    key = static_key(data.corpus_fingerprint())
    model.config.update({"pages": len(chosen), "targets": "GPU, float16 MiniLM"})
    model.save(Path(args.cache_dir) / "static" / key)
    print(f"static scorer tuned on {len(chosen)} pages' targets saved under {args.cache_dir}")
    base, new = _figures(data, args.baseline_cache), _figures(data, args.cache_dir)
    groups = base.pop("groups")
    new.pop("groups")
    print(f"{len(groups)} covered questions; {args.baseline_cache} (400 pages) -> {args.cache_dir}")
    for k in base:
        d = new[k] - base[k]
        lo, hi = bootstrap_ci(d, groups=groups)
        print(
            f"{k:22s} {base[k].mean():.3f} -> {new[k].mean():.3f} ({d.mean():+.3f} "
            f"[{lo:+.3f}, {hi:+.3f}])"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--out", default=".gpu2")
    b = sub.add_parser("build")
    b.add_argument("--vectors", required=True)
    b.add_argument("--cache-dir", required=True)
    b.add_argument("--baseline-cache", default=".cache")
    for q in (p, b):
        q.add_argument("--pages", type=int, default=12000)
        q.add_argument("--data-root", default=None)
    args = parser.parse_args()
    prep(args) if args.step == "prep" else build(args)


if __name__ == "__main__":
    main()
