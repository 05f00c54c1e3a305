"""Calibrating the identity gate per domain (NumPy and SciPy; the torch-free runtime uses it).

A domain's calibration is a temperature ``T`` (``p = sigmoid(logit / T)``) and a threshold ``tau``
chosen on a small labelled calibration set of that domain to maximise the mean nDCG@10 gain while
the regression rate stays under a cap. The rate is taken among *orderable* questions (a relevant
candidate in the bank: the others cannot regress), and the cap is kept in one of three ways
(``method``):

- ``"ltt"`` (default): Learn-then-Test with a binomial bound. Thresholds are tested from the
  highest down (fixed-sequence testing) against ``H0: regression rate > cap`` with the exact
  binomial p-value ``P(Bin(n, cap) <= k)`` (``k`` regressions among ``n`` orderable calibration
  questions); the threshold is chosen among those rejected before the first failure. Then, with
  probability at least ``1 - delta`` over the draw of the calibration set, the chosen threshold's
  regression rate on the domain's orderable questions is at most ``cap``, assuming calibration
  and future questions are exchangeable (drawn from the same distribution). With few questions
  no threshold but "never open" may pass: ``(1 - cap)^n <= delta`` is needed for even a threshold
  with no regression (``n >= 76`` at cap 0.03 and delta 0.1).
- ``"crc"``: conformal risk control: ``(k + 1) / (n + 1) <= cap``, a guarantee on the *expected*
  regression rate (no ``delta``).
- ``"empirical"``: the regression rate on the calibration set itself ``<= cap`` (before 0.3: no
  promise about the next question).

Every calibration stores a ``risk_bound``: the Clopper-Pearson upper ``1 - delta`` bound on the
chosen threshold's regression rate among orderable questions (pointwise: not adjusted for the
threshold having been chosen on the same rows).

The promise is exact for rows scored by the model that is deployed and that never shaped it
(``calibrate_domain``, ``fincrowd calibrate``, ``gate_calibration="fold"``: ``fit_correction``
never early-stops or selects a residual on the fold that calibrates its gate). Its default
pooled calibration adds training questions' cross-fitted rows, scored by other residuals and
gates (whose settings those questions helped choose): the cap is then kept on rows that only
approximate the deployed model's (``pooled`` in the calibration, ``exact: false`` in its
guarantee); ``benchmarks/gate_guarantee.py`` measures how it holds on held-out folds.
Questions of one group (a company) are not independent, so the binomial test's effective sample
is smaller than ``n`` when groups are large.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field

import numpy as np

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.defaults import (
    DEFAULT_DELTA,
    DEFAULT_REGRESSION_CAP,
    GATE_METHODS,
    MIN_CALIBRATION_QUERIES,
)


class GateCalibrationWarning(UserWarning):
    """A calibration whose gate can never open (too few questions for its guarantee)."""


def uncertifiable(n: int, cap: float, delta: float) -> str | None:
    """Why Learn-then-Test cannot open a gate on ``n`` orderable questions at ``cap`` and
    ``delta`` (even a threshold with no regression needs ``(1 - cap)^n <= delta``), with the
    remedies; ``None`` when it can."""
    if _certifies(n, cap, delta):
        return None
    why = (
        f"Learn-then-Test cannot certify a regression cap of {cap} at delta {delta} with {n} "
        "orderable calibration questions: the gate will never open (it keeps the base order)."
    )
    if cap > 0:
        why += (
            f" At this cap it needs at least {_questions_needed(cap, delta)} orderable questions."
        )
    else:
        why += " No number of questions certifies a cap of 0."
    loosest = _loosest_cap(n, delta)
    if loosest is not None:
        why += (
            f" With {n}, a cap of {loosest:.3f} can be certified (regression_cap=,"
            " --regression-cap), and only at a threshold that opens on no calibration question"
            " it makes worse: one such question closes the gate."
        )
    return why + " Gate method 'crc' bounds the expected rate instead."


# While ``one_uncertifiable_warning`` holds them: every Learn-then-Test calibration's
# ``(orderable questions, cap, delta, why or None)``.
_HELD: ContextVar[list | None] = ContextVar("held_uncertifiable", default=None)


@contextmanager
def one_uncertifiable_warning(
    what: str = "calibrations", last: str | None = None
) -> Iterator[None]:
    """Within the block, Learn-then-Test's "cannot certify" warnings are held and given once,
    for every calibration of the block together (a fit calibrates a gate per cross-validation
    round, and a nested run per outer fold), naming how many of them (``what``) could not open,
    their sizes and, with ``last`` (e.g. "the saved model's"), whether the block's last one
    could. A block inside another adds to the outer one; a block left by an exception says
    nothing (the exception does)."""
    if _HELD.get() is not None:
        yield
        return
    token = _HELD.set([])
    try:
        yield
        held = _HELD.get() or []
    finally:
        _HELD.reset(token)
    failed = [h for h in held if h[3]]
    if not failed:
        return
    n, cap, delta, _ = min(failed)
    counts = ", ".join(str(h[0]) for h in failed)
    message = (
        f"{uncertifiable(n, cap, delta)} This is so for {len(failed)} of {len(held)} {what} "
        f"(orderable calibration questions: {counts}; the fewest is quoted)"
    )
    if last:
        message += f"; {last} is {'one of them' if held[-1][3] else 'not'}"
    warnings.warn(message + ".", GateCalibrationWarning, stacklevel=3)


def _certifies(n: int, cap: float, delta: float) -> bool:
    """Whether a threshold without regression among ``n`` passes ``choose_threshold``'s test."""
    return binomial_p_value(0, n, cap) <= delta


