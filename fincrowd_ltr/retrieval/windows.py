"""Token windows for passages longer than a model's input, and how window scores are pooled.

Policies (``WindowPolicy``): ``first`` scores only the first window (truncation); ``max`` scores
every window and keeps the best (max pooling over windows); ``mean`` averages window scores.
Windows do not overlap; each holds ``window_tokens`` word pieces plus the special tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POLICIES = ("first", "max", "mean")


@dataclass(frozen=True)
class WindowPolicy:
    """How a long passage is cut and pooled.

    Attributes:
        pooling: ``first``, ``max`` or ``mean``.
        window_tokens: Word pieces per window (without special tokens).
        max_windows: Upper bound on windows per passage (``None`` = all); ``first`` uses 1.
    """

    pooling: str = "max"
    window_tokens: int = 254
    max_windows: int | None = None

    def __post_init__(self) -> None:
        if self.pooling not in POLICIES:
            raise ValueError(f"window pooling must be one of {POLICIES}, got {self.pooling!r}")
        if self.window_tokens < 8:
            raise ValueError("window_tokens must be at least 8")

    @property
    def windows_needed(self) -> int | None:
        return 1 if self.pooling == "first" else self.max_windows

    def key(self) -> str:
        """Cache namespace: embeddings depend on the window size and count, not the pooling;
        ``b1``: computed in batches of equal-length windows (batch-invariant, see
        :meth:`~fincrowd_ltr.retrieval.windowed_encoder.WindowedEncoder.length_batches`)."""
        return f"w{self.window_tokens}-n{self.windows_needed or 'all'}-b1"

    def split(self, token_ids: list[int]) -> list[list[int]]:
        """Cut word-piece ids into windows (an empty text gives one empty window)."""
        size = self.window_tokens
        windows = [token_ids[i : i + size] for i in range(0, len(token_ids), size)] or [[]]
        limit = self.windows_needed
        return windows[:limit] if limit else windows

    def pool(self, window_scores: np.ndarray) -> float:
        """Combine the scores of one passage's windows into one score."""
        if self.pooling == "first":
            return float(window_scores[0])
        if self.pooling == "max":
            return float(window_scores.max())
        return float(window_scores.mean())
