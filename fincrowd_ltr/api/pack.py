"""``pack``: prune and pack rankings into a token budget and judge what the generator reads."""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path

from fincrowd_ltr.api.corpus import (
    bank_spec,
    build_banks,
    data_settings,
    load_dataset,
    rankers_of,
    read_run,
)
from fincrowd_ltr.data.jsonl import read_json, require_file
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.evaluation.packing import (
    INERT_NOTE,
    NOT_MEASURED,
    evaluate_packing,
    split_and_fuse_check,
)
from fincrowd_ltr.evaluation.reports import PackingReport
from fincrowd_ltr.evaluation.results import write_report
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.retrieval.build import BankSpec
from fincrowd_ltr.settings import DataSettings


def pack(
    dataset: str | Dataset,
    out_dir: str | Path,
    *,
    ranker: str | None = None,
    orders: str | Path | dict | None = None,
    budget: int = 32_000,
    depth: int = 30,
    tokenizer: str | Path | None = None,
    run=None,
    spec: BankSpec | None = None,
    data: DataSettings | None = None,
    **shortcuts,
) -> PackingReport:
    """Pack every ranking (``orders``: an ``evaluate --out`` report's systems, or a
    ``fit-residual`` report's held-out base/always-on/gated orders; otherwise ``ranker``'s
    (default ``dense``) bank
    order, the banks made as ``spec`` says or its shortcuts ``first_stage`` and ``size``) under
    each pruning policy; writes ``report.json``,
    ``summary.md`` and ``contexts.jsonl`` to ``out_dir``. ``data`` (or ``split``,
    ``data_root``, ``cache_dir``) says where the data and caches are."""
    from fincrowd_ltr.packing import POLICIES, Packer, TokenCounter

    where = data_settings(data, shortcuts)
    given = [*sorted(shortcuts), *(["spec"] if spec else []), *(["run"] if run else [])]
    given += ["ranker"] if ranker is not None else []
    spec = bank_spec(spec, **shortcuts)  # an unknown name is a TypeError
    if orders is not None and given:
        raise DataError(
            f"orders are packed as they were ranked: {', '.join(given)} (which make banks) "
            "would not be read; give them without orders",
            "orders",
        )
    for name, value in (("budget", budget), ("depth", depth)):
        whole = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not (whole and math.isfinite(value) and value == int(value) and value >= 1):
            raise DataError(f"{name} (--{name}) must be a whole number >= 1; got {value!r}", name)
    budget, depth = int(budget), int(depth)
    if tokenizer is not None and not Path(tokenizer).is_dir():
        raise DataError(f"tokenizer: no tokenizer folder at {tokenizer}", "tokenizer")
    split = where.split
    corpus = load_dataset(dataset, where.data_root, split)
    corpus.require_covered("measure")
    systems, trimmed = _common_questions(_rankings(corpus, orders, ranker, spec, where, run))
    counter = TokenCounter(path=Path(tokenizer) if tokenizer else None)
    packer = Packer(counter, budget)
    _fits_the_budget(corpus, systems, packer)
    extractor = corpus_extractor(corpus.passages)
    report = PackingReport(
        dataset=corpus.name,
        split=split,
        budget=budget,
        tokenizer=counter.name,
        depth=depth,
        answer_accuracy=NOT_MEASURED,
        orders_note=INERT_NOTE,
        **({"questions_note": trimmed} if trimmed else {}),
        systems={},
        rank_halves={},
    )
    for name, rankings in systems.items():
        report["systems"][name] = {
            policy.name: evaluate_packing(corpus, rankings, policy, packer, extractor, depth)
            for policy in POLICIES
        }
        report["rank_halves"][name] = split_and_fuse_check(corpus, rankings, packer)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_report(out / "report.json", report)
    (out / "summary.md").write_text(report.to_markdown())
    report["contexts_system"] = _write_contexts(
        out / "contexts.jsonl", corpus, systems, packer, depth
    )
    return report


