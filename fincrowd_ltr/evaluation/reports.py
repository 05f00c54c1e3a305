"""Typed workflow reports: each workflow's JSON contract as a mapping that prints itself as its
table, saves as strict JSON and loads back (like ranx's ``Report``).

A report is a ``dict`` (``report["systems"]["gated:bm25"]["recall@10"]`` reads as before), so
every JSON contract is unchanged; ``print(report)`` shows the table the command line shows,
``report.save(path)`` writes it (NaN -> null, noted) and ``Kind.load(path)`` reads one back.
"""

from __future__ import annotations

import json
from pathlib import Path

from fincrowd_ltr.data.schema import SYNTHETIC_SUFFIX, DataError
from fincrowd_ltr.evaluation.results import Report, is_missing, write_report
from fincrowd_ltr.evaluation.results import format_number as _number


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
        report = cls(data)
        try:  # another workflow's report lacks what this one's table reads
            report.table()
        except KeyError as err:
            raise DataError(
                f"{path}: not a report {cls.__name__} can read (no {err}); load it with the "
                "class of the workflow that wrote it, or WorkflowReport.load for any report"
            ) from None
        return report


class EvaluationReport(WorkflowReport):
    """``evaluate``: base rankers, corrections and cascades on banks."""

    def table(self) -> str:
        deep = f"R@{min(100, self['bank_size'])}"  # recall@100 of a smaller bank: all of it
        lines = [
            f"{self['dataset']} split={self['split']} banks={self['bank_mode']} "
            f"(size {self['bank_size']}"
            + (f", first stage {self['first_stage']}" if self.get("first_stage") else "")
            + f"): {self['n_covered']} covered of "
            f"{self['n_queries']} queries ({self['n_groups']} groups; 95% cluster-bootstrap CIs)",
            f"{'system':<22}{'R@10':>22}{deep:>22}{'nDCG@10':>22}{'MRR':>8}",
        ]
        for title, key in (("", "systems"), (" (expanded rel.)", "systems_expanded_relevance")):
            for system, stats in self.get(key, {}).items():
                cells = "".join(
                    f"{_cell(stats, m):>22}" for m in ("recall@10", "recall@100", "ndcg@10")
                )
                lines.append(f"{system + title:<22}{cells}{stats['mrr']:>8.3f}")
        for system, stats in self.get("systems", {}).items():
            if "delta" not in stats:
                continue
            lo, hi = stats["delta_ci95"]["recall@10"]
            extra = ""
            if "repair_rate" in stats:
                extra += (
                    f", repaired {stats['crowded_repaired']}/{stats['crowded_failures']} crowded"
                )
            if "gate_open_share" in stats:
                extra += f", gate opened on {stats['gate_open_share']:.3f}"
            lines.append(
                f"{system}: {stats['n']} queries, R@10 delta {stats['delta']['recall@10']:+.3f} "
                f"{_interval(lo, hi, '+.3f')}, nDCG@10 delta {stats['delta']['ndcg@10']:+.3f}, "
                f"regression {orderable_summary(stats)}, improvement "
                f"{stats['improvement_rate']:.3f}{extra}"
            )
        if self.get("excluded", {}).get("n_excluded"):
            ex = self["excluded"]
            why = ", ".join(f"{n} {role}" for role, n in ex["by_role"].items())
            lines.append(
                f"correction rows leave out {ex['n_excluded']} questions the checkpoint saw "
                "(trained, validated or calibrated on, any domain; matched by content, question "
                "text and gold evidence, or by id and text; by role, where a question may hold "
                f"several: {why}); {ex['n_scored']} scored"
            )
        lines += [f"warning: {message}" for message in self.get("warnings", [])]
        lines += [f"note: {message}" for message in self.get("notes", [])]
        if self.get("n_groups", 2) < 2:
            lines.append("note: one group only: a cluster bootstrap states no interval (nan)")
        for system, shares in self.get("contamination@10", {}).items():
            off, other = (_number(shares[k]) for k in ("off_period", "other_company"))
            lines.append(f"{system}: top-10 off-period share {off}, other-company share {other}")
        if self.get("contamination@10"):
            unread = [why for k, why in _UNREAD_SHARES.items() if _all_unread(self, k)]
            lines += [f"note: {why}" for why in unread]
        return "\n".join(lines)

    def to_markdown(self) -> str:
        return Report.from_dict(self).to_markdown()


