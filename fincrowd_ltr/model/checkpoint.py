"""A trained correction on disk: ``config.json``, weights and a SHA-256 manifest.

``config.json`` records the format version, the feature names, the extractor version and company
vocabulary, alpha, gamma, the base ranker, the training summary (query ids and content
fingerprints, so evaluation and calibration can leave training questions out) and, when a gate was
fitted, the gate's feature names and its per-domain calibrations. ``residual.safetensors`` and
``gate.safetensors`` hold weights and standardisation statistics; ``residual.onnx`` and
``gate.onnx`` (optional) the same computation for the torch-free runtime. ``manifest.json`` lists
the SHA-256 of every other file; loading checks it first and refuses a folder without one or with
a file it does not list. Saving writes a fresh folder and swaps it in (:func:`replace_folder`).

Reading a config needs neither torch nor onnxruntime; the weights are read by the runtime that
needs them (:mod:`fincrowd_ltr.model.runtime`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

from fincrowd_ltr.data.folders import swap_in_folder
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.features.bank_features import FEATURE_NAMES, FEATURE_VERSIONS
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


class FeatureVersionWarning(UserWarning):
    """A checkpoint fitted with another version of the code that computes its features."""


# why a checkpoint has no gate, and how to get one
NO_GATE = (
    "trained without one: `fit --no-gate`, or a `python train.py fit` / `export "
    "--from-lightning` model, which is always on; `fincrowd fit` trains a gate to calibrate"
)


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to ``path`` through a temporary file (a crash never leaves half a file)."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))  # an infinite threshold (never open) round-trips
    tmp.replace(path)


def write_manifest(directory: Path) -> None:
    """SHA-256 of every file of the folder (config, weights, ONNX graphs and anything else)."""
    directory = Path(directory)
    files = sorted(_listed_files(directory))
    write_json_atomic(
        directory / MANIFEST, {"sha256": {n: file_digest(directory / n) for n in files}}
    )


def _listed_files(directory: Path) -> list[str]:
    """The files a manifest must list: every regular file but the manifest and dotfiles."""
    return [
        p.name
        for p in Path(directory).iterdir()
        if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")
    ]


def check_manifest(directory: Path, trust_unverified: bool = False) -> None:
    """Compare the folder with its manifest: every listed file present with its SHA-256, no file
    unlisted. A folder without a manifest is refused unless ``trust_unverified`` (a hand-made
    folder); so is any file the manifest does not list (e.g. an earlier model's ONNX graph)."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not path.is_file():
        if trust_unverified or not (directory / CONFIG).is_file():
            return  # a missing config is reported by read_config
        raise DataError(
            f"{path}: missing, so the checkpoint's files cannot be verified; re-save it with "
            "save_pretrained / `fincrowd export`, or load it with trust_unverified=True "
            "(--trust-unverified) if you made the folder by hand"
        )
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: malformed JSON ({err.msg})") from None
    listed = manifest.get("sha256", {}) if isinstance(manifest, dict) else None
    if not isinstance(listed, dict):
        raise DataError(f"{path}: field 'sha256' must map file names to digests")
    for name, digest in listed.items():
        if not (directory / name).is_file():
            raise DataError(f"{directory / name}: listed in {MANIFEST} but missing")
        if file_digest(directory / name) != digest:
            raise DataError(f"{directory / name}: SHA-256 differs from {MANIFEST} (corrupted?)")
    if trust_unverified:
        return
    for name in _listed_files(directory):
        if name not in listed:
            raise DataError(
                f"{directory / name}: not listed in {MANIFEST} (left by another model?); "
                "remove it or re-save the checkpoint into an empty folder"
            )


def replace_folder(directory: Path, write) -> Path:
    """Write a checkpoint into a fresh temporary sibling folder with ``write(tmp)`` and swap it
    in for ``directory`` (:func:`~fincrowd_ltr.data.folders.swap_in_folder`): no file of an
    earlier model survives, and a crash leaves either the old folder or the new one. A folder
    holding anything but checkpoint files is refused (its files would be lost)."""

    def write_checkpoint(tmp: Path) -> None:
        write(tmp)
        write_manifest(tmp)
        mode = (tmp / MANIFEST).stat().st_mode & 0o777  # the umask's mode for a new file
        for path in tmp.iterdir():
            path.chmod(mode)  # safetensors writes 0600, the rest follows the umask

    return swap_in_folder(
        directory,
        write_checkpoint,
        owns=lambda name: name in (*FILES, MANIFEST) or name.startswith("."),
        what="a checkpoint's",
        advice="save into an empty or new folder so nothing is lost",
    )


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
    feature_versions: dict[str, int] | None = FEATURE_VERSIONS,
) -> dict:
    """The ``config.json`` content (``feature_versions``: those the model was fitted with; None
    for a model saved before they were recorded, which stays unrecorded)."""
    code = feature_code()
    config = {
        "format_version": FORMAT_VERSION,
        "kind": "fincrowd-residual",
        "feature_names": code["feature_names"],
        "extractor_version": code["extractor_version"],
        "alpha": alpha,
        "gamma": gamma,
        "base_ranker": ranker,
        "training": summary,
        # copies for readers of the config; loading uses the weights files
        "standardisation": {"feature_mean": feature_mean, "feature_std": feature_std},
    }
    if feature_versions is not None:
        config["feature_versions"] = dict(feature_versions)
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
    check_feature_code(config, path)  # a warning names read_config's caller
    gate = config.get("gate")
    if gate is not None and gate.get("feature_names") != list(GATE_FEATURE_NAMES):
        raise DataError(f"{path}: gate features differ from this version's")
    return config


