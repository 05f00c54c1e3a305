"""The FinDeCrowd-RAG residual correction, a plain ``torch.nn.Module`` (the math, no Lightning).

For one bank with frozen base scores ``s`` and candidate features ``x`` (rows in bank order)::

    s_hat = (s - mean(s)) / std(s)              # base normalised within the bank (0 if degenerate)
    z     = (x - mu) / sigma                    # features standardised with training statistics
    r     = z @ w                               # the linear residual (no bias: order-free)
    final = s_hat + alpha * tanh(gamma * r)     # the corrected score

``alpha`` is the correction scale: no candidate moves by more than ``alpha`` standard deviations of
the bank's base scores. ``gamma`` controls activation: small ``gamma`` keeps ``tanh`` linear
(``alpha * gamma * r``), large ``gamma`` turns the correction into a near-constant push of
``+/- alpha`` once ``|r|`` exceeds about ``1/gamma``. Candidate membership never changes, only
order; everything is float64.
"""

from __future__ import annotations

import torch
from torch import nn

DEFAULT_ALPHA = 1.0
DEFAULT_GAMMA = 1.0


def normalise_base(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Z-score of base scores within each bank (last dimension); degenerate banks (one
    candidate, all ties) give zeros. ``mask`` marks real candidates in padded batches."""
    scores = scores.to(torch.float64)
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    weight = mask.to(torch.float64)
    # divide by a power of two near the largest magnitude first (exact in floating point), so any
    # finite scores (1e300, -1.79e308) stay finite through the variance
    largest = torch.where(mask, scores.abs(), torch.zeros_like(scores)).amax(-1, keepdim=True)
    exponent = torch.floor(torch.log2(torch.where(largest > 0, largest, torch.ones_like(largest))))
    scores = scores / torch.pow(torch.full_like(exponent, 2.0), exponent)
    count = weight.sum(-1, keepdim=True).clamp(min=1.0)
    mean = (scores * weight).sum(-1, keepdim=True) / count
    var = (((scores - mean) * weight) ** 2).sum(-1, keepdim=True) / count
    std = var.sqrt()
    safe = torch.where(std > 0, std, torch.ones_like(std))
    out = torch.where(std > 0, (scores - mean) / safe, torch.zeros_like(scores))
    return out * weight


class ResidualScorer(nn.Module):
    """Standardised linear residual over bank features, added to the normalised base score.

    Args:
        n_features: Number of features per candidate.
        alpha: Correction scale (see module docstring).
        gamma: Activation sharpness (see module docstring).
    """

    def __init__(
        self,
        n_features: int,
        alpha: float = DEFAULT_ALPHA,
        gamma: float = DEFAULT_GAMMA,
        active: list[bool] | None = None,
    ) -> None:
        super().__init__()
        self.alpha = float(alpha)
        self.gamma = float(gamma)
        self.weight = nn.Parameter(torch.zeros(n_features, dtype=torch.float64))
        # features switched off (ablations) contribute nothing whatever their weight
        flags = [True] * n_features if active is None else [bool(a) for a in active]
        self.register_buffer("active", torch.tensor(flags, dtype=torch.float64))
        self.register_buffer("feature_mean", torch.zeros(n_features, dtype=torch.float64))
        self.register_buffer("feature_std", torch.ones(n_features, dtype=torch.float64))

    @torch.no_grad()
    def fit_standardisation(self, features: torch.Tensor) -> None:
        """Fit ``mu`` and ``sigma`` on the training candidates (rows of ``features``);
        constant features get ``sigma = 1``."""
        features = features.to(torch.float64).reshape(-1, self.weight.numel())
        self.feature_mean.copy_(features.mean(0))
        std = features.std(0, unbiased=False)
        self.feature_std.copy_(torch.where(std > 0, std, torch.ones_like(std)))

    def standardise(self, features: torch.Tensor) -> torch.Tensor:
        return (features.to(torch.float64) - self.feature_mean) / self.feature_std

    def residual(self, features: torch.Tensor) -> torch.Tensor:
        """``r = z @ w`` per candidate."""
        return self._project(self.standardise(features))

    def _project(self, standardised: torch.Tensor) -> torch.Tensor:
        return standardised @ (self.weight * self.active)

    def forward(
        self,
        features: torch.Tensor,
        base_scores: torch.Tensor,
        mask: torch.Tensor | None = None,
        s_hat: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Corrected scores, shape of ``base_scores`` (``(n,)`` or padded ``(banks, n)``)."""
        return self.outputs(features, base_scores, mask, s_hat)[0]

    def outputs(
        self,
        features: torch.Tensor,
        base_scores: torch.Tensor,
        mask: torch.Tensor | None = None,
        s_hat: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(final, s_hat, z)``: corrected scores, normalised base scores and standardised
        features, each computed once (what a runtime returns). ``s_hat``: the base scores
        already normalised (each bank alone, as a training loop keeps them across epochs)."""
        z = self.standardise(features)
        correction = self.alpha * torch.tanh(self.gamma * self._project(z))
        if s_hat is None:
            s_hat = normalise_base(base_scores, mask)
        final = s_hat + correction
        if mask is not None:
            final = torch.where(mask, final, torch.full_like(final, float("-inf")))
        return final, s_hat, z


@torch.no_grad()
def average_residuals(
    scorers: list[ResidualScorer], features: torch.Tensor | None = None
) -> ResidualScorer:
    """One residual whose ``r`` is the mean of the ``scorers``' ``r`` for every candidate (up to
    rounding): a committee of linear residuals is a linear residual. The members must share
    ``alpha``, ``gamma`` and their active features; their weights are averaged in raw feature
    units (``w / sigma``). The merged scorer standardises with the statistics of ``features``
    (the committee's whole training set, as a single fit would; default: the members' mean
    statistics), and its ``mu`` moves by the least amount in standardised units that carries the
    members' mean constant term (``tanh`` reads it). Should the averaged weights cancel to zero,
    that constant is lost: it is the same for every candidate, so no order changes."""
    if not scorers:
        raise ValueError("a committee needs at least one residual")
    first = scorers[0]
    for other in scorers[1:]:
        if (other.alpha, other.gamma) != (first.alpha, first.gamma) or not torch.equal(
            other.active, first.active
        ):
            raise ValueError("committee members must share alpha, gamma and active features")
    effective = torch.stack([s.weight * s.active / s.feature_std for s in scorers])
    offsets = torch.stack(
        [(s.feature_mean * w).sum() for s, w in zip(scorers, effective, strict=True)]
    )
    raw, offset = effective.mean(0), offsets.mean()  # r = x @ raw - offset
    out = ResidualScorer(first.weight.numel(), first.alpha, first.gamma)
    out.active.copy_(first.active)
    if features is not None:
        out.fit_standardisation(features)
    else:
        out.feature_std.copy_(torch.stack([s.feature_std for s in scorers]).mean(0))
        out.feature_mean.copy_(torch.stack([s.feature_mean for s in scorers]).mean(0))
    std, mean = out.feature_std, out.feature_mean
    direction = raw * std * std  # the constant's least move of mu in standardised units
    norm = (direction * raw).sum()
    if norm > 0:
        out.feature_mean.copy_(mean + (offset - (mean * raw).sum()) / norm * direction)
    out.weight.copy_(raw * std)
    return out
