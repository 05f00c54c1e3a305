"""The training objective: supporting-versus-distracting pairs with per-bank unit weight.

In each bank, every supporting (relevant) candidate is paired with each of the at most
``max_distractors`` highest-ranked distracting candidates by base score; a pair's loss is
``softplus(-(final_support - final_distract))`` (logistic / RankNet), and a bank's pairs carry
weights that sum to one, so a bank with many pairs counts as much as a bank with one. Banks without
a supporting candidate contribute nothing and are counted by the data module.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MAX_DISTRACTORS = 30


def pair_weights(
    labels: torch.Tensor,
    base_scores: torch.Tensor,
    mask: torch.Tensor,
    max_distractors: int = MAX_DISTRACTORS,
) -> torch.Tensor:
    """``(banks, n, n)`` weights ``W[b, i, j]`` for pairs (support i, distractor j); each bank
    with at least one pair sums to one."""
    labels = labels.bool() & mask
    distract = (~labels) & mask
    # rank distractors by base score within the bank; keep the top max_distractors
    masked = torch.where(
        distract,
        base_scores.to(torch.float64),
        torch.full_like(base_scores, float("-inf"), dtype=torch.float64),
    )
    order = torch.argsort(masked, dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(order.shape[-1]).expand_as(order))
    kept = distract & (rank < max_distractors)
    pairs = labels.unsqueeze(-1) & kept.unsqueeze(-2)
    counts = pairs.sum(dim=(-1, -2), keepdim=True).clamp(min=1)
    return pairs.to(torch.float64) / counts


def pairwise_loss(
    final: torch.Tensor,
    labels: torch.Tensor,
    base_scores: torch.Tensor,
    mask: torch.Tensor,
    max_distractors: int = MAX_DISTRACTORS,
) -> torch.Tensor:
    """Mean over banks with pairs of the weighted pairwise logistic loss (computed on the pairs
    only: at most ``max_distractors`` per supporting candidate, not the bank's n x n)."""
    weights = pair_weights(labels, base_scores, mask, max_distractors)
    bank, support, distract = weights.nonzero(as_tuple=True)
    if len(bank) == 0:
        return final.sum() * 0.0
    margin = final[bank, support] - final[bank, distract]
    per_pair = weights[bank, support, distract] * F.softplus(-margin)
    per_bank = torch.zeros(final.shape[0], dtype=per_pair.dtype).index_add(0, bank, per_pair)
    has_pairs = torch.zeros(final.shape[0], dtype=torch.bool)
    has_pairs[bank] = True
    return per_bank[has_pairs].mean()
