"""Turning a ``python train.py fit`` Lightning checkpoint into a servable correction folder."""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path

from fincrowd_ltr.data.registry import DEFAULT_DATA_ROOT
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model.correction import GatedCorrection, TrainingSummary
from fincrowd_ltr.retrieval.first_stage import resolve_first_stage
from fincrowd_ltr.retrieval.rankers import scorer_recipe
from fincrowd_ltr.settings import BankSettings, DataSettings, FoldSettings, as_settings
from fincrowd_ltr.training.module import ResidualModule


def from_lightning(ckpt: Path, datamodule=None, ranker: str | None = None) -> GatedCorrection:
    """The always-on correction of a ``ResidualModule`` checkpoint (``.ckpt``), with the
    training summary its data module gives (the same folder layout ``fit`` writes; no gate:
    ``fincrowd fit`` trains one). Without ``datamodule``, the data module is built again from
    the checkpoint's hyperparameters (its banks from the cache), so that the folder records the
    questions the correction trained and validated on (``evaluate`` leaves them out) and the
    corpus's company and segment names (the features read them); relative paths are read from
    the folder the training ran in. ``ranker``: refuse a checkpoint of another base ranker."""
    ckpt = Path(ckpt)
    if not ckpt.is_file():
        raise DataError(f"expected a Lightning checkpoint at {ckpt} but it does not exist")
    import torch

    try:
        stored = torch.load(str(ckpt), map_location="cpu", weights_only=False)
        versions = _feature_versions(stored, ckpt)
        module = ResidualModule.load_from_checkpoint(str(ckpt), map_location="cpu")
    except DataError:
        raise
    except Exception as err:  # torch and Lightning raise many types for a foreign file
        raise DataError(
            f"{ckpt}: not a checkpoint of this version's residual ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:200]}); train it again with `python train.py fit`"
        ) from None
    hp = dict(stored.get("datamodule_hyper_parameters") or {})
    if datamodule is not None:
        hp = dict(datamodule.hparams)
    if ranker is not None and ranker != str(hp.get("ranker", "dense")):
        raise DataError(
            f"{ckpt}: residual was fitted for base ranker {hp.get('ranker', 'dense')!r}, not "
            f"{ranker!r}",
            "ranker",
        )
    if datamodule is None and hp:
        datamodule = _rebuilt(hp, ckpt)
    source, banks, folds = _settings(hp)
    summary = TrainingSummary(
        dataset=str(hp.get("dataset", "")),
        base_ranker=str(hp.get("ranker", "dense")),
        # the stage the data module's banks came from (``auto`` resolved as it was at training)
        first_stage=resolve_first_stage(banks.first_stage, str(hp.get("dataset", ""))),
        base_scorer=scorer_recipe(str(hp.get("ranker", "dense")), banks.static_questions)
        if _records_reader(hp.get("banks"))
        else None,
        split=source.split,
        setting={k: module.hparams[k] for k in ("alpha", "weight_decay") if k in module.hparams},
        bank_mode=banks.train_mode,
        val_bank_mode=banks.val_mode,
        folds=folds.folds,
        seed=folds.seed,
        test_fold=folds.test_fold,
        bank_size=banks.bank_size,
        extra={"lightning_checkpoint": str(ckpt.resolve())},
    )
    companies = segments = None
    if datamodule is not None and getattr(datamodule, "examples", None):
        summary.query_ids = sorted(
            {e.qid for p in ("train", "val") for e in datamodule.examples.get(p, [])}
        )
        data = getattr(datamodule, "dataset", None)
        if data is not None:
            summary.query_fingerprints = data.question_identities(summary.query_ids)
            summary.dataset_fingerprint = data.corpus_fingerprint()
            extractor = datamodule.featurizer().extractor
            companies, segments = extractor.companies, extractor.segment_names
    return GatedCorrection(
        module.scorer, None, None, companies, summary, segments=segments, feature_versions=versions
    )


def _feature_versions(stored: dict, ckpt: Path) -> dict[str, int] | None:
    """The feature code's versions a checkpoint was trained with, checked as a saved folder's
    are (other features or extractor refused, other versions warned); None, said, for a
    checkpoint written before they were recorded (its folder's versions then stay unrecorded,
    as a folder saved before them does, not stamped with this version's)."""
    from fincrowd_ltr.model.checkpoint import checked_feature_record

    # warnings name from_lightning's caller
    record = checked_feature_record(stored.get("fincrowd"), ckpt, stacklevel=4) or {}
    versions = record.get("feature_versions")
    return dict(versions) if isinstance(versions, dict) else None


def _rebuilt(hp: dict, ckpt: Path):
    """The data module ``hp`` describes, set up as it was for training (relative paths read
    from the folder it ran in); None for one whose examples came from memory (nothing records
    where they came from: the export then records no training questions, said)."""
    from fincrowd_ltr.training.data import BankDataModule

    if hp.get("in_memory"):
        warnings.warn(
            f"{ckpt}: its data module was given its banks in memory, so the export cannot "
            "record the questions it trained on: `evaluate` will not leave them out",
            stacklevel=3,
        )
        return None
    source, banks, folds = _settings(hp)
    workdir = Path(hp.get("workdir") or Path.cwd())
    root = source.data_root or os.environ.get("FINCROWD_DATA") or DEFAULT_DATA_ROOT
    cache = None if source.cache_dir is None else workdir / source.cache_dir
    datamodule = BankDataModule(
        dataset=str(hp.get("dataset", "")),
        ranker=str(hp.get("ranker", "dense")),
        source=replace(source, data_root=str(workdir / root), cache_dir=cache),
        banks=banks,
        folds=folds,
        parts=hp.get("parts"),
    )
    try:
        datamodule.setup("fit")
    except DataError as err:
        raise DataError(
            f"{ckpt}: the data it was trained on does not load ({err}): export it where that "
            "data is (the record of its training questions keeps `evaluate` off them), or "
            "serve the `model/` folder `python train.py fit` wrote beside its checkpoints"
        ) from None
    return datamodule


def _records_reader(banks) -> bool:
    """Whether stored bank settings name the static scorer's question reader (those written
    before it was a setting do not: the checkpoint records no reader then)."""
    return (
        isinstance(banks, BankSettings) or isinstance(banks, dict) and "static_questions" in banks
    )


def _settings(hp: dict) -> tuple[DataSettings, BankSettings, FoldSettings]:
    """The data module's settings from its stored hyperparameters, nested (since 0.3) or flat
    (checkpoints written before: ``bank_mode``, ``val_bank_mode``, ``split``, ``folds``, ...)."""
    if isinstance(hp.get("banks"), dict | BankSettings):
        return (
            as_settings(DataSettings, hp.get("source")),
            as_settings(BankSettings, hp.get("banks")),
            as_settings(FoldSettings, hp.get("folds")),
        )
    mode = hp.get("bank_mode", "retrieved")
    banks = BankSettings(
        first_stage=hp.get("first_stage", "auto"),
        bank_size=hp.get("bank_size", BankSettings().bank_size),
        train_mode=mode,
        val_mode=hp.get("val_bank_mode") or mode,
    )
    folds = FoldSettings(hp.get("folds", 5), hp.get("test_fold", 0), hp.get("seed", 0))
    source = DataSettings(
        split=hp.get("split", "all"),
        data_root=hp.get("data_root"),
        cache_dir=hp.get("cache_dir", DataSettings().cache_dir),
    )
    return source, banks, folds
