"""A million pages on one machine: the full path on a synthetic corpus of FinanceBench copies.

The corpus (SYNTHETIC, documented as such): copy 0 is the FinanceBench page corpus as it is (ids
unchanged, so the 108 questions and their judgements apply); copies 1..N-1 are the same pages as
filings of other companies: the company's name is rewritten in the metadata and wherever the
text writes it (``3M`` -> ``3M Aldergrove``), every year 1990-2039 shifted by 1-9 and the filing
ids and periods with them. 21 copies: 1,048,782 pages, 3.7 GB of JSON Lines.

The path, each figure beside the same one on copy 0 alone (the 49,942-page corpus):

1. index build: ``build_sharded_index`` (shards tokenised as Dask tasks that read their byte range
   from storage; nothing but the path in the task graph) with 1 and 2 workers;
2. first stage + banks: the filing-aware first stage (``bm25+query+entity+filing``) over the
   sharded index, top 100 for each of the 108 questions, on the same 1 and 2 workers (the
   first stage pickles as the index's folder plus its company and filing rows);
3. bank scores: ``fused-static`` (the first stage's score fused with the static scorer tuned on
   the FinanceBench corpus, loaded from its cache: ``fc.load_encoder("static", "financebench")``);
4. features + correction: the shipped ``checkpoints/default`` reranks every bank with the
   fused-static scores as its base (a throughput figure: the checkpoint was fitted on ``fused``),
   after one pass over the corpus for its segment names.

Peak resident memory is the sum over this process and its Dask workers, sampled every 0.2 s.
R@100 of the first stage is printed to show the banks are the same kind on both corpora.

    .venv/bin/python benchmarks/million_pages.py [--data-root ../shared/data] [--copies 21]
        [--workers 1 2] [--work runs/million]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import threading
import time
from pathlib import Path

SUFFIXES = [
    *("Aldergrove", "Birchmont", "Calloway", "Dunmore", "Eastwick", "Fairhaven", "Glenrock"),
    *("Hartwell", "Ironbridge", "Juniper", "Kingsmere", "Larchmont", "Millbrook", "Northgate"),
    *("Oakridge", "Pinecrest", "Queensbury", "Redfield", "Stonebrook", "Thornbury", "Upland"),
]
_YEAR = re.compile(r"\b(19[9]\d|20[0-3]\d)\b")
TARGET_MB, TARGET_S = 8 * 1024, 600.0
STAGE = "bm25+query+entity+filing"


class PeakMemory:
    """Peak of the summed resident memory of this process and its children, sampled."""

    def __init__(self, every: float = 0.2) -> None:
        import psutil

        self.process, self.every, self.peak = psutil.Process(), every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for proc in [self.process, *self.process.children(recursive=True)]:
                with contextlib.suppress(Exception):  # a worker that just exited
                    total += proc.memory_info().rss
            self.peak = max(self.peak, total)
            time.sleep(self.every)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mb(self) -> float:
        return self.peak / 2**20


def _copy(passage, k: int) -> dict:
    """Page ``passage`` as a filing of copy ``k`` (``k == 0``: as it is)."""
    meta = {"company": passage.company, "period": passage.period, "doc_type": passage.doc_type}
    meta["document"], meta["position"] = passage.document, passage.position
    if k == 0:
        return {"_id": passage.pid, "text": passage.text, "metadata": meta}
    shift, name = 1 + (k - 1) % 9, f"{passage.company} {SUFFIXES[(k - 1) % len(SUFFIXES)]}"

    def year(m: re.Match) -> str:
        return str(int(m.group(1)) + shift)

    text = _YEAR.sub(year, passage.text)
    if passage.company:
        text = re.sub(rf"(?i)\b{re.escape(passage.company)}\b", name, text)
    meta.update(
        company=name,
        period=_YEAR.sub(year, passage.period or "") or None,
        document=f"{passage.document}~{k}",
    )
    return {"_id": f"{passage.pid}~{k}", "text": text, "metadata": meta}


def write_corpus(data, folder: Path, copies: int) -> list[Path]:
    """One ``corpus-KK.jsonl`` per copy (reused when already written)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(copies):
        path = folder / f"corpus-{k:02d}.jsonl"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for passage in data.passages.values():
                    fh.write(json.dumps(_copy(passage, k)) + "\n")
            tmp.replace(path)
        paths.append(path)
    return paths


def recall_at(bankset, data, k: int = 100) -> float:
    covered = [q for q in data.queries if data.qrels.get(q)]
    hits = [bool(set(bankset.banks[q].pids[:k]) & set(data.qrels[q])) for q in covered]
    return sum(hits) / max(len(hits), 1)


