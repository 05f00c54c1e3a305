"""Data-parallel training (two CPU processes, gloo) reaches the single-process result.

The training fold's banks fit in one batch of 8 on one process, or in one batch of 4 on each of two
processes: every step sees every bank, and the mean of the two processes' equal-sized mean losses is
the one-process mean loss, so averaged gradients, weights and validation nDCG@10 agree to rounding.
"""

import pytest
import torch

from fincrowd_ltr.training.module import batch_ndcg
from tests.conftest import write_corpus
from tests.training.conftest import train


def fit(root, cache, strategy, devices, batch_size):
    model, dm = train(root, cache, strategy, devices, batch_size)
    dm.setup("test")
    batch = next(iter(dm.test_dataloader()))
    with torch.no_grad():
        ndcg = batch_ndcg(model(batch), batch["labels"], batch["mask"]).mean().item()
    return model.scorer.weight.detach().clone(), ndcg


@pytest.mark.integration
def test_ddp_on_two_cpu_processes_matches_one_process(tmp_path):
    write_corpus(tmp_path / "corpus")
    single_w, single_ndcg = fit(tmp_path / "corpus", tmp_path / "cache", "auto", 1, 8)
    ddp_w, ddp_ndcg = fit(tmp_path / "corpus", tmp_path / "cache", "ddp_spawn", 2, 4)
    assert abs(single_ndcg - ddp_ndcg) <= 1e-9
    assert torch.allclose(single_w, ddp_w, atol=1e-6, rtol=0)  # agree to rounding
    assert single_w.abs().max() > 0.1  # and training moved the weights at all