def _questions_needed(cap: float, delta: float) -> int:
    n = max(1, math.ceil(math.log(delta) / math.log(1.0 - cap)))
    while not _certifies(n, cap, delta):  # floating point: the test itself decides
        n += 1
    return n


def _loosest_cap(n: int, delta: float) -> float | None:
    """The smallest cap (to 0.001) certifiable with ``n`` questions, or None below 1."""
    if n <= 0:
        return None
    cap = math.ceil((1.0 - delta ** (1.0 / n)) * 1000) / 1000
    while cap < 1.0 and not _certifies(n, cap, delta):
        cap = round(cap + 0.001, 3)
    return cap if cap < 1.0 else None


TEMPERATURES = np.exp(np.linspace(np.log(0.1), np.log(10.0), 41))
NEVER_OPEN = float(np.nextafter(1.0, 2.0))  # a threshold above every probability


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
    # the ids and contents of the calibration queries (n_queries of them): left out of the repr
    query_ids: list[str] = field(default_factory=list, repr=False)
    dataset: str | None = None  # the dataset the calibration queries came from
    query_fingerprints: list[str] = field(default_factory=list, repr=False)
    # the guarantee (calibrations written before 0.3 were "empirical" over all covered questions)
    method: str = "empirical"
    delta: float | None = None
    n_orderable: int | None = None  # calibration rows with a relevant candidate in the bank
    risk_bound: float | None = None  # upper 1 - delta bound on the regression rate (orderable)
    # calibrated on rows pooled with training questions' cross-fitted rows (scored by other
    # residuals and gates than the one deployed): the ltt/crc promise is then approximate
    pooled: bool = False

    def guarantee(self) -> dict:
        """What this calibration promises (returned with every gated decision): ``delta`` only
        for ``ltt`` (the cap holds with probability 1 - delta), ``risk_bound`` the upper
        ``1 - bound_delta`` bound on the regression rate for every method (for ``crc`` and
        ``empirical`` it may exceed the cap: they keep it in expectation or on the
        calibration questions only), ``exact`` False for pooled rows or the empirical rule,
        ``can_open`` False when no probability reaches the threshold (the cap then holds
        because the gate never opens: no threshold gained within the cap, or too few
        calibration questions to certify one)."""
        return {
            "method": self.method,
            "cap": self.regression_cap,
            "delta": self.delta if self.method == "ltt" else None,
            "risk_bound": self.risk_bound,
            "bound_delta": self.delta if self.risk_bound is not None else None,
            "n_calibration": self.n_queries,
            "n_orderable": self.n_orderable,
            "exact": self.method != "empirical" and not self.pooled,
            "can_open": self.can_open,
        }

    @property
    def can_open(self) -> bool:
        """Whether any gate probability (at most 1) reaches the threshold."""
        return self.threshold <= 1.0

    def probability(self, logits: np.ndarray) -> np.ndarray:
        return _sigmoid(np.asarray(logits, dtype=np.float64) / self.temperature)

    def opens(self, logits: np.ndarray) -> np.ndarray:
        return self.probability(logits) >= self.threshold

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GateCalibration:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))``, ``x`` clipped to +-700 so that ``exp`` never overflows: the one
    probability calibration and serving both read."""
    return 1.0 / (1.0 + np.exp(-np.clip(x, -700.0, 700.0)))


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The temperature (from a fixed grid) with the lowest log loss on the labels."""
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    best, best_loss = 1.0, np.inf
    for t in TEMPERATURES:
        p = np.clip(_sigmoid(logits / t), 1e-9, 1 - 1e-9)
        loss = -(labels * np.log(p) + (1 - labels) * np.log(1 - p)).mean()
        if loss < best_loss - 1e-12:
            best, best_loss = float(t), loss
    return best


