"""The label-free check a fit reports: its always-on correction on synthetic questions of
companies that no fit of the round trained on.

Each gated cross-validation round (synthetic scope ``folds``) holds out a fold of the labelled
set's companies; their synthetic questions (written from their own pages, no label read) are
scored by the round's residual. How much it moves nDCG@10 on them tells a user with few labelled
questions whether the correction transfers to companies it has not seen, on hundreds of
questions instead of a handful; the project decided its own changes on the paired difference of
this figure between two fits (docs/results.md). It reads synthetic questions, so it favours a
correction trained on more of them: a check beside the labelled rows, not a substitute.
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.metrics import bootstrap_ci


def held_out_synthetic_check(gate_folds: list[dict], groups: dict[str, str]) -> dict | None:
    """Pool the gate folds' held-out synthetic rows (``rows.synthetic_test``: qids, always-on
    nDCG@10 gains, orderable) over their orderable questions.

    Args:
        gate_folds: A fit report's ``gate_folds``.
        groups: Each synthetic question's company (the cluster of the bootstrap interval).

    Returns:
        ``{"n_questions", "n_orderable", "n_groups", "ndcg@10_gain", "ci95", "improved",
        "harmed"}`` (shares of the orderable questions), or None when no fold held out a
        synthetic question.
    """
    qids, gains, n_questions = [], [], 0
    for fold in gate_folds:
        rows = fold.get("rows", {}).get("synthetic_test")
        if not rows:
            continue
        n_questions += len(rows["qids"])
        for qid, gain, orderable in zip(
            rows["qids"], rows["gains"], rows["orderable"], strict=True
        ):
            if orderable:
                qids.append(qid)
                gains.append(gain)
    if not n_questions:
        return None
    values = np.asarray(gains, dtype=np.float64)
    clusters = [groups.get(q, q) for q in qids]

    def mean(x: np.ndarray) -> float:  # NaN where no question is orderable
        return float(x.mean()) if len(x) else float("nan")

    return {
        "n_questions": n_questions,
        "n_orderable": len(values),
        "n_groups": len(set(clusters)),
        "ndcg@10_gain": mean(values),
        "ci95": list(bootstrap_ci(values, groups=clusters)),  # (NaN, NaN) without values
        "improved": mean(values > 1e-12),
        "harmed": mean(values < -1e-12),
    }
