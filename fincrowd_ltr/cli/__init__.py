"""The ``fincrowd`` command line: each command parses its arguments and calls one function of
:mod:`fincrowd_ltr.api` (heavy libraries are imported by the command that needs them, so
``fincrowd --help`` and argument errors are instant)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import warnings
from pathlib import Path

from fincrowd_ltr import settings
from fincrowd_ltr.cli import commands as c
from fincrowd_ltr.data.schema import MAX_SERVED_TEXT_CHARS
from fincrowd_ltr.defaults import (
    AUTO_FALLBACK,
    AUTO_FIRST_STAGE,
    BANK_MODES,
    DEFAULT_BANK_SIZE,
    DEFAULT_CACHE,
    DEFAULT_LINE_ITEMS,
    LINE_ITEMS,
    QUESTION_READERS,
)

DESCRIPTION = (
    "fincrowd_ltr: a trainable, metadata-aware correction of a financial retriever's top k. "
    "Each command calls one function of the Python API (import fincrowd_ltr); "
    "`fincrowd COMMAND --help` lists its options."
)
FIRST_STAGE_HELP = (
    "candidate retrieval: 'auto' (the one chosen on training folds for the dataset: "
    + ", ".join(f"{name} {stage}" for name, stage in AUTO_FIRST_STAGE.items())
    + f", other corpora {AUTO_FALLBACK}), 'run' (your --run's own top N), or 'bm25' plus any of "
    "+instructions +periods +synonyms +keywords +query +entity +filing[=W] +static[=W]"
)

NO_RUN = " (this command takes no --run: not 'run')"  # for commands without a run


class Terminated(Exception):
    """SIGTERM or SIGINT arrived while a command ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum, frame) -> None:
    raise Terminated(signum)


def _data(p: argparse.ArgumentParser, index: bool = True) -> None:
    p.add_argument(
        "--dataset",
        default=None,
        help="financebench | tatqa | finqa | beir | beir:SUBDIR (default: financebench; required "
        "with --data-root)",
    )
    p.add_argument(
        "--data-root",
        default=None,
        help="data folder (default: $FINCROWD_DATA, else ../shared/data)",
    )
    p.add_argument("--split", default="all", help="'all' or a split/file name of the dataset")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help="index, embedding, bank and feature cache",
    )
    _engine_options(p)
    p.add_argument(
        "--allow-unknown-qrels",
        action="store_true",
        help="BEIR qrels naming passages outside the corpus: count them (the question is then "
        "not covered) instead of failing",
    )
    if not index:
        return
    p.add_argument(
        "--index",
        type=Path,
        default=None,
        help="a BEIR folder's sharded index (`fincrowd index --out DIR`): its pages are read from "
        "the indexed corpus files page by page instead of corpus.jsonl, and banks search it "
        "(for a corpus larger than memory)",
    )


def _engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="where embedding, first-stage retrieval, bank features, field extraction and index "
        "shards run: this process, or a Dask cluster (needs the [distributed] extra)",
    )
    p.add_argument(
        "--engine-address",
        default=None,
        help="the Dask scheduler to use (tcp://host:8786); none starts a local cluster",
    )
    p.add_argument(
        "--engine-workers",
        type=int,
        default=2,
        help="worker processes of the local Dask cluster",
    )
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the encoders run: auto uses a CUDA GPU when PyTorch sees one",
    )


def _stage(p: argparse.ArgumentParser, default: str | None = "auto", help: str = "") -> None:
    p.add_argument("--first-stage", default=default, help=FIRST_STAGE_HELP + help)


def _run(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run",
        type=Path,
        default=None,
        help="your ranker's scores (TREC run file), ranker or first stage 'run'",
    )


def _cap(p: argparse.ArgumentParser) -> None:
    settings.add_arguments(
        p,
        settings.CalibrationSettings,
        ("regression_cap", "min_calibration", "delta", "gate_method"),
    )


