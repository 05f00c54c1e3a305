"""The numerics of a correction, behind one small interface, in PyTorch or ONNX Runtime.

A runtime maps a bank's features ``(n, d)`` and base scores ``(n,)`` to ``(corrected scores,
normalised base scores, standardised features)``, and a query's gate features to a logit. The
decision itself (gate features, calibration, threshold, order) is NumPy code in
:class:`~fincrowd_ltr.model.correction.GatedCorrection`, shared by both runtimes, so the
torch-free path (``residual.onnx``, ``gate.onnx``) decides exactly like PyTorch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model import checkpoint as io
from fincrowd_ltr.model.checkpoint import CONFIG, GATE_ONNX, GATE_WEIGHTS, RESIDUAL_ONNX, WEIGHTS


class TorchRuntime:
    """PyTorch modules (``ResidualScorer``, ``IdentityGate``)."""

    name = "torch"

    def __init__(self, scorer, gate=None) -> None:
        self.scorer = scorer.eval()
        self.gate = gate.eval() if gate is not None else None

    def residual(self, features: np.ndarray, base: np.ndarray):
        import torch

        with torch.no_grad():
            x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float64))
            b = torch.from_numpy(np.ascontiguousarray(base, dtype=np.float64))
            return tuple(t.numpy() for t in self.scorer.outputs(x, b))

    def gate_logit(self, gate_features: np.ndarray) -> float:
        return float(self.gate.logits(np.atleast_2d(gate_features))[0])


class OnnxRuntime:
    """``residual.onnx`` and ``gate.onnx`` under onnxruntime; imports no torch."""

    name = "onnx"

    def __init__(self, directory: Path, has_gate: bool) -> None:
        try:
            import onnxruntime as ort
        except ImportError:  # pragma: no cover - the 'onnx' extra
            raise DataError(
                "the ONNX runtime needs onnxruntime (pip install 'fincrowd_ltr[onnx]')"
            ) from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        for name in [RESIDUAL_ONNX] + ([GATE_ONNX] if has_gate else []):
            if not (directory / name).is_file():
                raise DataError(
                    f"{directory / name} is missing: write it with save_pretrained(onnx=True) or "
                    "`fincrowd export --onnx`"
                )
        providers = ["CPUExecutionProvider"]
        self._residual = ort.InferenceSession(
            str(directory / RESIDUAL_ONNX), options, providers=providers
        )
        self._gate = (
            ort.InferenceSession(str(directory / GATE_ONNX), options, providers=providers)
            if has_gate
            else None
        )

    def residual(self, features: np.ndarray, base: np.ndarray):
        return tuple(
            self._residual.run(
                None,
                {
                    "features": np.ascontiguousarray(features, dtype=np.float64),
                    "base_scores": np.ascontiguousarray(base, dtype=np.float64),
                },
            )
        )

    def gate_logit(self, gate_features: np.ndarray) -> float:
        (logit,) = self._gate.run(
            ["logit"], {"gate_features": np.atleast_2d(gate_features).astype(np.float64)}
        )
        return float(np.asarray(logit).reshape(-1)[0])


def load_torch(directory: Path, config: dict):
    """``(ResidualScorer, IdentityGate | None)`` from a checkpoint's safetensors files."""
    from safetensors.torch import load_file

    from fincrowd_ltr.model.gate import IdentityGate
    from fincrowd_ltr.model.residual import ResidualScorer

    scorer = ResidualScorer(
        len(config["feature_names"]), alpha=config["alpha"], gamma=config["gamma"]
    )
    scorer.load_state_dict(_read(directory / WEIGHTS, load_file))
    gate = None
    if config.get("gate") is not None:
        gate = IdentityGate(len(config["gate"]["feature_names"]))
        gate.load_state_dict(_read(directory / GATE_WEIGHTS, load_file))
    return scorer, gate


def _read(path: Path, load_file) -> dict:
    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises several types for bad files
        raise DataError(f"{path}: cannot read weights ({err})") from None


def load_residual(directory: Path, ranker: str | None = None):
    """``(ResidualScorer, config)``; with ``ranker``, refuse one fitted for another base ranker."""
    config = io.read_config(directory)
    io.check_ranker(config, ranker, Path(directory))
    scorer, _ = load_torch(Path(directory), config)
    return scorer, config


def load_gate(directory: Path):
    """``(IdentityGate, {domain: GateCalibration})``."""
    config = io.read_config(directory)
    if config.get("gate") is None:
        raise DataError(f"{Path(directory) / io.CONFIG}: checkpoint has no identity gate")
    _, gate = load_torch(Path(directory), config)
    return gate, io.domains_of(config, Path(directory))


__all__ = [
    "CONFIG",
    "OnnxRuntime",
    "TorchRuntime",
    "load_gate",
    "load_residual",
    "load_torch",
]
