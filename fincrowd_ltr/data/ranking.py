"""The one rule that turns scores into an order.

Descending score; ties keep input position (a bank's input position is its first-stage rank),
never anything else. Every ranking this package reports, serves or trains on is made here.
"""

from __future__ import annotations

import numpy as np


def rank_order(scores) -> np.ndarray:
    """Indices of ``scores`` best first; ties in input order (stable).

    Works for any finite float64 values, whatever their magnitude.

    Example:
        >>> rank_order([0.2, 0.9, 0.2]).tolist()
        [1, 0, 2]
    """
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
