"""The correction: residual and gate as plain torch modules, their calibration, and
:class:`GatedCorrection`, the one object that turns scores into an order (Lightning wraps the
modules in ``fincrowd_ltr.training``). Imported lazily: the ONNX runtime needs no torch."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "MAX_DISTRACTORS": "fincrowd_ltr.model.pairs",
    "pair_weights": "fincrowd_ltr.model.pairs",
    "pairwise_loss": "fincrowd_ltr.model.pairs",
    "ResidualScorer": "fincrowd_ltr.model.residual",
    "normalise_base": "fincrowd_ltr.model.residual",
    "average_residuals": "fincrowd_ltr.model.residual",
    "IdentityGate": "fincrowd_ltr.model.gate",
    "GateCalibration": "fincrowd_ltr.model.calibration",
    "GatedCorrection": "fincrowd_ltr.model.correction",
    "TrainingSummary": "fincrowd_ltr.model.summary",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fincrowd_ltr.model' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
