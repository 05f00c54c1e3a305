"""``run_demo``: the README's main job, driven by a YAML config (``configs/demo.yaml``): baseline
reports, the first-stage ablation, crowding diagnostics, the cascade, and the gated correction
cross-validated, fitted, calibrated for more domains and evaluated."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.defaults import (
    BANK_MODES,
    DEFAULT_BANK_SIZE,
    DEFAULT_LINE_ITEMS,
    DEFAULT_REGRESSION_CAP,
    DEFAULT_TRAIN_MODE,
)

DEFAULT_DEMO_CONFIG = Path("configs/demo.yaml")
MODES = BANK_MODES


@dataclass
class DemoConfig:
    """The demo's steps (see ``configs/demo.yaml`` for each field)."""

    runs: list[dict]
    first_stage: list[dict] = field(default_factory=list)
    diagnose: list[dict] = field(default_factory=list)
    cascade: list[dict] = field(default_factory=list)
    correction: dict | None = None
    bank_size: int = DEFAULT_BANK_SIZE
    dense_pooling: str = "max"
    out_dir: str = "runs"
    what: str = ""


# what a config's ``correction`` may say (``_correction_steps`` reads them)
CORRECTION_FIELDS = (
    "dataset", "split", "ranker", "first_stage", "train_mode", "val_mode", "folds", "seed",
    "gate", "regression_cap", "domain", "out", "select", "synthetic", "synthetic_weights",
    "synthetic_mixing", "synthetic_draws", "synthetic_line_items", "committee", "calibrate",
    "evaluate",
)  # fmt: skip


def load_demo_config(path: Path) -> DemoConfig:
    """Read and check the demo's YAML config."""
    import yaml

    from fincrowd_ltr.api.corpus import rankers_of
    from fincrowd_ltr.retrieval.first_stage import parse_first_stage

    path = Path(path)
    if not path.is_file():
        raise DataError(f"expected the demo config at {path} but it does not exist")
    raw = yaml.safe_load(path.read_text()) or {}
    runs = raw.get("runs")
    if not isinstance(runs, list) or not runs:
        raise DataError(f"{path}: field 'runs' must be a non-empty list")
    for i, run in enumerate(runs):
        for key in ("dataset", "split", "rankers", "modes"):
            if key not in run:
                raise DataError(f"{path}: runs[{i}] lacks field {key!r}")
        rankers_of(list(run["rankers"]))
        bad = [m for m in run["modes"] if m not in MODES]
        if bad:
            raise DataError(f"{path}: runs[{i}].modes has unknown mode(s) {bad}")
    for section in ("runs", "diagnose", "cascade", "first_stage"):
        for i, item in enumerate(raw.get(section) or []):
            if "first_stage" in item:
                try:
                    parse_first_stage(item["first_stage"])
                except DataError as err:
                    raise DataError(f"{path}: {section}[{i}].first_stage: {err}") from None
    unknown = set(raw) - set(DemoConfig.__dataclass_fields__)
    if unknown:
        raise DataError(f"{path}: unknown field(s) {sorted(unknown)}")
    unknown = set(raw.get("correction") or {}) - set(CORRECTION_FIELDS)
    if unknown:
        raise DataError(f"{path}: correction has unknown field(s) {sorted(unknown)}")
    return DemoConfig(**{k: v for k, v in raw.items() if v is not None})


def run_demo(
    config: DemoConfig, data_root=None, cache_dir=".cache", first_stage="auto", echo=print
) -> Path:
    """Run every step of ``config``; reports go to ``config.out_dir``. ``first_stage`` serves
    the steps that do not name one. Before each step it prints how long the step took here last
    time (kept in ``cache_dir``); long steps show a bar with an estimate."""
    out = Path(config.out_dir)
    common = {"data_root": data_root, "cache_dir": cache_dir}
    steps = _steps(config, out, common, first_stage, echo)
    clock = _StepClock(None if cache_dir is None else Path(cache_dir) / "demo-times.json")
    echo(f"{config.what or 'demo'}: {len(steps)} steps{clock.total([k for k, _, _ in steps])}")
    for i, (key, label, step) in enumerate(steps, 1):
        echo(f"\n[{i}/{len(steps)}] {label}{clock.estimate(key)}")
        with clock.timing(key):
            step()
    echo(f"\nreports in {out}/")
    return out


