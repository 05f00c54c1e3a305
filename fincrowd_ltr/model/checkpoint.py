"""A trained correction on disk: ``config.json``, weights and a SHA-256 manifest.

``config.json`` records the format version, the feature names, the extractor version and company
vocabulary, alpha, gamma, the base ranker, the training summary (query ids and content
fingerprints, so evaluation and calibration can leave training questions out) and, when a gate was
fitted, the gate's feature names and its per-domain calibrations. ``residual.safetensors`` and
``gate.safetensors`` hold weights and standardisation statistics; ``residual.onnx`` and
``gate.onnx`` (optional) the same computation for the torch-free runtime. ``manifest.json`` lists
the SHA-256 of every other file; loading checks it first.

Reading a config needs neither torch nor onnxruntime; the weights are read by the runtime that
needs them (:mod:`fincrowd_ltr.model.runtime`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.features.bank_features import FEATURE_NAMES
from fincrowd_ltr.fields.vocabulary import EXTRACTOR_VERSION
from fincrowd_ltr.model.calibration import GateCalibration
from fincrowd_ltr.model.gate_features import GATE_FEATURE_NAMES

FORMAT_VERSION = 2
CONFIG = "config.json"
WEIGHTS = "residual.safetensors"
GATE_WEIGHTS = "gate.safetensors"
RESIDUAL_ONNX = "residual.onnx"
GATE_ONNX = "gate.onnx"
MANIFEST = "manifest.json"
FILES = (CONFIG, WEIGHTS, GATE_WEIGHTS, RESIDUAL_ONNX, GATE_ONNX)


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to ``path`` through a temporary file (a crash never leaves half a file)."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))  # an infinite threshold (never open) round-trips
    tmp.replace(path)


def write_manifest(directory: Path) -> None:
    """SHA-256 of every checkpoint file present (config, weights, ONNX graphs)."""
    directory = Path(directory)
    files = [name for name in FILES if (directory / name).is_file()]
    write_json_atomic(
        directory / MANIFEST, {"sha256": {n: file_digest(directory / n) for n in files}}
    )


def check_manifest(directory: Path) -> None:
    """Compare every listed file with the manifest (no manifest: a training checkpoint)."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: malformed JSON ({err.msg})") from None
    for name, digest in manifest.get("sha256", {}).items():
        if not (path.parent / name).is_file():
            raise DataError(f"{path.parent / name}: listed in {MANIFEST} but missing")
        if file_digest(path.parent / name) != digest:
            raise DataError(f"{path.parent / name}: SHA-256 differs from {MANIFEST} (corrupted?)")
    for name in FILES:
        if (path.parent / name).is_file() and name not in manifest.get("sha256", {}):
            raise DataError(f"{path.parent / name}: not listed in {MANIFEST}")


def make_config(
    alpha: float,
    gamma: float,
    feature_mean: list[float],
    feature_std: list[float],
    ranker: str,
    summary: dict,
    companies: dict[str, list[str]] | None,
    gate: dict | None,
    domains: dict[str, GateCalibration],
    segments: dict[str, list[str]] | None = None,
) -> dict:
    """The ``config.json`` content."""
    config = {
        "format_version": FORMAT_VERSION,
        "kind": "fincrowd-residual",
        "feature_names": list(FEATURE_NAMES),
        "extractor_version": EXTRACTOR_VERSION,
        "alpha": alpha,
        "gamma": gamma,
        "base_ranker": ranker,
        "training": summary,
        # copies for readers of the config; loading uses the weights files
        "standardisation": {"feature_mean": feature_mean, "feature_std": feature_std},
    }
    if companies is not None:
        from fincrowd_ltr.fields import vocabulary as V

        config["extractor"] = {
            "version": EXTRACTOR_VERSION,
            "companies": companies,
            # segment names harvested from the training corpus's filings, per company
            "segments": segments or {},
            # the rest of the vocabulary, for the record (the extractor version pins it)
            "vocabularies": {
                name: getattr(V, name)
                for name in ("METRICS", "SEGMENTS", "STATEMENTS", "UNITS", "CURRENCIES")
            },
        }
    if gate is not None:
        config["gate"] = {
            "feature_names": list(GATE_FEATURE_NAMES),
            "standardisation": gate,
            "domains": {name: c.to_dict() for name, c in domains.items()},
        }
    return config


def read_config(directory: Path) -> dict:
    """The checked ``config.json`` of a checkpoint directory."""
    directory = Path(directory)
    path = directory / CONFIG
    if not path.is_file():
        raise DataError(f"no residual checkpoint at {directory} (expected {path})")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: malformed JSON ({err.msg})") from None
    if config.get("format_version") != FORMAT_VERSION:
        raise DataError(
            f"{path}: checkpoint format {config.get('format_version')} is not "
            f"supported (expected {FORMAT_VERSION})"
        )
    if config.get("feature_names") != list(FEATURE_NAMES):
        raise DataError(f"{path}: checkpoint features differ from this version's features")
    if config.get("extractor_version") != EXTRACTOR_VERSION:
        raise DataError(
            f"{path}: fitted with field extractor {config.get('extractor_version')}, this "
            f"version has {EXTRACTOR_VERSION}; refit or use a matching fincrowd_ltr"
        )
    gate = config.get("gate")
    if gate is not None and gate.get("feature_names") != list(GATE_FEATURE_NAMES):
        raise DataError(f"{path}: gate features differ from this version's")
    return config


def domains_of(config: dict, where: Path) -> dict[str, GateCalibration]:
    """The per-domain gate calibrations of a config."""
    try:
        return {
            n: GateCalibration.from_dict(c)
            for n, c in (config.get("gate") or {}).get("domains", {}).items()
        }
    except TypeError as err:
        raise DataError(f"{where / CONFIG}: malformed gate calibration ({err})") from None


def check_ranker(config: dict, ranker: str | None, directory: Path) -> None:
    if ranker is not None and config.get("base_ranker") != ranker:
        raise DataError(
            f"{directory / CONFIG}: residual was fitted for base ranker "
            f"{config.get('base_ranker')!r}, not {ranker!r}"
        )


def add_domain(directory: Path, name: str, calibration: GateCalibration) -> None:
    """Store (or replace) a domain's gate calibration in a checkpoint (manifest refreshed)."""
    directory = Path(directory)
    config = read_config(directory)
    if config.get("gate") is None:
        raise DataError(f"{directory / CONFIG}: checkpoint has no identity gate to calibrate")
    config["gate"].setdefault("domains", {})[name] = calibration.to_dict()
    write_json_atomic(directory / CONFIG, config)
    if (directory / MANIFEST).is_file():
        write_manifest(directory)


def domain_calibration(
    domains: dict[str, GateCalibration], name: str, directory: Path | None = None
) -> GateCalibration:
    """A domain's calibration, or an error naming the domains the checkpoint has."""
    if name not in domains:
        known = ", ".join(sorted(domains)) or "none"
        raise DataError(
            f"no gate calibration for domain {name!r} (calibrated: {known}); calibrate it first "
            "or fall back to the base order (fallback 'identity')"
        )
    return domains[name]
