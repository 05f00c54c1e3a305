"""Scoring a saved correction on any banks: always-on residual and gated systems beside the base,
excluding the queries the checkpoint was trained or calibrated on."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.evaluation.correction import compare
from fincrowd_ltr.features import BankFeaturizer
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.model.checkpoint import domain_calibration, load_gate, load_residual
from fincrowd_ltr.model.gate import GateCalibration
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.training.data import make_examples
from fincrowd_ltr.training.gating import crowded_queries, gate_rows, gated_rankings, repair_rate

FALLBACKS = ("error", "identity")


def seen_queries(config: dict, dataset: Dataset, domain: str | None) -> set[str]:
    """Query ids of ``dataset`` the checkpoint trained on, or calibrated ``domain`` on."""
    seen: set[str] = set()
    training = config.get("training", {})
    if training.get("dataset") == dataset.name:
        seen |= set(training.get("query_ids", []))
    calibration = (config.get("gate") or {}).get("domains", {}).get(domain or "", {})
    if calibration.get("dataset") in (None, dataset.name):
        seen |= set(calibration.get("query_ids", []))
    return seen & set(dataset.queries)


def add_correction_systems(
    report: dict,
    dataset: Dataset,
    bankset: BankSet,
    checkpoint: Path,
    rankers: list[str],
    domain: str | None = None,
    fallback: str = "error",
) -> None:
    """Add ``residual:<ranker>`` (always on) and, with ``domain``, ``gated:<ranker>`` to a report,
    with paired deltas, regression/improvement rates, crowded-failure repair and gate openings."""
    scorer, config = load_residual(checkpoint)
    ranker = config["base_ranker"]
    if ranker not in rankers:
        raise DataError(
            f"{checkpoint}: residual was fitted for base ranker {ranker!r}; add it to --ranker"
        )
    seen = seen_queries(config, dataset, domain)
    qids = [
        q for q in dataset.queries if q in bankset.banks and dataset.covered(q) and q not in seen
    ]
    if not qids:
        raise DataError(f"{checkpoint}: every covered query was used to train or calibrate it")
    featurizer = BankFeaturizer(
        FieldExtractor.from_passages(dataset.passages.values()), dataset.passages
    )
    examples = make_examples(dataset, bankset, ranker, featurizer, qids)
    rows = gate_rows(dataset, featurizer, scorer, examples)
    systems = {"residual": rows.residual}
    opened: dict[str, bool] = {}
    if domain is not None:
        gate, domains = load_gate(checkpoint)
        if domain in domains or fallback == "error":
            calibration = domain_calibration(domains, domain, checkpoint)
        else:  # identity fallback: a closed gate, the base order everywhere
            calibration = GateCalibration(1.0, float("inf"), 0.0, 0, 0.0, 0.0, 0.0)
        systems["gated"], opened = gated_rankings(rows, gate, calibration)
    labels = crowded_queries(dataset, examples) if bankset.mode == "retrieved" else {}
    # with queries left out, the base row the corrections are paired with is restricted too
    compared = {"base": rows.base, **systems} if seen else systems
    for name, rankings in compared.items():
        system = compare(dataset, rankings, rows.base, rows.qids)
        if labels:
            repaired, crowded = repair_rate(dataset, labels, rankings)
            system["crowded_repaired"], system["crowded_failures"] = repaired, crowded
            system["repair_rate"] = repaired / crowded if crowded else float("nan")
        if name == "gated":
            system["gate_open_share"] = float(np.mean([opened[q] for q in rows.qids]))
            system["domain"] = domain
        key = f"{name}:{ranker}" + (":unseen" if name == "base" else "")
        report["systems"][key] = system
    if seen:
        report.setdefault("notes", []).append(
            f"{len(seen)} queries used to train or calibrate {checkpoint} are excluded from the "
            f"correction rows ({len(rows.qids)} scored)"
        )
