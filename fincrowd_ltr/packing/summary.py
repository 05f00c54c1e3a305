"""The packing report as Markdown tables (``summary.md`` and the README section)."""

from __future__ import annotations


def _cell(stat: dict | None) -> str:
    if not stat or not stat["n"]:
        return "-"
    lo, hi = stat["ci95"]
    return f"{stat['mean']:.3f} [{lo:.3f}, {hi:.3f}] (n={stat['n']})"


def format_summary(report: dict) -> str:
    """Per system and pruning policy: evidence in context, off-period and near-duplicate token
    shares, largest packed prompt; per order: where the first gold passage sits; rank halves."""
    lines = [
        f"# Packing: {report['dataset']} ({report['split']}), budget {report['budget']:,} tokens "
        f"({report['tokenizer']}), top {report['depth']} candidates",
        "",
        report["answer_accuracy"],
        "",
        "| system | policy | gold in context | answer figures in context | all answer figures "
        "| multi-period/company | off-period tokens | near-dup tokens | max tokens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for system, policies in report["systems"].items():
        for policy, r in policies.items():
            lines.append(
                f"| {system} | {policy} | {_cell(r['gold_in_context'])} | "
                f"{_cell(r.get('answer_figures_in_context'))} | "
                f"{_cell(r.get('all_answer_figures_in_context'))} | "
                f"{_cell(r['gold_in_context_multi_period_or_company'])} | "
                f"{_cell(r['off_period_token_share'])} | {r['near_duplicate_token_share']:.3f} | "
                f"{r['max_packed_tokens']:,} |"
            )
    lines += [
        "",
        report["orders_note"],
        "",
        "| system | policy | order | first gold position (0 first, 1 last) | gold at an end |",
        "|---|---|---|---|---|",
    ]
    for system, policies in report["systems"].items():
        for policy, r in policies.items():
            for order, o in r["orders"].items():
                lines.append(
                    f"| {system} | {policy} | {order} | "
                    f"{_number(o['first_gold_relative_position'])} | "
                    f"{_number(o['gold_at_an_end_share'])} |"
                )
    lines += [
        "",
        "| system | questions | top-20 over budget | a rank half still over budget "
        "| largest top-20 tokens | token groups when split (mean / max) |",
        "|---|---|---|---|---|---|",
    ]
    for system, h in report["rank_halves"].items():
        g = h["token_groups_when_split"]
        groups = f"{_number(g['mean'], '.2f')} / {g['max']}" if g["max"] else "no split"
        lines.append(
            f"| {system} | {h['n_queries']} | {h['split_triggered']} | "
            f"{h['rank_half_exceeds_budget']} | {h['largest_top20_tokens']:,} | {groups} |"
        )
    return "\n".join(lines) + "\n"


def _number(value, spec: str = ".3f") -> str:
    """A figure, or a dash where there is none (no question had one: NaN or None)."""
    if value is None or value != value:
        return "-"
    return format(value, spec)
