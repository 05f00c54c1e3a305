"""Distribution shift: banks unlike the ones a correction was trained on.

A checkpoint records the banks it was trained on (first stage, bank size, base ranker) and its
features' standardisation statistics. Applying it to banks of another first stage, of a very
different size, or whose features sit far from the training statistics gives a warning (a
:class:`DistributionShiftWarning` in Python, a line in the CLI's output and the evaluation
report, a ``warnings`` field in ``POST /rerank``'s response): the correction may not help there.
Nothing is refused: the warning says what differs.
"""

from __future__ import annotations

import numpy as np

from fincrowd_ltr.features.bank_features import FEATURE_NAMES

SIZE_RATIO = 10.0  # a bank this many times smaller or larger than the training banks (top-20
# reranking of a model trained on banks of 100 is an intended use: the cascade does it)
# the mean standardised value of a feature over the banks scored: 0 on the training banks, so a
# mean this many training standard deviations away is a shift (over many banks, evaluation) ...
SHIFT_Z = 1.0
# ... and over one request's bank, whose mean is noisier (serving). Measured with zero-label
# checkpoints on their own first stage: 5.7% of FinanceBench and 2.5% of TAT-QA dev banks pass 5
# (at 3: 11% and 9%); on banks of another first stage or dataset, 78% and 98% do.
SHIFT_Z_ONE_BANK = 5.0


CONSTANT_Z = 1e6  # a standardised mean this large: the feature was constant in training


def _z(z: float) -> str:
    return "(constant in training)" if abs(z) > CONSTANT_Z else f"{z:+.1f}"


class DistributionShiftWarning(UserWarning):
    """Banks unlike the correction's training banks."""


def bank_warnings(
    trained_first_stage: str | None,
    trained_size: int | None,
    first_stage: str | None,
    size: int | None,
) -> list[str]:
    """What differs between the training banks and these (first stage, size)."""
    out = []
    if trained_first_stage and first_stage and first_stage != trained_first_stage:
        out.append(
            f"the correction was trained on banks of first stage {trained_first_stage!r}, these "
            f"come from {first_stage!r}: its features and gate may not carry over"
        )
    if trained_size and size and not trained_size / SIZE_RATIO <= size <= trained_size * SIZE_RATIO:
        out.append(
            f"banks of {size} candidates; the correction was trained on banks of {trained_size}"
        )
    return out


def scorer_warnings(ranker: str, trained_scorer: str | None, scorer: str | None) -> list[str]:
    """Whether the static scorer behind ``ranker``'s scores of these banks (``scorer``, the
    banks' version of it, which ends with its recipe; ``None`` for a fixed model) differs in
    scoring code or question reader from the one that scored the training banks
    (``trained_scorer``, the checkpoint's recipe; ``None`` in checkpoints written before it was
    recorded)."""
    if not scorer:
        return []
    if not trained_scorer:
        return [
            f"the correction does not record who read the questions of its {ranker!r} base "
            f"ranker in training; these banks' scores are {_recipe(scorer)}: refit it if it was "
            "trained otherwise (static_questions=, --static-questions)"
        ]
    if scorer.endswith(trained_scorer):
        return []
    from fincrowd_ltr.retrieval.rankers import reader_of

    how = "build the banks as it was trained (static_questions=, --static-questions) or refit it"
    if reader_of(scorer) == reader_of(trained_scorer):  # another version of its table or scores
        how = "refit it"
    return [
        f"the {ranker!r} base scores of these banks are {_recipe(scorer)}, the correction was "
        f"trained on {trained_scorer!r}: {how}"
    ]


def _recipe(version: str) -> str:
    """The scoring code and question reader of a bank file's static scorer version."""
    from fincrowd_ltr.retrieval.rankers import recipe_of

    return repr(recipe_of(version))


def feature_warnings(standardised: np.ndarray, threshold: float = SHIFT_Z) -> list[str]:
    """Features whose mean standardised value over ``standardised`` (candidates x features,
    standardised by the training statistics) is more than ``threshold`` from zero."""
    if standardised.size == 0:
        return []
    means = np.asarray(standardised, dtype=np.float64).mean(axis=0)
    far = [(FEATURE_NAMES[j], float(means[j])) for j in np.flatnonzero(np.abs(means) > threshold)]
    if not far:
        return []
    shown = ", ".join(f"{name} {_z(z)}" for name, z in sorted(far, key=lambda f: -abs(f[1]))[:5])
    return [
        f"{len(far)} of {len(FEATURE_NAMES)} features sit far from the training banks' (mean "
        f"standardised value beyond {threshold:g}: {shown})"
    ]
