"""The identity gate: apply the residual order only where it predicts a better nDCG@10.

``IdentityGate`` is a logistic classifier over per-query gate features (standardised with
training statistics held in buffers). Its probability is calibrated per domain: a temperature
``T`` (``p = sigmoid(logit / T)``) and a threshold ``tau`` chosen on a small labelled calibration
set of that domain to maximise the mean nDCG@10 gain while the regression rate (queries whose
nDCG@10 falls) stays under a cap. The decision is binary: the residual order, or exactly the
original order; candidate membership never changes either way.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fincrowd_ltr.model.calibration import (  # noqa: F401 (re-exported)
    DEFAULT_REGRESSION_CAP,
    MIN_CALIBRATION_QUERIES,
    GateCalibration,
    calibrate,
    choose_threshold,
    fit_temperature,
)


class IdentityGate(nn.Module):
    """Logistic gate: ``logit = w . ((x - mu) / sigma) + b``.

    Args:
        n_features: Gate features per query.
    """

    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n_features, 1, dtype=torch.float64)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        self.register_buffer("feature_mean", torch.zeros(n_features, dtype=torch.float64))
        self.register_buffer("feature_std", torch.ones(n_features, dtype=torch.float64))

    @torch.no_grad()
    def fit_standardisation(self, features: torch.Tensor) -> None:
        features = features.to(torch.float64)
        self.feature_mean.copy_(features.mean(0))
        std = features.std(0, unbiased=False)
        self.feature_std.copy_(torch.where(std > 0, std, torch.ones_like(std)))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Logits, one per row of ``features``."""
        z = (features.to(torch.float64) - self.feature_mean) / self.feature_std
        return self.linear(z).squeeze(-1)

    def logits(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self(torch.from_numpy(np.atleast_2d(features))).numpy()
