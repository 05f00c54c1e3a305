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
    """Mean over banks with pairs of the weighted pairwise logistic loss."""
    weights = pair_weights(labels, base_scores, mask, max_distractors)
    safe = torch.where(mask, final, torch.zeros_like(final))
    margin = safe.unsqueeze(-1) - safe.unsqueeze(-2)  # [b, i, j] = final_i - final_j
    per_bank = (weights * F.softplus(-margin)).sum(dim=(-1, -2))
    has_pairs = weights.sum(dim=(-1, -2)) > 0
    if not has_pairs.any():
        return final.sum() * 0.0
    return per_bank[has_pairs].mean()
