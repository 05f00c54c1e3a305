"""Typed workflow reports: each workflow's JSON contract as a mapping that prints itself as its
table, saves as strict JSON and loads back (like ranx's ``Report``).

A report is a ``dict`` (``report["systems"]["gated:bm25"]["recall@10"]`` reads as before), so
every JSON contract is unchanged; ``print(report)`` shows the table the command line shows,
``report.save(path)`` writes it (NaN -> null, noted) and ``Kind.load(path)`` reads one back.
"""

from __future__ import annotations

import json
from pathlib import Path

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.evaluation.first_stage import format_ablation
from fincrowd_ltr.evaluation.report import format_table
from fincrowd_ltr.evaluation.results import Report, format_rows, write_report
from fincrowd_ltr.packing.summary import format_summary


class WorkflowReport(dict):
    """The base of every workflow's report: a mapping, a printed table, a file."""

    def table(self) -> str:
        """The plain-text table of this report."""
        return json.dumps(self, indent=2, default=str)

    def __str__(self) -> str:
        return self.table()

    def to_markdown(self) -> str:
        """The report for the docs (default: its table as a fenced block)."""
        return f"```text\n{self.table()}\n```"

    def to_dict(self) -> dict:
        return dict(self)

    def save(self, path: str | Path) -> Path:
        """Write the report as strict JSON (NaN and infinities as null, listed in a note)."""
        return write_report(Path(path), dict(self))

    @classmethod
    def load(cls, path: str | Path):
        """A report written by :meth:`save` (or a command's ``--out`` / ``--report``)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise DataError(f"{path}: no report there") from None
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: malformed JSON (line {err.lineno}: {err.msg})") from None
        if not isinstance(data, dict):
            raise DataError(f"{path}: a report is a JSON object; got {type(data).__name__}")
        return cls(data)


class EvaluationReport(WorkflowReport):
    """``evaluate``: base rankers, corrections and cascades on banks."""

    def table(self) -> str:
        return format_table(self)

    def to_markdown(self) -> str:
        return Report.from_dict(self).to_markdown()


class AblationReport(WorkflowReport):
    """``first_stage_ablation``: every first stage on group folds and the training-fold choice."""

    def table(self) -> str:
        return format_ablation(self)


class PackingReport(WorkflowReport):
    """``pack``: evidence in the packed context per order, budget and policy."""

    def table(self) -> str:
        return format_summary(self)


class CascadeReport(WorkflowReport):
    """``cascade``: reranker cascades with their training-fold choice and gated corrections."""

    def table(self) -> str:
        parts = [
            format_rows(
                f"{self['dataset']}: cascade n={self['n']} k={self['k']} "
                f"({self['n_queries']} questions)",
                self["systems"],
            ),
            f"chosen per fold on training folds: {self['chosen_per_fold']}",
        ]
        for name, block in self.get("gated", {}).items():
            parts.append(format_rows(f"\ngated correction on {name} top-k", block["systems"]))
        return "\n".join(parts)


class DiagnosisReport(WorkflowReport):
    """``diagnose``: matched compatible and incompatible pools, and crowded failures."""

    def table(self) -> str:
        lines = [
            f"{self['dataset']} ({self['split']}), ranker {self['ranker']}, first stage "
            f"{self['first_stage']}: matched pools (Recall@10)"
        ]
        for size, row in self["stress"]["variants"]["primary"].items():
            if not row["n_queries"]:
                lines.append(f"  {size:>3} distractors: no query could be matched "
                             f"({row['n_dropped']})")  # fmt: skip
                continue
            r = row["recall@10"]
            lo, hi = r["delta_ci95"]
            lines.append(
                f"  {size:>3} distractors: compatible {r['compatible']:.3f} incompatible "
                f"{r['incompatible']:.3f} delta {r['delta']:+.3f} [{lo:+.3f},{hi:+.3f}] "
                f"({row['n_queries']} queries, {row['n_dropped']} unmatched)"
            )
        f = self["failures"]
        lines.append(
            f"  retrieved banks: {f['top10_failures']}/{f['n_queries']} top-10 failures, "
            f"{f['orderable_failures']} orderable, {f['crowded_failures']} crowded, "
            f"{f['absent_failures']} absent from the top 100"
        )
        return "\n".join(lines)


class CrossEncoderReport(WorkflowReport):
    """``train_cross_encoder``: its banks, training settings, folds and final adapter."""

    def table(self) -> str:
        lines = [f"{self['dataset']}: LoRA cross-encoder over the {self['first_stage']} first "
                 f"stage's top {self['depth']}"]  # fmt: skip
        for fold in self.get("folds", []):
            lines.append(f"  {json.dumps(fold, default=str)}")
        if "final_groups" in self:
            lines.append(f"  final adapter trained on {self['final_groups']} groups")
        return "\n".join(lines)


class NestedReport(WorkflowReport):
    """``nested_cross_validation``: the whole system with every choice nested."""

    def table(self) -> str:
        lines = [
            f"{self['dataset']} {self['ranker']}: nested cross-validation, fold seed "
            f"{self['seed']}; first stage per outer fold: "
            + ", ".join(f["first_stage"] for f in self["folds"]),
            f"{'system':<10}{'R@10':>22}{'nDCG@10':>22}{'dR@10 [pct] [BCa]':>40}"
            f"{'regr. (orderable)':>20}{'crowded rep.':>14}",
        ]
        for name, row in self["systems"].items():
            lines.append(f"{name:<10}" + _nested_cells(row))
        n = self["systems"]["base"]
        lines.append(f"{n['n']} held-out covered questions, {n['n_groups']} groups")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        lines = [
            "| system | R@10 | nDCG@10 | delta R@10 [pct] [BCa] | regression (orderable) |",
            "|---|---|---|---|---|",
        ]
        for name, row in self["systems"].items():
            cells = [f"{row[m]:.3f} [{row['ci95'][m][0]:.3f}, {row['ci95'][m][1]:.3f}]"
                     for m in ("recall@10", "ndcg@10")]  # fmt: skip
            delta = regr = ""
            if "delta" in row:
                p, b = row["delta_ci95"]["recall@10"], row["delta_bca95"]["recall@10"]
                delta = (f"{row['delta']['recall@10']:+.3f} [{p[0]:+.3f}, {p[1]:+.3f}] "
                         f"[{b[0]:+.3f}, {b[1]:+.3f}]")  # fmt: skip
                regr = f"{row['regression_rate_orderable']:.3f} of {row['n_orderable']}"
            lines.append(f"| {name} | {cells[0]} | {cells[1]} | {delta} | {regr} |")
        return "\n".join(lines)


def _nested_cells(row: dict) -> str:
    cells = "".join(
        f"{row[m]:.3f} [{row['ci95'][m][0]:.3f},{row['ci95'][m][1]:.3f}]".rjust(22)
        for m in ("recall@10", "ndcg@10")
    )
    if "delta" not in row:
        return cells
    p, b = row["delta_ci95"]["recall@10"], row["delta_bca95"]["recall@10"]
    d = row["delta"]["recall@10"]
    delta = f"{d:+.3f} [{p[0]:+.3f},{p[1]:+.3f}] [{b[0]:+.3f},{b[1]:+.3f}]"
    regr = f"{row['regression_rate_orderable']:.3f} of {row['n_orderable']}"
    rep = f"{row['crowded_repaired']}/{row['crowded_failures']}"
    return cells + f"{delta:>40}{regr:>20}{rep:>14}"


__all__ = [
    "AblationReport",
    "CascadeReport",
    "CrossEncoderReport",
    "DiagnosisReport",
    "EvaluationReport",
    "NestedReport",
    "PackingReport",
    "WorkflowReport",
]
