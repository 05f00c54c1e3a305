"""Fitting the residual on in-memory banks, with Lightning.

:func:`fit_residual` trains one residual (early stopping on the validation banks, the best
validation epoch restored, or a fixed number of epochs); :func:`choose_setting` trains every
setting of a grid on one or more (training, validation) splits and keeps the best setting and
epoch count of the mean validation curve; :class:`ResidualFits`
remembers every fit by (training questions, validation questions, setting), so a workflow never
trains the same residual twice, and trains committees: a residual averaged over fits on group
sub-samples of its training banks (:meth:`ResidualFits.deployed`).
"""

from __future__ import annotations

import copy
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping

from fincrowd_ltr.defaults import AVERAGED, MIXING_KEYS, SELECTION_GRID
from fincrowd_ltr.engine import fork_safe, stop_pool, worker_count, worker_init
from fincrowd_ltr.features.examples import BankExample
from fincrowd_ltr.model.residual import average_residuals
from fincrowd_ltr.progress import Progress
from fincrowd_ltr.training.data import BankDataModule
from fincrowd_ltr.training.module import ResidualModule
from fincrowd_ltr.training.trainer import quiet_trainer

MIN_PARALLEL_FITS = 8  # fewer fits than this train in-process (starting workers costs seconds)
MAX_EPOCHS = 60  # early stopping on the validation banks usually ends training sooner
PATIENCE = 15
MONITOR = "val_ndcg10"

HPARAM_GRID = SELECTION_GRID  # the name this module exported before SELECTION_GRID


class KeepBest(Callback):
    """Restore the weights of the best validation epoch when training ends (early stopping stops
    ``patience`` epochs after it); ``curve`` holds every epoch's validation score."""

    def __init__(self, monitor: str = MONITOR) -> None:
        self.monitor = monitor
        self.best_score = float("-inf")
        self.best_epochs = 0  # epochs trained when the best validation score was reached
        self.curve: list[float] = []
        self._state: dict | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        score = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or score is None:
            return
        self.curve.append(float(score))
        if float(score) > self.best_score:
            self.best_score = float(score)
            self.best_epochs = trainer.current_epoch + 1
            self._state = copy.deepcopy(pl_module.state_dict())

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._state is not None:
            pl_module.load_state_dict(self._state)


def fit_residual(
    train: list[BankExample],
    val: list[BankExample],
    setting: dict | None = None,
    seed: int = 0,
    max_epochs: int = MAX_EPOCHS,
    batch_size: int = 16,
) -> tuple[ResidualModule, float, int]:
    """One residual trained on ``train`` banks (those with a supporting candidate), stopped and
    restored on ``val``; returns the module, its best validation nDCG@10 and the number of
    training banks used. A ``synthetic_weight`` in ``setting`` reweighs the synthetic banks
    (0 leaves them out), so the mixing weight is chosen like any other setting; an ``epochs``
    in ``setting`` trains exactly that many epochs with no validation banks (``val`` empty,
    score NaN): a refit whose epoch count was chosen on other folds. The number of epochs to
    the best validation score is the module's ``best_epochs``, every epoch's validation score its
    ``val_curve``."""
    setting = dict(setting or {})
    if AVERAGED in setting:
        raise ValueError("an averaged setting is trained part by part (ResidualFits.deployed)")
    if "synthetic_draw" in setting:
        draw = setting.pop("synthetic_draw")
        train = [e for e in train if not e.synthetic or e.draw == draw]
    if "synthetic_weight" in setting:
        train = with_synthetic_weight(train, setting.pop("synthetic_weight"))
    epochs = setting.pop("epochs", None)
    if (epochs is None) == (not val):
        raise ValueError(
            "a residual fit needs validation banks or a fixed epoch count (setting 'epochs'), "
            f"not {'neither' if epochs is None else 'both'}"
        )
    L.seed_everything(seed, verbose=False)
    dm = BankDataModule(examples={"train": train, "val": val}, batch_size=batch_size)
    model = ResidualModule(**setting)
    if epochs is not None:
        trainer = quiet_trainer(int(epochs), accelerator="cpu", limit_val_batches=0)
        trainer.fit(model, datamodule=dm)
        model.best_epochs, model.val_curve = int(epochs), []
        return model, float("nan"), len(dm.examples["train"])
    best = KeepBest()
    callbacks = [EarlyStopping(monitor=MONITOR, mode="max", patience=PATIENCE), best]
    quiet_trainer(max_epochs, callbacks=callbacks, accelerator="cpu").fit(model, datamodule=dm)
    model.best_epochs, model.val_curve = best.best_epochs, best.curve
    return model, best.best_score, len(dm.examples["train"])


