"""What every bundle for the device holds besides its data: MiniLM in float16 (the device takes
64 MiB, float32 MiniLM is 91 MB) and where the bundle came from (commit, time), so that a device
run's log shows which code and which rule it followed."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path


def stamp() -> dict:
    """The checkout's commit, whether it has uncommitted changes, and the UTC time."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return out.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD") or "unknown",
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_minilm(folder: Path) -> None:
    """The shipped MiniLM's config and its weights in float16 into ``folder/model``."""
    from safetensors.torch import load_file, save_file

    from fincrowd_ltr.retrieval.dense import minilm_path

    target = Path(folder) / "model"
    target.mkdir(parents=True, exist_ok=True)
    weights = load_file(str(minilm_path() / "model.safetensors"))
    save_file(
        {k: v.half().contiguous() for k, v in weights.items()}, str(target / "model.safetensors")
    )
    shutil.copy(minilm_path() / "config.json", target / "config.json")