def _banks(p: argparse.ArgumentParser, stage: str | None = "auto", stage_help: str = "") -> None:
    p.add_argument(
        "--ranker",
        default=None,
        help="comma list of bm25, dense, splade, hybrid, fused, static, hybrid-static, "
        "fused-static, fused-static-whole (fused's form: the whole first-stage score), "
        "first-stage (the first stage's own score), run (your --run), "
        "cross-encoder (evaluate), or 'all'; dense, hybrid and "
        "fused embed every bank page with MiniLM, the -static ones with the static scorer "
        "(~160x faster on a CPU; built once per corpus with MiniLM, a few minutes); 'all' is "
        "bm25,dense,splade,hybrid,fused (default: bm25,dense on the package's data; required "
        "with --data-root)",
    )
    p.add_argument("--bank-mode", choices=BANK_MODES, default="retrieved")
    p.add_argument(
        "--static-questions",
        choices=QUESTION_READERS,
        default=None,
        help="who reads a question for the static scorer (static, hybrid-static, "
        "fused-static): minilm (its own vector against the table's page vectors) or static (the "
        "table alone); default: minilm (evaluate --checkpoint: what its training recorded)",
    )
    _stage(p, stage, stage_help)
    p.add_argument("--bank-size", type=int, default=DEFAULT_BANK_SIZE)
    p.add_argument(
        "--dense-pooling",
        choices=("first", "max", "mean"),
        default="max",
        help="long passages: first window, or max/mean over windows",
    )
    p.add_argument("--dense-window", type=int, default=254, help="word pieces per window")
    p.add_argument("--stemmer", default=None, help="BM25 stemmer (PyStemmer name)")
    _run(p)


# help of options several commands share, where a command gives none
COMMON_HELP = {
    "--folds": "group folds (companies, contexts or your questions' group)",
    "--seed": "seed of the fold assignment and of training",
    "--bank-size": "candidates per bank",
    "--bank-mode": "retrieved (the first stage's top N) or injected (gold added)",
    "--checkpoint": "a saved correction folder",
    "--out": "output folder",
    "--report": "write the JSON report here",
    "--host": "address to listen on",
    "--port": "port to listen on",
    "--max-candidates": "most candidates one request may send",
    "--max-text-chars": "longest candidate text accepted",
    "--max-query-chars": "longest query accepted",
    "--stemmer": "BM25 stemmer (PyStemmer name)",
    "--epochs": "training epochs",
    "--lr": "learning rate",
    "--labels": "audit labels (JSONL)",
    "--data-root": "data folder (default: $FINCROWD_DATA, else ../shared/data)",
}


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help states it already; flags
    (on/off switches) say nothing, since they are off unless given."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" in text
            or action.default is argparse.SUPPRESS
            or not action.option_strings
            or action.nargs == 0
            or action.required
        ):
            return text
        default = "none" if action.default is None else "%(default)s"
        return f"{text} (default: {default})".strip()


def _evaluate_command(command) -> None:
    """``fincrowd evaluate``."""
    p = command(
        "evaluate", c.evaluate, "evaluate base rankers (and a correction) on candidate banks"
    )
    _data(p)
    _banks(p, None, "; default: the --checkpoint's (its training's), else 'auto'")
    p.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="a correction: adds residual:<ranker> (always on)",
    )
    p.add_argument(
        "--domain",
        default=None,
        help="with --checkpoint: also gated:<ranker> with this domain's calibration",
    )
    p.add_argument(
        "--domain-fallback",
        choices=("error", "identity"),
        default="error",
        help="an uncalibrated domain: fail, or keep the base order",
    )
    p.add_argument(
        "--cross-encoder",
        type=Path,
        default=None,
        help="adapter folder for --ranker cross-encoder (default: checkpoints/cross-encoder)",
    )
    p.add_argument(
        "--cascade",
        action="append",
        help="add a cascade: RANKER[:NORM:WEIGHT] keeps the top --cascade-k by WEIGHT*norm(RANKER) + (1-WEIGHT)*norm(first stage)",
    )
    p.add_argument(
        "--cascade-k", type=int, default=None, help="candidates stage 2 keeps (default: 20)"
    )