def run_path(paths: list[Path], data, workers: int, work: Path, correct: bool, args) -> dict:
    """Index, first stage and banks on ``workers`` Dask workers; then scores and correction."""
    from fincrowd_ltr.data.schema import Dataset
    from fincrowd_ltr.engine import make_engine, using
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.retrieval.banks import retrieve_candidates
    from fincrowd_ltr.retrieval.first_stage import FirstStage
    from fincrowd_ltr.retrieval.sharded import build_sharded_index

    out: dict = {"workers": workers}
    engine = make_engine("dask", workers=workers, device="cpu")
    with PeakMemory() as memory, using(engine):
        start = time.perf_counter()
        index = build_sharded_index(paths, work / f"index-{workers}w", progress=False)
        out["build_s"] = time.perf_counter() - start
        out["pages"], out["shards"] = len(index), len(index.names)
        start = time.perf_counter()
        store = index.page_store()
        extractor = FieldExtractor.from_passages(store.headers.values(), texts=store)
        stage = FirstStage(STAGE, index, store.headers, extractor)
        out["open_s"] = time.perf_counter() - start
        corpus = Dataset("financebench-synthetic", data.queries, store, data.qrels)
        start = time.perf_counter()
        bankset = retrieve_candidates(corpus, stage, 100)
        out["first_stage_s"] = time.perf_counter() - start
        out["questions_per_s"] = len(corpus.queries) / out["first_stage_s"]
        out["r_at_100"] = recall_at(bankset, data)
        if correct:
            out.update(score_and_correct(bankset, corpus, stage, data, args))
    engine.close()
    out["peak_mb"] = memory.mb
    return out


def score_and_correct(bankset, corpus, stage, data, args) -> dict:
    from fincrowd_ltr.api.corpus import load_encoder
    from fincrowd_ltr.model.correction import GatedCorrection
    from fincrowd_ltr.retrieval.banks import score_banks
    from fincrowd_ltr.retrieval.rankers import EncoderRanker, FirstStageRanker, HybridRanker

    out: dict = {}
    encoder = load_encoder("static", data, progress=False)
    static = EncoderRanker("static", encoder, corpus.passages, progress=False)
    fused = HybridRanker(
        [FirstStageRanker(stage, static_term=False), static], name="fused-static"
    )  # as make_rankers builds it
    start = time.perf_counter()
    score_banks(bankset, corpus, [fused], progress=False)
    out["scores_s"] = time.perf_counter() - start
    out["banks_per_s_scores"] = len(bankset.banks) / out["scores_s"]
    model = GatedCorrection.from_pretrained(args.checkpoint)
    start = time.perf_counter()
    model.featurizer(corpus.passages)  # one pass over the corpus for its segment names
    out["segments_s"] = time.perf_counter() - start
    start = time.perf_counter()
    results = model.rerank_banks(corpus, bankset, ranker="fused-static")
    out["correction_s"] = time.perf_counter() - start
    out["banks_per_s_correction"] = len(results) / out["correction_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--copies", type=int, default=21)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--work", type=Path, default=Path("runs/million"))
    parser.add_argument("--checkpoint", help="default: checkpoints/default, else checkpoints/demo")
    args = parser.parse_args()

    import os

    from fincrowd_ltr.api.corpus import load_dataset

    data = load_dataset("financebench", args.data_root)
    if args.checkpoint is None:
        shipped = Path("checkpoints/default")
        args.checkpoint = shipped if (shipped / "config.json").exists() else "checkpoints/demo"
    print(f"correction: {args.checkpoint}")
    rows = []
    for copies in (1, args.copies):
        start = time.perf_counter()
        paths = write_corpus(data, args.work / "corpus", copies)
        print(f"corpus of {copies} copies: {time.perf_counter() - start:.0f} s to write")
        for workers in args.workers:
            work = args.work / f"{copies}copies"
            row = run_path(paths, data, workers, work, workers == args.workers[-1], args)
            row.update(copies=copies, load=os.getloadavg()[0])
            print(json.dumps(row), flush=True)
            rows.append(row)
    (args.work / "million.json").write_text(json.dumps(rows, indent=1))
    print(
        f"\n{'pages':>10} {'workers':>7} {'build s':>8} {'q/s':>6} {'stage s':>8} "
        f"{'R@100':>6} {'banks/s scores':>14} {'banks/s corr.':>13} {'peak GB':>8} {'load':>5}"
    )
    for r in rows:
        print(
            f"{r['pages']:>10,} {r['workers']:>7} {r['build_s']:>8.0f} "
            f"{r['questions_per_s']:>6.2f} {r['first_stage_s']:>8.0f} {r['r_at_100']:>6.3f} "
            f"{r.get('banks_per_s_scores', float('nan')):>14.1f} "
            f"{r.get('banks_per_s_correction', float('nan')):>13.1f} "
            f"{r['peak_mb'] / 1024:>8.2f} {r['load']:>5.1f}"
        )
    big = [r for r in rows if r["copies"] == args.copies]
    peak = max(r["peak_mb"] for r in big)
    stage = min(r["first_stage_s"] + r["open_s"] for r in big)
    verdict = "MET" if peak <= TARGET_MB else "NOT MET"
    print(f"\npeak memory {peak / 1024:.2f} GB (target <= 8: {verdict})")
    print(
        f"first stage + banks, 108 questions (with opening the index): {stage:.0f} s "
        f"(target <= {TARGET_S:.0f} s: {'MET' if stage <= TARGET_S else 'NOT MET'})"
    )


if __name__ == "__main__":
    main()
