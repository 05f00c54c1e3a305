"""The training objective: supporting-versus-distracting pairs with per-bank unit weight.

In each bank, every supporting (relevant) candidate is paired with each of the at most
``max_distractors`` highest-ranked distracting candidates by base score; a pair's loss is
``softplus(-(final_support - final_distract))`` (logistic / RankNet), and a bank's pairs carry
weights that sum to one, so a bank with many pairs counts as much as a bank with one. Banks without
a supporting candidate contribute nothing and are counted by the data module.

Options beside the paper's objective (the default):

- hard negatives: distractors that violate exactly one typed constraint (same company and metric,
  another year; same filing, another metric) are kept before the others, still at most
  ``max_distractors`` per bank and still unit weight per bank;
- ``listnet_loss``: a listwise objective (ListNet, Cao et al., 2007): cross-entropy between the
  softmax of the bank's scores and the uniform distribution over its supporting candidates, one
  unit per bank;
- ``lambdarank_loss``: the same pairs, each weighted by how much swapping its two candidates in
  the current corrected order would change the bank's nDCG@10 (LambdaRank, Burges, 2010), the
  weights of a bank still summing to one: pairs whose candidates both sit below rank 10 teach
  nothing, pairs that decide the top 10 teach most.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

MAX_DISTRACTORS = 30

# a batch's pairs as index lists: (bank, supporting candidate, distractor) and each pair's weight
Pairs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def pair_weights(
    labels: torch.Tensor,
    base_scores: torch.Tensor,
    mask: torch.Tensor,
    max_distractors: int = MAX_DISTRACTORS,
    hard: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(banks, n, n)`` weights ``W[b, i, j]`` for pairs (support i, distractor j); each bank
    with at least one pair sums to one. ``hard`` (banks, n) marks distractors kept first."""
    labels = labels.bool() & mask
    distract = (~labels) & mask
    # rank distractors by base score within the bank (hard ones first); keep the top ones
    key = base_scores.to(torch.float64)
    if hard is not None:
        spread = (key.max() - key.min()).abs() + 1.0
        key = key + hard.to(torch.float64) * spread
    kept = distract & (_ranks(torch.where(distract, key, float("-inf"))) < max_distractors)
    pairs = labels.unsqueeze(-1) & kept.unsqueeze(-2)
    counts = pairs.sum(dim=(-1, -2), keepdim=True).clamp(min=1)
    return pairs.to(torch.float64) / counts


def _ranks(scores: torch.Tensor) -> torch.Tensor:
    """Each entry's 0-based rank within its bank (last dimension), highest score first, ties
    in bank order."""
    order = torch.argsort(scores, dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(order.shape[-1]).expand_as(order))
    return rank


def pair_index(
    labels: torch.Tensor,
    base_scores: torch.Tensor,
    mask: torch.Tensor,
    max_distractors: int = MAX_DISTRACTORS,
    hard: torch.Tensor | None = None,
) -> Pairs:
    """The pairs of :func:`pair_weights` as index lists and weights, in row-major order."""
    weights = pair_weights(labels, base_scores, mask, max_distractors, hard)
    bank, support, distract = weights.nonzero(as_tuple=True)
    return bank, support, distract, weights[bank, support, distract]


def stack_pairs(banks: list[Pairs]) -> Pairs:
    """One batch's pairs from each bank's own (computed on the bank alone, without ``hard``: a
    bank's pairs do not depend on the other banks of its batch), as :func:`pair_index` of the
    padded batch gives them."""
    # joined in numpy: a training step's few small arrays cost several times more as torch ops
    sizes = [len(p[0]) for p in banks]
    bank = np.repeat(np.arange(len(banks), dtype=np.int64), sizes)
    joined = (np.concatenate([p[k].numpy() for p in banks]) for k in (1, 2, 3))
    return torch.from_numpy(bank), *(torch.from_numpy(a) for a in joined)