# why a top-10 share reads "-" on every system
_UNREAD_SHARES = {
    "off_period": "off-period share -: no gold passage, or no ranked passage, gives a period "
    "(passage metadata.period)",
    "other_company": "other-company share -: no question gives its company (metadata.company in "
    "queries.jsonl) or no ranked passage gives one",
}


def _all_unread(report: dict, share: str) -> bool:
    values = [s[share] for s in report["contamination@10"].values()]
    return all(v is None or v != v for v in values)  # None or nan


class AblationReport(WorkflowReport):
    """``first_stage_ablation``: every first stage on group folds and the training-fold choice."""

    def table(self) -> str:
        lines = [
            f"{self['dataset']}: first stage over the whole corpus, top {self['depth']}, "
            f"{self['n_covered']} covered questions, {self['n_groups']} groups "
            "(95% cluster-bootstrap CIs)",
            f"{'first stage':<30}{'R@100':>22}{'R@10':>22}{'nDCG@10':>22}{'dR@100 vs bm25':>26}",
        ]
        for name, s in self["variants"].items():
            cells = "".join(f"{_cell(s, m):>22}" for m in ("recall@100", "recall@10", "ndcg@10"))
            delta = ""
            if "delta_recall@100_vs_bm25" in s:
                lo, hi = s["delta_recall@100_ci95"]
                delta = f"{s['delta_recall@100_vs_bm25']:+.3f} {_interval(lo, hi, '+.3f')}"
            lines.append(f"{name:<30}{cells}{delta:>26}")
        lines.append(f"chosen per fold (on its training folds): {self['chosen_per_fold']}")
        lines.append(f"chosen on all covered questions: {self['chosen_on_all']}")
        return "\n".join(lines)