def module_setting(setting: dict) -> dict:
    """The part of a setting that the residual module takes (the rest selects its data or its
    epoch count); of an averaged setting, its parts' (which must agree)."""
    parts = setting.get(AVERAGED, [setting])
    found = [{k: v for k, v in p.items() if k not in (*MIXING_KEYS, "epochs")} for p in parts]
    if any(f != found[0] for f in found[1:]):
        raise ValueError(f"an averaged setting's parts differ beyond weight and epochs: {parts}")
    return found[0]


def with_synthetic_weight(train: list[BankExample], weight: float) -> list[BankExample]:
    """``train`` with every synthetic bank weighted ``weight`` (left out at 0)."""
    if weight == 0:
        return [e for e in train if not e.synthetic]
    return [e.reweighted(weight) if e.synthetic else e for e in train]


class ResidualFits:
    """Every residual fitted in one workflow, by (training banks, validation banks, setting):
    cross-validation, the gate's cross-fitting and the final model share fits instead of
    training them again. ``trained`` counts actual trainings.

    Args:
        workers: Processes for :meth:`prefetch` (``None``: one per CPU core when there are at
            least ``MIN_PARALLEL_FITS`` fits to train; 1: in this process).
        progress: Show a bar with an estimate while prefetching.
        committee: Member fits of a deployed residual (:meth:`deployed`; 1: a single fit).
        groups: Each question's group (company), which decides the members' sub-samples; a
            question without one is its own group.
    """

    def __init__(
        self,
        workers: int | None = 1,
        progress: bool = False,
        committee: int = 1,
        groups: dict[str, str] | None = None,
    ) -> None:
        if committee < 1:
            raise ValueError(f"a committee has at least one member; got {committee}")
        self._fits: dict[tuple, tuple[ResidualModule, float]] = {}
        self.trained = 0
        self.workers = workers
        self.progress = progress
        self.committee = committee
        self.groups = dict(groups or {})

    def members(
        self, train: list[BankExample], val: list[BankExample], setting: dict, seed: int = 0
    ) -> list[tuple[list[BankExample], list[BankExample], dict, int]]:
        """The fits a deployed residual averages: with a committee of K, member k is trained
        without the k-th of K seeded chunks of the training banks' groups (labelled and
        synthetic banks of a company are one group; a training set of fewer than K groups gets
        one member per group, of one group a single fit); else the fit itself. An
        averaged setting's (``{AVERAGED: [setting, ...]}``) are its parts' members, all of them."""
        if AVERAGED in setting:  # every part's fits, merged by ``deployed``
            return [m for part in setting[AVERAGED] for m in self.members(train, val, part, seed)]
        names = sorted({self.groups.get(e.qid, e.qid) for e in train})
        k = min(self.committee, len(names))
        if k <= 1:
            return [(train, val, setting, seed)]
        order = np.random.default_rng(seed).permutation(len(names))
        chunks = [{names[i] for i in order[m::k]} for m in range(k)]
        group = self.groups.get
        return [
            ([e for e in train if group(e.qid, e.qid) not in left_out], val, setting, seed)
            for left_out in chunks
        ]

    def deployed(
        self, train: list[BankExample], val: list[BankExample], setting: dict, seed: int = 0
    ) -> tuple[ResidualModule, float]:
        """The residual a workflow deploys or scores rows with: the committee's members (fitted
        or found; of an averaged setting, every part's, each part weighing the same
        whatever its committee) merged into one linear residual (:func:`average_residuals`),
        with their mean validation score; a single fit without a committee."""
        jobs = self.members(train, val, setting, seed)
        if len(jobs) == 1:
            return self.get(*jobs[0])
        fitted = [self.get(*job) for job in jobs]
        module = ResidualModule(**module_setting(setting))
        # standardised with the statistics a single fit on ``train`` would have (the merge is
        # exact whichever: they only choose how its weights are written)
        weighted = with_synthetic_weight(train, setting.get("synthetic_weight", 1.0))
        rows = np.concatenate([e.features for e in weighted if e.has_support])
        merged = average_residuals([m.scorer for m, _ in fitted], torch.from_numpy(rows))
        module.scorer.load_state_dict(merged.state_dict())
        return module, float(np.mean([score for _, score in fitted]))

    @staticmethod
    def key(train: list[BankExample], val: list[BankExample], setting: dict, seed: int) -> tuple:
        return (
            tuple(e.qid if e.weight == 1.0 else f"{e.qid}*{e.weight}" for e in train),
            tuple(e.qid for e in val),
            json.dumps(setting, sort_keys=True),
            seed,
        )

    def get(
        self, train: list[BankExample], val: list[BankExample], setting: dict, seed: int = 0
    ) -> tuple[ResidualModule, float]:
        key = self.key(train, val, setting, seed)
        if key not in self._fits:
            model, score, _ = fit_residual(train, val, setting, seed)
            self._fits[key] = (model, score)
            self.trained += 1
        return self._fits[key]

    def prefetch(self, jobs: list[tuple[list[BankExample], list[BankExample], dict, int]]) -> None:
        """Train the ``(train, val, setting, seed)`` fits not trained yet, in parallel worker
        processes (one thread each) when there are enough; later :meth:`get` calls find them.
        Results equal the in-process ones (each fit is seeded and deterministic)."""
        todo: dict[tuple, tuple] = {}
        for job in jobs:
            key = self.key(*job)
            if key not in self._fits:
                todo.setdefault(key, job)
        workers = self.workers
        if workers is None and len(todo) < MIN_PARALLEL_FITS:
            workers = 1
        workers = min(worker_count(workers), len(todo))  # FINCROWD_WORKERS caps even an asked one
        bar = Progress(len(todo), "residual fits", enabled=self.progress, unit=" fits")
        if workers <= 1:
            for train, val, setting, seed in todo.values():
                self.get(train, val, setting, seed)
                bar.update()
            bar.close()
            return
        # examples go to each worker once; jobs name them by position
        examples: dict[int, BankExample] = {}
        for train, val, _, _ in todo.values():
            for e in (*train, *val):
                examples.setdefault(id(e), e)
        position = {k: i for i, k in enumerate(examples)}
        payload = [
            (key, [position[id(e)] for e in train], [position[id(e)] for e in val], setting, seed)
            for key, (train, val, setting, seed) in todo.items()
        ]
        # fork on Linux (workers start at once and inherit the examples; one thread each, as
        # DataLoader workers, keeps OpenMP safe after fork), spawn elsewhere (macOS included)
        method = "fork" if fork_safe() else "spawn"
        shared = list(examples.values())
        _WORKER_EXAMPLES[:] = shared if method == "fork" else []
        pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_worker_init,
            initargs=(None if method == "fork" else shared,),
        )
        try:
            for key, setting, state, score, trace in pool.map(_worker_fit, payload):
                module = ResidualModule(**module_setting(setting))
                module.load_state_dict(state)
                module.best_epochs, module.val_curve = trace
                self._fits[key] = (module, score)
                self.trained += 1
                bar.update()
        except BaseException:  # interrupted (a signal, Ctrl-C) or a fit failed: stop the rest now
            stop_pool(pool)
            raise
        finally:
            _WORKER_EXAMPLES.clear()
            bar.close()
        pool.shutdown()


