"""Typed results: a system's metrics with intervals and paired deltas, and a report of systems.

``SystemResult.to_dict()`` and ``Report.to_dict()`` keep the documented JSON contract of
``fincrowd evaluate --out``: ``{"dataset", "split", "bank_mode", "n_queries", "n_covered",
"bank_size", "systems": {name: {"recall@10", "recall@100", "ndcg@10", "mrr", "ci95", "n",
"regression_rate", ...}}}``. ``Report.save`` writes strict JSON: a NaN becomes null and a note
says where.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fincrowd_ltr.data.metadata import passage_periods
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.metrics import METRICS, bootstrap_ci, per_query

METRIC_NAMES = tuple(METRICS)


@dataclass
class SystemResult:
    """One system over a set of questions (paired with a base system when ``delta`` is set)."""

    n: int
    metrics: dict[str, float]
    ci95: dict[str, list[float]]
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    delta: dict[str, float] | None = None
    delta_ci95: dict[str, list[float]] | None = None
    regression_rate: float | None = None  # share of all n questions whose nDCG@10 fell
    improvement_rate: float | None = None
    # among the n_orderable questions with a relevant candidate in the bank (the others can
    # neither regress nor improve): the rates every target and the gate's cap use
    n_orderable: int | None = None
    regression_rate_orderable: float | None = None
    improvement_rate_orderable: float | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out: dict = {"n": self.n, **self.metrics, "ci95": self.ci95}
        if self.delta is not None:
            out.update(
                delta=self.delta,
                delta_ci95=self.delta_ci95,
                regression_rate=self.regression_rate,
                improvement_rate=self.improvement_rate,
                n_orderable=self.n_orderable,
                regression_rate_orderable=self.regression_rate_orderable,
                improvement_rate_orderable=self.improvement_rate_orderable,
            )
        out.update(self.extra)
        out["per_query"] = self.per_query
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SystemResult:
        data = dict(data)
        known = {
            "n",
            "ci95",
            "per_query",
            "delta",
            "delta_ci95",
            "regression_rate",
            "improvement_rate",
            "n_orderable",
            "regression_rate_orderable",
            "improvement_rate_orderable",
            *METRIC_NAMES,
        }
        return cls(
            n=data.get("n", 0),
            metrics={m: data[m] for m in METRIC_NAMES if m in data},
            ci95=data.get("ci95", {}),
            per_query=data.get("per_query", {}),
            delta=data.get("delta"),
            delta_ci95=data.get("delta_ci95"),
            regression_rate=data.get("regression_rate"),
            improvement_rate=data.get("improvement_rate"),
            n_orderable=data.get("n_orderable"),
            regression_rate_orderable=data.get("regression_rate_orderable"),
            improvement_rate_orderable=data.get("improvement_rate_orderable"),
            extra={k: v for k, v in data.items() if k not in known},
        )

    def __getitem__(self, key: str):  # dict-style reads of the JSON contract
        return self.to_dict()[key]


def system_result(
    dataset: Dataset,
    rankings: dict[str, list[str]],
    qids: list[str],
    base: dict[str, list[str]] | None = None,
) -> SystemResult:
    """Metrics of ``rankings`` over ``qids`` with 95% cluster-bootstrap intervals (groups:
    companies, contexts); with ``base``, paired deltas and regression/improvement rates."""
    groups = [dataset.queries[q].group for q in qids]
    rows = {q: per_query(rankings[q], dataset.qrels[q]) for q in qids}
    metrics, ci = {}, {}
    for name in METRIC_NAMES:
        values = np.array([rows[q][name] for q in qids], dtype=np.float64)
        metrics[name] = float(values.mean()) if len(values) else float("nan")
        ci[name] = list(bootstrap_ci(values, groups=groups))
    result = SystemResult(len(qids), metrics, ci, rows)
    if base is not None:
        base_rows = {q: per_query(base[q], dataset.qrels[q]) for q in qids}
        result.delta, result.delta_ci95 = {}, {}
        for name in METRIC_NAMES:
            d = np.array([rows[q][name] - base_rows[q][name] for q in qids])
            result.delta[name] = float(d.mean()) if len(d) else float("nan")
            result.delta_ci95[name] = list(bootstrap_ci(d, groups=groups))
        nd = np.array([rows[q]["ndcg@10"] - base_rows[q]["ndcg@10"] for q in qids])
        result.regression_rate = _share(nd < -1e-12)
        result.improvement_rate = _share(nd > 1e-12)
        orderable = np.array([any(p in dataset.qrels[q] for p in base[q]) for q in qids], bool)
        result.n_orderable = int(orderable.sum())
        result.regression_rate_orderable = _share(nd[orderable] < -1e-12)
        result.improvement_rate_orderable = _share(nd[orderable] > 1e-12)
    return result


def _share(flags: np.ndarray) -> float:
    return float(flags.mean()) if len(flags) else float("nan")


def is_missing(value) -> bool:
    """Whether there is no figure (no question had one, or one group gave no interval): NaN or
    None."""
    return value is None or value != value


def format_number(value, spec: str = ".3f") -> str:
    """A figure, or a dash where there is none (:func:`is_missing`)."""
    return "-" if is_missing(value) else format(value, spec)


def compare(
    dataset: Dataset, system: dict[str, list[str]], base: dict[str, list[str]], qids: list[str]
) -> dict:
    """``system_result(...).to_dict()`` paired with ``base`` (the report's JSON form)."""
    return system_result(dataset, system, qids, base).to_dict()


def strict_json(value, path: str = "", notes: list[str] | None = None):
    """``value`` with every NaN or infinity replaced by None (noted in ``notes``)."""
    if isinstance(value, float) and not math.isfinite(value):
        if notes is not None:
            notes.append(path or "(root)")
        return None
    if isinstance(value, dict):
        return {
            k: strict_json(v, f"{path}.{k}" if path else str(k), notes) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [strict_json(v, f"{path}[{i}]", notes) for i, v in enumerate(value)]
    if isinstance(value, np.floating | np.integer):
        return strict_json(value.item(), path, notes)
    if hasattr(value, "to_dict"):
        return strict_json(value.to_dict(), path, notes)
    return value


def write_report(path: Path, report: dict) -> Path:
    """Write a report as strict JSON (NaN -> null, with a note listing the fields)."""
    notes: list[str] = []
    clean = strict_json(report, "", notes)
    if notes:
        clean.setdefault("notes", []).append(
            f"{len(notes)} undefined value(s) written as null (e.g. {', '.join(notes[:3])})"
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(clean, indent=1, allow_nan=False))
    tmp.replace(path)
    return path


@dataclass
class Report:
    """A report of systems on one dataset: the JSON contract plus typed access."""

    dataset: str
    systems: dict[str, SystemResult]
    fields: dict = field(default_factory=dict)  # split, bank_mode, n_queries, n_covered, ...
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            **self.fields,
            "systems": {k: v.to_dict() for k, v in self.systems.items()},
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Report:
        data = dict(data)
        try:
            systems = {k: SystemResult.from_dict(v) for k, v in data.pop("systems").items()}
            dataset = data.pop("dataset")
        except (KeyError, AttributeError) as err:
            raise DataError(f"not a fincrowd report (missing {err})") from None
        notes = data.pop("notes", [])
        return cls(dataset, systems, data, notes)

    def save(self, path: Path) -> Path:
        return write_report(path, self.to_dict())

    @classmethod
    def load(cls, path: Path) -> Report:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: malformed JSON ({err.msg})") from None

    def to_markdown(self) -> str:
        """The systems as a Markdown table with intervals and paired deltas."""
        lines = [
            f"**{self.dataset}** ({self.fields.get('n_covered', '?')} covered questions; 95% "
            "cluster-bootstrap intervals)",
            "",
            "| system | R@10 | R@100 | nDCG@10 | MRR | ΔR@10 | regression |",
            "|---|---|---|---|---|---|---|",
        ]

        def cell(s: SystemResult, m: str) -> str:
            lo, hi = s.ci95.get(m, [float("nan")] * 2)
            return f"{s.metrics[m]:.3f} [{format_number(lo)}, {format_number(hi)}]"

        for name, s in self.systems.items():
            delta = f"{s.delta['recall@10']:+.3f}" if s.delta else ""
            reg = f"{s.regression_rate:.3f}" if s.regression_rate is not None else ""
            lines.append(
                f"| {name} | {cell(s, 'recall@10')} | {cell(s, 'recall@100')} | "
                f"{cell(s, 'ndcg@10')} | {s.metrics['mrr']:.3f} | {delta} | {reg} |"
            )
        return "\n".join(lines)


def ideal_order(dataset: Dataset, ranking: list[str], qid: str) -> list[str]:
    """The best order of a bank: its relevant candidates first (by grade, then the ranking's
    order), the rest after. Uses the labels: the true upper bound of any reordering."""
    rels = dataset.qrels.get(qid, {})
    return sorted(ranking, key=lambda p: -rels.get(p, 0))


def gold_metadata_filter(dataset: Dataset, ranking: list[str], qid: str) -> list[str]:
    """A ranking with every candidate removed whose filing is another company's than the gold
    filings' or shares none of their periods (uses gold metadata: a reference row, not a system
    and not an upper bound: a reordering can beat it; called "metadata_oracle" before 0.3)."""
    gold = [dataset.passages[p] for p in dataset.qrels.get(qid, {})]
    companies = {p.company for p in gold} - {None}
    periods = frozenset().union(*(passage_periods(p) for p in gold))

    def conflicts(p) -> bool:
        if companies and p.company is not None and p.company not in companies:
            return True
        return bool(periods) and p.period is not None and not passage_periods(p) & periods

    return [pid for pid in ranking if not conflicts(dataset.passages[pid])]
