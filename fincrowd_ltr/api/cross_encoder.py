"""``train_cross_encoder``: out-of-fold cross-encoder scores (a TREC run) and a final adapter."""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

from fincrowd_ltr.api.corpus import build_banks, data_settings, load_dataset
from fincrowd_ltr.api.synthetic import check_named_share, require_writable, synthesis_for
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.evaluation.reports import CrossEncoderReport
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.retrieval.banks import BankSet
from fincrowd_ltr.retrieval.build import BankSpec
from fincrowd_ltr.retrieval.first_stage import RUN
from fincrowd_ltr.settings import CrossEncoderSettings, DataSettings, SyntheticSettings
from fincrowd_ltr.synthesis import Synthesis

# orders a synthetic bank's negatives (MiniLM over thousands of banks' pages: an hour on CPU)
SYNTHETIC_RANKER = "bm25"


def train_cross_encoder(
    dataset: str | Dataset,
    settings: CrossEncoderSettings | None = None,
    *,
    run_out: str | Path | None = None,
    out: str | Path | None = None,
    overwrite: bool = False,
    data: DataSettings | None = None,
    **shortcuts,
) -> CrossEncoderReport:
    """Cross-fit a LoRA cross-encoder on group folds (``run_out``: out-of-fold scores as a TREC
    run) and/or train the final adapter on every covered question (``out``; a folder that holds
    files is replaced only with ``overwrite``). ``settings``
    (:class:`~fincrowd_ltr.settings.CrossEncoderSettings`: ``depth``, ``negatives_from``,
    ``first_stage``, ``max_length``, ``epochs``, ``batch_size``, ``lr``, ``max_groups``,
    ``folds``, ``seed``, ``synthetic``, ``synthetic_only``) and ``data`` (``split``,
    ``data_root``, ``cache_dir``) may be given as keyword shortcuts. With ``synthetic=N`` it also
    trains on N questions synthesised from the corpus's pages (no label read; each fold's model
    never on a question or a page of its held-out companies); with ``synthetic_only`` on them
    alone, so the final adapter needs no labelled question."""
    from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderConfig
    from fincrowd_ltr.crossencoder import train_cross_encoder as train
    from fincrowd_ltr.crossencoder.crossfit import crossfit
    from fincrowd_ltr.data.beir import write_trec_run

    where = data_settings(data, shortcuts)
    s = dataclasses.replace(settings or CrossEncoderSettings(), **shortcuts)
    run_out = None if run_out is None else Path(run_out)
    out = None if out is None else Path(out)
    _check_request(s, run_out, out, overwrite)
    depth, seed, split = s.depth, s.seed, where.split
    data = load_dataset(dataset, where.data_root, split)
    for note in data.notes:  # e.g. questions without a group: folds split their companies
        warnings.warn(f"train-cross-encoder: {note}", stacklevel=2)
    bankset = None
    if run_out is not None or not s.synthetic_only:  # labelled banks: trained on or scored
        if s.synthetic_only and not any(data.covered(q) for q in data.queries):
            raise DataError(
                f"{data.name}: no question has a relevant passage in the corpus, so there is "
                "no out-of-fold score to measure (run_out, --run-out); out (--out) alone trains "
                "on the synthetic questions without labelled ones",
                "run_out",
            )
        if not s.synthetic_only and not data.queries:
            raise DataError(
                f"{data.name}: no labelled question to train on; synthetic_only "
                "(--synthetic-only, with --synthetic N) trains on the corpus's own questions",
                "synthetic_only",
            )
        data.require_covered("train on")
        rankers = [SYNTHETIC_RANKER if s.synthetic_only else s.labelled_negatives_from]
        bankset = build_banks(data, rankers, first_stage=s.first_stage, size=depth, data=where)
    groups_for = TrainingGroups(data, bankset, s, *_synthetic_banks(data, s, where))
    config = CrossEncoderConfig(max_length=s.max_length)
    kwargs = s.steps()
    stage = BankSpec(first_stage=s.first_stage).stage(data)
    report = CrossEncoderReport(
        dataset=data.name, first_stage=stage, depth=depth, config=vars(config), train=kwargs
    )
    if groups_for.synthesis is not None:
        report["synthetic"] = {
            "asked": s.synthetic,
            "questions": len(groups_for.synthesis.questions),
            "seed": seed,
            "ranker": SYNTHETIC_RANKER,
            "only": s.synthetic_only,
        }
    if run_out is not None:
        run, fold_info = crossfit(data, bankset, groups_for, config, s.folds, seed, depth, kwargs)
        run_out.parent.mkdir(parents=True, exist_ok=True)
        write_trec_run(run_out, run, "cross-encoder")
        report["folds"] = fold_info
    if out is not None:
        covered = (
            []
            if s.synthetic_only
            else [q for q in data.queries if q in bankset.banks and data.covered(q)]
        )
        groups = groups_for(covered, set())
        model = CrossEncoder.from_minilm(config, seed)
        summary = train(model, groups, seed=seed, **kwargs)
        trained = set(summary.pop("trained_qids"))
        model.config.training = {
            **summary,
            "dataset": data.name,
            "corpus": data.corpus_fingerprint(),
            "split": split,
            "first_stage": stage,
            "depth": depth,
            "max_groups": s.max_groups,
            "query_ids": [q for q in covered if q in trained],  # the labelled ones trained on
            "synthetic": report.get("synthetic"),
        }
        if out.is_dir() and overwrite:
            shutil.rmtree(out)
        model.save(out)
        report["final_groups"] = len(groups)  # available; at most max_groups of them trained
        report["final_trained_groups"] = model.config.training["train_groups"]
    return report


