"""The Lightning training path on a small hand-written BEIR corpus: it runs, learns to push
wrong-year distractors down, and the same seed gives the same weights."""

import json
import math
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model.correction import GatedCorrection
from fincrowd_ltr.settings import BankSettings, DataSettings, FoldSettings
from fincrowd_ltr.training.data import BankDataModule
from fincrowd_ltr.training.module import ResidualModule, batch_ndcg
from tests.conftest import write_corpus
from tests.training.conftest import train


def test_training_learns_period_conflicts_and_is_repeatable(tmp_path):
    write_corpus(tmp_path / "corpus")
    model, dm = train(tmp_path / "corpus", tmp_path / "cache")
    names = model.feature_names
    w = dict(zip(names, model.scorer.weight.tolist(), strict=True))
    assert w["period_conflict"] < 0 < w["period_match"]
    batch = next(iter(dm.test_dataloader()))
    with torch.no_grad():
        corrected = batch_ndcg(model(batch), batch["labels"], batch["mask"]).mean()
    base = batch_ndcg(batch["base"], batch["labels"], batch["mask"]).mean()
    assert corrected > base
    again, _ = train(tmp_path / "corpus", tmp_path / "cache")
    assert torch.equal(again.scorer.weight, model.scorer.weight)


def test_checkpoint_scores_companies_it_never_saw(tmp_path, capsys):
    """fit-residual saves a checkpoint; evaluate --checkpoint applies it to another data root."""
    from fincrowd_ltr.cli import main

    write_corpus(tmp_path / "train")
    write_corpus(tmp_path / "other", prefix="Othercorp")
    cache, ckpt = tmp_path / "cache", tmp_path / "ckpt"
    common = ["--dataset=beir", f"--cache-dir={cache}", "--ranker=bm25"]
    assert (
        main(
            [
                "fit-residual",
                *common,
                f"--data-root={tmp_path / 'train'}",
                "--folds=3",
                "--no-select",
                "--no-gate",
                f"--out={ckpt}",
            ]
        )
        == 0
    )
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "evaluate",
                *common,
                f"--data-root={tmp_path / 'other'}",
                "--bank-size=6",
                f"--checkpoint={ckpt}",
                f"--out={out}",
            ]
        )
        == 0
    )
    systems = json.loads(out.read_text())["systems"]
    assert systems["residual:bm25"]["n"] == 12
    assert systems["residual:bm25"]["delta"]["ndcg@10"] > 0  # wrong years pushed down


def _toy_banks(tmp_path) -> list:
    """The training and validation banks of the hand-written corpus's first fold."""
    write_corpus(tmp_path / "c")
    dm = BankDataModule(
        dataset="beir",
        ranker="bm25",
        source=DataSettings(data_root=str(tmp_path / "c"), cache_dir=str(tmp_path / "cache")),
        banks=BankSettings(bank_size=6, train_mode="injected", val_mode="injected"),
        folds=FoldSettings(folds=3, test_fold=0),
    )
    dm.setup()
    return dm.examples["train"] + dm.examples["val"]


@pytest.mark.parametrize("forked", [True, False], ids=["fork", "spawn"])
def test_parallel_fits_equal_the_fits_of_one_process(tmp_path, monkeypatch, forked):
    """Residuals trained by worker processes are the ones this process would train, forked (on
    Linux) or spawned (elsewhere: macOS's system libraries are not fork-safe)."""
    from fincrowd_ltr.training import fitting
    from fincrowd_ltr.training.fitting import ResidualFits

    monkeypatch.setattr(fitting, "fork_safe", lambda: forked)

    banks = _toy_banks(tmp_path)
    jobs = [
        (banks[:-2], banks[-2:], {"alpha": alpha}, seed) for alpha in (1.0, 2.0) for seed in (0, 1)
    ]
    jobs.append((banks, [], {"alpha": 2.0, "epochs": 3}, 0))  # a refit: fixed epochs
    here, workers = ResidualFits(workers=1), ResidualFits(workers=2)
    here.prefetch(jobs)
    workers.prefetch(jobs)
    assert here.trained == workers.trained == 5
    for job in jobs:
        (a, score_a), (b, score_b) = here.get(*job), workers.get(*job)
        assert score_a == score_b or (math.isnan(score_a) and math.isnan(score_b))
        assert a.best_epochs == b.best_epochs and a.val_curve == b.val_curve
        for name, value in a.state_dict().items():
            assert torch.equal(value, b.state_dict()[name]), name
    workers.prefetch(jobs)  # nothing left to train
    assert workers.trained == 5