def _fit_command(command) -> None:
    """``fincrowd fit``."""
    p = command(
        "fit",
        c.fit_residual,
        "cross-validate, fit and save the gated correction (alias: fit-residual)",
        aliases=["fit-residual"],
    )
    _data(p)
    p.add_argument(
        "--ranker",
        default=None,
        help="the base ranker to correct: bm25, dense, hybrid, fused, splade, static, "
        "hybrid-static, fused-static, fused-static-whole, first-stage (the first stage's own "
        "score: no bank page embedded) or run (with --run); required",
    )
    _stage(p)
    _run(p)
    for group in (settings.BankSettings, settings.TrainingSettings, settings.CalibrationSettings):
        settings.add_arguments(p, group)
    settings.add_synthetic_arguments(p)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the checkpoint folder to write (default: a new checkpoints/<dataset>-<ranker>-<time>)",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace the checkpoint already at --out"
    )
    p.add_argument("--report", type=Path, default=None, help="write the cross-validation JSON")
    p.add_argument("--onnx", action="store_true", help="also write residual.onnx and gate.onnx")
    p.add_argument(
        "--ablation",
        action="store_true",
        help="also cross-validate the residual with each feature family removed",
    )
    p.add_argument(
        "--no-select",
        dest="select",
        action="store_false",
        help="train the package defaults only (no alpha / weight decay selection grid)",
    )


def _nested_command(command) -> None:
    """``fincrowd nested``."""
    p = command(
        "nested",
        c.nested,
        "the whole system's held-out figure with every choice (first stage, residual setting, "
        "gate) made on the outer training folds, over fold seeds",
    )
    _data(p)
    p.add_argument("--ranker", required=True, help="the base ranker to correct (e.g. fused)")
    p.add_argument("--seeds", default="0", help="comma list of fold seeds (e.g. 0,1,2)")
    p.add_argument(
        "--variants", default="all", help="first stages to choose from (comma list, or 'all')"
    )
    for group in (settings.BankSettings, settings.CalibrationSettings):
        settings.add_arguments(p, group)
    settings.add_arguments(
        p, settings.TrainingSettings, only=("folds", "monotone", "committee", "workers")
    )
    settings.add_synthetic_arguments(p)
    p.add_argument(
        "--no-select",
        dest="select",
        action="store_false",
        help="train the package defaults only (no alpha / weight decay selection grid)",
    )
    p.add_argument("--report", type=Path, default=None, help="write the JSON report here")


def _synthesize_command(command) -> None:
    """``fincrowd synthesize``."""
    p = command(
        "synthesize",
        c.synthesize,
        "write label-free training questions from a corpus's own pages as a BEIR folder",
    )
    _data(p)
    p.add_argument("--n", type=int, default=500, help="questions to synthesise")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw of pages and wordings")
    p.add_argument(
        "--named-share",
        type=settings.share_or_auto,
        default=1.0,
        help="share of questions that name their company (default 1); lower it when your "
        "questions rarely name one ('What was the revenue in 2019?'); 'auto': the share of the "
        "dataset's own questions that name one (their texts alone are read)",
    )
    p.add_argument(
        "--line-items",
        choices=LINE_ITEMS,
        default=DEFAULT_LINE_ITEMS,
        help="table rows asked about: 'any' (every row with a specific label, asked about by "
        "its own label; default) or 'known' (labels the extractor maps to a metric)",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the BEIR folder to write (corpus, queries, qrels); a new or empty one",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the files already in --out")


