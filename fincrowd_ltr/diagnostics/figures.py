"""PNG figures of a diagnosis report (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fincrowd_ltr.diagnostics.stress import TYPED_FIELDS  # noqa: E402


def _errors(value: float, ci: list[float]) -> list[float]:
    return [value - ci[0], ci[1] - value]


def recall_vs_pool(report: dict, path: Path) -> None:
    """Recall@10 against pool size, incompatible and compatible, with 95% intervals."""
    primary = report["stress"]["variants"]["primary"]
    sizes = [s for s in primary if primary[s]["n_queries"]]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for cond, style in (("compatible", "o-"), ("incompatible", "s--")):
        values = [primary[s]["recall@10"][cond] for s in sizes]
        errs = [
            _errors(v, primary[s]["recall@10"][f"{cond}_ci95"])
            for v, s in zip(values, sizes, strict=True)
        ]
        ax.errorbar(
            [int(s) for s in sizes],
            values,
            yerr=list(zip(*errs, strict=True)) if errs else None,
            fmt=style,
            capsize=3,
            label=cond,
        )
    for s in sizes:
        ax.annotate(f"n={primary[s]['n_queries']}", (int(s), 0.02), ha="center", fontsize=8)
    ax.set_xlabel("distractors in the pool")
    ax.set_ylabel("Recall@10")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{report['dataset']} / {report['ranker']}: matched pools")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def typed_deltas(report: dict, path: Path) -> None:
    """Recall@10 delta (incompatible minus compatible) per single-field intervention."""
    variants = report["stress"]["variants"]
    size = str(min(int(s) for s in variants["primary"]))
    labels, values, errs = [], [], []
    for name in TYPED_FIELDS:
        row = variants[f"typed:{name}"][size]
        if not row["n_queries"]:
            continue
        r = row["recall@10"]
        labels.append(f"{name}\n(n={row['n_queries']})")
        values.append(r["delta"])
        errs.append(_errors(r["delta"], r["delta_ci95"]))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if values:
        ax.bar(range(len(values)), values, yerr=list(zip(*errs, strict=True)), capsize=3)
        ax.set_xticks(range(len(values)), labels, fontsize=8)
    else:
        ax.text(0.5, 0.5, "no query has single-field pools", ha="center", transform=ax.transAxes)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_ylabel(f"Recall@10 delta ({size} distractors)")
    ax.set_title(f"{report['dataset']} / {report['ranker']}: typed interventions")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def failure_breakdown(report: dict, path: Path) -> None:
    """Queries by crowding status in ordinary retrieval."""
    f = report["failures"]
    parts = {
        "top-10 hit": f["n_queries"] - f["top10_failures"],
        "crowded": f["crowded_failures"],
        "orderable, not crowded": f["orderable_failures"] - f["crowded_failures"],
        "absent from top 100": f["absent_failures"],
    }
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.barh(
        list(parts), list(parts.values()), color=["tab:green", "tab:red", "tab:orange", "tab:gray"]
    )
    for i, v in enumerate(parts.values()):
        ax.text(v, i, f" {v}", va="center")
    ax.invert_yaxis()
    ax.set_xlabel("queries")
    ax.set_title(f"{report['dataset']} / {report['ranker']}: top-10 outcomes, retrieved banks")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def off_target(report: dict, path: Path) -> None:
    """Off-period and off-company share of the top-k against the whole bank."""
    shares = report["off_target"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, style in (("period", "o-"), ("entity", "s-")):
        row = shares[name]
        if not row["n_queries"]:
            continue
        ks = [int(k) for k in row["top_k"]]
        line = ax.plot(ks, list(row["top_k"].values()), style, label=f"{name}: top-k")[0]
        ax.axhline(row["bank"], color=line.get_color(), ls=":", label=f"{name}: whole bank")
    ax.set_xlabel("k")
    ax.set_ylabel("share conflicting with the question")
    ax.set_ylim(0, 1)
    ax.set_title(f"{report['dataset']} / {report['ranker']}: off-target top-k")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


FIGURES = {
    "recall_vs_pool.png": recall_vs_pool,
    "typed_deltas.png": typed_deltas,
    "failures.png": failure_breakdown,
    "off_target.png": off_target,
}


def write_figures(report: dict, out_dir: Path) -> list[Path]:
    paths = []
    for name, draw in FIGURES.items():
        draw(report, out_dir / name)
        paths.append(out_dir / name)
    return paths