def test_a_refit_trains_the_chosen_epochs_without_validation_banks(tmp_path):
    """``choose_setting`` averages each setting's validation curves over several splits, epoch
    by epoch, each weighted by its validation banks (every question counts once, not every
    split), and keeps the best setting and epoch count of the mean curves; a setting with
    ``epochs`` trains exactly that many epochs and reads no validation banks; a fit with neither
    or both is refused."""
    import numpy as np
    import pytest

    from fincrowd_ltr.training.fitting import ResidualFits, choose_setting, fit_residual

    banks = _toy_banks(tmp_path)
    splits = [(banks[1:], banks[:1]), (banks[:-3], banks[-3:])]
    fits = ResidualFits()
    grid = ({"alpha": 1.0}, {"alpha": 4.0})
    index, scores, epochs = choose_setting(splits, grid, 0, fits)
    for g, score in zip(grid, scores, strict=True):
        curves = [fits.get(t, v, g)[0].val_curve for t, v in splits]
        n = min(map(len, curves))
        assert n >= 1 and all(len(c) <= 60 for c in curves)
        mean = [(a + 3 * b) / 4 for a, b in zip(curves[0][:n], curves[1][:n], strict=True)]
        assert score == pytest.approx(max(mean))
        if g == grid[index]:
            assert epochs == int(np.argmax(mean)) + 1
    assert scores[index] == max(scores)
    module, score, _ = fit_residual(banks, [], {**grid[index], "epochs": 2})
    assert math.isnan(score) and module.best_epochs == 2
    assert module.trainer.current_epoch == 2 and module.trainer.global_step > 0
    with pytest.raises(ValueError, match="validation banks or a fixed epoch count"):
        fit_residual(banks, [], {})
    with pytest.raises(ValueError, match="not both"):
        fit_residual(banks, banks[:2], {"epochs": 2})


def test_an_epoch_count_over_splits_weighs_each_split_by_its_validation_questions():
    """One question validating a split counts once: a split of 1 question that peaks late does
    not outvote a split of 3 that peaks early (equal weights would pick epoch 2, not 1)."""
    from types import SimpleNamespace

    from fincrowd_ltr.training.fitting import validate_grid

    curves = {1: [0.0, 1.0], 3: [0.7, 0.3]}  # by number of validation banks

    class Curves:  # the fits' validation curves, as ResidualFits.get returns them
        def get(self, train, val, setting, seed):
            return SimpleNamespace(val_curve=curves[len(val)]), None

    splits = [(["t"], ["a"]), (["t"], ["b", "c", "d"])]
    scores, epochs = validate_grid(splits, ({},), 0, Curves())
    assert epochs == [1] and scores[0] == pytest.approx((0.0 + 3 * 0.7) / 4)


def test_the_data_modules_validation_and_test_parts_hold_covered_questions_only(tmp_path):
    """An unjudged question scores nDCG@10 0 whatever the model does: the validation and test
    parts leave it out (as `evaluate` does) instead of averaging it in as a 0."""
    import json

    root = tmp_path / "corpus"
    write_corpus(root)
    with open(root / "queries.jsonl", "a") as fh:
        for c in range(12):
            company = f"Company{c}"
            unjudged = {"_id": f"u{c}", "text": f"{company} revenue in 2019?", "group": company}
            fh.write(json.dumps(unjudged) + "\n")
    dm = BankDataModule(
        dataset="beir",
        ranker="bm25",
        source=DataSettings(data_root=str(root), cache_dir=tmp_path / "cache"),
        banks=BankSettings(bank_size=6, train_mode="retrieved"),
        folds=FoldSettings(folds=3, test_fold=0),
    )
    dm.setup()
    assert not dm.dataset.covered("u0") and "u0" in dm.dataset.queries
    for part in ("val", "test"):
        qids = [e.qid for e in dm.examples[part]]
        assert qids and all(q.startswith("qCompany") for q in qids), part
    # a part of unjudged questions only has nothing to measure: said, not an empty loader
    only = BankDataModule(
        dataset="beir", ranker="bm25", source=dm.source, banks=dm.banks,
        parts={"train": ["qCompany1", "qCompany2"], "val": ["u0", "u3"], "test": []},
    )  # fmt: skip
    with pytest.raises(DataError, match="the val part's 2 questions include no covered one"):
        only.setup()
    # named parts with unknown ids, or no validation part; folds that leave no training fold
    for parts, match in (
        ({"train": ["qCompany1", "nope"], "val": ["qCompany2"]}, r"parts.train: 1 question ids"),
        ({"train": ["qCompany1"], "val": []}, "data.parts.val is empty"),
    ):
        bad = BankDataModule(
            dataset="beir", ranker="bm25", source=dm.source, banks=dm.banks, parts=parts
        )
        with pytest.raises(DataError, match=match):
            bad.setup()
    for folds in (FoldSettings(folds=5, test_fold=7), FoldSettings(folds=2, test_fold=0)):
        bad = BankDataModule(
            dataset="beir", ranker="bm25", source=dm.source, banks=dm.banks, folds=folds
        )
        with pytest.raises(DataError, match="the held-out fold is one of"):
            bad.setup()


