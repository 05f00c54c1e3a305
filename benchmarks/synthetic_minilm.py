"""MiniLM vectors for the synthetic banks' pages from a GPU, so that the synthetic-only residual
can train on banks scored by the base it is deployed on (``--synthetic-ranker fused``) instead of
its static stand-in.

On 2 cores MiniLM reads 4-8 pages/s and the 2,000 synthetic banks hold ~34,000 pages, so fits
score them with ``fused-static``. Steps:

1. ``prep``: the pages of a synthetic bank file (``.cache/banks/financebench-synthetic-...``) that
   the MiniLM cache lacks, cut into the package's windows, in ``--parts`` bundles (the device
   takes 64 MiB and returns 64 MiB), each with MiniLM in float16.
2. ``benchmarks/static_targets_gpu.py --bundle B`` on the device, once per part.
3. ``insert``: the vectors into a copy of the cache (``--cache-dir``; the default cache is left
   alone, since these come from float16 weights), where the fit finds them.

    python benchmarks/synthetic_minilm.py prep --banks FILE --out .gpu3
    python benchmarks/synthetic_minilm.py insert --banks FILE --vectors DIR_A,DIR_B --cache-dir C
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from _bundle import stamp, write_minilm


def _todo(banks_file: str, data, cache_dir: str) -> list[str]:
    from fincrowd_ltr.retrieval.dense import DenseEncoder

    pids: set[str] = set()
    with open(banks_file) as fh:
        for line in fh:
            pids.update(json.loads(line).get("candidates", []))
    encoder = DenseEncoder(cache_dir=Path(cache_dir))
    return sorted(p for p in pids if encoder.cache.get(data.passages[p].text) is None)


def _windows(pages: list[str], data, encoder) -> list[list[list[int]]]:
    texts = [data.passages[p].text for p in pages]
    ids = encoder.tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)
    return [encoder.policy.split(t) for t in ids["input_ids"]]


def prep(args) -> None:

    import fincrowd_ltr as fc
    from fincrowd_ltr.retrieval.dense import DenseEncoder

    data = fc.load_dataset("financebench", args.data_root)
    pages = _todo(args.banks, data, args.cache_dir)
    encoder = DenseEncoder(cache_dir=None)
    for part, chunk in enumerate(np.array_split(np.array(pages), args.parts)):
        out = Path(f"{args.out}{'abcdefgh'[part]}")
        out.mkdir(parents=True, exist_ok=True)
        seqs = [w for ws in _windows(list(chunk), data, encoder) for w in ws]
        np.savez_compressed(
            out / "sequences.npz",
            ids=np.concatenate([np.asarray(s, dtype=np.uint16) for s in seqs]),
            lengths=np.array([len(s) for s in seqs], dtype=np.int32),
        )
        meta = {"cls": encoder.tokenizer.cls_token_id, "sep": encoder.tokenizer.sep_token_id}
        meta["made"] = stamp()
        (out / "meta.json").write_text(json.dumps({**meta, "pages": list(map(str, chunk))}))
        write_minilm(out)
        print(f"{out}: {len(chunk)} pages, {len(seqs)} windows")


def insert(args) -> None:
    import fincrowd_ltr as fc
    from fincrowd_ltr.retrieval.dense import DenseEncoder

    data = fc.load_dataset("financebench", args.data_root)
    encoder = DenseEncoder(cache_dir=Path(args.cache_dir))
    added = 0
    for bundle, vectors in zip(args.bundles.split(","), args.vectors.split(","), strict=True):
        pages = json.loads((Path(bundle) / "meta.json").read_text())["pages"]
        rows = np.concatenate(
            [np.load(f).astype(np.float32) for f in sorted(Path(vectors).glob("vectors_*.npy"))]
        )
        windows = _windows(pages, data, encoder)
        if sum(map(len, windows)) != len(rows):
            raise SystemExit(f"{bundle}: {sum(map(len, windows))} windows, {len(rows)} vectors")
        start = 0
        for page, ws in zip(pages, windows, strict=True):
            encoder.cache.put(data.passages[page].text, rows[start : start + len(ws)])
            start += len(ws)
            added += 1
    encoder.cache.save()
    print(f"{added} pages' MiniLM vectors added to {args.cache_dir}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--out", default=".gpu3")
    p.add_argument("--parts", type=int, default=2)
    i = sub.add_parser("insert")
    i.add_argument("--bundles", required=True)
    i.add_argument("--vectors", required=True)
    for q in (p, i):
        q.add_argument("--banks", required=True)
        q.add_argument("--data-root", default=None)
        q.add_argument("--cache-dir", default=".cache")
    args = parser.parse_args()
    prep(args) if args.step == "prep" else insert(args)


if __name__ == "__main__":
    main()