def binomial_p_value(regressions: int, n: int, cap: float) -> float:
    """``P(Bin(n, cap) <= regressions)``: the p-value of ``H0: rate > cap`` (exact)."""
    from scipy.stats import binom

    return float(binom.cdf(regressions, n, cap)) if n else 1.0


def risk_bound(regressions: int, n: int, delta: float) -> float:
    """The Clopper-Pearson upper ``1 - delta`` bound on a rate with ``regressions`` of ``n``."""
    from scipy.stats import beta

    if n == 0 or regressions >= n:
        return 1.0
    return float(beta.ppf(1.0 - delta, regressions + 1, n - regressions))


def choose_threshold(
    probabilities: np.ndarray,
    gains: np.ndarray,
    cap: float,
    method: str = "empirical",
    delta: float = DEFAULT_DELTA,
) -> tuple[float, float, float, float]:
    """The threshold maximising the mean gain subject to the cap, kept by ``method`` (module
    docstring); returns (threshold, gain, regression rate, open share) on these rows. Never
    opening (threshold above every probability) is always allowed; among equal gains the higher
    threshold wins. The rows should be the orderable questions."""
    if method not in GATE_METHODS:
        raise DataError(f"gate calibration method must be one of {GATE_METHODS}; got {method!r}")
    probabilities = np.asarray(probabilities, dtype=np.float64)
    gains = np.asarray(gains, dtype=np.float64)
    n = len(gains)
    best = (NEVER_OPEN, 0.0, 0.0, 0.0)
    for tau in sorted(set(probabilities.tolist()), reverse=True):
        opened = probabilities >= tau
        regressions = int(((gains < -1e-12) & opened).sum())
        if method == "ltt":
            if binomial_p_value(regressions, n, cap) > delta:
                break  # fixed-sequence testing stops at the first threshold it cannot certify
        elif method == "crc":
            if (regressions + 1) / (n + 1) > cap + 1e-12:
                continue
        elif regressions / n > cap + 1e-12:
            continue
        gain = float((gains * opened).mean())
        if gain > best[1] + 1e-12:
            best = (float(tau), gain, regressions / n, float(opened.mean()))
    return best


def calibrate(
    logits: np.ndarray,
    gains: np.ndarray,
    query_ids: list[str],
    cap: float = DEFAULT_REGRESSION_CAP,
    min_queries: int = MIN_CALIBRATION_QUERIES,
    dataset: str | None = None,
    query_fingerprints: list[str] | None = None,
    orderable: np.ndarray | None = None,
    delta: float = DEFAULT_DELTA,
    method: str = "ltt",
) -> GateCalibration:
    """Fit a domain's temperature and threshold on calibration queries (``gains``: residual
    minus base nDCG@10 per query; ``orderable``: which have a relevant candidate in the bank,
    all when None). Only orderable rows count: the others cannot change."""
    if not 0.0 <= cap < 1.0:
        raise DataError(f"regression cap must be in [0, 1), got {cap}")
    if not 0.0 < delta < 1.0:
        raise DataError(f"delta must be in (0, 1), got {delta}")
    gains = np.asarray(gains, dtype=np.float64)
    logits = np.asarray(logits, dtype=np.float64)
    keep = np.ones(len(gains), bool) if orderable is None else np.asarray(orderable, bool)
    if len(keep) != len(gains) or len(logits) != len(gains):
        raise DataError(
            f"calibration rows disagree: {len(logits)} logits, {len(gains)} gains, "
            f"{len(keep)} orderable flags"
        )
    if int(keep.sum()) < max(min_queries, 1):
        raise DataError(
            f"calibration needs at least {min_queries} labelled queries with relevant evidence in "
            f"the bank; got {int(keep.sum())} (of {len(query_ids)}): calibrate on more questions "
            "(fewer folds make each fold larger; calibrating without a fold uses every one) or "
            "accept fewer (min_calibration=, --min-calibration)"
        )
    gains, logits = gains[keep], logits[keep]
    why = uncertifiable(len(gains), cap, delta) if method == "ltt" else None
    held = _HELD.get()
    if held is not None and method == "ltt":
        held.append((len(gains), cap, delta, why))
    elif why:
        warnings.warn(why, GateCalibrationWarning, stacklevel=2)
    temperature = fit_temperature(logits, gains > 1e-12)
    probabilities = _sigmoid(logits / temperature)
    threshold, gain, regression, opened = choose_threshold(probabilities, gains, cap, method, delta)
    regressions = int(round(regression * len(gains)))
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
        method=method,
        delta=delta,
        n_orderable=len(gains),
        # a gate that never opens cannot regress: its bound is 0, not the binomial one
        risk_bound=0.0 if threshold > 1.0 else risk_bound(regressions, len(gains), delta),
    )
