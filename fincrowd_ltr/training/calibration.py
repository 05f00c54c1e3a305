"""Gate training rows and per-domain calibration: what the gate learns from and how a domain's
temperature and threshold are fitted. A calibration is returned, never stored behind the caller's
back: ``model.with_domain(name, calibration)`` gives the calibrated model."""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.defaults import DEFAULT_DELTA, DEFAULT_REGRESSION_CAP, MIN_CALIBRATION_QUERIES
from fincrowd_ltr.features.examples import BankExample
from fincrowd_ltr.metrics import ndcg_at_k
from fincrowd_ltr.model import checkpoint as io
from fincrowd_ltr.model.calibration import GateCalibration, calibrate
from fincrowd_ltr.model.correction import GatedCorrection
from fincrowd_ltr.model.gate_features import gate_features_from_scores


def gate_rows(
    model: GatedCorrection, dataset: Dataset, examples: list[BankExample]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(qids, gate features, nDCG@10 gains of the corrected over the base order)`` of the
    covered banks: the gate's training and calibration data."""
    covered = {e.qid: e for e in examples if dataset.covered(e.qid)}
    scored = model.score_examples(dataset, list(covered.values()))
    featurizer = model.featurizer(dataset.passages)
    qids, feats, gains = [], [], []
    for qid, r in scored.items():
        d, e = r.decision, covered[qid]
        observed = featurizer.query_fields(dataset.queries[qid].text, r.pids).observed()
        feats.append(
            gate_features_from_scores(
                e.features, e.base, observed, d.corrected, d.normalised_base, d.standardised
            )
        )
        qrels = dataset.qrels[qid]
        gains.append(
            ndcg_at_k(r.corrected_ranking, qrels, 10) - ndcg_at_k(r.base_ranking, qrels, 10)
        )
        qids.append(qid)
    width = len(feats[0]) if feats else 0
    return qids, np.array(feats, dtype=np.float64).reshape(len(qids), width), np.array(gains)


def orderable_rows(examples: list[BankExample], qids: list[str]) -> np.ndarray:
    """Which of ``qids`` have a relevant candidate in their bank (the questions a reordering
    can change; the others can neither regress nor improve)."""
    support = {e.qid: e.has_support for e in examples}
    return np.array([support[q] for q in qids], dtype=bool)


def fit_calibration(
    model: GatedCorrection,
    dataset: Dataset,
    examples: list[BankExample],
    cap: float = DEFAULT_REGRESSION_CAP,
    min_queries: int = MIN_CALIBRATION_QUERIES,
    cross_fitted: list[tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] | None = None,
    *,
    delta: float = DEFAULT_DELTA,
    method: str = "ltt",
) -> GateCalibration:
    """A domain's temperature and threshold fitted on labelled banks the correction never
    trained on (training questions are refused, by content), keeping the regression cap among
    orderable questions by ``method`` with ``delta`` (:mod:`fincrowd_ltr.model.calibration`).

    ``cross_fitted`` adds training questions' ``(qids, gate logits, gains, orderable)`` rows, each
    scored by a residual and a gate trained without them (``fit_correction``'s pooled
    calibration); the calibration still records only ``examples``' questions as its own."""
    if not model.has_gate:
        raise DataError(f"this checkpoint has no identity gate to calibrate ({io.NO_GATE})")
    trained = model.seen(dataset, calibration_of=None) & {e.qid for e in examples}
    if trained:
        raise DataError(
            f"{len(trained)} calibration queries were training queries (e.g. "
            f"{sorted(trained)[:3]}); calibrate on queries the correction never saw"
            + model.summary.calibrate_hint()
        )
    qids, feats, gains = gate_rows(model, dataset, examples)
    logits = np.array([model.runtime.gate_logit(f) for f in feats])
    orderable = orderable_rows(examples, qids)
    rows = cross_fitted or []
    calibration = calibrate(
        np.concatenate([logits, *(row[1] for row in rows)]),
        np.concatenate([gains, *(row[2] for row in rows)]),
        list(qids) + [q for row in rows for q in row[0]],
        cap,
        min_queries,
        dataset=dataset.name,
        query_fingerprints=dataset.question_identities(qids),
        orderable=np.concatenate([orderable, *(row[3] for row in rows)]),
        delta=delta,
        method=method,
    )
    calibration.pooled = bool(rows)
    calibration.query_ids = sorted(qids)  # the held-out questions, not the cross-fitted ones
    return calibration