def test_a_checkpoint_of_a_python_built_data_module_exports(tmp_path):
    """Hyperparameters are plain values: torch's weights_only load reads the checkpoint, and the
    exported summary carries the data module's settings (and old flat ones are still read)."""
    from fincrowd_ltr.training.export import _settings, from_lightning

    write_corpus(tmp_path / "corpus")
    dm = BankDataModule(
        dataset="beir",
        ranker="bm25",
        source=DataSettings(data_root=str(tmp_path / "corpus"), cache_dir=tmp_path / "cache"),
        banks=BankSettings(bank_size=6, train_mode="injected"),  # two modes the export keeps apart
        folds=FoldSettings(folds=3, test_fold=1),
    )

    def trainer_in(root: str, epochs: int = 1) -> L.Trainer:
        return L.Trainer(
            max_epochs=epochs,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=tmp_path / root,
            accelerator="cpu",
        )

    trainer = trainer_in("run")
    trainer.fit(ResidualModule(lr=0.1), datamodule=dm)
    ckpt = trainer.checkpoint_callback.best_model_path
    torch.load(ckpt, map_location="cpu", weights_only=True)  # no settings objects pickled
    exported = from_lightning(ckpt)  # the data module built again from the checkpoint
    summary = exported.summary
    dm.setup("fit")
    trained = {e.qid for part in ("train", "val") for e in dm.examples[part]}
    assert set(summary.query_ids) == trained and summary.query_fingerprints  # evaluate skips them
    assert summary.bank_size == 6 and summary.dataset_fingerprint
    assert exported.extractor.companies == dm.featurizer().extractor.companies
    # a gateless model: an uncalibrated domain's identity fallback is the base order
    assert exported.rule("mine", fallback="identity") == "identity"
    with pytest.raises(DataError, match="no identity gate .*`fincrowd fit` trains a gate"):
        exported.rule("mine")
    (tmp_path / "garbage.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(DataError, match="garbage.ckpt: not a checkpoint of this version"):
        from_lightning(tmp_path / "garbage.ckpt")
    # the feature code it trained with travels with the weights (an eleventh walk: an older
    # checkpoint exported under this version's feature versions, unchecked)
    from fincrowd_ltr.features.bank_features import FEATURE_VERSIONS
    from fincrowd_ltr.model.checkpoint import FeatureVersionWarning

    assert exported.feature_versions == FEATURE_VERSIONS
    stored = torch.load(ckpt, map_location="cpu", weights_only=True)
    name = next(iter(FEATURE_VERSIONS))
    stored["fincrowd"]["feature_versions"][name] -= 1
    torch.save(stored, tmp_path / "older.ckpt")
    with pytest.warns(FeatureVersionWarning, match="older.ckpt: fitted with other feature code"):
        older = from_lightning(tmp_path / "older.ckpt")
    assert older.feature_versions[name] == FEATURE_VERSIONS[name] - 1
    older.save_pretrained(tmp_path / "older")
    with pytest.warns(FeatureVersionWarning):  # the folder says it again where it is loaded
        GatedCorrection.from_pretrained(tmp_path / "older")
    # resumed under newer feature code: said, and the older record kept for the export
    resumed = trainer_in("resumed", epochs=2)
    with pytest.warns(FeatureVersionWarning, match="older.ckpt: fitted with other feature code"):
        resumed.fit(ResidualModule(lr=0.1), datamodule=dm, ckpt_path=tmp_path / "older.ckpt")
    again = torch.load(resumed.checkpoint_callback.best_model_path, weights_only=True)
    assert again["epoch"] == 1 and again["fincrowd"] == stored["fincrowd"]
    record = dict(stored["fincrowd"])
    stored["fincrowd"] = {**record, "extractor_version": "0.0"}
    torch.save(stored, tmp_path / "extractor.ckpt")
    with pytest.raises(DataError, match="extractor.ckpt: fitted with field extractor 0.0"):
        from_lightning(tmp_path / "extractor.ckpt")
    stored["fincrowd"] = {**record, "feature_names": record["feature_names"][::-1]}
    torch.save(stored, tmp_path / "other.ckpt")
    with pytest.raises(DataError, match="other.ckpt: checkpoint features differ"):
        from_lightning(tmp_path / "other.ckpt")
    stored["fincrowd"] = {k: v for k, v in record.items() if k != "feature_versions"}
    torch.save(stored, tmp_path / "unversioned.ckpt")  # a record without versions: none kept
    assert from_lightning(tmp_path / "unversioned.ckpt").feature_versions is None
    del stored["fincrowd"]
    torch.save(stored, tmp_path / "unrecorded.ckpt")
    with pytest.warns(UserWarning, match="records no feature code"):
        assert from_lightning(tmp_path / "unrecorded.ckpt").feature_versions is None
    (tmp_path / "corpus").rename(tmp_path / "moved")
    from fincrowd_ltr.training.data import config_dataset

    config_dataset.cache_clear()  # a new process: the data is read again
    with pytest.raises(DataError, match=r"\.ckpt: the data it was trained on does not load"):
        from_lightning(ckpt)
    (tmp_path / "moved").rename(tmp_path / "corpus")
    assert (summary.bank_mode, summary.val_bank_mode, summary.folds, summary.test_fold) == (
        "injected",
        "retrieved",
        3,
        1,
    )  # fmt: skip
    assert summary.first_stage == "bm25"  # 'auto' resolved for the corpus, as its banks were built
    assert BankDataModule().banks.train_mode == "retrieved"  # the module's default is unchanged
    old = {"bank_mode": "injected", "val_bank_mode": None, "folds": 4, "split": "dev"}
    source, banks, folds = _settings(old)
    assert (source.split, banks.train_mode, banks.val_mode, folds.folds) == (
        "dev", "injected", "injected", 4,
    )  # fmt: skip


STOPPED_RUN = """
import os, signal, sys, threading, time
from pathlib import Path
from fincrowd_ltr.features.examples import BankExample
from fincrowd_ltr.training import fitting

marks = Path(sys.argv[1])

def slow_fit(train, val, setting, seed=0):  # a Lightning fit of ~20 s (it handles SIGTERM)
    import lightning as L
    import torch
    from fincrowd_ltr.training.trainer import quiet_trainer

    class Slow(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, index):
            time.sleep(0.5)
            return (self.w - batch[0]).pow(2).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(40, 1)))
    quiet_trainer(1, accelerator="cpu").fit(Slow(), data)
    (marks / f"done-{setting['alpha']}").touch()
    raise RuntimeError("never reached while the run is stopped")

class Terminated(Exception):
    pass

def on_signal(signum, frame):  # as the command line does
    raise Terminated(signum)

fitting.fit_residual = slow_fit  # forked workers inherit it
signal.signal(signal.SIGTERM, on_signal)
(marks / "pid").write_text(str(os.getpid()))
bank = BankExample("q", [], None, None, None)
jobs = [([bank], [bank], {"alpha": float(a)}, 0) for a in range(8)]
threading.Timer(3, os.kill, (os.getpid(), signal.SIGTERM)).start()
try:
    fitting.ResidualFits(workers=2).prefetch(jobs)
except Terminated:
    print("stopped")
"""


def test_a_signal_stops_parallel_fits_at_once(tmp_path):
    """A run told to stop while worker processes train residuals stops them instead of waiting
    for every queued fit (it waited before: a killed `fincrowd fit` lived on)."""
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(STOPPED_RUN)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert "stopped" in done.stdout, done.stderr
    assert not list(tmp_path.glob("done-*"))  # no queued fit ran to its end


def _banks(lengths, seed=0):
    """Banks of random features, ties in the base scores, 0-3 supports each."""
    from fincrowd_ltr.features import FEATURE_NAMES
    from fincrowd_ltr.features.examples import BankExample

    rng = np.random.default_rng(seed)
    banks = []
    for i, n in enumerate(lengths):
        labels = np.zeros(n, dtype=np.int64)
        labels[rng.choice(n, size=min(n - 1, int(rng.integers(0, 4))), replace=False)] = 1
        base = np.round(rng.normal(size=n), 1)  # rounded: many tied base scores
        features = rng.normal(size=(n, len(FEATURE_NAMES)))
        banks.append(BankExample(f"q{i}", [f"p{j}" for j in range(n)], features, base, labels))
    return banks


def test_remembered_pairs_give_the_padded_batchs_loss_and_gradients_bit_for_bit():
    # collate keeps each bank's pairs across epochs; the loss and its gradients must be those
    # of pairs recomputed on the padded batch (banks of other lengths, > 30 distractors, ties)
    from fincrowd_ltr.model.pairs import pair_index, pairwise_loss
    from fincrowd_ltr.training.data import collate

    banks = _banks([100, 37, 100, 5, 64, 2, 100, 80])
    batch = collate(banks)
    padded = pair_index(batch["labels"], batch["base"], batch["mask"])
    assert all(torch.equal(a, b) for a, b in zip(batch["pairs"], padded, strict=True))
    module = ResidualModule()
    module.scorer.fit_standardisation(torch.cat([torch.from_numpy(b.features) for b in banks]))
    grads = []
    for pairs in (None, batch["pairs"]):
        module.zero_grad()
        final = module(batch)
        loss = pairwise_loss(final, batch["labels"], batch["base"], batch["mask"], pairs=pairs)
        loss.backward()
        grads.append((loss.detach(), [p.grad.clone() for p in module.parameters()]))
    assert torch.equal(grads[0][0], grads[1][0])
    assert all(torch.equal(a, b) for a, b in zip(grads[0][1], grads[1][1], strict=True))


def test_remembered_normalised_base_scores_are_each_banks_own_as_serving_computes_them(
    monkeypatch,
):
    # collate carries each bank's base scores normalised on the bank alone (remembered across
    # epochs): equal-length banks give the padded batch's forward bit for bit, and a bank of any
    # length gets exactly what the runtime computes for that bank by itself
    from fincrowd_ltr.model.residual import normalise_base
    from fincrowd_ltr.training.data import collate

    same = collate(_banks([100] * 6))
    assert torch.equal(
        same["base_normalised"], normalise_base(same["base"], same["mask"]) * same["mask"]
    )
    module = ResidualModule()
    module.scorer.fit_standardisation(same["features"].reshape(-1, same["features"].shape[-1]))
    with torch.no_grad():
        module.scorer.weight.normal_(generator=torch.Generator().manual_seed(0))
        without = dict(same)
        del without["base_normalised"]
        assert torch.equal(module(same), module(without))
    banks = _banks([100, 37, 5, 64, 1])
    batch = collate(banks)
    for i, bank in enumerate(banks):
        alone = normalise_base(torch.from_numpy(bank.base)[None])[0]
        assert torch.equal(batch["base_normalised"][i, : len(bank.base)], alone)
        assert not batch["base_normalised"][i, len(bank.base) :].any()

    import fincrowd_ltr.training.data as data

    calls = []
    monkeypatch.setattr(data, "normalise_base", lambda *a: calls.append(1) or normalise_base(*a))
    again = collate(banks)  # the next epoch reads what the first computed
    assert torch.equal(again["base_normalised"], batch["base_normalised"]) and not calls


def test_cpu_batches_are_not_walked_by_a_device_transfer():
    from fincrowd_ltr.training.data import BankDataModule, collate

    batch = collate(_banks([10, 4]))
    module = BankDataModule(examples={"train": [], "val": []})
    assert module.transfer_batch_to_device(batch, torch.device("cpu"), 0) is batch


def test_training_steps_recompute_pairs_for_hard_negatives_and_other_distractor_caps():
    # collate's remembered pairs are the default objective's: a residual with hard negatives or
    # another distractor cap must compute its own (here they differ from the remembered ones)
    from fincrowd_ltr.features.bank_features import CONFLICT_COLUMNS
    from fincrowd_ltr.model.pairs import pairwise_loss
    from fincrowd_ltr.training.data import collate

    banks = _banks([100, 100, 60])
    for bank in banks:  # every low-ranked distractor conflicts on one field: hard
        bank.labels[:] = 0
        bank.labels[0] = 1
        bank.features[:, list(CONFLICT_COLUMNS)] = 0.0
        bank.features[50:, CONFLICT_COLUMNS[0]] = 1.0
        bank.base[:] = -np.arange(len(bank.base), dtype=np.float64)
    batch = collate(banks)
    for options in ({"hard_negatives": True}, {"max_distractors": 5}, {}):
        module = ResidualModule(**options)
        module.scorer.fit_standardisation(torch.cat([torch.from_numpy(b.features) for b in banks]))
        module._epoch["train"] = []
        final = module(batch)
        hard = None
        if options.get("hard_negatives"):
            hard = batch["features"][..., list(CONFLICT_COLUMNS)].sum(-1) == 1
        k = options.get("max_distractors", 30)
        own = pairwise_loss(final, batch["labels"], batch["base"], batch["mask"], k, hard)
        remembered = pairwise_loss(final, None, None, None, pairs=batch["pairs"])
        assert torch.equal(module.training_step(batch, 0), own)
        assert torch.equal(own, remembered) == (not options)


def test_a_lambdarank_residual_trains_on_the_remembered_pairs_reweighted_per_step():
    from fincrowd_ltr.model.pairs import lambdarank_loss, pairwise_loss
    from fincrowd_ltr.training.data import collate

    batch = collate(_banks([100, 100, 60]))
    module = ResidualModule(objective="lambdarank")
    module.scorer.fit_standardisation(batch["features"].reshape(-1, batch["features"].shape[-1]))
    with torch.no_grad():
        module.scorer.weight.normal_(generator=torch.Generator().manual_seed(1))
    module._epoch["train"] = []
    final = module(batch)
    step = module.training_step(batch, 0)
    remembered = lambdarank_loss(final, None, None, batch["mask"], pairs=batch["pairs"])
    assert torch.equal(step, remembered)
    assert torch.equal(step, lambdarank_loss(final, batch["labels"], batch["base"], batch["mask"]))
    assert not torch.equal(step, pairwise_loss(final, None, None, None, pairs=batch["pairs"]))
    step.backward()
    assert module.scorer.weight.grad.abs().sum() > 0


def test_a_synthetic_weight_reuses_the_banks_pairs_and_carries_its_weight(monkeypatch):
    # each mixing weight reweighs the same synthetic banks: their pairs (labels and base scores
    # alone) are computed once, not once per fit, and the batch still carries the new weight
    from fincrowd_ltr.model import pairs as pairs_module
    from fincrowd_ltr.training import data
    from fincrowd_ltr.training.fitting import with_synthetic_weight

    banks = _banks([100, 40, 70])
    for bank in banks:
        bank.synthetic = True
    computed = []
    real = pairs_module.pair_index
    monkeypatch.setattr(data, "pair_index", lambda *a: computed.append(1) or real(*a))
    first = data.collate(banks)
    batches = [data.collate(with_synthetic_weight(banks, w)) for w in (0.03, 0.3)]
    assert len(computed) == len(banks)  # once per bank, for the first batch only
    for weight, batch in zip((0.03, 0.3), batches, strict=True):
        assert torch.equal(batch["weight"], torch.full((3,), weight, dtype=torch.float64))
        assert all(torch.equal(a, b) for a, b in zip(batch["pairs"], first["pairs"], strict=True))
    assert with_synthetic_weight(banks, 0) == []


def test_a_committee_leaves_each_share_of_groups_out_of_one_member_and_averages_them(tmp_path):
    """Member k of a committee trains without the k-th seeded chunk of the training groups
    (each group left out by exactly one member, at most one member per group); the deployed
    residual is the members' average, and a committee of 1 is the plain fit."""
    from fincrowd_ltr.training.fitting import ResidualFits

    banks = _toy_banks(tmp_path)
    train, val = banks, banks[-2:]  # validation banks that also train: enough for the test
    groups = {e.qid: f"g{i % 4}" for i, e in enumerate(train)}
    names = sorted(set(groups.values()))
    assert len(train) == 5 and len(names) == 4
    fits = ResidualFits(committee=3, groups=groups)
    jobs = fits.members(train, val, {"alpha": 2.0}, 0)
    assert len(jobs) == 3
    left_out = [set(names) - {groups[e.qid] for e in job[0]} for job in jobs]
    assert all(left_out) and sorted(g for out in left_out for g in out) == names
    for job, out in zip(jobs, left_out, strict=True):
        assert [e.qid for e in job[0]] == [e.qid for e in train if groups[e.qid] not in out]
        assert job[1] is val
    assert len(ResidualFits(committee=9, groups=groups).members(train, val, {}, 0)) == 4
    assert ResidualFits().members(train, val, {}, 0) == [(train, val, {}, 0)]
    module, score = fits.deployed(train, val, {"alpha": 2.0}, 0)
    assert fits.trained == 3
    members = [fits.get(*job)[0] for job in jobs]
    assert score == np.mean([fits.get(*job)[1] for job in jobs])
    x = torch.from_numpy(np.concatenate([e.features for e in val]))
    mean_r = torch.stack([m.scorer.residual(x) for m in members]).mean(0)
    assert torch.allclose(module.scorer.residual(x), mean_r, rtol=1e-10, atol=1e-10)
    assert not torch.allclose(members[0].scorer.residual(x), mean_r)  # members differ
    rows = torch.from_numpy(np.concatenate([e.features for e in train if e.has_support]))
    assert torch.allclose(module.scorer.feature_std, torch.where(
        rows.std(0, unbiased=False) > 0, rows.std(0, unbiased=False), torch.ones(rows.shape[1])
    ))  # the statistics of a single fit on the same banks  # fmt: skip


def test_an_averaged_setting_deploys_the_mean_of_its_parts_residuals(tmp_path):
    """An averaged setting (every mixing weight's residual, each at its own epoch count) is
    trained part by part: its members are its parts' (a committee's within each part), the
    deployed residual scores their mean, and parts that differ beyond weight and epochs, or an
    averaged setting given to a single fit, are refused."""
    from fincrowd_ltr.defaults import AVERAGED
    from fincrowd_ltr.training.fitting import ResidualFits, fit_residual

    banks = _toy_banks(tmp_path)
    for bank in banks[:2]:
        bank.synthetic = True
    parts = [{"synthetic_weight": 0.0, "epochs": 2}, {"synthetic_weight": 0.3, "epochs": 5}]
    setting = {AVERAGED: parts}
    fits = ResidualFits()
    assert fits.members(banks, [], setting, 0) == [(banks, [], p, 0) for p in parts]
    module, _ = fits.deployed(banks, [], setting, 0)
    assert fits.trained == 2
    alone = [fits.get(banks, [], p, 0)[0] for p in parts]
    assert [m.best_epochs for m in alone] == [2, 5]
    x = torch.from_numpy(np.concatenate([e.features for e in banks]))
    mean_r = torch.stack([m.scorer.residual(x) for m in alone]).mean(0)
    assert torch.allclose(module.scorer.residual(x), mean_r, rtol=1e-10, atol=1e-10)
    assert not torch.allclose(alone[0].scorer.residual(x), mean_r)  # the parts differ
    groups = {e.qid: f"g{i % 4}" for i, e in enumerate(banks)}
    committee = ResidualFits(committee=2, groups=groups).members(banks, [], setting, 0)
    assert [job[2] for job in committee] == [parts[0]] * 2 + [parts[1]] * 2
    with pytest.raises(ValueError, match="differ beyond weight and epochs"):
        fits.deployed(banks, [], {AVERAGED: [parts[0], {**parts[1], "alpha": 4.0}]}, 0)
    with pytest.raises(ValueError, match="trained part by part"):
        fit_residual(banks, [], setting)
    # a draw's part trains on the labelled banks and that draw's synthetic banks alone
    banks[0].draw = banks[1].draw = 1
    counts = [fit_residual(banks, [], {"synthetic_draw": k, "epochs": 1})[2] for k in (0, 1)]
    assert counts == [len(banks) - 2, len(banks)]
    assert fit_residual(banks, [], {"epochs": 1})[2] == len(banks)


def test_training_banks_without_a_relevant_candidate_are_a_named_error():
    """Retrieved training banks may hold no relevant candidate: the data module names the
    option to change instead of failing on an empty array."""
    from fincrowd_ltr.data.schema import DataError
    from fincrowd_ltr.features import FEATURE_NAMES
    from fincrowd_ltr.features.examples import BankExample

    n = 4
    empty = BankExample("q", [f"p{i}" for i in range(n)], np.zeros((n, len(FEATURE_NAMES))),
                        np.arange(n, dtype=float), np.zeros(n, dtype=np.int64))  # fmt: skip
    dm = BankDataModule(examples={"train": [empty], "val": [empty], "test": []})
    assert dm.skipped_without_support["train"] == 1
    with pytest.raises(DataError, match="no training bank holds a relevant candidate") as err:
        dm.train_features()
    assert err.value.field == "train_mode"


def test_an_export_builds_the_data_module_from_the_training_folder_or_says_it_cannot(
    tmp_path, monkeypatch
):
    """Relative data and cache paths are read from the folder the training ran in (an export
    from elsewhere records the same questions); a module given its banks in memory records no
    data to build, and the export says so; a checkpoint of the flat, older hyperparameters is
    built again through them."""
    import warnings

    from fincrowd_ltr.training.data import config_dataset
    from fincrowd_ltr.training.export import from_lightning

    write_corpus(tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    dm = BankDataModule(
        dataset="beir", ranker="bm25",
        source=DataSettings(data_root="corpus", cache_dir=Path("cache")),
        banks=BankSettings(bank_size=6), folds=FoldSettings(folds=3, test_fold=0),
    )  # fmt: skip
    trainer = L.Trainer(max_epochs=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path / "run")  # fmt: skip
    trainer.fit(ResidualModule(lr=0.1), datamodule=dm)
    ckpt = Path(trainer.checkpoint_callback.best_model_path).resolve()
    want = from_lightning(ckpt, dm).summary.query_ids
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config_dataset.cache_clear()
    assert from_lightning(ckpt).summary.query_ids == want and want
    assert not list(elsewhere.iterdir())  # nothing built or written where the export ran
    # the flat hyperparameters of checkpoints written before the settings objects
    stored = torch.load(ckpt, map_location="cpu", weights_only=False)
    hp = stored["datamodule_hyper_parameters"]
    stored["datamodule_hyper_parameters"] = {
        "dataset": "beir", "ranker": "bm25", "bank_mode": "retrieved", "bank_size": 6,
        "folds": 3, "test_fold": 0, "seed": 0, "split": "all",
        "data_root": str(tmp_path / "corpus"), "cache_dir": str(tmp_path / "cache"),
    }  # fmt: skip
    torch.save(stored, tmp_path / "flat.ckpt")
    assert from_lightning(tmp_path / "flat.ckpt").summary.query_ids == want
    # a module given its examples in memory: nothing says where they came from
    stored["datamodule_hyper_parameters"] = {**hp, "in_memory": True}
    torch.save(stored, tmp_path / "memory.ckpt")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert from_lightning(tmp_path / "memory.ckpt").summary.query_ids == []
    assert any("cannot record the questions it trained on" in str(w.message) for w in said)
    # named parts: a part name the module does not read, a question in two parts, a bad fold
    monkeypatch.chdir(tmp_path)
    for parts, match in (
        ({"train": ["qCompany1"], "val": ["qCompany2"], "tset": ["qCompany3"]}, "parts are train"),
        ({"train": ["qCompany1", "qCompany2"], "val": ["qCompany2"]}, "also in data.parts.train"),
    ):
        bad = BankDataModule(dataset="beir", ranker="bm25", source=dm.source, banks=dm.banks,
                             parts=parts)  # fmt: skip
        with pytest.raises(DataError, match=match):
            bad.setup()
    bad = BankDataModule(dataset="beir", ranker="bm25", source=dm.source, banks=dm.banks,
                         folds=FoldSettings(folds=3, test_fold=-2))  # fmt: skip
    with pytest.raises(DataError, match="the held-out fold is one of the folds"):
        bad.setup()
