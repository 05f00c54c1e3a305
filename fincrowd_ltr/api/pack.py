"""``pack``: prune and pack rankings into a token budget and judge what the generator reads."""

from __future__ import annotations

import json
from pathlib import Path

from fincrowd_ltr.api.corpus import DEFAULT_CACHE, build_banks, load_dataset, rankers_of, read_run
from fincrowd_ltr.data.jsonl import require_file
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.defaults import DEFAULT_BANK_SIZE
from fincrowd_ltr.evaluation.packing import (
    INERT_NOTE,
    NOT_MEASURED,
    evaluate_packing,
    split_and_fuse_check,
)
from fincrowd_ltr.evaluation.results import write_report
from fincrowd_ltr.fields import FieldExtractor


def pack(
    dataset: str | Dataset,
    out_dir: str | Path,
    *,
    ranker: str = "dense",
    orders: str | Path | dict | None = None,
    budget: int = 32_000,
    depth: int = 30,
    tokenizer: str | Path | None = None,
    first_stage: str = "auto",
    size: int = DEFAULT_BANK_SIZE,
    run=None,
    split: str = "all",
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE,
) -> dict:
    """Pack every ranking (``orders``: a ``fit-residual`` report's held-out base/always-on/gated
    orders; otherwise ``ranker``'s bank order) under each pruning policy; writes
    ``report.json``, ``summary.md`` and ``contexts.jsonl`` to ``out_dir``."""
    from fincrowd_ltr.api.fit import held_out_rankings
    from fincrowd_ltr.packing import POLICIES, Packer, TokenCounter, assemble, format_summary

    data = load_dataset(dataset, data_root, split)
    if orders is not None:
        if not isinstance(orders, dict):
            require_file(Path(orders), "cross-validation report")
            orders = json.loads(Path(orders).read_text())
        systems = held_out_rankings(orders)
        unknown = sorted({q for r in systems.values() for q in r} - set(data.queries))
        if unknown:
            raise DataError(f"orders: unknown query id {unknown[0]!r} for {data.name}")
    else:
        name = rankers_of(ranker)[0]
        banks = build_banks(
            data,
            [name],
            first_stage=first_stage,
            size=size,
            split=split,
            cache_dir=cache_dir,
            run=read_run(run, data),
        )
        systems = {f"base:{name}": {q: b.ranking(name) for q, b in banks.banks.items()}}
    counter = TokenCounter(path=Path(tokenizer) if tokenizer else None)
    packer = Packer(counter, budget)
    extractor = FieldExtractor.from_passages(data.passages.values())
    report: dict = {
        "dataset": data.name,
        "split": split,
        "budget": budget,
        "tokenizer": counter.name,
        "depth": depth,
        "answer_accuracy": NOT_MEASURED,
        "orders_note": INERT_NOTE,
        "systems": {},
        "rank_halves": {},
    }
    for name, rankings in systems.items():
        report["systems"][name] = {
            policy.name: evaluate_packing(data, rankings, policy, packer, extractor, depth)
            for policy in POLICIES
        }
        report["rank_halves"][name] = split_and_fuse_check(data, rankings, packer)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_report(out / "report.json", report)
    (out / "summary.md").write_text(format_summary(report))
    name, rankings = list(systems.items())[-1]
    with open(out / "contexts.jsonl", "w", encoding="utf-8") as fh:
        for qid, ranking in rankings.items():
            ranked = [data.passages[p] for p in ranking[:depth]]
            packing = assemble(packer.pack(data.queries[qid].text, ranked), "score")
            row = {
                "qid": qid,
                "system": name,
                "policy": "budget",
                "order": "score",
                "tokens": packing.tokens,
                "prompt": packing.prompt(),
                "citations": [vars(p.citation) for p in packing.passages],
                "dropped": packing.dropped,
            }
            fh.write(json.dumps(row) + "\n")
    report["contexts_system"] = name
    return report