class _StepClock:
    """Each step's duration on this machine, remembered between runs for the next estimate."""

    def __init__(self, path: Path | None) -> None:
        import json

        self.path = path
        try:
            self.seconds = json.loads(path.read_text()) if path and path.exists() else {}
        except (OSError, ValueError):
            self.seconds = {}

    def estimate(self, key: str) -> str:
        seconds = self.seconds.get(key)
        if seconds is None:
            return " (first run here: no estimate yet)"
        return f" (about {_duration(seconds)}: its time here last run)"

    def total(self, keys: list[str]) -> str:
        if not all(k in self.seconds for k in keys):
            return ""
        return f", about {_duration(sum(self.seconds[k] for k in keys))} in all (last run here)"

    @contextlib.contextmanager
    def timing(self, key: str):
        import json
        import time

        start = time.perf_counter()
        yield
        self.seconds[key] = time.perf_counter() - start
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.seconds, indent=1))


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _steps(config: DemoConfig, out: Path, common: dict, first_stage: str, echo) -> list:
    """The demo's steps as (key, label, function), in order."""
    from fincrowd_ltr import api
    from fincrowd_ltr.evaluation.results import write_report

    steps = []
    for run in config.runs:
        stage = run.get("first_stage", first_stage)
        for mode in run["modes"]:
            rankers = list(run["rankers"])

            def baseline(run=run, stage=stage, mode=mode, rankers=rankers):
                report = api.evaluate(
                    run["dataset"],
                    rankers,
                    first_stage=stage,
                    mode=mode,
                    size=config.bank_size,
                    split=run["split"],
                    **common,
                )
                write_report(out / f"baseline-{run['dataset']}-{stage}-{mode}.json", report)
                echo(f"\n{report}")

            key = f"baseline {run['dataset']} {run['split']} {stage} {mode} {'+'.join(rankers)}"
            label = f"{run['dataset']} {mode} banks ({stage} first stage): {', '.join(rankers)}"
            steps.append((key, label, baseline))
    for item in config.first_stage:

        def ablation(item=item):
            report = api.first_stage_ablation(
                item["dataset"], split=item.get("split", "all"), **common
            )
            write_report(out / f"first-stage-{item['dataset']}.json", report)
            echo(f"\n{report}")

        label = f"first-stage ablation on {item['dataset']}"
        steps.append((label, label, ablation))
    for item in config.diagnose:
        stage = item.get("first_stage", first_stage)

        def diagnose(item=item, stage=stage):
            api.diagnose(
                item["dataset"],
                item["ranker"],
                split=item.get("split", "all"),
                pool_depth=int(item.get("pool_depth", 100)),
                similarity=item.get("similarity", "dense"),
                caliper=float(item.get("caliper", 1.0)),
                first_stage=stage,
                out_dir=out / "diagnose" / f"{item['dataset']}-{item['ranker']}-{stage}",
                **common,
            )

        label = f"crowding diagnostics, {item['dataset']} {item['ranker']}"
        steps.append((label, label, diagnose))
    for item in config.cascade:

        def cascade(item=item):
            report = api.cascade(
                item["dataset"],
                list(item["stage2"]),
                n=int(item["n"]),
                k=int(item["k"]),
                gated=bool(item.get("gated", True)),
                split=item.get("split", "all"),
                first_stage=item.get("first_stage", first_stage),
                **common,
            )
            write_report(out / f"cascade-{item['dataset']}.json", report)

        label = f"cascade on {item['dataset']} ({', '.join(item['stage2'])})"
        steps.append((label, label, cascade))
    if config.correction:
        steps += _correction_steps(config.correction, out, common, first_stage, echo)
    return steps


def _correction_steps(c: dict, out: Path, common: dict, first_stage: str, echo) -> list:
    from fincrowd_ltr import api
    from fincrowd_ltr.evaluation.results import write_report

    target = Path(c.get("out", "checkpoints/default"))

    def fit():
        from fincrowd_ltr.settings import SyntheticSettings
        from fincrowd_ltr.training.fitting import HPARAM_GRID

        # questions synthesised from the corpus, mixed in (the weight chosen on training folds)
        synthetic = SyntheticSettings(
            n=int(c.get("synthetic", 0)),
            seed=int(c.get("seed", 0)),
            select_weights=tuple(float(w) for w in c.get("synthetic_weights", ())),
            mixing=str(c.get("synthetic_mixing", "choose")),
            draws=int(c.get("synthetic_draws", 1)),
            line_items=str(c.get("synthetic_line_items", DEFAULT_LINE_ITEMS)),
        )
        model, report = api.fit_correction(
            c["dataset"],
            c["ranker"],
            gate=bool(c.get("gate", True)),
            folds=int(c.get("folds", 5)),
            seed=int(c.get("seed", 0)),
            grid=HPARAM_GRID if c.get("select", True) else None,
            committee=int(c.get("committee", 1)),
            synthetic=synthetic,
            first_stage=c.get("first_stage", first_stage),
            split=c.get("split", "all"),
            train_mode=c.get("train_mode", DEFAULT_TRAIN_MODE),
            val_mode=c.get("val_mode", "retrieved"),
            regression_cap=float(c.get("regression_cap", DEFAULT_REGRESSION_CAP)),
            domain=c.get("domain"),
            **common,
        )
        name = f"crossval-{c['dataset']}-{c['ranker']}-{model.summary.first_stage}.json"
        report.save(out / name)
        for note in report.info.get("notes", []):
            echo(f"note: {note}")
        echo(
            "\nheld out by group fold; [lo,hi]: 95% cluster-bootstrap interval of the change "
            "against the base order"
        )
        echo(report.table())
        model.save_pretrained(target)
        echo(f"\ncorrection saved to {target}")

    steps = [
        (
            f"correction {c['dataset']} {c['ranker']}",
            f"gated correction of {c['ranker']} on {c['dataset']}: cross-validation, fit",
            fit,
        )
    ]
    for item in c.get("calibrate", []):

        def calibrate(item=item):
            _, cal = api.calibrate_domain(
                target,
                item["domain"],
                item["dataset"],
                fold=item.get("fold"),
                split=item.get("split", "all"),
                regression_cap=float(c.get("regression_cap", DEFAULT_REGRESSION_CAP)),
                **common,
            )
            echo(f"domain {item['domain']!r}: calibrated on {cal.n_queries} questions")

        label = f"calibrate the gate for {item['domain']} on {item['dataset']}"
        steps.append((label, label, calibrate))
    for item in c.get("evaluate", []):
        mode = item.get("mode", "retrieved")

        def evaluate(item=item, mode=mode):
            report = api.evaluate(
                item["dataset"],
                [c["ranker"]],
                checkpoint=target,
                domain=item.get("domain"),
                mode=mode,
                split=item.get("split", "all"),
                first_stage=item.get("first_stage", first_stage),
                **common,
            )
            write_report(
                out / f"corrected-{item['dataset']}-{mode}-{item.get('domain')}.json", report
            )
            echo(f"\n{report}")

        label = f"evaluate {target} on {item['dataset']} {mode} ({item.get('domain')})"
        steps.append((label, label, evaluate))
    return steps
