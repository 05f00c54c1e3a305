"""Saving and loading a trained residual as a small directory (``config.json`` + weights).

``config.json`` records the format version, the feature names, the extractor version, alpha,
gamma, the base ranker the residual was fitted for and a training summary; ``residual.safetensors``
holds the weights and standardisation statistics. Loading checks all of them before returning.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file, save_file

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.features import FEATURE_NAMES
from fincrowd_ltr.fields.vocabulary import EXTRACTOR_VERSION
from fincrowd_ltr.model.residual import ResidualScorer

FORMAT_VERSION = 1
CONFIG = "config.json"
WEIGHTS = "residual.safetensors"


def save_residual(directory: Path, scorer: ResidualScorer, ranker: str, summary: dict) -> None:
    """Write ``scorer`` fitted for base ranker ``ranker`` to ``directory``."""
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
    }
    tensors = {k: v.detach().contiguous() for k, v in scorer.state_dict().items()}
    save_file(tensors, str(directory / WEIGHTS))
    (directory / CONFIG).write_text(json.dumps(config, indent=1))


def load_residual(directory: Path, ranker: str | None = None) -> tuple[ResidualScorer, dict]:
    """Load a residual; with ``ranker``, refuse one fitted for another base ranker."""
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
