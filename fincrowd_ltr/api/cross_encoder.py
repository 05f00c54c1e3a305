"""``train_cross_encoder``: out-of-fold cross-encoder scores (a TREC run) and a final adapter."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fincrowd_ltr.api.corpus import build_banks, data_settings, load_dataset
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.evaluation.reports import CrossEncoderReport
from fincrowd_ltr.retrieval.build import BankSpec
from fincrowd_ltr.settings import CrossEncoderSettings, DataSettings


def train_cross_encoder(
    dataset: str | Dataset,
    settings: CrossEncoderSettings | None = None,
    *,
    run_out: str | Path | None = None,
    out: str | Path | None = None,
    data: DataSettings | None = None,
    **shortcuts,
) -> CrossEncoderReport:
    """Cross-fit a LoRA cross-encoder on group folds (``run_out``: out-of-fold scores as a TREC
    run) and/or train the final adapter on every covered question (``out``). ``settings``
    (:class:`~fincrowd_ltr.settings.CrossEncoderSettings`: ``depth``, ``negatives_from``,
    ``first_stage``, ``max_length``, ``epochs``, ``batch_size``, ``lr``, ``max_groups``,
    ``folds``, ``seed``) and ``data`` (``split``, ``data_root``, ``cache_dir``) may be given as
    keyword shortcuts."""
    from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderConfig
    from fincrowd_ltr.crossencoder import train_cross_encoder as train
    from fincrowd_ltr.crossencoder.crossfit import crossfit
    from fincrowd_ltr.crossencoder.training import hard_negative_groups
    from fincrowd_ltr.data.beir import write_trec_run

    where = data_settings(data, shortcuts)
    s = dataclasses.replace(settings or CrossEncoderSettings(), **shortcuts)
    if run_out is None and out is None:
        raise DataError(
            "nothing to train: give run_out (--run-out, out-of-fold scores) and/or out (--out, "
            "the final adapter)",
            "out",
        )
    depth, negatives_from, seed, split = s.depth, s.negatives_from, s.seed, where.split
    data = load_dataset(dataset, where.data_root, split)
    data.require_covered("train on")
    bankset = build_banks(data, [negatives_from], first_stage=s.first_stage, size=depth, data=where)
    config = CrossEncoderConfig(max_length=s.max_length)
    kwargs = s.steps()
    report = CrossEncoderReport(
        dataset=data.name,
        first_stage=BankSpec(first_stage=s.first_stage).stage(data),
        depth=depth,
        config=vars(config),
        train=kwargs,
    )
    if run_out is not None:
        run, fold_info = crossfit(
            data, bankset, negatives_from, config, s.folds, seed, depth, kwargs
        )
        Path(run_out).parent.mkdir(parents=True, exist_ok=True)
        write_trec_run(Path(run_out), run, "cross-encoder")
        report["folds"] = fold_info
    if out is not None:
        covered = [q for q in data.queries if q in bankset.banks and data.covered(q)]
        groups = hard_negative_groups(data, bankset, negatives_from, covered)
        model = CrossEncoder.from_minilm(config, seed)
        model.config.training = {
            **train(model, groups, seed=seed, **kwargs),
            "dataset": data.name,
            "split": split,
            "query_ids": covered,
        }
        model.save(Path(out))
        report["final_groups"] = len(groups)  # available; at most max_groups of them trained
        report["final_trained_groups"] = model.config.training["train_groups"]
    return report
