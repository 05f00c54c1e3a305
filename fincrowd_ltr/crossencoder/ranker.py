"""The cross-encoder as a base ranker over bank candidates."""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.crossencoder.model import CrossEncoder
from fincrowd_ltr.data.schema import Passage, Query


class CrossEncoderRanker:
    """Scores ``(question, passage)`` pairs with a trained cross-encoder (logits, float64)."""

    name = "cross-encoder"

    def __init__(self, model: CrossEncoder, passages: dict[str, Passage], batch_size: int = 32):
        self.model = model.eval()
        self.passages = passages
        self.batch_size = batch_size

    def score(self, query: Query, pids: list[str]) -> np.ndarray:
        return self.model.score(query.text, [self.passages[p].text for p in pids], self.batch_size)
