"""ONNX export of the correction's numerics, for the torch-free runtime.

Two graphs, float64 like the PyTorch modules: ``residual.onnx`` maps a bank's features ``(n, d)``
and base scores ``(n,)`` to the corrected scores, the normalised base scores and the standardised
features; ``gate.onnx`` maps a query's gate features ``(1, g)`` to the gate's logit. Everything
else (gate features, calibration, threshold, order) is NumPy code shared with PyTorch.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fincrowd_ltr.model.checkpoint import GATE_ONNX, RESIDUAL_ONNX
from fincrowd_ltr.model.gate import IdentityGate
from fincrowd_ltr.model.residual import ResidualScorer

OPSET = 18


class _Residual(nn.Module):
    def __init__(self, scorer: ResidualScorer) -> None:
        super().__init__()
        self.scorer = scorer

    def forward(self, features: torch.Tensor, base: torch.Tensor):
        return self.scorer.outputs(features, base)


def export_onnx(scorer: ResidualScorer, gate: IdentityGate | None, directory: Path) -> list[Path]:
    """Write ``residual.onnx`` (and ``gate.onnx``) to ``directory``; returns the paths."""
    import warnings

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    n_features = scorer.weight.numel()
    paths = [directory / RESIDUAL_ONNX]
    with warnings.catch_warnings():
        # the legacy TorchScript exporter needs only `onnx` (the new one also needs onnxscript)
        warnings.simplefilter("ignore", DeprecationWarning)
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
            torch.onnx.export(
                gate.eval(),
                (torch.zeros(1, gate.feature_mean.numel(), dtype=torch.float64),),
                str(paths[1]),
                input_names=["gate_features"],
                output_names=["logit"],
                opset_version=OPSET,
                dynamo=False,
            )
    return paths