def _check_request(
    s: CrossEncoderSettings, run_out: Path | None, out: Path | None, overwrite: bool
) -> None:
    """Refuse, before any work, what the settings cannot do together and an ``out`` that is a
    file or a folder holding files (without ``overwrite``)."""
    if run_out is None and out is None:
        raise DataError(
            "nothing to train: give run_out (--run-out, out-of-fold scores) and/or out (--out, "
            "the final adapter)",
            "out",
        )
    if s.synthetic_only and s.negatives_from is not None:
        raise DataError(
            "negatives_from (--negatives-from) orders the labelled questions' negatives, and "
            "synthetic_only (--synthetic-only) trains on none (a synthetic question's come from "
            f"its {SYNTHETIC_RANKER} bank)",
            "negatives_from",
        )
    if s.first_stage == RUN:
        raise DataError(
            "the cross-encoder's banks come from a first stage of the package (auto, bm25...): "
            "it takes no run",
            "first_stage",
        )
    if out is not None:
        require_writable(out, overwrite)


def _synthetic_banks(data: Dataset, s: CrossEncoderSettings, where: DataSettings) -> tuple:
    """The synthetic questions ``s`` asks for and their BM25 banks, or ``(None, None)``; the
    synthesis's notes are warned, and a corpus that yields no question is an error."""
    if not s.synthetic:
        return None, None
    extractor = corpus_extractor(data.passages)
    found = synthesis_for(SyntheticSettings(n=s.synthetic, seed=s.seed), data, extractor)
    for note in found.notes:  # fewer questions than asked and why; interim filings' wording
        warnings.warn(f"train-cross-encoder: {note}", stacklevel=3)
    if not found.questions:
        raise DataError(
            "no question could be synthesised from the corpus's pages (none has a table row or "
            "sentence stating a figure for a period, or no page names its company or document)",
            "synthetic",
        )
    check_named_share(
        found, [q.text for q in data.queries.values()], extractor, "train-cross-encoder",
        "nothing here: the cross-encoder's synthetic questions always name their company "
        "(fit-residual takes --synthetic-named-share)",
    )  # fmt: skip
    banks = build_banks(
        found.dataset(), [SYNTHETIC_RANKER], first_stage=s.first_stage, size=s.depth, data=where,
        extractor=extractor,
    )  # fmt: skip
    return found, banks


@dataclass
class TrainingGroups:
    """The training groups of a cross-encoder that must not draw on ``held`` companies
    (:func:`~fincrowd_ltr.data.splits.held_units`): the labelled training questions'
    hard-negative groups (unless ``synthetic_only``) and the synthetic questions' groups."""

    data: Dataset
    bankset: BankSet | None
    s: CrossEncoderSettings
    synthesis: Synthesis | None = None
    synthetic_banks: BankSet | None = None

    def __call__(self, train: list[str], held: set[str]) -> list:
        from fincrowd_ltr.crossencoder.training import hard_negative_groups, synthetic_groups

        groups = []
        if not self.s.synthetic_only:
            groups += hard_negative_groups(
                self.data, self.bankset, self.s.labelled_negatives_from, train, excluded=held
            )
        if self.synthesis is not None:
            groups += synthetic_groups(self.synthesis, self.synthetic_banks, SYNTHETIC_RANKER, held)
        return groups