def _index_command(command) -> None:
    """``fincrowd index``."""
    p = command(
        "index",
        c.index,
        "index corpus.jsonl files larger than memory into BM25 shards on disk",
    )
    _engine_options(p)
    p.add_argument("--corpus", type=Path, nargs="+", required=True, help="corpus.jsonl file(s)")
    p.add_argument("--out", type=Path, required=True, help="the index folder to write")
    p.add_argument("--shard-mb", type=float, default=64, help="corpus bytes per shard (MB)")
    p.add_argument("--query", default=None, help="print this question's top 10 from the index")
    p.add_argument(
        "--stemmer",
        default=None,
        help="BM25 stemmer (PyStemmer name); banks over a stemmed index need the same --stemmer "
        "(banks, evaluate, first-stage), and the other commands read BM25 without one",
    )


def _calibrate_command(command) -> None:
    """``fincrowd calibrate``."""
    p = command("calibrate", c.calibrate, "calibrate a checkpoint's gate for a domain")
    _data(p)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--domain", required=True, help="name to store the calibration under")
    p.add_argument(
        "--fold",
        type=int,
        default=None,
        help="calibrate on this group fold only (default: every question)",
    )
    p.add_argument(
        "--qids",
        type=Path,
        default=None,
        help="calibrate on the questions this file lists, one id per line (instead of --fold)",
    )
    settings.add_arguments(p, settings.TrainingSettings, ("folds", "seed"))
    settings.add_arguments(p, settings.BankSettings, ("bank_size",))
    p.add_argument(
        "--replace", action="store_true", help="overwrite the domain's existing calibration"
    )
    p.add_argument(
        "--base-ranker",
        default=None,
        help="calibrate the correction for another base ranker than it was trained on (e.g. "
        "'run', your --run; its banks then come from --first-stage, default 'run'); needs "
        "--out: the new checkpoint's only domain is --domain",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the calibrated model to this new (empty) folder instead of adding the "
        "domain to --checkpoint",
    )
    _stage(p, None)
    _run(p)
    _cap(p)


def _diagnose_command(command) -> None:
    """``fincrowd diagnose``."""
    p = command("diagnose", c.diagnose, "crowding diagnostics: matched pools, crowded failures")
    _data(p)
    p.add_argument(
        "--ranker",
        default=None,
        help="the base ranker to diagnose (or 'run' with --run; default: dense on the package's "
        "data; required with --data-root)",
    )
    _run(p)
    _stage(p)
    p.add_argument(
        "--pool-depth",
        type=int,
        default=100,
        help="first-stage candidates the matched pools are drawn from",
    )
    p.add_argument("--pool-sizes", default="10,30,60", help="distractors per pool, nested")
    p.add_argument(
        "--similarity",
        default=None,
        help="ranker whose score is the 'model similarity' covariate (default: dense, which embeds "
        "the pools' pages with MiniLM unless cached; bm25 costs nothing)",
    )
    p.add_argument("--caliper", type=float, default=1.0, help="nearest-neighbour caliper (z units)")
    p.add_argument("--out", type=Path, default=None, help="output folder")


def _export_command(command) -> None:
    """``fincrowd export``."""
    p = command("export", c.export, "write a checkpoint as a checksummed serving directory")
    p.add_argument("--checkpoint", type=Path, default=None, help="a correction folder")
    p.add_argument(
        "--from-lightning", type=Path, default=None, help="a `train.py fit` .ckpt file instead"
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--overwrite", action="store_true", help="replace the checkpoint already at --out"
    )
    p.add_argument("--ranker", default=None, help="refuse a checkpoint fitted for another ranker")
    p.add_argument("--onnx", action="store_true", help="also write residual.onnx and gate.onnx")
    p.add_argument(
        "--trust-unverified",
        action="store_true",
        help="load a hand-made checkpoint folder without a manifest",
    )


def _serve_command(command) -> None:
    """``fincrowd serve``."""
    p = command("serve", c.serve, "serve a checkpoint over HTTP: /health, /rerank")
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--ranker", default=None, help="refuse a checkpoint fitted for another ranker")
    p.add_argument(
        "--runtime",
        choices=("torch", "onnx"),
        default="torch",
        help="what computes the correction: PyTorch, or onnxruntime without torch (needs the "
        "checkpoint's ONNX files: `fincrowd export --onnx`)",
    )
    p.add_argument(
        "--trust-unverified",
        action="store_true",
        help="serve a hand-made checkpoint folder without a manifest",
    )
    p.add_argument("--workers", type=int, default=0, help="worker processes (0: one per CPU core)")
    p.add_argument("--max-candidates", type=int, default=1000)
    p.add_argument("--max-text-chars", type=int, default=MAX_SERVED_TEXT_CHARS)
    p.add_argument("--max-query-chars", type=int, default=2_000)