def pairwise_loss(
    final: torch.Tensor,
    labels: torch.Tensor,
    base_scores: torch.Tensor,
    mask: torch.Tensor,
    max_distractors: int = MAX_DISTRACTORS,
    hard: torch.Tensor | None = None,
    bank_weight: torch.Tensor | None = None,
    pairs: Pairs | None = None,
) -> torch.Tensor:
    """Mean over banks with pairs of the weighted pairwise logistic loss (computed on the pairs
    only: at most ``max_distractors`` per supporting candidate, not the bank's n x n);
    ``bank_weight`` (banks,) weighs each bank's unit in the mean (default 1 each). ``pairs``:
    the batch's :func:`pair_index` computed beforehand (a training loop's banks keep theirs
    across epochs; the n x n weights dominate a step's time)."""
    if pairs is None:
        pairs = pair_index(labels, base_scores, mask, max_distractors, hard)
    bank, support, distract, weights = pairs
    if len(bank) == 0:
        return final.sum() * 0.0
    margin = final[bank, support] - final[bank, distract]
    per_pair = weights * F.softplus(-margin)
    per_bank = torch.zeros(final.shape[0], dtype=per_pair.dtype).index_add(0, bank, per_pair)
    has_pairs = torch.zeros(final.shape[0], dtype=torch.bool)
    has_pairs[bank] = True
    return _weighted_mean(per_bank[has_pairs], bank_weight, has_pairs)


def lambda_weights(
    final: torch.Tensor, mask: torch.Tensor, pairs: Pairs, k: int = 10
) -> torch.Tensor:
    """Each pair's ``|delta nDCG@k|`` of swapping its support and distractor in the order of
    ``final`` (binary gains; the ideal DCG cancels in a bank's normalisation), times its
    :func:`pair_weights` weight, then normalised so that every bank with a nonzero total sums
    to one (a bank whose pairs all sit below rank ``k`` gets zeros)."""
    bank, support, distract, weights = pairs
    with torch.no_grad():
        position = _ranks(torch.where(mask, final.detach(), float("-inf"))).to(torch.float64)
        discount = torch.where(position < k, 1.0 / torch.log2(position + 2.0), 0.0)
        delta = (discount[bank, support] - discount[bank, distract]).abs() * weights
        total = torch.zeros(final.shape[0], dtype=delta.dtype).index_add(0, bank, delta)
        return torch.where(total[bank] > 0, delta / total[bank].clamp(min=1e-300), 0.0)


def lambdarank_loss(
    final: torch.Tensor,
    labels: torch.Tensor,
    base_scores: torch.Tensor,
    mask: torch.Tensor,
    max_distractors: int = MAX_DISTRACTORS,
    bank_weight: torch.Tensor | None = None,
    pairs: Pairs | None = None,
    k: int = 10,
) -> torch.Tensor:
    """:func:`pairwise_loss` over the same pairs with :func:`lambda_weights`: the mean over
    banks whose pairs can change nDCG@``k`` of each bank's lambda-weighted logistic loss."""
    if pairs is None:
        pairs = pair_index(labels, base_scores, mask, max_distractors)
    weights = lambda_weights(final, mask, pairs, k)
    kept = weights > 0
    weighted = (pairs[0][kept], pairs[1][kept], pairs[2][kept], weights[kept])
    return pairwise_loss(final, labels, base_scores, mask, bank_weight=bank_weight, pairs=weighted)


def _weighted_mean(
    values: torch.Tensor, bank_weight: torch.Tensor | None, kept: torch.Tensor
) -> torch.Tensor:
    if bank_weight is None:
        return values.mean()
    w = bank_weight[kept].to(values.dtype)
    return (values * w).sum() / w.sum()


def listnet_loss(
    final: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    bank_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over banks with a supporting candidate of ListNet's cross-entropy between the target
    distribution (uniform over supporting candidates) and the softmax of the final scores."""
    support = labels.bool() & mask
    has = support.any(-1)
    if not has.any():
        return final.sum() * 0.0
    logits = torch.where(mask, final, torch.full_like(final, float("-inf")))
    log_p = torch.log_softmax(logits[has], dim=-1)
    target = support[has].to(log_p.dtype)
    target = target / target.sum(-1, keepdim=True)
    per_bank = -(target * torch.where(support[has], log_p, torch.zeros_like(log_p))).sum(-1)
    return _weighted_mean(per_bank, bank_weight, has)
