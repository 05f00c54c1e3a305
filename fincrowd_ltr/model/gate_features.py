"""Per-query inputs of the identity gate: what the query asks, what conflicts crowd the top of
the base order, how unusual the bank looks to the residual, how confident the base order is, and
how much the residual would change the top 10. NumPy only (the torch-free runtime uses it too).

- ``observes_<field>``: 1 if the query states the field;
- ``top10_<field>_conflicts``: share of the base top 10 conflicting on the field;
- ``out_of_distribution``: root mean square of the top 10's standardised features (large when the
  bank lies outside what the residual was trained on);
- ``base_margin_top`` / ``base_margin_cut``: normalised base score gap between ranks 1 and 2, and
  between ranks 10 and 11 (a confident base order);
- ``top_concentration``: mean local lexical concentration of the base top 10;
- ``top10_changed``: share of the base top 10 the residual order pushes out;
- ``top10_rank_shift``: mean absolute rank change of the base top 10, over the bank size;
- ``correction_spread``: standard deviation of the residual's score changes in the bank.
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.data.ranking import rank_order
from fincrowd_ltr.features.bank_features import CONFLICT_COLUMNS, FEATURE_NAMES
from fincrowd_ltr.fields.extractor import FIELD_NAMES

TOP = 10
GATE_FEATURE_NAMES: tuple[str, ...] = (
    *(f"observes_{name}" for name in FIELD_NAMES),
    *(f"top{TOP}_{name}_conflicts" for name in FIELD_NAMES),
    "out_of_distribution",
    "base_margin_top",
    "base_margin_cut",
    "top_concentration",
    "top10_changed",
    "top10_rank_shift",
    "correction_spread",
)
_CONCENTRATION = FEATURE_NAMES.index("concentration")


def gate_features_from_scores(
    features: np.ndarray,
    base: np.ndarray,
    observed: tuple[str, ...],
    final: np.ndarray,
    s_hat: np.ndarray,
    standardised: np.ndarray,
) -> np.ndarray:
    """Gate inputs of one bank from the residual's outputs (corrected scores, normalised base
    scores, standardised features); rows of ``features`` in bank order, ``observed`` the fields
    the question states."""
    n = len(base)
    k = min(TOP, n)
    z = standardised
    base_order = rank_order(base)
    final_order = rank_order(final)
    top = base_order[:k]
    final_rank = np.empty(n, dtype=np.int64)
    final_rank[final_order] = np.arange(n)
    sorted_hat = s_hat[base_order]
    out = [float(name in observed) for name in FIELD_NAMES]
    out += [float(features[top, c].mean()) for c in CONFLICT_COLUMNS]
    out += [
        float(np.sqrt((z[top] ** 2).mean())),
        float(sorted_hat[0] - sorted_hat[1]) if n > 1 else 0.0,
        float(sorted_hat[k - 1] - sorted_hat[k]) if n > k else 0.0,
        float(features[top, _CONCENTRATION].mean()),
        float(1.0 - len(set(top) & set(final_order[:k])) / k),
        float(np.abs(final_rank[top] - np.arange(k)).mean() / n),
        float((final - s_hat).std()),
    ]
    return np.array(out, dtype=np.float64)
