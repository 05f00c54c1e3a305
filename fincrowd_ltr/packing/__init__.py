"""Context packing for the generator: token counts, splitting, pruning policies, budgeted packing
with citations, assembly orders and split-and-fuse groups."""

from fincrowd_ltr.packing.order import ORDERS, assemble
from fincrowd_ltr.packing.packer import (
    DEFAULT_BUDGET,
    Citation,
    Packer,
    Packing,
    fuse_groups,
    rank_halves_exceed,
)
from fincrowd_ltr.packing.pruning import POLICIES, PruningPolicy, near_duplicate_of
from fincrowd_ltr.packing.split import split_passage, units
from fincrowd_ltr.packing.tokens import TokenCounter

__all__ = [
    "DEFAULT_BUDGET",
    "ORDERS",
    "POLICIES",
    "Citation",
    "Packer",
    "Packing",
    "PruningPolicy",
    "TokenCounter",
    "assemble",
    "fuse_groups",
    "near_duplicate_of",
    "rank_halves_exceed",
    "split_passage",
    "units",
]
