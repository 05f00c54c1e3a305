"""The residual correction and its pairwise objective on tiny hand-made banks."""

import math

import numpy as np
import pytest
import torch

from fincrowd_ltr.model import ResidualScorer, normalise_base, pair_weights, pairwise_loss
from fincrowd_ltr.model.pairs import lambda_weights, lambdarank_loss, listnet_loss, pair_index


def softplus(x):
    return math.log1p(math.exp(x))


def test_normalise_base_handles_degenerate_banks():
    assert normalise_base(torch.tensor([5.0])).tolist() == [0.0]
    assert normalise_base(torch.tensor([2.0, 2.0, 2.0])).tolist() == [0.0, 0.0, 0.0]
    z = normalise_base(torch.tensor([1.0, 3.0]))
    assert z.dtype == torch.float64 and z.tolist() == [-1.0, 1.0]
    # padding does not change the real candidates' values
    padded = normalise_base(torch.tensor([[1.0, 3.0, 99.0]]), torch.tensor([[True, True, False]]))
    assert padded[0, :2].tolist() == [-1.0, 1.0] and padded[0, 2] == 0


def test_final_score_formula_by_hand():
    scorer = ResidualScorer(2, alpha=0.5, gamma=2.0)
    scorer.fit_standardisation(torch.tensor([[0.0, 1.0], [2.0, 1.0]]))  # mu (1, 1), sigma (1, 1*)
    assert scorer.feature_std.tolist() == [1.0, 1.0]  # constant feature -> sigma 1
    with torch.no_grad():
        scorer.weight.copy_(torch.tensor([0.3, -1.0], dtype=torch.float64))
    x = torch.tensor([[0.0, 1.0], [2.0, 3.0]], dtype=torch.float64)
    final = scorer(x, torch.tensor([1.0, 3.0]))
    r = [0.3 * -1 + -1.0 * 0.0, 0.3 * 1 + -1.0 * 2.0]
    expected = [-1 + 0.5 * math.tanh(2 * r[0]), 1 + 0.5 * math.tanh(2 * r[1])]
    assert torch.allclose(final, torch.tensor(expected, dtype=torch.float64))


def test_one_pass_outputs_equal_the_separate_computations_bit_for_bit():
    scorer = ResidualScorer(4, alpha=2.0, gamma=0.7)
    x = torch.randn(30, 4, dtype=torch.float64) * 3.0 + 1.0
    scorer.fit_standardisation(x)
    with torch.no_grad():
        scorer.weight.copy_(torch.tensor([0.4, -1.3, 0.0, 2.2], dtype=torch.float64))
    base = torch.randn(30, dtype=torch.float64) * 1e3
    final, s_hat, z = scorer.outputs(x, base)
    assert torch.equal(final, scorer(x, base))  # what runtimes serve is what training scores
    assert torch.equal(s_hat, normalise_base(base))
    assert torch.equal(z, scorer.standardise(x))
    by_hand = normalise_base(base) + 2.0 * torch.tanh(0.7 * scorer.residual(x))
    assert torch.equal(final, by_hand)


