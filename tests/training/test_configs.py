"""Every training config in configs/ parses with the LightningCLI and names a known ranker."""

from pathlib import Path

import pytest

from fincrowd_ltr.retrieval.rankers import RANKERS
from fincrowd_ltr.settings import BankSettings
from fincrowd_ltr.training.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
DEMOS = ("demo.yaml", "reproduce.yaml")
CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if p.name not in DEMOS)


def test_configs_are_found_from_any_directory():
    assert len(CONFIGS) >= 8


def test_one_config_per_dataset_and_ranker():
    names = {p.stem for p in CONFIGS}
    for dataset in ("financebench", "tatqa"):
        for ranker in ("bm25", "dense", "hybrid", "splade"):
            assert f"{dataset}_{ranker}" in names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_parses(path, tmp_path):
    cli = run_cli(["--config", str(path), f"--trainer.default_root_dir={tmp_path}"], run=False)
    dataset, ranker = path.stem.split("_", 1)
    assert cli.datamodule.hparams.dataset == dataset
    assert cli.datamodule.hparams.ranker == ranker in RANKERS
    banks = cli.datamodule.banks
    # training banks as deployed, the package default (the configs kept "injected" after it moved)
    assert banks.train_mode == BankSettings().train_mode == "retrieved"
    assert (banks.val_mode, banks.bank_size) == ("retrieved", 100)
    assert cli.datamodule.folds.test_fold == 0


def test_train_py_answers_bad_input_with_exit_2_and_keeps_its_own_optimizer(tmp_path, capsys):
    """A config's bad data root is an error naming it (exit 2, no traceback); `--optimizer`,
    which would replace the module's optimizer without the checkpoint recording it, is refused."""
    from fincrowd_ltr.training.cli import main

    config = ["--config", str(ROOT / "configs" / "tatqa_bm25.yaml"), "--trainer.logger=false",
              f"--trainer.default_root_dir={tmp_path}"]  # fmt: skip
    assert main(["fit", *config, f"--data.source.data_root={tmp_path / 'nowhere'}"]) == 2
    err = capsys.readouterr().err
    assert "nowhere does not exist" in err and "a config key under data or data.source" in err
    with pytest.raises(SystemExit):
        main(["fit", *config, "--optimizer", "torch.optim.SGD"])
    other = tmp_path / "sgd.yaml"
    other.write_text("optimizer:\n  class_path: torch.optim.SGD\n  init_args:\n    lr: 0.5\n")
    assert main(["fit", *config, "--config", str(other)]) == 2
    assert "the residual uses its own optimizer" in capsys.readouterr().err
    saved = tmp_path / "saved.yaml"  # what LightningCLI saved while it offered the options
    saved.write_text("optimizer: null\nlr_scheduler: null\n")
    run_cli(["--config", config[1], "--config", str(saved), *config[2:]], run=False)