def _fits_the_budget(data: Dataset, systems: dict, packer) -> None:
    """Refuse a budget that a question alone overruns, naming the question."""
    for qid in sorted({q for rankings in systems.values() for q in rankings}):
        try:
            packer.pack(data.queries[qid].text, [])
        except ValueError as err:
            raise DataError(f"budget: question {qid!r}: {err}", "budget") from None


def _report_rankings(report: dict) -> dict[str, dict[str, list[str]]]:
    """The orders of a saved report, by system: an ``evaluate --out`` report's (field
    ``rankings``, also a ``fit-residual --no-gate`` report's held-out ones) or a gated
    ``fit-residual`` report's held-out ones."""
    if isinstance(report, dict) and isinstance(report.get("rankings"), dict):
        return report["rankings"]
    try:
        return report["gated"]["modes"]["retrieved"]["rankings"]
    except (KeyError, TypeError):
        raise DataError(
            "no rankings in this report (field rankings of an `evaluate --out` or a `fincrowd "
            "fit-residual --no-gate --report` report, or gated.modes.retrieved.rankings of a "
            "gated fit's; a `--no-gate` report of an earlier version has none: fit again)"
        ) from None


def _common_questions(systems: dict) -> tuple[dict, str | None]:
    """The systems' rankings on the questions every system ranks, and a note when some rank
    others (an ``evaluate`` report's correction rows rank only the questions it never saw)."""
    asked = [set(r) for r in systems.values()]
    common = set.intersection(*asked) if asked else set()
    if all(a == common for a in asked):
        return systems, None
    note = (
        f"packed on the {len(common)} questions every system ranks (of "
        f"{len(set.union(*asked))}): the systems rank different questions (a correction's "
        "rows rank only those it never saw; `base:<ranker>:unseen` is their base)"
    )
    return {name: {q: r[q] for q in r if q in common} for name, r in systems.items()}, note


def _rankings(data: Dataset, orders, ranker: str, spec: BankSpec, where: DataSettings, run) -> dict:
    """``{system: {qid: ranking}}``: a report's orders (``evaluate --out``'s, or a
    cross-validation report's held-out ones), or the bank order of ``ranker``."""
    if orders is not None:
        where_from = "orders"
        if not isinstance(orders, dict):
            where_from = str(orders)
            orders = read_json(require_file(Path(orders), "report with orders"))
        return _checked_orders(_report_rankings(orders), data, where_from)
    name = rankers_of(ranker or "dense")[0]
    banks = build_banks(data, [name], spec, data=where, run=read_run(run, data))
    return {f"base:{name}": {q: b.ranking(name) for q, b in banks.banks.items()}}


def _checked_orders(systems, data: Dataset, source: str) -> dict:
    """A report's orders, refused (naming the system, question and id) when a system ranks no
    question, a ranking is not a list of ids, or names an unknown question or passage or one
    passage twice (it would be packed twice)."""
    if not isinstance(systems, dict) or not systems:
        raise DataError(f"{source}: the report's rankings name no system", "orders")
    for name, rankings in systems.items():
        if not isinstance(rankings, dict) or not rankings:
            raise DataError(f"{source}: system {name!r} ranks no question", "orders")
        for qid, ranking in rankings.items():
            where = f"{source}: system {name!r}, question {qid!r}"
            if qid not in data.queries:
                raise DataError(f"{where}: not a question of {data.name}", "orders")
            if not isinstance(ranking, list) or not all(isinstance(p, str) for p in ranking):
                raise DataError(f"{where}: a ranking is a list of passage ids", "orders")
            seen: set[str] = set()
            for pid in ranking:
                if pid not in data.passages:
                    raise DataError(f"{where}: unknown passage id {pid!r}", "orders")
                if pid in seen:
                    raise DataError(f"{where}: passage {pid!r} ranked twice", "orders")
                seen.add(pid)
    return systems


def _write_contexts(path: Path, data: Dataset, systems: dict, packer, depth: int) -> str:
    """The last system's packed budget contexts, one JSON line per question; returns its name."""
    from fincrowd_ltr.packing import assemble

    name, rankings = list(systems.items())[-1]
    with open(path, "w", encoding="utf-8") as fh:
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
    return name