def test_standardisation_round_trip():
    scorer = ResidualScorer(3)
    data = torch.randn(50, 3, dtype=torch.float64) * torch.tensor([1.0, 5.0, 0.1]) + 2.0
    scorer.fit_standardisation(data)
    z = scorer.standardise(data)
    assert torch.allclose(z.mean(0), torch.zeros(3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(z.std(0, unbiased=False), torch.ones(3, dtype=torch.float64))
    back = z * scorer.feature_std + scorer.feature_mean
    assert torch.allclose(back, data)


def test_permutation_invariance_and_membership():
    torch.manual_seed(0)
    scorer = ResidualScorer(4, alpha=0.7, gamma=1.5)
    with torch.no_grad():
        scorer.weight.normal_()
    x, base = torch.randn(10, 4, dtype=torch.float64), torch.randn(10, dtype=torch.float64)
    perm = torch.randperm(10)
    a, b = scorer(x, base), scorer(x[perm], base[perm])
    assert torch.allclose(a[perm], b)
    order = torch.argsort(a, descending=True)
    assert sorted(order.tolist()) == list(range(10))  # same candidates, only reordered


def test_pair_loss_by_hand_with_unit_bank_weight():
    # bank 1: one support (index 0) and two distractors -> 2 pairs of weight 1/2
    # bank 2: two supports, one distractor -> 2 pairs of weight 1/2; bank 3: no support (skipped)
    final = torch.tensor([[2.0, 1.0, 0.0], [0.5, 0.0, 1.0], [1.0, 2.0, 3.0]], dtype=torch.float64)
    labels = torch.tensor([[1, 0, 0], [1, 0, 1], [0, 0, 0]])
    mask = torch.ones(3, 3, dtype=torch.bool)
    loss = pairwise_loss(final, labels, final, mask)
    bank1 = 0.5 * softplus(-(2 - 1)) + 0.5 * softplus(-(2 - 0))
    bank2 = 0.5 * softplus(-(0.5 - 0)) + 0.5 * softplus(-(1 - 0))
    assert math.isclose(loss.item(), (bank1 + bank2) / 2, rel_tol=1e-12)
    weights = pair_weights(labels, final, mask)
    assert weights[0].sum() == 1 and weights[1].sum() == 1 and weights[2].sum() == 0


def test_distractor_cap_keeps_the_highest_ranked():
    base = torch.arange(40, dtype=torch.float64).flip(0).unsqueeze(0)  # index 0 ranks first
    labels = torch.zeros(1, 40, dtype=torch.long)
    labels[0, 39] = 1  # the support is ranked last
    weights = pair_weights(labels, base, torch.ones(1, 40, dtype=torch.bool), max_distractors=30)
    paired = weights[0, 39].nonzero().flatten().tolist()
    assert paired == list(range(30))  # the 30 highest-ranked distractors, weight 1/30 each
    assert torch.allclose(weights[0, 39, :30], torch.full((30,), 1 / 30, dtype=torch.float64))


def test_hard_negatives_are_kept_before_higher_ranked_distractors():
    base = torch.arange(40, dtype=torch.float64).flip(0).unsqueeze(0)
    labels = torch.zeros(1, 40, dtype=torch.long)
    labels[0, 39] = 1
    hard = torch.zeros(1, 40, dtype=torch.bool)
    hard[0, 35:38] = True  # three low-ranked distractors that conflict on one field only
    mask = torch.ones(1, 40, dtype=torch.bool)
    weights = pair_weights(labels, base, mask, max_distractors=30, hard=hard)
    paired = weights[0, 39].nonzero().flatten().tolist()
    assert paired == [*range(27), 35, 36, 37] and math.isclose(weights.sum().item(), 1.0)


def test_listnet_loss_by_hand_and_banks_without_support_skipped():
    final = torch.tensor([[2.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    labels = torch.tensor([[1, 0, 0], [0, 0, 0]])
    mask = torch.tensor([[True, True, True], [True, True, True]])
    expected = -math.log(math.exp(2) / (math.exp(2) + 2))
    assert math.isclose(listnet_loss(final, labels, mask).item(), expected, rel_tol=1e-12)
    padded = torch.tensor([[2.0, 0.0, 99.0]], dtype=torch.float64)
    two = listnet_loss(padded, labels[:1], torch.tensor([[True, True, False]]))
    assert math.isclose(two.item(), -math.log(math.exp(2) / (math.exp(2) + 1)), rel_tol=1e-12)


def test_lambdarank_weighs_pairs_by_their_ndcg_change_and_skips_pairs_below_k():
    """A bank of 14: the support at rank 3 (0-based 2); distractors at ranks 1, 2 and 4-14.
    With k = 3, a pair teaches in proportion to |1/log2(r_s + 2) - 1/log2(r_d + 2)| (0 below
    rank k), and the bank's weights sum to one."""
    final = torch.tensor([list(range(14, 0, -1))], dtype=torch.float64)
    labels = torch.zeros(1, 14, dtype=torch.long)
    labels[0, 2] = 1
    mask = torch.ones(1, 14, dtype=torch.bool)
    pairs = pair_index(labels, final, mask)
    weights = lambda_weights(final, mask, pairs, k=3)
    disc = [1.0, 1 / math.log2(3), 0.5]
    raw = {0: disc[0] - disc[2], 1: disc[1] - disc[2]} | {j: disc[2] for j in range(3, 14)}
    expected = [raw[int(j)] / sum(raw.values()) for j in pairs[2]]
    assert torch.allclose(weights, torch.tensor(expected, dtype=torch.float64), atol=1e-12)
    assert math.isclose(weights.sum().item(), 1.0, rel_tol=1e-12)
    # a support already on top of its distractors still pairs with those it would swap with
    deep = torch.zeros(1, 14, dtype=torch.long)
    deep[0, 12] = 1  # support at rank 13, distractors in the top 3 carry all the weight
    pairs = pair_index(deep, final, mask)
    weights = lambda_weights(final, mask, pairs, k=3)
    top = [int(j) < 3 for j in pairs[2]]
    assert weights[torch.tensor(top)].sum().item() == pytest.approx(1.0)
    assert (weights[~torch.tensor(top)] == 0).all()
    # by hand: only the pairs that cross rank k count, each with its logistic loss
    loss = lambdarank_loss(final, deep, final, mask, k=3)
    w = [disc[0], disc[1], disc[2]]
    by_hand = sum(wi * softplus(-(final[0, 12] - final[0, j]).item()) for j, wi in enumerate(w))
    assert math.isclose(loss.item(), by_hand / sum(w), rel_tol=1e-12)


def test_lambdarank_skips_banks_whose_pairs_cannot_change_the_top_k():
    final = torch.tensor([[5.0, 4.0, 3.0, 2.0], [4.0, 3.0, 2.0, 1.0]], dtype=torch.float64)
    labels = torch.tensor([[0, 0, 0, 1], [1, 0, 0, 0]])
    mask = torch.ones(2, 4, dtype=torch.bool)
    # k = 1: bank 0's support (rank 4) pairs only with the top candidate; bank 1's (on top)
    # with each distractor alike (each swap costs it the whole top 1)
    one = lambdarank_loss(final, labels, final, mask, k=1)
    on_top = (softplus(-1.0) + softplus(-2.0) + softplus(-3.0)) / 3
    assert math.isclose(one.item(), (softplus(3.0) + on_top) / 2, rel_tol=1e-12)
    labels = torch.tensor([[0, 0, 0, 0], [0, 0, 0, 0]])
    assert lambdarank_loss(final, labels, final, mask).item() == 0.0


def test_padding_is_ignored_by_the_loss():
    final = torch.tensor([[2.0, 1.0, 50.0]], dtype=torch.float64)
    labels = torch.tensor([[1, 0, 0]])
    mask = torch.tensor([[True, True, False]])
    assert math.isclose(pairwise_loss(final, labels, final, mask).item(), softplus(-1.0))


def test_dropped_features_keep_zero_weight_and_no_effect():
    from fincrowd_ltr.features import FEATURE_NAMES
    from fincrowd_ltr.training.module import ResidualModule

    module = ResidualModule(drop_features=["period", "concentration"])
    active = dict(zip(FEATURE_NAMES, module.scorer.active.tolist(), strict=True))
    assert active["period_match"] == active["period_conflict"] == active["concentration"] == 0
    assert active["entity_match"] == 1 and active["lexical"] == 1
    with torch.no_grad():
        module.scorer.weight.fill_(1.0)
    x = torch.zeros(3, len(FEATURE_NAMES), dtype=torch.float64)
    y = x.clone()
    y[:, FEATURE_NAMES.index("period_conflict")] = 5.0
    base = torch.tensor([1.0, 2.0, 3.0])
    assert torch.equal(module.scorer(x, base), module.scorer(y, base))
    everything_typed = ResidualModule(drop_features=["compatibility"]).scorer.active
    typed = [n.endswith(("_match", "_conflict")) for n in FEATURE_NAMES]
    assert everything_typed[typed].sum() == 0
    assert everything_typed[[not t for t in typed]].sum() == len(typed) - sum(typed)


def test_bank_weights_scale_each_banks_unit_in_the_mean():
    final = torch.tensor([[2.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    labels = torch.tensor([[1, 0], [1, 0]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    one, two = softplus(-1.0), softplus(1.0)
    weighted = pairwise_loss(final, labels, final, mask, bank_weight=torch.tensor([1.0, 0.25]))
    assert math.isclose(weighted.item(), (one + 0.25 * two) / 1.25, rel_tol=1e-12)
    assert pairwise_loss(final, labels, final, mask).item() == (one + two) / 2
    listnet = listnet_loss(final, labels, mask, torch.tensor([1.0, 0.0]))
    assert math.isclose(listnet.item(), listnet_loss(final[:1], labels[:1], mask[:1]).item())


def test_monotone_residual_never_lets_a_conflict_raise_a_candidate():
    """Banks where a period conflict marks the supporting candidate (a noisy, wrong-signed
    signal): the free residual learns a positive conflict weight, the monotone one cannot."""
    from fincrowd_ltr.features import FEATURE_NAMES
    from fincrowd_ltr.features.examples import BankExample
    from fincrowd_ltr.training.fitting import fit_residual

    generator = torch.Generator().manual_seed(0)
    conflict, match = FEATURE_NAMES.index("period_conflict"), FEATURE_NAMES.index("entity_match")
    banks = []
    for i in range(24):
        x = torch.rand(8, len(FEATURE_NAMES), generator=generator, dtype=torch.float64)
        labels = torch.zeros(8, dtype=torch.long)
        labels[i % 8] = 1
        x[:, conflict] = labels.to(torch.float64)  # the support "conflicts"
        x[:, match] = 1 - labels.to(torch.float64)  # and the distractors "match"
        base = torch.rand(8, generator=generator, dtype=torch.float64)
        pids = [f"{i}-{j}" for j in range(8)]
        banks.append(BankExample(f"q{i}", pids, x.numpy(), base.numpy(), labels.numpy()))
    free, _, _ = fit_residual(banks[:16], banks[16:], {}, max_epochs=15)
    signed, _, _ = fit_residual(banks[:16], banks[16:], {"monotone": True}, max_epochs=15)
    assert free.scorer.weight[conflict] > 0 and free.scorer.weight[match] < 0
    assert signed.scorer.weight[conflict] <= 0 and signed.scorer.weight[match] >= 0


def test_a_committee_of_residuals_is_one_residual_with_the_members_mean_r():
    """Members with their own standardisation and weights merge into one ``ResidualScorer``
    whose ``r`` (constant term included, which ``tanh`` reads) and corrected scores are the
    members' mean ``r`` and its correction, standardised with the statistics of the rows it is
    given; the averaged raw weights keep their signs."""
    from fincrowd_ltr.model.residual import average_residuals

    rng = np.random.default_rng(3)
    members = []
    for _ in range(4):
        s = ResidualScorer(5, alpha=2.0, gamma=0.7, active=[True, True, True, True, False])
        s.feature_mean.copy_(torch.from_numpy(rng.normal(size=5) * 10))
        s.feature_std.copy_(torch.from_numpy(rng.uniform(0.1, 5.0, size=5)))
        with torch.no_grad():
            s.weight.copy_(torch.from_numpy(np.abs(rng.normal(size=5)) * [1, -1, 1, -1, 1]))
        members.append(s)
    members[0].feature_std[2] = 1.0  # a feature constant in one member's training rows
    members[0].weight.data[2] = 0.0
    x = torch.from_numpy(rng.normal(size=(30, 5)) * 20)
    merged = average_residuals(members, x)
    assert torch.allclose(merged.feature_std, x.std(0, unbiased=False))
    base = torch.from_numpy(rng.normal(size=30))
    mean_r = torch.stack([m.residual(x) for m in members]).mean(0)
    assert torch.allclose(merged.residual(x), mean_r, rtol=1e-10, atol=1e-10)
    expected = normalise_base(base) + 2.0 * torch.tanh(0.7 * mean_r)
    assert torch.allclose(merged(x, base), expected, rtol=1e-10, atol=1e-10)
    signs = torch.sign(merged.weight)
    assert signs.tolist() == [1.0, -1.0, 1.0, -1.0, 0.0]  # signs kept, switched-off stays 0
    assert torch.allclose(average_residuals(members).residual(x), mean_r, rtol=1e-10, atol=1e-10)
    alone = average_residuals(members[:1])
    assert torch.allclose(alone.residual(x), members[0].residual(x), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="share alpha"):
        average_residuals([members[0], ResidualScorer(5, alpha=1.0, gamma=0.7)])
