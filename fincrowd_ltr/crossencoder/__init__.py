"""A cross-encoder trained here (LoRA on the shipped MiniLM): model, training and cross-fitting."""

from fincrowd_ltr.crossencoder.model import CrossEncoder, CrossEncoderConfig, focus
from fincrowd_ltr.crossencoder.ranker import CrossEncoderRanker
from fincrowd_ltr.crossencoder.training import Group, hard_negative_groups, train_cross_encoder

__all__ = [
    "CrossEncoder",
    "CrossEncoderConfig",
    "CrossEncoderRanker",
    "Group",
    "focus",
    "hard_negative_groups",
    "train_cross_encoder",
]
