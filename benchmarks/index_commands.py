"""A command over a sharded index against the same command over ``corpus.jsonl`` in memory.

The corpus is FinanceBench's pages (``--copies`` > 1: the synthetic copies of
``benchmarks/million_pages.py``, copy 0 as it is), written once under ``--work`` as a BEIR folder
with FinanceBench's questions and judgements (ids and question texts, git-ignored; the pages
are read from ``--data-root``). Each row is a fresh ``fincrowd banks`` process, as a user runs it
(BM25 banks of the filing-aware first stage, top 100 of every question):

- ``memory``: ``--dataset beir:DIR`` (the baseline: every page loaded, indexed in memory);
- ``index, first``: ``--index IDX`` with an empty cache, the first command over that index (it
  hashes the pages once to key the caches, and records the fingerprint beside the index);
- ``index``: ``--index IDX`` with another empty cache (the fingerprint read, not hashed).

Peak memory is the resident memory of the command's process, sampled every 0.2 s; rows are the
medians of ``--rounds`` alternated rounds, ratios against ``memory``. The banks of the three are
checked equal (ids in order).

    .venv/bin/python benchmarks/index_commands.py [--copies 1] [--rounds 2]
        [--work runs/index_commands]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from million_pages import STAGE, write_corpus  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def write_folder(data, work: Path, copies: int) -> tuple[Path, list[Path]]:
    """The BEIR folder (questions, judgements, one ``corpus.jsonl``) and the corpus files."""
    paths = write_corpus(data, work / "pages", copies)
    folder = work / "beir"
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.jsonl"
    if not corpus.exists():
        with open(corpus.with_suffix(".tmp"), "wb") as out:
            for path in paths:
                with open(path, "rb") as fh:
                    shutil.copyfileobj(fh, out)
        corpus.with_suffix(".tmp").replace(corpus)
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        for q in data.queries.values():
            meta = {"company": q.company} if q.company else {}
            fh.write(json.dumps({"_id": q.qid, "text": q.text, "metadata": meta}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{q}\t{p}\t{g}" for q, rels in data.qrels.items() for p, g in rels.items()]
    (folder / "qrels.tsv").write_text("\n".join(lines) + "\n")
    return folder, [corpus]


def run(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of one command."""
    start, peak = time.perf_counter(), 0
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    watched = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode})")
    return time.perf_counter() - start, peak / 2**20


def _banks(path: Path) -> dict[str, tuple[list[str], list[float]]]:
    """Each question's candidates and BM25 scores, from a saved bank file."""
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    return {r["qid"]: (r["candidates"], r["scores"]["bm25"]) for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("runs/index_commands"))
    args = parser.parse_args()
    from fincrowd_ltr.api.corpus import index_corpus
    from fincrowd_ltr.data.registry import load_dataset

    work = args.work.resolve() / f"copies-{args.copies}"
    folder, corpus = write_folder(load_dataset("financebench", args.data_root), work, args.copies)
    if not (work / "index" / "index.json").exists():
        index_corpus(corpus, work / "index", progress=False)
    cli = [sys.executable, "-m", "fincrowd_ltr.cli", "banks", "--dataset", f"beir:{folder}"]
    cli += ["--ranker", "bm25", "--first-stage", STAGE]
    rows: dict[str, list[tuple[float, float]]] = {"memory": [], "index, first": [], "index": []}
    for r in range(args.rounds):
        for name in rows:
            cache = work / f"cache-{r}-{name.replace(', ', '-')}"
            shutil.rmtree(cache, ignore_errors=True)
            if name == "index, first":
                (work / "index" / "fingerprint.json").unlink(missing_ok=True)
            extra = [] if name == "memory" else ["--index", str(work / "index")]
            out = work / f"banks-{name.replace(', ', '-')}.jsonl"
            rows[name].append(run([*cli, *extra, "--cache-dir", str(cache), "--out", str(out)]))
            shutil.rmtree(cache, ignore_errors=True)
    banks = [_banks(work / f"banks-{n.replace(', ', '-')}.jsonl") for n in rows]
    same = all(b == banks[0] for b in banks[1:])
    base_s = statistics.median(s for s, _ in rows["memory"])
    base_mb = statistics.median(m for _, m in rows["memory"])
    with open(corpus[0], "rb") as fh:
        pages = sum(1 for line in fh if line.strip())
    print(f"{pages:,} pages ({args.copies} copies), {args.rounds} rounds, banks equal: {same}")
    print("| command | seconds (median) | ratio | peak MB (median) | ratio |")
    print("|---|---|---|---|---|")
    for name, got in rows.items():
        s, mb = statistics.median(x for x, _ in got), statistics.median(m for _, m in got)
        print(f"| {name} | {s:.1f} | {s / base_s:.2f} | {mb:.0f} | {mb / base_mb:.2f} |")
    if not same:
        raise SystemExit("the banks differ: the index path is not the same path")


if __name__ == "__main__":
    main()