def _banks_command(command) -> None:
    """``fincrowd banks``."""
    p = command("banks", c.banks, "build, score and save candidate banks")
    _data(p)
    _banks(p)
    p.add_argument("--out", type=Path, default=None, help="also write the banks here (JSONL)")


def _first_stage_command(command) -> None:
    """``fincrowd first-stage``."""
    p = command(
        "first-stage",
        c.first_stage,
        "first-stage ablation on group folds and the training-fold choice",
    )
    _data(p)
    p.add_argument("--variants", default="all", help="comma-separated first stages, or 'all'")
    p.add_argument("--depth", type=int, default=100, help="passages retrieved per question")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stemmer", default=None)
    p.add_argument("--report", type=Path, default=None, help="write the JSON report here")


def _cascade_command(command) -> None:
    """``fincrowd cascade``."""
    p = command("cascade", c.cascade, "cross-validate the reranker cascade (and the gate)")
    _data(p)
    _stage(p, help=NO_RUN)
    p.add_argument("--stage2", default="dense,hybrid", help="stage-2 rankers to choose from")
    p.add_argument("--n", type=int, default=200, help="candidates stage 1 passes on")
    p.add_argument("--k", type=int, default=20, help="candidates stage 2 keeps")
    p.add_argument(
        "--scores", action="append", help="NAME=FILE: a TREC run reported as another stage-2 ranker"
    )
    p.add_argument("--gated", action="store_true", help="add the residual and gate on the top k")
    p.add_argument(
        "--correction-ranker",
        default=None,
        help="base ranker of the residual (default: dense; with --gated)",
    )
    settings.add_arguments(p, settings.BankSettings, ("train_mode",))
    _cap(p)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", type=Path, default=None)


def _train_cross_encoder_command(command) -> None:
    """``fincrowd train-cross-encoder``."""
    p = command(
        "train-cross-encoder",
        c.train_cross_encoder,
        "LoRA cross-encoder: out-of-fold scores and a final adapter",
    )
    _data(p)
    _stage(p, help=NO_RUN)
    settings.add_arguments(p, settings.CrossEncoderSettings)
    p.add_argument("--run-out", type=Path, default=None, help="write out-of-fold scores (TREC)")
    p.add_argument("--out", type=Path, default=None, help="save the final adapter here")
    p.add_argument("--overwrite", action="store_true", help="replace the files already in --out")
    p.add_argument("--report", type=Path, default=None)


def _pack_command(command) -> None:
    """``fincrowd pack``."""
    p = command("pack", c.pack, "prune and pack rankings into a token budget")
    _data(p)
    _stage(p, None, " (default: auto; not with --orders)")
    _run(p)
    p.add_argument(
        "--ranker",
        default=None,
        help="base ranker without --orders (default: dense on the package's data; required with "
        "--data-root unless --orders is given)",
    )
    p.add_argument(
        "--bank-size",
        type=int,
        default=None,
        help=f"candidates per bank (default: {DEFAULT_BANK_SIZE}; not with --orders)",
    )
    p.add_argument("--budget", type=int, default=32_000, help="tokens of the whole prompt")
    p.add_argument("--depth", type=int, default=30, help="ranked candidates considered")
    p.add_argument(
        "--orders",
        type=Path,
        default=None,
        help="a report with orders: `evaluate --out` (every system's) or "
        "`fit-residual --report` (the held-out ones)",
    )
    p.add_argument(
        "--tokenizer", type=Path, default=None, help="tokenizer folder (default: MiniLM's)"
    )
    p.add_argument("--out", type=Path, required=True, help="output folder")


