"""``train_cross_encoder``: out-of-fold cross-encoder scores (a TREC run) and a final adapter."""

from __future__ import annotations

from pathlib import Path

from fincrowd_ltr.api.corpus import DEFAULT_CACHE, build_banks, load_dataset
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.retrieval.build import BankSpec


def train_cross_encoder(
    dataset: str | Dataset,
    *,
    run_out: str | Path | None = None,
    out: str | Path | None = None,
    depth: int = 200,
    negatives_from: str = "dense",
    max_length: int = 128,
    epochs: int = 2,
    batch_size: int = 4,
    lr: float = 1e-3,
    max_groups: int = 120,
    folds: int = 5,
    seed: int = 0,
    first_stage: str = "auto",
    split: str = "all",
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE,
) -> dict:
    """Cross-fit a LoRA cross-encoder on group folds (``run_out``: out-of-fold scores as a TREC
    run) and/or train the final adapter on every covered question (``out``)."""
    from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderConfig
    from fincrowd_ltr.crossencoder import train_cross_encoder as train
    from fincrowd_ltr.crossencoder.crossfit import crossfit
    from fincrowd_ltr.crossencoder.training import hard_negative_groups
    from fincrowd_ltr.data.beir import write_trec_run

    data = load_dataset(dataset, data_root, split)
    bankset = build_banks(
        data,
        [negatives_from],
        first_stage=first_stage,
        size=depth,
        split=split,
        cache_dir=cache_dir,
    )
    config = CrossEncoderConfig(max_length=max_length)
    kwargs = {"max_epochs": epochs, "batch_size": batch_size, "lr": lr, "max_groups": max_groups}
    report: dict = {
        "dataset": data.name,
        "first_stage": BankSpec(first_stage=first_stage).stage(data),
        "depth": depth,
        "config": vars(config),
        "train": kwargs,
    }
    if run_out is not None:
        run, fold_info = crossfit(data, bankset, negatives_from, config, folds, seed, depth, kwargs)
        Path(run_out).parent.mkdir(parents=True, exist_ok=True)
        write_trec_run(Path(run_out), run, "cross-encoder")
        report["folds"] = fold_info
    if out is not None:
        covered = [q for q in data.queries if q in bankset.banks and data.covered(q)]
        groups = hard_negative_groups(data, bankset, negatives_from, covered)
        model = CrossEncoder.from_minilm(config)
        model.config.training = {
            **train(model, groups, seed=seed, **kwargs),
            "dataset": data.name,
            "split": split,
            "query_ids": covered,
        }
        model.save(Path(out))
        report["final_groups"] = len(groups)
    return report