def feature_code() -> dict:
    """What a fit records of the code computing its features (a Lightning checkpoint keeps it
    under ``"fincrowd"``; ``config.json`` under the same keys)."""
    return {
        "feature_names": list(FEATURE_NAMES),
        "extractor_version": EXTRACTOR_VERSION,
        "feature_versions": dict(FEATURE_VERSIONS),
    }


def check_feature_code(record: dict, path: Path | str, stacklevel: int = 3) -> None:
    """Refuse a model whose features or field extractor differ from this version's; warn
    when its feature code's versions do (:class:`FeatureVersionWarning`; ``stacklevel``: the
    caller's frame, as for ``warnings.warn``)."""
    if record.get("feature_names") != list(FEATURE_NAMES):
        raise DataError(f"{path}: checkpoint features differ from this version's features")
    if record.get("extractor_version") != EXTRACTOR_VERSION:
        raise DataError(
            f"{path}: fitted with field extractor {record.get('extractor_version')}, this "
            f"version has {EXTRACTOR_VERSION}; refit or use a matching fincrowd_ltr"
        )
    _check_feature_versions(record.get("feature_versions"), path, stacklevel + 1)


def checked_feature_record(record, path: Path | str, stacklevel: int = 3) -> dict | None:
    """A Lightning checkpoint's feature record (its ``"fincrowd"`` entry), checked as
    :func:`check_feature_code` does; ``None``, warned, for a checkpoint written before the
    record existed (its features are taken to be this version's)."""
    if not isinstance(record, dict):
        warnings.warn(
            f"{path}: records no feature code (an earlier version wrote it): its features are "
            "taken to be this version's, and no feature versions are recorded for it",
            stacklevel=stacklevel,
        )
        return None
    check_feature_code(record, path, stacklevel + 1)
    return record


def _check_feature_versions(recorded: dict | None, path: Path | str, stacklevel: int) -> None:
    """Warn when a checkpoint's features were computed by other code than this version's (a
    checkpoint saved before the versions were recorded is not checked)."""
    if recorded is None:
        return
    moved = [
        f"{name} {recorded.get(name)} (now {version})"
        for name, version in FEATURE_VERSIONS.items()
        if recorded.get(name) != version
    ]
    if moved:
        warnings.warn(
            f"{path}: fitted with other feature code ({', '.join(moved)}): on some corpora its "
            "features now take other values than the ones it was trained on (CHANGELOG says "
            "which); refit it to be sure",
            FeatureVersionWarning,
            stacklevel=stacklevel,
        )


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


def add_domain(
    directory: Path, name: str, calibration: GateCalibration, replace: bool = False
) -> None:
    """Store a domain's gate calibration in a checkpoint (manifest refreshed); an existing
    domain is replaced only with ``replace``."""
    directory = Path(directory)
    check_manifest(directory)
    config = read_config(directory)
    if config.get("gate") is None:
        raise DataError(f"{directory / CONFIG}: checkpoint has no identity gate to calibrate "
                        f"({NO_GATE})")  # fmt: skip
    domains = config["gate"].setdefault("domains", {})
    if name in domains and not replace:
        raise DataError(
            f"{directory / CONFIG}: domain {name!r} is already calibrated; pass replace=True "
            "(--replace) to overwrite its calibration"
        )
    domains[name] = calibration.to_dict()
    write_json_atomic(directory / CONFIG, config)
    write_manifest(directory)


def domain_calibration(
    domains: dict[str, GateCalibration], name: str, directory: Path | None = None
) -> GateCalibration:
    """A domain's calibration, or an error naming the domains the checkpoint has."""
    if name not in domains:
        known = ", ".join(sorted(domains)) or "none"
        raise DataError(
            f"no gate calibration for domain {name!r} (calibrated: {known}); calibrate it first "
            "or fall back to the base order (`fallback='identity'` in Python, `\"fallback\": "
            '"identity"` in a request body, `--domain-fallback identity` on evaluate)',
            "domain",
        )
    return domains[name]
