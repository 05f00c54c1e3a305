"""``fincrowd diagnose``: is crowding the user's problem? Stress test, crowded failures and top-k
composition for one base ranker, written as JSON, Markdown, PNG figures and per-query labels."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.diagnostics.contamination import near_duplicates, off_target_shares
from fincrowd_ltr.diagnostics.crowding import label_failure, summarise_failures
from fincrowd_ltr.diagnostics.figures import write_figures
from fincrowd_ltr.diagnostics.stress import HYBRID_PARTS, StressConfig, run_stress
from fincrowd_ltr.features.bank_features import BankFeaturizer
from fincrowd_ltr.fields.compatibility import conflicts
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.retrieval.banks import DEFAULT_BANK_SIZE, BankSet
from fincrowd_ltr.retrieval.build import BankSpec, build_banks
from fincrowd_ltr.synthesis import page_table_questions

LABELS_FILE = "crowding_labels.jsonl"


def _banks(
    dataset: Dataset,
    split: str,
    ranker: str,
    spec: BankSpec,
    cache_dir: Path,
    similarity: str,
    run: dict | None,
) -> BankSet:
    names = list(dict.fromkeys([ranker, similarity, *(HYBRID_PARTS if ranker == "hybrid" else ())]))
    pairs = page_table_questions(dataset)  # what teaches the static rankers' page table
    return build_banks(
        dataset, split, names, spec, cache_dir, progress=True, run=run, static_pairs=pairs
    )


def crowding_labels(
    dataset: Dataset, banks: dict, ranker: str, featurizer: BankFeaturizer
) -> dict[str, dict]:
    """Crowding status of every covered query's retrieved bank under ``ranker``."""
    labels = {}
    for qid, bank in banks.items():
        if not dataset.covered(qid):
            continue
        q_fields = featurizer.query_fields(dataset.queries[qid].text)
        found = {p: conflicts(q_fields, featurizer.passage_fields(p)) for p in bank.pids}
        relevant = {p for p, g in dataset.qrels[qid].items() if g > 0}
        labels[qid] = label_failure(bank.ranking(ranker), relevant, found, depth=len(bank.pids))
    return labels


def diagnose(
    dataset: Dataset,
    split: str,
    ranker: str,
    cache_dir: Path,
    out_dir: Path | None = None,
    pool_depth: int = DEFAULT_BANK_SIZE,
    config: StressConfig | None = None,
    run: dict | None = None,
    first_stage: str = "auto",
) -> dict:
    """Run every diagnostic for ``ranker`` on banks of ``first_stage``; with ``out_dir``, write
    ``report.json``, ``summary.md``, the figures and ``crowding_labels.jsonl``."""
    config = config or StressConfig()
    started = time.perf_counter()
    dataset.require_covered("diagnose")
    sim = config.similarity_ranker
    pools = BankSpec(size=pool_depth, mode="injected", first_stage=first_stage)
    injected = _banks(dataset, split, ranker, pools, cache_dir, sim, run)
    retrieved = _banks(
        dataset,
        split,
        ranker,
        BankSpec(size=DEFAULT_BANK_SIZE, mode="retrieved", first_stage=first_stage),
        cache_dir,
        sim,
        run,
    )
    built = time.perf_counter()
    featurizer = BankFeaturizer(corpus_extractor(dataset.passages), dataset.passages)
    labels = crowding_labels(dataset, retrieved.banks, ranker, featurizer)
    covered = {q: b for q, b in retrieved.banks.items() if dataset.covered(q)}
    report = {
        "dataset": dataset.name,
        "split": split,
        "ranker": ranker,
        "pool_depth": pool_depth,
        "first_stage": BankSpec(first_stage=first_stage).stage(dataset),
        "stress": run_stress(dataset, injected.banks, ranker, featurizer, config),
        "failures": summarise_failures(labels),
        "off_target": off_target_shares(dataset, covered, ranker, featurizer),
        "near_duplicates": near_duplicates(dataset, covered, ranker, featurizer),
    }
    report["seconds"] = {
        "banks": round(built - started, 2),
        "diagnosis": round(time.perf_counter() - built, 2),
    }
    if out_dir is not None:
        write_outputs(report, labels, Path(out_dir))
    return report


def write_outputs(report: dict, labels: dict[str, dict], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))
    with (out_dir / LABELS_FILE).open("w") as f:
        for qid, label in labels.items():
            f.write(json.dumps({"qid": qid, **label}) + "\n")
    write_figures(report, out_dir)
    (out_dir / "summary.md").write_text(summary_markdown(report))