def _audit_command(command) -> None:
    """``fincrowd audit``."""
    p = command("audit", c.audit, "field extractor precision/recall/F1 on the audit labels")
    p.add_argument("--labels", type=Path, default=Path("audit/labels.jsonl"))
    p.add_argument("--data-root", default=None)


def _demo_command(command) -> None:
    """``fincrowd demo``."""
    p = command(
        "demo", c.demo, "the main job: baselines, ablation, diagnostics, cascade, the correction"
    )
    _data(p, index=False)  # the config names its datasets, loaded in memory
    _banks(p)  # accepted as before; the config decides the runs, --first-stage its default
    p.add_argument(
        "--config", type=Path, default=Path("configs/demo.yaml"), help="YAML listing the runs"
    )


def build_parser() -> argparse.ArgumentParser:
    # no abbreviated options: `--run` read as `--run-out` overwrote a user's run file
    parser = argparse.ArgumentParser(
        prog="fincrowd", description=DESCRIPTION, formatter_class=HelpFormatter, allow_abbrev=False
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func, text: str, aliases=()) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=text,
            description=text,
            formatter_class=HelpFormatter,
            aliases=list(aliases),
            allow_abbrev=False,
        )
        p.set_defaults(func=func)
        return p

    for add in (
        _evaluate_command,
        _fit_command,
        _nested_command,
        _synthesize_command,
        _index_command,
        _calibrate_command,
        _diagnose_command,
        _export_command,
        _serve_command,
        _banks_command,
        _first_stage_command,
        _cascade_command,
        _train_cross_encoder_command,
        _pack_command,
        _audit_command,
        _demo_command,
    ):
        add(command)
    for choice in sub.choices.values():
        for action in choice._actions:
            if action.help is None and action.option_strings:
                action.help = COMMON_HELP.get(action.option_strings[0])
    return parser


@contextlib.contextmanager
def _engine(args: argparse.Namespace):
    """The engine the command's heavy steps run on (``--engine``; local by default)."""
    name, device = getattr(args, "engine", "local"), getattr(args, "device", "auto")
    if name == "local" and device == "auto":
        yield
        return
    from fincrowd_ltr.engine import make_engine, resolve_device, using

    try:
        resolve_device(device)
    except ValueError as err:
        from fincrowd_ltr.data.schema import DataError

        raise DataError(str(err)) from None
    engine = make_engine(name, args.engine_address, args.engine_workers, device)
    print(f"engine: {name} with {engine.workers} worker(s), device {device}", file=sys.stderr)
    try:
        with using(engine):
            yield
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fincrowd`` console script: 0 on success, 2 for bad input (the
    message names the file, line or field), 128 + signal number when terminated."""
    parser = build_parser()
    args = parser.parse_args(argv)
    c.quiet_libraries()
    formatted = c.plain_warnings()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for s in handlers:
        signal.signal(s, _on_signal)
    from fincrowd_ltr.data.schema import DataError

    try:
        c.resolve_defaults(args)
        with _engine(args):
            args.func(args)
    except DataError as err:
        print(f"fincrowd: error: {err}", file=sys.stderr)
        return 2
    except Terminated as err:
        if args.command == "serve":
            print(f"fincrowd: server stopped ({err})", file=sys.stderr)
            return 0
        print(
            f"fincrowd: terminated by {err} before {args.command} finished; nothing "
            "half-written was kept (a rerun reuses the cached indexes, embeddings, banks and "
            "features; model fits start over)",
            file=sys.stderr,
        )
        return 128 + err.signum
    except SystemExit as err:  # Lightning turns SIGTERM into SystemExit without a code
        if err.code in (None, 0):
            print(f"fincrowd: {args.command} was stopped before it finished", file=sys.stderr)
            return 143
        raise
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        warnings.formatwarning = formatted  # a caller of main gets its own format back
    return 0


if __name__ == "__main__":
    sys.exit(main())
