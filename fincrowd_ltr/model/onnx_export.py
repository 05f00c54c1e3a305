"""ONNX export of the correction's features-to-decision path, for serving without PyTorch.

Two graphs: ``residual.onnx`` maps a bank's features ``(n, 17)`` and base scores ``(n,)`` to the
corrected scores, the normalised base scores and the standardised features; NumPy
(``gate_features_from_scores``) turns those into the query's gate features; ``gate.onnx`` maps
them ``(1, 21)``, a domain's temperature and threshold to the gate probability and decision. Both
run in float64, like the PyTorch modules (parity is tested under onnxruntime).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fincrowd_ltr.model.gate import IdentityGate
from fincrowd_ltr.model.residual import ResidualScorer, normalise_base

RESIDUAL_ONNX = "residual.onnx"
GATE_ONNX = "gate.onnx"
OPSET = 18


class _Residual(nn.Module):
    def __init__(self, scorer: ResidualScorer) -> None:
        super().__init__()
        self.scorer = scorer

    def forward(self, features: torch.Tensor, base: torch.Tensor):
        standardised = self.scorer.standardise(features)
        return self.scorer(features, base), normalise_base(base), standardised


class _Gate(nn.Module):
    def __init__(self, gate: IdentityGate) -> None:
        super().__init__()
        self.gate = gate

    def forward(self, features: torch.Tensor, temperature: torch.Tensor, threshold: torch.Tensor):
        probability = torch.sigmoid(self.gate(features) / temperature)
        return probability, probability >= threshold


def export_onnx(scorer: ResidualScorer, gate: IdentityGate | None, directory: Path) -> list[Path]:
    """Write ``residual.onnx`` (and ``gate.onnx``) to ``directory``; returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    n_features = scorer.weight.numel()
    paths = [directory / RESIDUAL_ONNX]
    torch.onnx.export(
        _Residual(scorer).eval(),
        (torch.zeros(8, n_features, dtype=torch.float64), torch.arange(8, dtype=torch.float64)),
        str(paths[0]),
        input_names=["features", "base_scores"],
        output_names=["scores", "normalised_base", "standardised_features"],
        dynamic_axes={"features": {0: "n"}, "base_scores": {0: "n"}},
        opset_version=OPSET,
        dynamo=False,
    )
    if gate is not None:
        paths.append(directory / GATE_ONNX)
        g = gate.feature_mean.numel()
        torch.onnx.export(
            _Gate(gate).eval(),
            (
                torch.zeros(1, g, dtype=torch.float64),
                torch.tensor(1.0, dtype=torch.float64),
                torch.tensor(0.5, dtype=torch.float64),
            ),
            str(paths[1]),
            input_names=["gate_features", "temperature", "threshold"],
            output_names=["probability", "applied"],
            opset_version=OPSET,
            dynamo=False,
        )
    return paths