_WORKER_EXAMPLES: list[BankExample] = []


def _worker_init(examples: list[BankExample] | None) -> None:
    worker_init()
    if examples is not None:
        _WORKER_EXAMPLES[:] = examples


def _worker_fit(job: tuple) -> tuple:
    key, train, val, setting, seed = job
    model, score, _ = fit_residual(
        [_WORKER_EXAMPLES[i] for i in train], [_WORKER_EXAMPLES[i] for i in val], setting, seed
    )
    return key, setting, model.state_dict(), score, (model.best_epochs, model.val_curve)


def choose_setting(
    splits: list[tuple[list[BankExample], list[BankExample]]],
    grid: tuple[dict, ...] = ({},),
    seed: int = 0,
    fits: ResidualFits | None = None,
) -> tuple[int, list[float], int]:
    """The grid setting and epoch count with the best validation nDCG@10 averaged over
    ``splits`` (``(train, val)`` pairs, e.g. the folds of an inner cross-validation): each
    setting's validation curves are averaged epoch by epoch, each weighted by its number of
    validation banks (every validation question counts once; over the epochs every fit reached;
    early stopping ends each one ``PATIENCE`` epochs after its best) and the best epoch of the
    mean curve is its score (the first setting and epoch win ties). Returns the setting's index,
    every setting's score and the epoch count of a refit on all of the splits' banks."""
    scores, epochs = validate_grid(splits, grid, seed, fits)
    index = max(range(len(grid)), key=lambda i: (scores[i], -i))
    return index, scores, epochs[index]


def validate_grid(
    splits: list[tuple[list[BankExample], list[BankExample]]],
    grid: tuple[dict, ...] = ({},),
    seed: int = 0,
    fits: ResidualFits | None = None,
) -> tuple[list[float], list[int]]:
    """Every grid setting's validation score and epoch count, as :func:`choose_setting`
    compares them."""
    fits = fits or ResidualFits()
    scores, epochs = [], []
    sizes = [len(val) for _, val in splits]  # each split's curve weighs by its questions
    for setting in grid:
        curves = [fits.get(train, val, setting, seed)[0].val_curve for train, val in splits]
        n = min(len(c) for c in curves)
        found = np.array([c[:n] for c in curves])
        mean = np.average(found, axis=0, weights=sizes) if n and sum(sizes) else np.full(1, -np.inf)
        mean = np.where(np.isfinite(mean), mean, -np.inf)  # a diverged epoch is never the best
        best = int(np.argmax(mean))  # the first of equal scores
        scores.append(float(mean[best]))
        epochs.append(best + 1)
    return scores, epochs
