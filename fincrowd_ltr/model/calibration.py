"""Calibrating the identity gate per domain (NumPy only; the torch-free runtime uses it too).

A domain's calibration is a temperature ``T`` (``p = sigmoid(logit / T)``) and a threshold ``tau``
chosen on a small labelled calibration set of that domain to maximise the mean nDCG@10 gain while
the regression rate (queries whose nDCG@10 falls) stays under a cap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.defaults import DEFAULT_REGRESSION_CAP, MIN_CALIBRATION_QUERIES  # noqa: E402

TEMPERATURES = np.exp(np.linspace(np.log(0.1), np.log(10.0), 41))


@dataclass
class GateCalibration:
    """A domain's calibration: temperature, threshold and what they were fitted on."""

    temperature: float
    threshold: float
    regression_cap: float
    n_queries: int
    calibration_gain: float  # mean nDCG@10 gain on the calibration set at the threshold
    calibration_regression: float
    calibration_open: float  # share of calibration queries where the gate opened
    query_ids: list[str] = field(default_factory=list)
    dataset: str | None = None  # the dataset the calibration queries came from
    query_fingerprints: list[str] = field(default_factory=list)  # content of those queries

    def probability(self, logits: np.ndarray) -> np.ndarray:
        z = np.clip(-np.asarray(logits, dtype=np.float64) / self.temperature, -700.0, 700.0)
        return 1.0 / (1.0 + np.exp(z))

    def opens(self, logits: np.ndarray) -> np.ndarray:
        return self.probability(logits) >= self.threshold

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GateCalibration:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The temperature (from a fixed grid) with the lowest log loss on the labels."""
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    best, best_loss = 1.0, np.inf
    for t in TEMPERATURES:
        p = np.clip(1.0 / (1.0 + np.exp(-logits / t)), 1e-9, 1 - 1e-9)
        loss = -(labels * np.log(p) + (1 - labels) * np.log(1 - p)).mean()
        if loss < best_loss - 1e-12:
            best, best_loss = float(t), loss
    return best


def choose_threshold(
    probabilities: np.ndarray, gains: np.ndarray, cap: float
) -> tuple[float, float, float, float]:
    """The threshold maximising the mean gain subject to regression rate <= ``cap``; returns
    (threshold, gain, regression rate, open share). Never opening (threshold above every
    probability) is always feasible; among equal gains the higher threshold wins."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    gains = np.asarray(gains, dtype=np.float64)
    best = (float(np.nextafter(1.0, 2.0)), 0.0, 0.0, 0.0)
    for tau in sorted(set(probabilities.tolist()), reverse=True):
        opened = probabilities >= tau
        gain = float((gains * opened).mean())
        regression = float(((gains < -1e-12) & opened).mean())
        if regression <= cap + 1e-12 and gain > best[1] + 1e-12:
            best = (float(tau), gain, regression, float(opened.mean()))
    return best


def calibrate(
    logits: np.ndarray,
    gains: np.ndarray,
    query_ids: list[str],
    cap: float = DEFAULT_REGRESSION_CAP,
    min_queries: int = MIN_CALIBRATION_QUERIES,
    dataset: str | None = None,
    query_fingerprints: list[str] | None = None,
) -> GateCalibration:
    """Fit a domain's temperature and threshold on calibration queries (``gains``: residual
    minus base nDCG@10 per query)."""
    if len(query_ids) < min_queries:
        raise DataError(
            f"calibration needs at least {min_queries} labelled queries with relevant evidence; "
            f"got {len(query_ids)}"
        )
    if not 0.0 <= cap < 1.0:
        raise DataError(f"regression cap must be in [0, 1), got {cap}")
    gains = np.asarray(gains, dtype=np.float64)
    temperature = fit_temperature(logits, gains > 1e-12)
    probabilities = 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64) / temperature))
    threshold, gain, regression, opened = choose_threshold(probabilities, gains, cap)
    return GateCalibration(
        temperature=temperature,
        threshold=threshold,
        regression_cap=cap,
        n_queries=len(query_ids),
        calibration_gain=gain,
        calibration_regression=regression,
        calibration_open=opened,
        query_ids=sorted(query_ids),
        dataset=dataset,
        query_fingerprints=sorted(query_fingerprints or []),
    )
