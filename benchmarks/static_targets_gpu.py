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

ROWS_PER_FILE = 20_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", default=".gpu2")
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel

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
    config = BertConfig.from_pretrained(str(folder / "model"))
    weights = load_file(str(folder / "model" / "model.safetensors"))
    model = BertModel(config, add_pooling_layer="pooler.dense.weight" in weights)
    missing, unexpected = model.load_state_dict(
        {k: v.float() for k, v in weights.items()}, strict=False
    )
    stray = [k for k in [*missing, *unexpected] if "position_ids" not in k]
    if stray:
        raise SystemExit(f"the weights do not fit the model: {stray}")
    model = model.to(device).eval()
    vectors = np.zeros((n, config.hidden_size), dtype=np.float16)
    order = sorted(range(n), key=lambda i: lengths[i])
    with torch.inference_mode():
        for s in range(0, n, args.batch):
            idx = order[s : s + args.batch]
            longest = int(max(lengths[i] for i in idx)) + 2
            batch = torch.zeros((len(idx), longest), dtype=torch.long)
            mask = torch.zeros((len(idx), longest), dtype=torch.long)
            for row, i in enumerate(idx):
                seq = [meta["cls"], *ids[starts[i] : starts[i + 1]].tolist(), meta["sep"]]
                batch[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = 1
            batch, mask = batch.to(device), mask.to(device)
            hidden = model(input_ids=batch, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            vec = torch.nn.functional.normalize(pooled, dim=-1)
            vectors[idx] = vec.cpu().numpy().astype(np.float16)
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
