"""The correction as plain torch modules (Lightning wraps them in ``fincrowd_ltr.training``)."""

from fincrowd_ltr.model.pairs import MAX_DISTRACTORS, pair_weights, pairwise_loss
from fincrowd_ltr.model.residual import ResidualScorer, normalise_base

__all__ = ["MAX_DISTRACTORS", "ResidualScorer", "normalise_base", "pair_weights", "pairwise_loss"]
