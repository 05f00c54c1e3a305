"""What a correction was trained on, and the leakage rule that reads it: which questions of a
dataset a model (or one of its domain calibrations) has seen, matched by content."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.model.calibration import GateCalibration


@dataclass
class TrainingSummary:
    """What a correction was trained on: the leakage checks read it, so every field is typed.

    ``query_fingerprints`` (``Dataset.question_identities``: each question's content fingerprint
    and its id-and-text key) identify the training questions: evaluation and calibration leave
    them out under any id or loader, and after their corpus's gold texts change.
    ``base_scorer``: the scoring code and question reader of a static base ranker
    (:func:`~fincrowd_ltr.retrieval.rankers.scorer_recipe`); ``None`` for fixed models and for
    checkpoints written before it was recorded.
    """

    dataset: str = ""
    base_ranker: str = "dense"
    first_stage: str = "bm25"
    base_scorer: str | None = None
    bank_size: int | None = None
    split: str = "all"
    dataset_fingerprint: str = ""
    setting: dict = field(default_factory=dict)
    bank_mode: str = "injected"
    val_bank_mode: str = "retrieved"
    folds: int | None = None
    seed: int | None = None
    calibration_fold: int | None = None
    test_fold: int | None = None
    train_banks: int | None = None
    query_ids: list[str] = field(default_factory=list)
    query_fingerprints: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:  # ids and fingerprints by count, not one by one
        parts = [
            f"{k}=<{len(v)}>" if k in ("query_ids", "query_fingerprints") else f"{k}={v!r}"
            for k, v in vars(self).items()
            if k != "extra"
        ]
        return f"TrainingSummary({', '.join(parts)}, extra keys {sorted(self.extra)})"

    @property
    def static_questions(self) -> str:
        """Who read the questions of the static base ranker in training (``minilm`` where
        not recorded: the package's default)."""
        from fincrowd_ltr.retrieval.rankers import reader_of

        return reader_of(self.base_scorer)

    @property
    def calibration_fold_in_plan(self) -> int | None:
        """The calibration fold as ``calibrate --fold`` names it: its index in the whole plan of
        ``folds`` (``calibration_fold`` counts the folds left when ``test_fold`` is held out)."""
        k, held = self.calibration_fold, self.test_fold
        if k is None or held is None:
            return k
        return k + 1 if k >= held else k

    def calibrate_hint(self) -> str:
        """How to calibrate again on the questions this correction was calibrated on (the
        only labelled ones it did not train on, but a held-out fold), or ``""``."""
        k = self.calibration_fold_in_plan
        if k is None or self.folds is None:
            return ""
        return (
            f"; this correction's own calibration questions are fold {k} of its plan: "
            f"`calibrate --fold {k} --folds {self.folds} --seed {self.seed}`"
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(out.pop("extra"))
        return out

    @classmethod
    def from_dict(cls, data: dict) -> TrainingSummary:
        known = set(cls.__dataclass_fields__) - {"extra"}
        return cls(
            **{k: v for k, v in data.items() if k in known},
            extra={k: v for k, v in data.items() if k not in known},
        )


def seen_questions(
    summary: TrainingSummary | None, calibrations: list[GateCalibration], dataset: Dataset
) -> set[str]:
    """Questions of ``dataset`` the model trained or validated on (``summary``) and that
    calibrated the given domains, matched by content fingerprint; a summary or calibration
    written without fingerprints (before 0.2.0) falls back to its query ids on a dataset of the
    same name."""
    sources = []
    if summary is not None:
        sources.append((summary.query_fingerprints, summary.query_ids, summary.dataset))
    for calibration in calibrations:
        sources.append((calibration.query_fingerprints, calibration.query_ids, calibration.dataset))
    prints, ids = set(), set()
    for fingerprints, qids, name in sources:
        if fingerprints:
            prints |= set(fingerprints)
        elif name in (None, dataset.name):
            ids |= set(qids)
    found = ids & set(dataset.queries)
    if prints:  # by content, or by id and text (a corpus re-extracted since: other gold texts)
        found |= {
            q
            for q in dataset.queries
            if dataset.question_fingerprint(q) in prints or dataset.question_key(q) in prints
        }
    return found
