"""Saving and loading a trained correction as a small directory (``config.json`` + weights).

``config.json`` records the format version, the feature names, the extractor version, alpha,
gamma, the base ranker the residual was fitted for, a training summary (with the training query
ids, so calibration data can be checked for overlap) and, when a gate was fitted, the gate's
feature names and its per-domain calibrations. ``residual.safetensors`` and ``gate.safetensors``
hold weights and standardisation statistics. Loading checks all of them before returning.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file, save_file

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.features import FEATURE_NAMES
from fincrowd_ltr.fields.vocabulary import EXTRACTOR_VERSION
from fincrowd_ltr.model.gate import GateCalibration, IdentityGate
from fincrowd_ltr.model.residual import ResidualScorer

FORMAT_VERSION = 2
CONFIG = "config.json"
WEIGHTS = "residual.safetensors"
GATE_WEIGHTS = "gate.safetensors"


def _gate_feature_names() -> list[str]:
    from fincrowd_ltr.features.gate_features import GATE_FEATURE_NAMES

    return list(GATE_FEATURE_NAMES)


def save_residual(
    directory: Path,
    scorer: ResidualScorer,
    ranker: str,
    summary: dict,
    gate: IdentityGate | None = None,
    domains: dict[str, GateCalibration] | None = None,
    companies: dict[str, list[str]] | None = None,
) -> None:
    """Write ``scorer`` fitted for base ranker ``ranker`` (and its gate, with calibrations per
    domain, and the extractor's company vocabulary) to ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "format_version": FORMAT_VERSION,
        "kind": "fincrowd-residual",
        "feature_names": list(FEATURE_NAMES),
        "extractor_version": EXTRACTOR_VERSION,
        "alpha": scorer.alpha,
        "gamma": scorer.gamma,
        "base_ranker": ranker,
        "training": summary,
        # copies for readers of the config; loading uses the safetensors weights
        "standardisation": {
            "feature_mean": scorer.feature_mean.tolist(),
            "feature_std": scorer.feature_std.tolist(),
        },
    }
    if companies is not None:
        from fincrowd_ltr.fields import vocabulary as V

        config["extractor"] = {
            "version": EXTRACTOR_VERSION,
            "companies": companies,
            # the rest of the vocabulary, for the record (the extractor version pins it)
            "vocabularies": {
                name: getattr(V, name)
                for name in ("METRICS", "SEGMENTS", "STATEMENTS", "UNITS", "CURRENCIES")
            },
        }
    tensors = {k: v.detach().contiguous() for k, v in scorer.state_dict().items()}
    save_file(tensors, str(directory / WEIGHTS))
    if gate is not None:
        config["gate"] = {
            "feature_names": _gate_feature_names(),
            "standardisation": {
                "feature_mean": gate.feature_mean.tolist(),
                "feature_std": gate.feature_std.tolist(),
            },
            "domains": {name: c.to_dict() for name, c in (domains or {}).items()},
        }
        gate_tensors = {k: v.detach().contiguous() for k, v in gate.state_dict().items()}
        save_file(gate_tensors, str(directory / GATE_WEIGHTS))
    _write_config(directory, config)


def _write_config(directory: Path, config: dict) -> None:
    """Replace ``config.json`` atomically (a crash never leaves half a file)."""
    tmp = directory / (CONFIG + ".tmp")
    tmp.write_text(json.dumps(config, indent=1))
    tmp.replace(directory / CONFIG)


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
    return config


def load_residual(directory: Path, ranker: str | None = None) -> tuple[ResidualScorer, dict]:
    """Load a residual; with ``ranker``, refuse one fitted for another base ranker."""
    directory = Path(directory)
    path = directory / CONFIG
    config = read_config(directory)
    if ranker is not None and config.get("base_ranker") != ranker:
        raise DataError(
            f"{path}: residual was fitted for base ranker "
            f"{config.get('base_ranker')!r}, not {ranker!r}"
        )
    scorer = ResidualScorer(len(FEATURE_NAMES), alpha=config["alpha"], gamma=config["gamma"])
    try:
        state = load_file(str(directory / WEIGHTS))
    except Exception as err:  # safetensors raises several types for bad files
        raise DataError(f"{directory / WEIGHTS}: cannot read weights ({err})") from None
    scorer.load_state_dict(state)
    return scorer, config


def load_gate(directory: Path) -> tuple[IdentityGate, dict[str, GateCalibration]]:
    """Load the gate and its per-domain calibrations."""
    directory = Path(directory)
    config = read_config(directory)
    spec = config.get("gate")
    if spec is None:
        raise DataError(f"{directory / CONFIG}: checkpoint has no identity gate")
    if spec.get("feature_names") != _gate_feature_names():
        raise DataError(f"{directory / CONFIG}: gate features differ from this version's")
    gate = IdentityGate(len(spec["feature_names"]))
    try:
        state = load_file(str(directory / GATE_WEIGHTS))
    except Exception as err:
        raise DataError(f"{directory / GATE_WEIGHTS}: cannot read weights ({err})") from None
    gate.load_state_dict(state)
    try:
        domains = {n: GateCalibration.from_dict(c) for n, c in spec.get("domains", {}).items()}
    except TypeError as err:
        raise DataError(f"{directory / CONFIG}: malformed gate calibration ({err})") from None
    return gate, domains


def add_domain(directory: Path, name: str, calibration: GateCalibration) -> None:
    """Store (or replace) a domain's gate calibration in a checkpoint."""
    directory = Path(directory)
    config = read_config(directory)
    if config.get("gate") is None:
        raise DataError(f"{directory / CONFIG}: checkpoint has no identity gate to calibrate")
    config["gate"].setdefault("domains", {})[name] = calibration.to_dict()
    _write_config(directory, config)


def domain_calibration(
    domains: dict[str, GateCalibration], name: str, directory: Path
) -> GateCalibration:
    """A domain's calibration, or an error naming the domains the checkpoint has."""
    if name not in domains:
        known = ", ".join(sorted(domains)) or "none"
        raise DataError(
            f"{directory}: no gate calibration for domain {name!r} (calibrated: {known}); run "
            f"`fincrowd calibrate --domain {name}` or use --domain-fallback identity"
        )
    return domains[name]
