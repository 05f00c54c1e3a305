"""The settings of ``fit_correction``: small frozen dataclasses with every default named once.

``FitSettings`` groups them: where the data is (:class:`DataSettings`), how banks are made
(:class:`BankSettings`), how the residual is trained (:class:`TrainingSettings`), how the gate is
calibrated (:class:`CalibrationSettings`) and which synthetic questions join training
(:class:`~fincrowd_ltr.api.synthetic.SyntheticSettings`). Python callers pass one object or the
flat keyword shortcuts (``fit_correction(data, "bm25", folds=4)``); the command line's options are
generated from the same fields (:func:`add_arguments`), so a default or a help text lives here
only.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path

from fincrowd_ltr.defaults import (
    BANK_MODES,
    CROSS_ENCODER_NEGATIVES,
    DEFAULT_BANK_SIZE,
    DEFAULT_CACHE,
    DEFAULT_DELTA,
    DEFAULT_LINE_ITEMS,
    DEFAULT_REGRESSION_CAP,
    DEFAULT_TRAIN_MODE,
    GATE_METHODS,
    LINE_ITEMS,
    MIN_CALIBRATION_QUERIES,
    QUESTION_READERS,
    SELECTION_GRID,
    STAND_IN,
)

MODES = BANK_MODES
GATE_CALIBRATIONS = ("auto", "pooled", "fold", "none")
GATE_ROWS = ("auto", "labelled", "synthetic", "both")
GATE_LABELS = ("improved", "decisive")
OBJECTIVES = ("pairwise", "listnet", "lambdarank")
SCOPES = ("folds", "transductive")
MIXINGS = ("choose", "average")
AUTO = "auto"  # a named share read from the questions


def _data_error(message: str) -> Exception:
    """A ``DataError`` (imported when needed: settings import nothing heavy)."""
    from fincrowd_ltr.data.schema import DataError

    return DataError(message)


_SIMPLE_TYPES = {
    "int": numbers.Integral,
    "float": numbers.Real,
    "bool": bool,
    "str": str,
    "None": type(None),
    "Path": os.PathLike,
}


def check_types(settings) -> None:
    """Refuse a field whose value is not of its declared type (``folds="5"``, ``monotone="no"``:
    a string is truthy, so the fit would run with it on), naming the field; a bool is not a
    number here. Fields of other declared types (tuples, mappings, objects) are left to their
    own checks."""
    for f in dataclasses.fields(settings):
        kinds = [k.strip() for k in str(f.type).split("|")]
        if not all(k in _SIMPLE_TYPES for k in kinds):
            continue
        value = getattr(settings, f.name)
        fits = any(isinstance(value, _SIMPLE_TYPES[k]) for k in kinds)
        if isinstance(value, bool) and "bool" not in kinds:
            fits = False
        if not fits:
            raise _data_error(
                f"{type(settings).__name__}.{f.name} must be {' or '.join(kinds)}; got "
                f"{value!r} ({type(value).__name__})"
            )


def _is_share(value) -> bool:
    """Whether ``value`` is a named share: a number in [0, 1] or ``auto``."""
    return value == AUTO or (not isinstance(value, str) and 0.0 <= value <= 1.0)


def share_or_auto(value: str) -> float | str:
    """A command-line share: a number in [0, 1] or ``auto``."""
    try:
        share = value if value == AUTO else float(value)
    except ValueError:
        share = None
    if share is None or not _is_share(share):
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1] or 'auto', got {value!r}")
    return share


@dataclass(frozen=True)
class SyntheticSettings:
    """Synthetic training questions in ``fit_correction``.

    Attributes:
        n: Questions to synthesise (0: none).
        seed: Seed of the synthesis.
        scope: ``folds`` (a training set takes only its own companies' questions) or
            ``transductive`` (every company's; no labels either way).
        labelled: Also train on the labelled training folds (False: synthetic questions only).
        weight: Weight of a synthetic bank in the objective (a labelled bank weighs 1).
        select_weights: Mixing weights to choose from per fold, like any other setting (on
            the folds that validate it; 0: the labelled banks alone); empty: ``weight``
            throughout.
        mixing: What a fit does with ``select_weights``: ``choose`` one per fold, or
            ``average`` the residuals of all of them (each at its own validated epoch count:
            refit for it in a gated fit with labelled banks, else early-stopped), so no
            weight is chosen on a few dozen validation questions.
        draws: Synthesise ``n`` questions this many times over (``n * draws`` in all, dealt
            into draws by position) and average one residual per draw (and weight): less
            dependence on which questions were drawn; needs mixing ``average``.
        ranker: The base ranker that scores the synthetic banks (None: the training ranker,
            or its static stand-in, ``STAND_IN``, when that embeds with MiniLM: thousands of
            synthetic banks are affordable because the residual reads each bank's
            standardised base scores); required when the training ranker is your ``run``,
            which has no synthetic questions.
        named_share: The share of synthetic questions that name their company (the others ask
            about "the" company's figure): lower it when your questions rarely name one;
            ``"auto"``: the share of the fit's questions (every fold's but a held-out test
            fold's; texts only, never their relevance) in which the extractor reads a company.
        line_items: Which table rows are asked about: ``known`` (labels the extractor maps to
            a metric) or ``any`` (every row with a specific label, asked about by its label;
            the default).
    """

    n: int = 0
    seed: int = 0
    scope: str = "folds"
    labelled: bool = True
    weight: float = 1.0
    select_weights: tuple[float, ...] = ()
    mixing: str = "choose"
    draws: int = 1
    ranker: str | None = None
    named_share: float | str = 1.0
    line_items: str = DEFAULT_LINE_ITEMS

    def __post_init__(self) -> None:
        check_types(self)
        if self.line_items not in LINE_ITEMS:
            raise _data_error(
                f"synthetic line_items must be one of {LINE_ITEMS}; got {self.line_items!r}"
            )
        if not _is_share(self.named_share):
            raise _data_error(
                f"synthetic named_share must be in [0, 1] or 'auto'; got {self.named_share!r}"
            )
        if self.mixing not in MIXINGS:
            raise _data_error(f"synthetic mixing must be one of {MIXINGS}; got {self.mixing!r}")
        if self.draws < 1 or (self.draws > 1 and self.mixing != "average"):
            raise _data_error(
                f"synthetic draws must be >= 1, and more than 1 averages their residuals (mixing "
                f"'average'); got draws {self.draws} with mixing {self.mixing!r}"
            )
        distinct = {tuple(sorted(g.items())) for g in self.grid(({},))}
        if self.mixing == "average" and self.n and len(distinct) < 2:
            raise _data_error(
                "synthetic mixing 'average' averages the residuals of the select_weights "
                f"(--synthetic-weights) or draws: give two or more; got "
                f"{list(self.select_weights)}"
            )
        if self.scope not in SCOPES:
            raise _data_error(f"synthetic scope must be one of {SCOPES}; got {self.scope!r}")
        if self.n < 0 or self.weight <= 0 or any(w < 0 for w in self.select_weights):
            raise _data_error("synthetic n must be >= 0, weight > 0 and select_weights >= 0")
        if 0 in self.select_weights and not self.labelled:
            raise _data_error("select weight 0 leaves nothing to train on without labelled banks")

    def grid(self, grid: tuple[dict, ...]) -> tuple[dict, ...]:
        """``grid`` crossed with the mixing weights to select from (a repeated weight once)
        and the draws."""
        mixes = [{"synthetic_weight": w} for w in dict.fromkeys(self.select_weights)] or [{}]
        if self.draws > 1:  # a weight-0 part reads no synthetic bank: one fit for every draw
            mixes = [
                dict(m) if m.get("synthetic_weight") == 0 else {**m, "synthetic_draw": k}
                for m in mixes
                for k in range(self.draws)
            ]
        if not self.active or mixes == [{}]:
            return grid
        return tuple({**s, **m} for s in grid for m in mixes)

    @property
    def total(self) -> int:
        """How many questions are synthesised: ``n`` per draw."""
        return self.n * self.draws

    @property
    def active(self) -> bool:
        return self.n > 0

    def resolved(self, ranker: str) -> SyntheticSettings:
        """These settings with the ranker that scores the synthetic banks made explicit for a
        fit of ``ranker``."""
        return dataclasses.replace(self, ranker=self.ranker or STAND_IN.get(ranker, ranker))


def _opt(help: str, flag: str | None = None, **cli) -> dict:
    """A field's command-line form: its help, its flag (default ``--field-name``) and extra
    argparse keywords; ``cli=False`` keeps a field out of the command line."""
    return {"help": help, "flag": flag, **cli}


@dataclass(frozen=True)
class DataSettings:
    """Where the labelled corpus and the caches are."""

    split: str = "all"
    data_root: str | Path | None = None
    cache_dir: str | Path | None = DEFAULT_CACHE

    def __post_init__(self) -> None:
        check_types(self)


@dataclass(frozen=True)
class BankSettings:
    """How candidate banks are made for training, validation and calibration."""

    first_stage: str = field(default="auto", metadata=_opt("candidate retrieval", cli=False))
    bank_size: int = field(
        default=DEFAULT_BANK_SIZE, metadata=_opt("candidates per bank (training and evaluation)")
    )
    train_mode: str = field(
        default=DEFAULT_TRAIN_MODE,
        metadata=_opt("bank mode of the training banks", choices=MODES),
    )
    val_mode: str = field(
        default="retrieved",
        metadata=_opt("bank mode of validation (early stopping, selection)", choices=MODES),
    )
    static_questions: str = field(
        default="minilm",
        metadata=_opt(
            "who reads a question for the static scorer (rankers static, hybrid-static, "
            "fused-static): minilm (its own vector against the table's page vectors) or static "
            "(the table alone: no torch when scoring); the checkpoint records it",
            choices=QUESTION_READERS,
        ),
    )

    def __post_init__(self) -> None:
        check_types(self)
        if self.bank_size < 1:
            raise _data_error(f"bank_size must be >= 1; got {self.bank_size}")
        for name in ("train_mode", "val_mode"):
            if getattr(self, name) not in MODES:
                raise _data_error(f"{name} must be one of {MODES}; got {getattr(self, name)!r}")
        if self.static_questions not in QUESTION_READERS:
            raise _data_error(
                f"static_questions must be one of {QUESTION_READERS}; got {self.static_questions!r}"
            )


@dataclass(frozen=True)
class TrainingSettings:
    """How the residual is trained and cross-validated."""

    folds: int = field(default=5, metadata=_opt("group folds (companies, contexts, groups)"))
    seed: int = field(default=0, metadata=_opt("seed of the fold plan, fits and synthesis"))
    test_fold: int | None = field(
        default=None,
        metadata=_opt(
            "hold this group fold out of training and calibration (evaluate reports on it)",
            type=int,
        ),
    )
    grid: tuple[dict, ...] | None = field(default=SELECTION_GRID, metadata=_opt("", cli=False))
    objective: str = field(
        default="pairwise",
        metadata=_opt(
            "residual objective: supporting-vs-distracting pairs (the paper's), ListNet, or the "
            "pairs weighted by their nDCG@10 change (LambdaRank)",
            choices=OBJECTIVES,
        ),
    )
    hard_negatives: bool = field(
        default=False,
        metadata=_opt("pair supports first with distractors that conflict on exactly one field"),
    )
    monotone: bool = field(
        default=False,
        metadata=_opt(
            "sign-constrained compatibility weights: a match never lowers a candidate, a "
            "conflict never raises it"
        ),
    )
    committee: int = field(
        default=1,
        metadata=_opt(
            "residuals averaged into each deployed one, each trained without a seeded share of "
            "the training companies (sub-bagging; 1: a single fit)",
            type=int,
        ),
    )
    extra_training: tuple[str, ...] = field(
        default=(),
        metadata=_opt(
            "other labelled datasets whose banks join every training set (comma list, e.g. "
            "tatqa,finqa); their questions count as training questions"
        ),
    )
    extra_limit: int = field(
        default=300, metadata=_opt("most questions drawn from each extra dataset")
    )
    workers: int | None = field(
        default=None,
        metadata=_opt(
            "worker processes of the fit's parallel steps: the residual fits (default: one "
            "per CPU core when there are at least 8), the bank features and the synthetic "
            "questions (1: no worker process at all); results are the same",
            type=int,
        ),
    )

    def __post_init__(self) -> None:
        check_types(self)
        if self.folds < 1:
            raise _data_error(f"folds must be >= 1; got {self.folds}")
        if self.test_fold is not None and not 0 <= self.test_fold < self.folds:
            raise _data_error(
                f"test_fold must be one of the folds 0..{self.folds - 1} or None; got "
                f"{self.test_fold}"
            )
        if self.objective not in OBJECTIVES:
            raise _data_error(f"objective must be one of {OBJECTIVES}; got {self.objective!r}")
        if self.extra_limit < 1:
            raise _data_error(f"extra_limit must be >= 1; got {self.extra_limit}")
        if self.committee < 1:  # their types were checked above
            raise _data_error(f"committee must be >= 1 (1: a single fit); got {self.committee}")
        if self.workers is not None and self.workers < 1:
            raise _data_error(
                f"workers must be a whole number >= 1 (1: none); got {self.workers!r}"
            )


@dataclass(frozen=True)
class FoldSettings:
    """Which group fold one training run holds out (``python train.py fit``).

    Attributes:
        folds: Number of group folds (companies, contexts, groups).
        test_fold: The held-out fold; the next one validates; -1 trains on every group
            (validation: fold 0 of the same groups).
        seed: Seed of the fold assignment.
    """

    folds: int = 5
    test_fold: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        check_types(self)


@dataclass(frozen=True)
class CalibrationSettings:
    """The identity gate and how its domains are calibrated."""

    gate: bool = field(
        default=True,
        metadata=_opt("residual only, trained on every group", flag="--no-gate"),
    )
    regression_cap: float = field(
        default=DEFAULT_REGRESSION_CAP,
        metadata=_opt(
            "largest share of orderable questions (a relevant candidate in the bank) the gate "
            "may make worse"
        ),
    )
    delta: float = field(
        default=DEFAULT_DELTA,
        metadata=_opt("the cap holds with probability >= 1 - delta over the calibration draw"),
    )
    gate_method: str = field(
        default="ltt",
        metadata=_opt(
            "how the cap is kept: ltt (Learn-then-Test, binomial bound: a guarantee), crc "
            "(conformal risk control: in expectation) or empirical (on the calibration set only)",
            choices=GATE_METHODS,
        ),
    )
    min_calibration: int = field(
        default=MIN_CALIBRATION_QUERIES,
        metadata=_opt("fewest labelled calibration queries accepted"),
    )
    gate_calibration: str = field(
        default="auto",
        metadata=_opt(
            "how the saved model's gate domain is calibrated: pooled (the calibration fold with "
            "the training folds' cross-fitted rows: more questions), fold (the calibration fold "
            "alone) or none (no domain: every fold trains, and `calibrate` fits your domain "
            "later); auto: none on a folder of synthetic questions (which cannot calibrate a "
            "gate for real ones), else pooled",
            choices=GATE_CALIBRATIONS,
        ),
    )
    gate_rows: str = field(
        default="auto",
        metadata=_opt(
            "the cross-fitted rows the gate's predictor learns from: the labelled training "
            "folds', the synthetic questions' (those of each inner test fold's companies; needs "
            "--synthetic) or both; auto: both when the fit has synthetic questions of scope "
            "folds, else labelled; the gate is calibrated on labelled questions either way",
            choices=GATE_ROWS,
        ),
    )
    gate_labels: str = field(
        default="improved",
        metadata=_opt(
            "what the gate's predictor learns: improved (every cross-fitted row; 1 where the "
            "correction raised nDCG@10, 0 where it lowered or kept it) or decisive (only "
            "orderable rows whose nDCG@10 moved: improved against worse, the rows whose "
            "opening changes the gain or the regression count)",
            choices=GATE_LABELS,
        ),
    )
    domain: str | None = field(
        default=None,
        metadata=_opt("gate domain to calibrate (default: the dataset's name)", type=str),
    )

    def __post_init__(self) -> None:
        check_types(self)
        if self.gate_method not in GATE_METHODS:
            raise _data_error(
                f"gate_method must be one of {GATE_METHODS}; got {self.gate_method!r}"
            )
        if not 0.0 < self.delta < 1.0:
            raise _data_error(f"delta must be in (0, 1); got {self.delta}")
        if not 0.0 <= self.regression_cap < 1.0:
            raise _data_error(f"regression_cap must be in [0, 1); got {self.regression_cap}")
        if self.min_calibration < 1:
            raise _data_error(f"min_calibration must be at least 1; got {self.min_calibration}")
        if self.gate_rows not in GATE_ROWS:
            raise _data_error(f"gate_rows must be one of {GATE_ROWS}; got {self.gate_rows!r}")
        if self.gate_labels not in GATE_LABELS:
            raise _data_error(f"gate_labels must be one of {GATE_LABELS}; got {self.gate_labels!r}")
        if self.gate_calibration not in GATE_CALIBRATIONS:
            raise _data_error(
                f"gate_calibration must be one of {GATE_CALIBRATIONS}; got "
                f"{self.gate_calibration!r}"
            )


@dataclass(frozen=True)
class CrossEncoderSettings:
    """How the LoRA cross-encoder is trained: its banks, its hard negatives and its steps."""

    depth: int = field(default=200, metadata=_opt("bank candidates scored per question"))
    negatives_from: str | None = field(
        default=None,
        metadata=_opt(
            "ranker ordering labelled questions' hard negatives (default dense; synthetic "
            "ones: bm25)",
            type=str,
        ),
    )
    first_stage: str = field(default="auto", metadata=_opt("candidate retrieval", cli=False))
    max_length: int = field(default=128, metadata=_opt("word pieces per pair"))
    epochs: int = field(default=2, metadata=_opt("passes over the training groups"))
    batch_size: int = field(default=4, metadata=_opt("groups (1 + 7 negatives) per step"))
    lr: float = field(default=1e-3, metadata=_opt("learning rate of the LoRA weights and head"))
    max_groups: int = field(
        default=120,
        metadata=_opt("cap on training groups, labelled and synthetic together (CPU time)"),
    )
    folds: int = field(default=5, metadata=_opt("group folds of the out-of-fold scores"))
    seed: int = field(default=0, metadata=_opt("seed of the fold plan, the training and synthesis"))
    synthetic: int = field(
        default=0,
        metadata=_opt(
            "also train on N questions synthesised from the corpus's pages (no label read; a "
            "fold's model only on companies outside the fold)",
            metavar="N",
        ),
    )
    synthetic_only: bool = field(
        default=False,
        metadata=_opt("train on the synthetic questions alone (labels only score out of fold)"),
    )

    def __post_init__(self) -> None:
        check_types(self)
        if self.synthetic < 0:
            raise _data_error(f"synthetic (--synthetic) must be >= 0; got {self.synthetic}")
        if self.synthetic_only and not self.synthetic:
            raise _data_error(
                "synthetic_only (--synthetic-only) needs synthetic questions (--synthetic N)"
            )
        group = CROSS_ENCODER_NEGATIVES + 1  # a gold passage and its negatives
        least = dict(depth=group, max_length=8, epochs=1, batch_size=1, max_groups=1, folds=2)
        for name, low in least.items():
            if getattr(self, name) < low:
                why = f" (a group is 1 + {CROSS_ENCODER_NEGATIVES} candidates)" * (name == "depth")
                flag = name.replace("_", "-")
                raise _data_error(
                    f"{name} (--{flag}) must be >= {low}{why}; got {getattr(self, name)}"
                )
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise _data_error(f"lr (--lr) must be a positive number; got {self.lr}")

    @property
    def labelled_negatives_from(self) -> str:
        """The ranker ordering labelled questions' hard negatives (default ``dense``)."""
        return self.negatives_from or "dense"

    def steps(self) -> dict:
        """The training loop's keywords."""
        return {
            "max_epochs": self.epochs,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "max_groups": self.max_groups,
        }


@dataclass(frozen=True)
class EvaluationSettings:
    """What ``evaluate`` reports beside the base rankers' rows.

    Attributes:
        checkpoint: A correction folder or a loaded ``GatedCorrection``: adds ``residual:<r>``.
        domain: The gate domain: adds ``gated:<r>``.
        fallback: What an unknown ``domain`` does (``error`` or the name of a known one).
        cross_encoder: The cross-encoder folder the ``cross-encoder`` ranker loads (default
            ``checkpoints/cross-encoder``).
        cascades: Fixed-setting cascades (``CascadeSettings``) over the same banks.
    """

    checkpoint: object = None
    domain: str | None = None
    fallback: str = "error"
    cross_encoder: str | Path | None = None
    cascades: tuple = ()

    def __post_init__(self) -> None:
        check_types(self)

    @classmethod
    def take(cls, given: EvaluationSettings | None, shortcuts: dict) -> EvaluationSettings:
        """``given`` (default: none of them) with its fields taken out of ``shortcuts``."""
        names = [f.name for f in dataclasses.fields(cls)]
        changes = {k: shortcuts.pop(k) for k in names if k in shortcuts}
        if "cascades" in changes:
            changes["cascades"] = tuple(changes["cascades"] or ())
        return dataclasses.replace(given or cls(), **changes)


@dataclass(frozen=True)
class FitSettings:
    """Everything ``fit_correction`` can be told, grouped."""

    data: DataSettings = DataSettings()
    banks: BankSettings = BankSettings()
    training: TrainingSettings = TrainingSettings()
    calibration: CalibrationSettings = CalibrationSettings()
    synthetic: SyntheticSettings = SyntheticSettings()

    def replace(self, **shortcuts) -> FitSettings:
        """A copy with flat keyword shortcuts applied (``folds=4``, ``regression_cap=0.02``,
        ``synthetic=400``: how many synthetic questions, the other synthetic settings kept,
        or a whole ``SyntheticSettings``); an unknown name is a ``TypeError``."""
        groups = {
            name: dataclasses.asdict(getattr(self, name))
            for name in ("data", "banks", "training", "calibration")
        }
        owner = {f: g for g, fields in groups.items() for f in fields}
        synthetic = shortcuts.pop("synthetic", self.synthetic)
        if isinstance(synthetic, bool) or not isinstance(
            synthetic, numbers.Integral | SyntheticSettings | None
        ):
            raise _data_error(
                f"synthetic must be a count of questions or a SyntheticSettings; got {synthetic!r}"
            )
        if isinstance(synthetic, numbers.Integral):
            synthetic = int(synthetic)
            seed = shortcuts.get("seed", self.synthetic.seed)
            synthetic = dataclasses.replace(self.synthetic, n=synthetic, seed=seed)
        require_used(shortcuts, (*owner, "synthetic"), "a fit (FitSettings)")
        changes: dict[str, dict] = {}
        for key, value in shortcuts.items():
            if key == "extra_training":
                value = tuple(value or ())
            changes.setdefault(owner[key], {})[key] = value
        return FitSettings(
            **{
                name: dataclasses.replace(getattr(self, name), **changes.get(name, {}))
                for name in groups
            },
            synthetic=synthetic or SyntheticSettings(),
        )


def as_settings(cls: type, value):
    """``value`` as a ``cls`` settings object (a mapping of its fields is converted: configs and
    stored hyperparameters hold mappings)."""
    if value is None:
        return cls()
    return value if isinstance(value, cls) else cls(**dict(value))


def plain(settings) -> dict:
    """A settings object as plain values (paths as strings): for hyperparameters and JSON."""
    return {
        k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(settings).items()
    }


def require_defaults(settings: FitSettings, used: dict[str, tuple[str, ...]], where: str) -> None:
    """Refuse a settings object whose fields ``where`` does not read differ from their defaults
    (a ``DataError`` naming them): ``used`` maps a group (``data``, ``banks``, ...) to the
    fields read, every field of a group not named is unread."""
    from fincrowd_ltr.data.schema import DataError

    changed = {}
    for f in dataclasses.fields(settings):
        group = getattr(settings, f.name)
        default = type(group)()
        for g in dataclasses.fields(group):
            value = getattr(group, g.name)
            if g.name not in used.get(f.name, ()) and value != getattr(default, g.name):
                changed[f"{f.name}.{g.name}"] = value
    if changed:
        shown = ", ".join(f"{name}={value!r}" for name, value in changed.items())
        raise DataError(
            f"{where} does not read {shown}: it trains and calibrates with their defaults; leave "
            "them unset",
            next(iter(changed)),
        )


def require_used(shortcuts: dict, used: tuple[str, ...], where: str) -> None:
    """Refuse settings ``where`` does not use (``TypeError`` naming them and the ones it does)."""
    unused = sorted(set(shortcuts) - set(used))
    if unused:
        import difflib

        near = [m for u in unused for m in difflib.get_close_matches(u, used, n=1)]
        hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
        raise TypeError(
            f"{where} does not use setting(s) {unused}{hint}; it takes {', '.join(used)}"
        )


def add_arguments(
    parser: argparse.ArgumentParser, cls: type, only: tuple[str, ...] | None = None
) -> None:
    """Command-line options for the fields of a settings class (``only`` those named), defaults
    and help from the fields; a ``bool`` defaulting to False is a flag, one defaulting to True a
    ``--no-`` flag, a tuple a comma list."""
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        meta = dict(f.metadata)
        if not meta or meta.pop("cli", True) is False:
            continue
        flag = meta.pop("flag") or "--" + f.name.replace("_", "-")
        text = meta.pop("help")
        if f.type in ("bool", bool):
            action = "store_false" if f.default else "store_true"
            parser.add_argument(flag, dest=f.name, action=action, help=text)
        elif str(f.type).startswith("tuple"):
            parser.add_argument(flag, dest=f.name, default="", help=text)
        else:
            kind = meta.pop("type", None) or type(f.default)
            parser.add_argument(flag, dest=f.name, type=kind, default=f.default, help=text, **meta)


def add_synthetic_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``SyntheticSettings`` options of the command line (defaults from the class)."""
    d = SyntheticSettings()
    parser.add_argument(
        "--synthetic", dest="synthetic", type=int, default=d.n, metavar="N",
        help="also train on N questions synthesised from the corpus's own pages",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-scope", dest="synthetic_scope", choices=SCOPES, default=d.scope,
        help="folds: a training set takes only its own companies' synthetic questions; "
        "transductive: every company's",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-only", dest="synthetic_only", action="store_true",
        help="train the residual on synthetic questions alone (labels only validate and "
        "calibrate)",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-weight", dest="synthetic_weight", type=float, default=d.weight,
        help="weight of a synthetic bank in the objective (a labelled bank weighs 1)",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-weights", dest="synthetic_weights", default="", metavar="W,W,...",
        help="mixing weights chosen per fold like any other setting (0: labelled banks alone), "
        "crossed with the selection grid when synthetic banks were built (comma list)",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-mixing", dest="synthetic_mixing", choices=MIXINGS, default=d.mixing,
        help="choose one of --synthetic-weights per fold (default), or average the residuals "
        "of all of them",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-draws", dest="synthetic_draws", type=int, default=d.draws, metavar="K",
        help="synthesise N questions K times over and average one residual per draw (needs "
        "--synthetic-mixing average)",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-ranker", dest="synthetic_ranker", default=d.ranker, metavar="R",
        help="base ranker that scores the synthetic banks (default: --ranker, or its static "
        "stand-in when it embeds with MiniLM: fused-static-whole for fused)",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-named-share", dest="synthetic_named_share", type=share_or_auto,
        default=d.named_share, metavar="S",
        help="share of synthetic questions that name their company (default 1); 'auto': the "
        "share of the fit's questions that name one",
    )  # fmt: skip
    parser.add_argument(
        "--synthetic-line-items", dest="synthetic_line_items", choices=LINE_ITEMS,
        default=d.line_items,
        help="table rows asked about: 'any' (every row with a specific label, asked about by "
        "its own label; default) or 'known' (labels the extractor maps to a metric)",
    )  # fmt: skip


def _weights(text: str) -> tuple[float, ...]:
    """``--synthetic-weights``: a comma list of numbers."""
    try:
        return tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise _data_error(
            f"--synthetic-weights {text!r}: expected a comma list of numbers (e.g. 0,0.03,0.3)"
        ) from None


def from_arguments(args: argparse.Namespace) -> FitSettings:
    """The ``FitSettings`` a parsed command line asks for (``--no-select``: no selection grid)."""
    grid = SELECTION_GRID if getattr(args, "select", True) else None

    def pick(cls: type, **extra):
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
                  if hasattr(args, f.name)}  # fmt: skip
        for f in dataclasses.fields(cls):
            if str(f.type).startswith("tuple") and isinstance(values.get(f.name), str):
                values[f.name] = tuple(v for v in values[f.name].split(",") if v)
        return cls(**{**values, **extra})

    return FitSettings(
        data=DataSettings(args.split, args.data_root, args.cache_dir),
        banks=pick(BankSettings, first_stage=args.first_stage),
        training=pick(TrainingSettings, grid=grid, workers=args.workers or None),
        calibration=pick(CalibrationSettings),
        synthetic=SyntheticSettings(
            n=args.synthetic,
            seed=args.seed,
            scope=args.synthetic_scope,
            labelled=not args.synthetic_only,
            weight=args.synthetic_weight,
            select_weights=_weights(args.synthetic_weights),
            mixing=args.synthetic_mixing,
            draws=args.synthetic_draws,
            ranker=args.synthetic_ranker,
            named_share=args.synthetic_named_share,
            line_items=args.synthetic_line_items,
        ),
    )
