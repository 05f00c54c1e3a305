"""What a bundle for another machine records about where it came from (commit, time), so that
a device run's log shows which code and which rule it followed."""

from __future__ import annotations

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