def _fmt(x: float) -> str:
    return "n/a" if x != x else f"{x:.3f}"


def _ci(ci: list[float]) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def summary_markdown(report: dict) -> str:
    """The report's headline tables as Markdown."""
    stress = report["stress"]
    lines = [
        f"# Crowding diagnosis: {report['dataset']} ({report['split']}), "
        f"ranker `{report['ranker']}`",
        "",
        f"Matched pools from the gold-injected first-stage bank of depth {report['pool_depth']}; "
        f"{stress['n_eligible']} covered queries eligible. Intervals: 95% cluster bootstrap over "
        "query groups (company / context).",
        "",
        "## Matched-pool stress test (Recall@10; delta = incompatible - compatible)",
        "",
        "| variant | distractors | queries (dropped) | compatible | incompatible | delta [95% CI] "
        "| nDCG@10 delta | gold rank shift |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, sizes in stress["variants"].items():
        for size, row in sizes.items():
            if not row["n_queries"]:
                lines.append(f"| {name} | {size} | 0 ({row['n_dropped']}) | | | | | |")
                continue
            r, n = row["recall@10"], row["ndcg@10"]
            lines.append(
                f"| {name} | {size} | {row['n_queries']} ({row['n_dropped']}) | "
                f"{_fmt(r['compatible'])} | {_fmt(r['incompatible'])} | {r['delta']:+.3f} "
                f"{_ci(r['delta_ci95'])} | {n['delta']:+.3f} | {row['gold_rank_shift']:+.2f} |"
            )
    lines += ["", "## Covariate balance (standardised mean differences, primary matching)", ""]
    covs = stress["covariates"]
    lines.append("| | " + " | ".join(covs) + " |")
    lines.append("|---|" + "---|" * len(covs))
    before = stress["balance_before_matching"]
    lines.append(
        "| before matching | " + " | ".join(_fmt(before.get(c, float("nan"))) for c in covs) + " |"
    )
    for size, row in stress["variants"]["primary"].items():
        if row.get("balance_smd"):
            lines.append(
                f"| matched, {size} | "
                + " | ".join(_fmt(row["balance_smd"][c]) for c in covs)
                + " |"
            )
    return "\n".join(lines + _retrieval_lines(report))


def _retrieval_lines(report: dict) -> list[str]:
    """The report's crowded failures, top-k composition and near-duplicate lines."""
    f = report["failures"]
    lines = [
        "",
        "## Crowded failures in ordinary retrieval (retrieved banks, top-100)",
        "",
        f"- queries: {f['n_queries']}; top-10 failures: {f['top10_failures']} "
        f"({_fmt(f['share_failures'])})",
        f"- orderable failures (evidence at 11-100): {f['orderable_failures']} "
        f"({_fmt(f['share_orderable_of_failures'])} of failures)",
        f"- crowded failures: {f['crowded_failures']} ({_fmt(f['share_crowded_of_orderable'])} of "
        "orderable failures)",
        f"- no evidence in the top 100: {f['absent_failures']}",
        f"- crowded, by primary conflict field: {f['crowded_by_primary_field']}",
        f"- crowded, fields whose conflicts alone suffice: {f['crowded_by_sufficient_field']}",
        f"- per-query labels: `{LABELS_FILE}`",
        "",
        "## Top-k composition (retrieved banks)",
        "",
        "The share of candidates whose period (entity) conflicts with the one the question "
        "states, by the extractor's fields (no label read): not `evaluate`'s off-period share, "
        "which compares with the gold passages' metadata.",
        "",
        "| field | queries | whole bank | "
        + " | ".join(f"top-{k}" for k in report["off_target"]["period"]["top_k"])
        + " |",
        "|---|---|---|" + "---|" * len(report["off_target"]["period"]["top_k"]),
    ]
    for name, row in report["off_target"].items():
        lines.append(
            f"| off-{name} | {row['n_queries']} | {_fmt(row['bank'])} | "
            + " | ".join(_fmt(v) for v in row["top_k"].values())
            + " |"
        )
    d = report["near_duplicates"]
    lines += [
        "",
        f"Near duplicates (TF-IDF cosine >= {d['near_duplicate_cosine']} or identical text, "
        f"another filing of the same company): {_fmt(d['share_with_twin'])} of bank candidates "
        "have one; "
        f"the gold is outranked by its own twin in {d['gold_outranked_by_own_twin']} of "
        f"{d['n_queries_with_gold']} queries with gold in the bank.",
        "",
        "Figures: `recall_vs_pool.png`, `typed_deltas.png`, `failures.png`, `off_target.png`.",
        "",
    ]
    return lines
