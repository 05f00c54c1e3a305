"""The device step of benchmarks/static_targets.py: MiniLM's vector of every sequence.

Standalone (torch, transformers, safetensors, numpy). Mean pooling over the word pieces with
CLS and SEP added, L2-normalised, as ``DenseEncoder.encode_windows``; float32 on the GPU (no
TF32), written as float16 in files of 20,000 rows (the device returns files of 16 MiB at most).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from _device_minilm import build_minilm, embed_many, read_minilm

ROWS_PER_FILE = 20_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", default=".gpu2")
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()

    started = time.time()
    folder, out = Path(args.bundle), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = json.loads((folder / "meta.json").read_text())
    arrays = np.load(folder / "sequences.npz")
    ids, lengths = arrays["ids"].astype(np.int64), arrays["lengths"]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    n = len(lengths) if args.limit is None else args.limit
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    config, state = read_minilm(folder)
    model = build_minilm(config, state, device)
    seqs = [ids[starts[i] : starts[i + 1]] for i in range(n)]
    vectors = embed_many(model, seqs, meta["cls"], meta["sep"], device, args.batch)
    vectors = vectors.cpu().numpy().astype(np.float16)
    for k in range(0, n, ROWS_PER_FILE):
        np.save(out / f"vectors_{k // ROWS_PER_FILE:02d}.npy", vectors[k : k + ROWS_PER_FILE])
    utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    line = (
        f"started {utc}; bundle made {meta.get('made')}; {n} sequences embedded on {device} "
        f"in {time.time() - started:.1f} s"
    )
    print(line, flush=True)
    (out / "log.txt").write_text(line + "\n")


if __name__ == "__main__":
    main()
