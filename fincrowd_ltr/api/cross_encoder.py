"""``train_cross_encoder``: out-of-fold cross-encoder scores (a TREC run) and a final adapter."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fincrowd_ltr.api.corpus import build_banks, data_settings, load_dataset
from fincrowd_ltr.api.synthetic import synthesis_for
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.evaluation.reports import CrossEncoderReport
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.retrieval.build import BankSpec
from fincrowd_ltr.settings import CrossEncoderSettings, DataSettings, SyntheticSettings

SYNTHETIC_RANKER = "bm25"  # orders a synthetic bank's negatives (MiniLM over thousands of banks'
# pages would cost an hour on CPU)


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
    ``folds``, ``seed``, ``synthetic``, ``synthetic_only``) and ``data`` (``split``,
    ``data_root``, ``cache_dir``) may be given as keyword shortcuts. With ``synthetic=N`` it also
    trains on N questions synthesised from the corpus's pages (no label read; each fold's model
    only on questions of companies outside its fold); with ``synthetic_only`` on them alone, so
    the final adapter needs no labelled question."""
    from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderConfig
    from fincrowd_ltr.crossencoder import train_cross_encoder as train
    from fincrowd_ltr.crossencoder.crossfit import crossfit
    from fincrowd_ltr.data.beir import write_trec_run

    where = data_settings(data, shortcuts)
    s = dataclasses.replace(settings or CrossEncoderSettings(), **shortcuts)
    if run_out is None and out is None:
        raise DataError(
            "nothing to train: give run_out (--run-out, out-of-fold scores) and/or out (--out, "
            "the final adapter)",
            "out",
        )
    depth, seed, split = s.depth, s.seed, where.split
    data = load_dataset(dataset, where.data_root, split)
    labelled = run_out is not None or not s.synthetic_only  # labelled banks: trained or scored
    bankset = None
    if labelled:
        data.require_covered("score out of fold" if s.synthetic_only else "train on")
        rankers = [SYNTHETIC_RANKER if s.synthetic_only else s.negatives_from]
        bankset = build_banks(data, rankers, first_stage=s.first_stage, size=depth, data=where)
    groups_for = _Groups(data, bankset, s, where)
    config = CrossEncoderConfig(max_length=s.max_length)
    kwargs = s.steps()
    report = CrossEncoderReport(
        dataset=data.name,
        first_stage=BankSpec(first_stage=s.first_stage).stage(data),
        depth=depth,
        config=vars(config),
        train=kwargs,
    )
    if groups_for.synthesis is not None:
        report["synthetic"] = {
            "n": s.synthetic,
            "questions": len(groups_for.synthesis.questions),
            "ranker": SYNTHETIC_RANKER,
            "only": s.synthetic_only,
        }
    if run_out is not None:
        run, fold_info = crossfit(data, bankset, groups_for, config, s.folds, seed, depth, kwargs)
        Path(run_out).parent.mkdir(parents=True, exist_ok=True)
        write_trec_run(Path(run_out), run, "cross-encoder")
        report["folds"] = fold_info
    if out is not None:
        covered = (
            []
            if s.synthetic_only
            else [q for q in data.queries if q in bankset.banks and data.covered(q)]
        )
        groups = groups_for(covered, set())
        model = CrossEncoder.from_minilm(config, seed)
        model.config.training = {
            **train(model, groups, seed=seed, **kwargs),
            "dataset": data.name,
            "split": split,
            "query_ids": covered,
            "synthetic": s.synthetic,
        }
        model.save(Path(out))
        report["final_groups"] = len(groups)  # available; at most max_groups of them trained
        report["final_trained_groups"] = model.config.training["train_groups"]
    return report


class _Groups:
    """The training groups of a model that must not draw on ``held`` groups (companies): the
    labelled training questions' hard-negative groups and/or the synthetic questions' groups."""

    def __init__(
        self, data: Dataset, bankset, s: CrossEncoderSettings, where: DataSettings
    ) -> None:
        self.data, self.bankset, self.s = data, bankset, s
        self.synthesis = self.synthetic_banks = None
        if s.synthetic:
            extractor = corpus_extractor(data.passages)
            questions = SyntheticSettings(n=s.synthetic, seed=s.seed)
            self.synthesis = synthesis_for(questions, data, extractor)
            self.synthetic_banks = build_banks(
                self.synthesis.dataset(), [SYNTHETIC_RANKER], first_stage=s.first_stage,
                size=s.depth, data=where,
            )  # fmt: skip

    def __call__(self, train: list[str], held: set[str]) -> list:
        from fincrowd_ltr.crossencoder.training import hard_negative_groups, synthetic_groups

        groups = []
        if not self.s.synthetic_only:
            groups += hard_negative_groups(self.data, self.bankset, self.s.negatives_from, train)
        if self.synthesis is not None:
            groups += synthetic_groups(self.synthesis, self.synthetic_banks, SYNTHETIC_RANKER, held)
        return groups