class PackingReport(WorkflowReport):
    """``pack``: evidence in the packed context per order, budget and policy (its table is the
    Markdown of ``summary.md``)."""

    def table(self) -> str:
        """Per system and pruning policy: evidence in context, off-period and near-duplicate token
        shares, largest packed prompt; per order: where the first gold passage sits; rank halves."""
        lines = [
            f"# Packing: {self['dataset']} ({self['split']}), budget {self['budget']:,} tokens "
            f"({self['tokenizer']}), top {self['depth']} candidates",
            "",
            self["answer_accuracy"],
            "",
            *([self["questions_note"], ""] if self.get("questions_note") else []),
            "| system | policy | gold in context | gold in part only | answer figures in context "
            "| all answer figures | multi-period/company | off-period tokens | near-dup tokens "
            "| max tokens |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for system, policies in self["systems"].items():
            for policy, r in policies.items():
                lines.append(
                    f"| {system} | {policy} | {_share(r['gold_in_context'])} | "
                    f"{_number(r.get('gold_partly_in_context'))} | "
                    f"{_share(r.get('answer_figures_in_context'))} | "
                    f"{_share(r.get('all_answer_figures_in_context'))} | "
                    f"{_share(r['gold_in_context_multi_period_or_company'])} | "
                    f"{_share(r['off_period_token_share'])} | "
                    f"{r['near_duplicate_token_share']:.3f} | "
                    f"{r['max_packed_tokens']:,} |"
                )
        lines += [
            "",
            self["orders_note"],
            "",
            "| system | policy | order | first gold position (0 first, 1 last) | gold at an end |",
            "|---|---|---|---|---|",
        ]
        empty = 0
        for system, policies in self["systems"].items():
            for policy, r in policies.items():
                for order, o in r["orders"].items():
                    position, end = o["first_gold_relative_position"], o["gold_at_an_end_share"]
                    if is_missing(position) and is_missing(end):
                        empty += 1  # no question's gold reached this context: nothing to place
                        continue
                    lines.append(
                        f"| {system} | {policy} | {order} | {_number(position)} | {_number(end)} |"
                    )
        if empty:
            lines += [
                "",
                f"{empty} system, policy and order rows left out: no question's gold passage "
                "is in those contexts, so there is no position to give",
            ]
        lines += [
            "",
            "| system | questions | top-20 over budget | a rank half still over budget "
            "| largest top-20 tokens | token groups when split (mean / max) |",
            "|---|---|---|---|---|---|",
        ]
        for system, h in self["rank_halves"].items():
            g = h["token_groups_when_split"]
            groups = f"{_number(g['mean'], '.2f')} / {g['max']}" if g["max"] else "no split"
            lines.append(
                f"| {system} | {h['n_queries']} | {h['split_triggered']} | "
                f"{h['rank_half_exceeds_budget']} | {h['largest_top20_tokens']:,} | {groups} |"
            )
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        return self.table()


class CascadeReport(WorkflowReport):
    """``cascade``: reranker cascades with their training-fold choice and gated corrections."""

    def table(self) -> str:
        parts = [
            _paired_rows(
                f"{self['dataset']}: cascade n={self['n']} k={self['k']} "
                f"({self['n_queries']} questions)",
                self["systems"],
            ),
            f"chosen per fold on training folds: {self['chosen_per_fold']}",
        ]
        trained = self.get("correction_train_mode")
        on = f" (residual trained on {trained} banks)" if trained else ""
        for name, block in self.get("gated", {}).items():
            parts.append(_paired_rows(f"\ngated correction on {name} top-k{on}", block["systems"]))
        parts.extend(f"note: {note}" for note in self.get("notes", []))
        return "\n".join(parts)


class CrossValidationReport(WorkflowReport):
    """``fit_correction``'s held-out folds (the JSON form of ``CrossValReport``): the ungated
    rows per bank mode under ``modes``, the gated ones under ``gated``."""

    def table(self) -> str:
        name = f"{self['dataset']} {self['ranker']}"
        parts = []
        for mode, res in self["modes"].items():
            title = (
                f"\n{name}: held-out folds, {mode} banks "
                f"({res['n_queries']} questions, {res['n_groups']} groups)"
            )
            parts.append(_paired_rows(title, res))
        for mode, res in self.get("gated", {}).get("modes", {}).items():
            title = (
                f"\n{name}: gated correction, held-out folds, {mode} banks "
                f"(gate opened on {res['gate_open_share']:.3f})"
            )
            gated = {k: v for k, v in res.items() if k.startswith("gated")}
            parts.append(_paired_rows(title, gated))
        if self["dataset"].endswith(SYNTHETIC_SUFFIX):
            gated = ", each round's gate calibrated on them" if self.get("gated") else ""
            parts.append(
                f"\nthese are synthetic questions{gated}: the rows say how well the templates' "
                "questions are answered, not how yours will be (calibrate a domain on your "
                "labelled questions and `evaluate` on others)"
            )
        if self.get("synthetic_held_out"):
            parts.append("\n" + _label_free_line(self["synthetic_held_out"]))
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
                f"{r['incompatible']:.3f} delta {r['delta']:+.3f} {_interval(lo, hi, '+.3f')} "
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
            trained = self.get("final_trained_groups", self["final_groups"])
            lines.append(f"  final adapter trained on {trained} of {self['final_groups']} groups")
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
            cells = [f"{row[m]:.3f} {_interval(*row['ci95'][m], '.3f', ', ')}"
                     for m in ("recall@10", "ndcg@10")]  # fmt: skip
            delta = regr = ""
            if "delta" in row:
                p, b = row["delta_ci95"]["recall@10"], row["delta_bca95"]["recall@10"]
                delta = (f"{row['delta']['recall@10']:+.3f} {_interval(*p, '+.3f', ', ')} "
                         f"{_interval(*b, '+.3f', ', ')}")  # fmt: skip
                regr = f"{row['regression_rate_orderable']:.3f} of {row['n_orderable']}"
            lines.append(f"| {name} | {cells[0]} | {cells[1]} | {delta} | {regr} |")
        return "\n".join(lines)


def _cell(stats: dict, metric: str) -> str:
    lo, hi = stats["ci95"][metric]
    return f"{stats[metric]:.3f} {_interval(lo, hi)}"


def _paired_rows(title: str, systems: dict) -> str:
    """Paired rows (the dict form of :class:`SystemResult`): Recall@10 with the change against
    the base order and its 95% interval, nDCG@10, regression, crowded failures repaired."""
    lines = [title]
    for name, s in systems.items():
        if not isinstance(s, dict) or "delta" not in s:
            continue
        lo, hi = s["delta_ci95"]["recall@10"]
        extra = ""
        if s.get("crowded_failures"):
            extra = f"  repaired {s['crowded_repaired']}/{s['crowded_failures']} crowded"
        lines.append(
            f"  {name:<34} R@10 {s['recall@10']:.3f}  delta {s['delta']['recall@10']:+.3f} "
            f"{_interval(lo, hi, '+.3f')}  nDCG@10 {s['ndcg@10']:.3f}  regression "
            f"{orderable_summary(s)}{extra}"
        )
    return "\n".join(lines)


def orderable_summary(s: dict) -> str:
    """The regression rate among orderable questions (its denominator named), then overall."""
    if s.get("n_orderable") is None:
        return f"{s['regression_rate']:.3f}"
    rate = s["regression_rate_orderable"]
    shown = "-" if rate is None or rate != rate else f"{rate:.3f}"
    return f"{shown} of {s['n_orderable']} orderable ({s['regression_rate']:.3f} of all)"


def _share(stat: dict | None) -> str:
    if not stat or not stat["n"]:
        return "-"
    lo, hi = stat["ci95"]
    return f"{stat['mean']:.3f} {_interval(lo, hi, '.3f', ', ')} (n={stat['n']})"


def _label_free_line(check: dict) -> str:
    """The fit's label-free check (:mod:`~fincrowd_ltr.evaluation.label_free`) in one line."""
    if not check["n_orderable"]:
        return (
            f"label-free check: none of the {check['n_questions']:,} held-out synthetic "
            "questions has a relevant page in its bank"
        )
    return (
        f"label-free check: the always-on correction on {check['n_orderable']:,} orderable "
        f"synthetic questions of {check['n_groups']} held-out companies (no fit of their round "
        f"trained on them): nDCG@10 gain {_number(check['ndcg@10_gain'], '+.3f')} "
        f"{_interval(*check['ci95'], '+.3f', ', ')}, improved {_number(check['improved'], '.1%')}, "
        f"harmed {_number(check['harmed'], '.1%')}"
    )


def _interval(lo, hi, spec: str = ".3f", sep: str = ",") -> str:
    """``[lo,hi]``, each a dash where there is none (one group: no interval; NaN or None)."""
    return f"[{_number(lo, spec)}{sep}{_number(hi, spec)}]"


def _nested_cells(row: dict) -> str:
    cells = "".join(_cell(row, m).rjust(22) for m in ("recall@10", "ndcg@10"))
    if "delta" not in row:
        return cells
    p, b = row["delta_ci95"]["recall@10"], row["delta_bca95"]["recall@10"]
    d = row["delta"]["recall@10"]
    delta = f"{d:+.3f} {_interval(*p, '+.3f')} {_interval(*b, '+.3f')}"
    regr = f"{row['regression_rate_orderable']:.3f} of {row['n_orderable']}"
    rep = f"{row['crowded_repaired']}/{row['crowded_failures']}"
    return cells + f"{delta:>40}{regr:>20}{rep:>14}"


__all__ = [
    "AblationReport",
    "CascadeReport",
    "CrossEncoderReport",
    "CrossValidationReport",
    "DiagnosisReport",
    "EvaluationReport",
    "NestedReport",
    "PackingReport",
    "WorkflowReport",
]
