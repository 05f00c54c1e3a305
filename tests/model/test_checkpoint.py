"""Residual checkpoints: exact round trip and clear errors."""

import json

import pytest
import torch

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.features import FEATURE_NAMES
from fincrowd_ltr.model import ResidualScorer
from fincrowd_ltr.model.correction import save_residual
from fincrowd_ltr.model.runtime import load_residual


@pytest.fixture
def saved(tmp_path):
    scorer = ResidualScorer(len(FEATURE_NAMES), alpha=0.8, gamma=1.3)
    torch.manual_seed(0)
    scorer.fit_standardisation(torch.randn(40, len(FEATURE_NAMES), dtype=torch.float64))
    with torch.no_grad():
        scorer.weight.normal_()
    save_residual(tmp_path, scorer, "dense", {"train_banks": 3})
    return tmp_path, scorer


def test_round_trip_gives_identical_scores(saved):
    path, scorer = saved
    loaded, config = load_residual(path, ranker="dense")
    x = torch.randn(100, len(FEATURE_NAMES), dtype=torch.float64)
    base = torch.randn(100, dtype=torch.float64)
    assert torch.allclose(loaded(x, base), scorer(x, base), atol=1e-12, rtol=0)
    assert config["training"]["train_banks"] == 3 and loaded.alpha == 0.8


def test_wrong_ranker_version_and_corrupt_files(saved):
    path, _ = saved
    with pytest.raises(DataError, match="fitted for base ranker 'dense', not 'bm25'"):
        load_residual(path, ranker="bm25")
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "format_version": 99}))
    with pytest.raises(DataError, match="format 99 is not supported"):
        load_residual(path)
    (path / "config.json").write_text(json.dumps(config))
    (path / "residual.safetensors").write_bytes(b"truncated")
    with pytest.raises(DataError, match="cannot read weights"):
        load_residual(path)
    with pytest.raises(DataError, match="no residual checkpoint"):
        load_residual(path / "missing")


def test_harvested_segment_names_travel_with_the_checkpoint(tmp_path):
    from fincrowd_ltr.data.schema import Passage
    from fincrowd_ltr.model import GatedCorrection

    scorer = ResidualScorer(len(FEATURE_NAMES))
    scorer.fit_standardisation(torch.randn(40, len(FEATURE_NAMES), dtype=torch.float64))
    names = {"Acme": ["connected fitness"]}
    save_residual(tmp_path, scorer, "dense", {}, companies={"Acme": []}, segments=names)
    model = GatedCorrection.from_pretrained(tmp_path)
    assert model.extractor.segment_names == names
    # a corpus adds the names its own filings write; the checkpoint's stay
    corpus = {"b": Passage("b", "Our Wholesale Banking segment grew.", company="Beta")}
    extended = model.featurizer(corpus).extractor.segment_names
    assert extended == {**names, "Beta": ["wholesale banking"]}


def test_a_served_model_learns_a_new_companys_segment_names(tmp_path):
    from fincrowd_ltr.data.schema import Passage
    from fincrowd_ltr.model import GatedCorrection

    scorer = ResidualScorer(len(FEATURE_NAMES))
    scorer.fit_standardisation(torch.randn(40, len(FEATURE_NAMES), dtype=torch.float64))
    save_residual(tmp_path / "m", scorer, "dense", {}, companies={"Acme": []})
    model = GatedCorrection.from_pretrained(tmp_path / "m")
    filings = [Passage("n1", "Sales of our Connected Fitness segment grew.", company="Newco")]
    assert model.add_segment_names(filings) == {"Newco": ["connected fitness"]}
    assert model.add_segment_names(filings) == {}  # nothing new the second time
    candidates = [{"id": "a", "text": "Connected Fitness 53.4", "metadata": {"company": "Newco"}}]
    result = model.rerank("Newco connected fitness revenue", candidates, [1.0])
    assert result.explanation["query_constraints"]["segment"] == ["connected fitness"]
    assert result.explanation["candidates"]["a"]["fields"]["segment"] == ["connected fitness"]
    model.save_pretrained(tmp_path / "served")
    reloaded = GatedCorrection.from_pretrained(tmp_path / "served")
    assert reloaded.extractor.segment_names == {"Newco": ["connected fitness"]}
