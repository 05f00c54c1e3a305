"""``LightningCLI`` for the residual: offline W&B + CSV logging, early stopping, checkpoints."""

from __future__ import annotations

import argparse
import os
import sys

from lightning.pytorch.cli import LightningCLI

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.training.data import BankDataModule
from fincrowd_ltr.training.module import ResidualModule


class ResidualCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # configs LightningCLI saved while it offered these hold `optimizer: null`: still read
        for name in ("optimizer", "lr_scheduler"):
            parser.add_argument(f"--{name}", type=None | dict, default=None, help=argparse.SUPPRESS)

    def before_instantiate_classes(self) -> None:
        config = self.config.get(self.subcommand, self.config) if self.subcommand else self.config
        for name in ("optimizer", "lr_scheduler"):
            if config.get(name) is not None:
                raise DataError(
                    f"{name}: the residual uses its own optimizer (Adam with model.lr and "
                    "model.weight_decay, what its checkpoint records); set those instead",
                    name,
                )

    def before_fit(self) -> None:
        dm = self.datamodule
        dm.setup("fit")
        print(
            f"banks: train {len(dm.examples['train'])} (skipped without support: "
            f"{dm.skipped_without_support['train']}), validation {len(dm.examples['val'])}, "
            f"test {len(dm.examples['test'])}"
        )

    def after_fit(self) -> None:
        trainer = self.trainer
        callback = trainer.checkpoint_callback
        where = callback.best_model_path if callback is not None else "(no checkpoint)"
        logs = [
            getattr(lg, "log_dir", None) or getattr(lg, "save_dir", None) for lg in trainer.loggers
        ]
        print(f"best checkpoint: {where}")
        print(f"logs: {', '.join(str(x) for x in logs if x)}")
        if not trainer.is_global_zero:  # under DDP one rank writes the servable folder
            return
        if callback is not None and callback.best_model_path:
            from pathlib import Path

            from fincrowd_ltr.training.export import from_lightning

            target = Path(trainer.default_root_dir) / "model"
            from_lightning(Path(callback.best_model_path), self.datamodule).save_pretrained(target)
            print(f"servable correction (GatedCorrection.from_pretrained): {target}")


def run_cli(args: list[str] | None = None, run: bool = True) -> ResidualCLI:
    """Run ``LightningCLI`` for the residual (W&B runs offline unless the user configured it);
    ``run=False`` only parses the config and builds the objects."""
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    return ResidualCLI(
        ResidualModule,
        BankDataModule,
        seed_everything_default=0,
        args=args,
        save_config_kwargs={"overwrite": True},
        # the module's own optimizer (its lr and weight_decay are what a checkpoint records):
        # LightningCLI would otherwise offer --optimizer, which replaces it unrecorded
        auto_configure_optimizers=False,
        run=run,
    )


def main(args: list[str] | None = None) -> int:
    """``python train.py``: 0 on success, 2 for bad input (the message names the file, key or
    field, as ``fincrowd``'s commands do), not a traceback."""
    try:
        run_cli(args)
    except DataError as err:
        flag = " --" in str(err) or "(--" in str(err)  # it names a `fincrowd` flag
        print(
            f"train.py: error: {err}"
            + (
                " (for train.py, a `fincrowd` flag this names is a config key under data or "
                "data.source: `python train.py fit --print_config` lists them)"
                if flag
                else ""
            ),
            file=sys.stderr,
        )
        return 2
    return 0
