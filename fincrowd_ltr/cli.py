"""The ``fincrowd`` command line: build banks, evaluate, audit the field extractor, demo."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.evaluation.report import evaluate_bankset, format_table
from fincrowd_ltr.model.gate import MIN_CALIBRATION_QUERIES
from fincrowd_ltr.retrieval.banks import DEFAULT_BANK_SIZE, MODES
from fincrowd_ltr.retrieval.bm25 import BM25Config
from fincrowd_ltr.retrieval.build import BankSpec, build_banks
from fincrowd_ltr.retrieval.first_stage import FIRST_STAGES, parse_first_stage
from fincrowd_ltr.retrieval.rankers import RANKERS
from fincrowd_ltr.retrieval.windows import POLICIES, WindowPolicy

DEFAULT_CACHE = Path(".cache")


def _quiet_libraries() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "offline")
    import logging
    import warnings

    # cross-validation builds dozens of Trainers: their banners would bury the results (lightning
    # sets its loggers' level when imported, so import it first)
    import lightning.pytorch  # noqa: F401

    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*treespec.*")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        default="financebench",
        help="financebench | tatqa | finqa | beir | beir:SUBDIR",
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
        help="index, embedding and bank cache (default .cache)",
    )


def _add_bank_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ranker",
        default="bm25,dense",
        help=f"comma-separated base rankers from {RANKERS}, or 'all'; evaluate also takes "
        "'cross-encoder' (a trained adapter, --cross-encoder DIR)",
    )
    p.add_argument("--bank-mode", choices=MODES, default="retrieved")
    _add_first_stage_arg(p)
    p.add_argument("--bank-size", type=int, default=DEFAULT_BANK_SIZE)
    p.add_argument(
        "--dense-pooling",
        choices=POLICIES,
        default="max",
        help="long passages: score the first window, or max/mean over windows",
    )
    p.add_argument("--dense-window", type=int, default=254, help="word pieces per window")
    p.add_argument("--stemmer", default=None, help="BM25 stemmer (PyStemmer name), default none")
    p.add_argument(
        "--run",
        type=Path,
        default=None,
        help="a TREC run file of your own ranker (reported as base:run)",
    )


def _add_first_stage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--first-stage",
        type=_first_stage,
        default="auto",
        help="candidate retrieval: 'bm25' plus any of +instructions +periods +synonyms "
        "+keywords +query +entity (e.g. bm25+query+entity), or 'auto' (default): the one "
        "chosen on training folds for the dataset (FinanceBench bm25+query+entity, TAT-QA "
        "bm25, other corpora bm25)",
    )


DEFAULT_CROSS_ENCODER = Path("checkpoints/cross-encoder")


def _add_cap_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--regression-cap",
        type=float,
        default=0.03,
        help="largest share of calibration queries the gate may make worse (default 0.03)",
    )
    p.add_argument(
        "--min-calibration",
        type=int,
        default=MIN_CALIBRATION_QUERIES,
        help=f"fewest labelled calibration queries accepted (default {MIN_CALIBRATION_QUERIES})",
    )


def _rankers(text: str) -> list[str]:
    names = list(RANKERS) if text == "all" else [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in names if r not in RANKERS]
    if unknown:
        raise DataError(f"unknown ranker(s) {unknown}; choose from {RANKERS}")
    return names


def _first_stage(name: str) -> str:
    try:
        parse_first_stage(name)
    except DataError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return name


def _spec(args: argparse.Namespace) -> BankSpec:
    return BankSpec(
        size=args.bank_size,
        mode=args.bank_mode,
        bm25=BM25Config(stemmer=args.stemmer),
        dense_policy=WindowPolicy(pooling=args.dense_pooling, window_tokens=args.dense_window),
        first_stage=getattr(args, "first_stage", "bm25"),
    )


CROSS_ENCODER = "cross-encoder"


def _cascade_settings(args: argparse.Namespace) -> list:
    """``--cascade R[:NORM:WEIGHT]`` items as cascade settings over the bank (n = bank size)."""
    from fincrowd_ltr.retrieval.cascade import CascadeSettings

    out = []
    for item in args.cascade:
        ranker, _, rest = item.partition(":")
        norm, _, weight = rest.partition(":")
        try:
            out.append(
                CascadeSettings(
                    args.bank_size, args.cascade_k, ranker, norm or "zscore", float(weight or 1.0)
                )
            )
        except ValueError as err:
            raise DataError(f"--cascade {item!r}: {err}") from None
    return out


def cmd_evaluate(args: argparse.Namespace) -> dict:
    dataset = load_dataset(args.dataset, args.data_root, args.split)
    names = [r.strip() for r in args.ranker.split(",") if r.strip()]
    trained = CROSS_ENCODER in names  # a trained adapter, scored here and never cached
    rankers = _rankers(",".join(r for r in names if r != CROSS_ENCODER) or "bm25")
    bankset = build_banks(dataset, args.split, rankers, _spec(args), args.cache_dir)
    if trained:
        from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderRanker
        from fincrowd_ltr.retrieval.banks import score_banks

        model = CrossEncoder.load(getattr(args, "cross_encoder", DEFAULT_CROSS_ENCODER))
        score_banks(bankset, dataset, [CrossEncoderRanker(model, dataset.passages)])
        rankers = [r for r in names if r in {*rankers, CROSS_ENCODER}]
    if args.run is not None:
        from fincrowd_ltr.data.beir import read_trec_run
        from fincrowd_ltr.retrieval.banks import score_banks
        from fincrowd_ltr.retrieval.rankers import RunRanker

        run = read_trec_run(args.run, dataset)
        qid_of = {q.text: q.qid for q in dataset.queries.values()}
        score_banks(bankset, dataset, [RunRanker(run, qid_of)], progress=False)
        rankers = [*rankers, "run"]
    report = evaluate_bankset(dataset, bankset, rankers)
    report["notes"] = list(dataset.notes)
    if getattr(args, "cascade", None):
        from fincrowd_ltr.evaluation.cascade import add_cascade_systems

        add_cascade_systems(report, dataset, bankset, _cascade_settings(args))
    if getattr(args, "checkpoint", None) is not None:
        from fincrowd_ltr.evaluation.gated import add_correction_systems

        add_correction_systems(
            report,
            dataset,
            bankset,
            args.checkpoint,
            rankers,
            getattr(args, "domain", None),
            getattr(args, "domain_fallback", "error"),
        )
    print(format_table(report))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))
        print(f"report written to {args.out}")
    return report


def cmd_fit_residual(args: argparse.Namespace) -> None:
    """Cross-validate the residual (and the gated correction) over group folds, then train the
    final correction and save it (with ``--no-gate``: the residual alone, on every group)."""
    from fincrowd_ltr.model.checkpoint import save_residual
    from fincrowd_ltr.training.crossval import (
        HPARAM_GRID,
        MAX_EPOCHS,
        best_setting,
        crossvalidate,
        train_fold,
    )

    common = {
        "dataset": args.dataset,
        "data_root": args.data_root,
        "split": args.split,
        "ranker": args.ranker,
        "cache_dir": str(args.cache_dir),
        "folds": args.folds,
        "seed": args.seed,
        "first_stage": args.first_stage,
    }
    grid = HPARAM_GRID if getattr(args, "select", True) else None
    report = crossvalidate(**common, train_mode=args.train_mode, val_mode=args.val_mode, grid=grid)
    setting = best_setting(report)
    print(f"setting chosen per fold on validation groups: {report['selection']['chosen_per_fold']}")
    for mode, res in report["modes"].items():
        _print_systems(
            f"\n{args.dataset} {args.ranker}: company/context-held-out folds, {mode} banks "
            f"({res['n_queries']} questions, {res['n_groups']} groups)",
            res,
        )
    if getattr(args, "ablation", False):
        report["ablation"] = run_ablation(common, args, setting)
    if not getattr(args, "gate", True):
        _write_report(args, report)
        model, dm, _ = train_fold(
            {**common, "bank_mode": args.train_mode, "val_bank_mode": args.val_mode},
            -1,
            setting,
            MAX_EPOCHS,
            args.seed,
        )
        summary = {
            "setting": setting,
            "dataset": dm.dataset.name,
            "split": args.split,
            "bank_mode": args.train_mode,
            "val_bank_mode": args.val_mode,
            "first_stage": dm.hparams.first_stage,
            "train_banks": len(dm.examples["train"]),
            "skipped_without_support": dm.skipped_without_support["train"],
            "query_ids": sorted({e.qid for part in ("train", "val") for e in dm.examples[part]}),
        }
        companies = dm.featurizer().extractor.companies
        save_residual(args.out, model.scorer, args.ranker, summary, companies=companies)
        print(
            f"residual trained on every group ({summary['train_banks']} banks) saved to {args.out}"
        )
        return
    fit_gated(args, common, grid, report, setting)


def _write_report(args: argparse.Namespace, report: dict) -> None:
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=1))
        print(f"report written to {args.report}")


def _print_systems(title: str, res: dict) -> None:
    print(title)
    for name, s in res.items():
        if isinstance(s, dict) and "delta" in s:
            lo, hi = s["delta_ci95"]["recall@10"]
            extra = ""
            if "repair_rate" in s:
                extra = f"  repaired {s['crowded_repaired']}/{s['crowded_failures']} crowded"
            print(
                f"  {name:<18} R@10 {s['recall@10']:.3f}  delta {s['delta']['recall@10']:+.3f}"
                f" [{lo:+.3f},{hi:+.3f}]  nDCG@10 {s['ndcg@10']:.3f}  regression "
                f"{s['regression_rate']:.3f}  improvement {s['improvement_rate']:.3f}{extra}"
            )


def fit_gated(args: argparse.Namespace, common: dict, grid, report: dict, setting: dict) -> None:
    """Cross-validate the gated correction, then fit the residual (at ``setting``, the best on
    validation folds) and gate on every group but a calibration fold, calibrate the dataset's
    domain on that fold and save the checkpoint."""
    from fincrowd_ltr.model.checkpoint import save_residual
    from fincrowd_ltr.training.gating import GateFitter, crossvalidate_gated

    fitter = GateFitter(**common, train_mode=args.train_mode, val_mode=args.val_mode)
    grid = grid or ({},)
    gated = crossvalidate_gated(
        fitter, grid, cap=args.regression_cap, min_queries=args.min_calibration
    )
    report["gated"] = gated
    for mode, res in gated["modes"].items():
        _print_systems(
            f"\n{args.dataset} {args.ranker}: gated correction, held-out folds, {mode} banks "
            f"({res['n_queries']} questions; gate opened on {res['gate_open_share']:.3f})",
            res,
        )
    _write_report(args, report)
    n = len(fitter.folds)
    covered = [sum(fitter.data.covered(q) for q in fold) for fold in fitter.folds]
    calib = max(range(n), key=lambda f: (covered[f], -f))  # the largest calibration set
    train = [f for f in range(n) if f != calib]
    scorer, setting = fitter.fit_residual(train, train[0], (setting,))
    gate = fitter.fit_gate(train, train[0], setting)
    domain = args.domain or args.dataset
    calibration = fitter.calibrate(scorer, gate, [calib], args.regression_cap, args.min_calibration)
    summary = {
        "setting": setting,
        "dataset": fitter.data.name,
        "split": args.split,
        "bank_mode": args.train_mode,
        "val_bank_mode": args.val_mode,
        "first_stage": args.first_stage,
        "folds": n,
        "seed": args.seed,
        "calibration_fold": calib,
        "query_ids": sorted(fitter.qids(train)),
    }
    companies = fitter.featurizer.extractor.companies
    save_residual(args.out, scorer, args.ranker, summary, gate, {domain: calibration}, companies)
    print(
        f"residual and gate trained on {len(train)} of {n} group folds "
        f"({len(summary['query_ids'])} questions); domain {domain!r} calibrated on fold {calib} "
        f"({calibration.n_queries} questions: threshold {calibration.threshold:.3f}, "
        f"temperature {calibration.temperature:.2f}); saved to {args.out}"
    )


def cmd_calibrate(args: argparse.Namespace) -> None:
    """Fit a domain's gate calibration on labelled queries disjoint from the training queries."""
    from fincrowd_ltr.data.splits import group_kfold
    from fincrowd_ltr.features import BankFeaturizer
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.model.checkpoint import add_domain, load_gate, load_residual
    from fincrowd_ltr.model.gate import calibrate
    from fincrowd_ltr.training.data import make_examples
    from fincrowd_ltr.training.gating import gate_rows

    scorer, config = load_residual(args.checkpoint)
    gate, _ = load_gate(args.checkpoint)
    ranker = config["base_ranker"]
    dataset = load_dataset(args.dataset, args.data_root, args.split)
    if args.fold is not None:
        qids = group_kfold(dataset, args.folds, args.seed)[args.fold]
    else:
        qids = list(dataset.queries)
    training = config.get("training", {})
    if training.get("dataset") == dataset.name:
        overlap = sorted(set(qids) & set(training.get("query_ids", [])))
        if overlap:
            raise DataError(
                f"{args.checkpoint}: {len(overlap)} calibration queries were training queries "
                f"(e.g. {overlap[:3]}); calibrate on queries the correction never saw"
            )
    # the banks the checkpoint was trained on, unless asked otherwise
    stage = getattr(args, "first_stage", None) or training.get("first_stage", "bm25")
    spec = BankSpec(size=args.bank_size, mode="retrieved", first_stage=stage)
    bankset = build_banks(dataset, args.split, [ranker], spec, args.cache_dir)
    qids = [q for q in qids if q in bankset.banks and dataset.covered(q)]
    featurizer = BankFeaturizer(
        FieldExtractor.from_passages(dataset.passages.values()), dataset.passages
    )
    rows = gate_rows(
        dataset, featurizer, scorer, make_examples(dataset, bankset, ranker, featurizer, qids)
    )
    calibration = calibrate(
        gate.logits(rows.features),
        rows.gains,
        rows.qids,
        args.regression_cap,
        args.min_calibration,
        dataset=dataset.name,
    )
    add_domain(args.checkpoint, args.domain, calibration)
    print(
        f"domain {args.domain!r}: calibrated on {calibration.n_queries} {dataset.name} questions "
        f"(temperature {calibration.temperature:.2f}, threshold {calibration.threshold:.3f}, "
        f"gate opens on {calibration.calibration_open:.3f}, mean nDCG@10 gain "
        f"{calibration.calibration_gain:+.4f}, regression {calibration.calibration_regression:.3f}"
        f" <= cap {calibration.regression_cap}); stored in {args.checkpoint}"
    )


ABLATION_FAMILIES = (
    "lexical",
    "coverage",
    "concentration",
    "compatibility",
    "entity",
    "metric",
    "period",
    "segment",
    "table_scope",
    "unit",
    "currency",
)


def run_ablation(common: dict, args: argparse.Namespace, setting: dict) -> dict:
    """Cross-validated Recall@10 / nDCG@10 deltas with each feature family removed, all at one
    ``setting`` (the best on validation folds); "none" is the full model at that setting."""
    from fincrowd_ltr.training.crossval import crossvalidate

    out = {}
    print(f"\nfeature ablation at {setting} (cross-validated delta over base, family removed):")
    for family in ("none", *ABLATION_FAMILIES):
        dropped = [] if family == "none" else [family]
        result = crossvalidate(
            **common,
            train_mode=args.train_mode,
            val_mode=args.val_mode,
            model_kwargs={**setting, "drop_features": dropped},
        )
        row = {}
        for mode, res in result["modes"].items():
            system = res[f"residual:{common['ranker']}"]
            row[mode] = {
                "recall@10_delta": system["delta"]["recall@10"],
                "ndcg@10_delta": system["delta"]["ndcg@10"],
                "regression_rate": system["regression_rate"],
            }
        out[family] = row
        print(
            f"  without {family:<14}"
            + "".join(
                f"  {m}: dR@10 {v['recall@10_delta']:+.3f} dnDCG {v['ndcg@10_delta']:+.3f}"
                for m, v in row.items()
            )
        )
    return out


def cmd_diagnose(args: argparse.Namespace) -> dict:
    """Crowding diagnostics for one base ranker (stress test, crowded failures, top-k mix)."""
    from fincrowd_ltr.diagnostics.diagnose import diagnose
    from fincrowd_ltr.diagnostics.stress import StressConfig

    dataset = load_dataset(args.dataset, args.data_root, args.split)
    run = None
    if args.run is not None:
        from fincrowd_ltr.data.beir import read_trec_run

        run = read_trec_run(args.run, dataset)
    config = StressConfig(
        sizes=tuple(int(s) for s in args.pool_sizes.split(",")),
        similarity_ranker=args.similarity,
        caliper=args.caliper,
    )
    report = diagnose(
        dataset, args.split, args.ranker, args.cache_dir, args.out, args.pool_depth, config, run
    )
    primary = report["stress"]["variants"]["primary"]
    print(f"{dataset.name} ({args.split}), ranker {args.ranker}: matched pools (Recall@10)")
    for size, row in primary.items():
        if row["n_queries"]:
            r = row["recall@10"]
            lo, hi = r["delta_ci95"]
            print(
                f"  {size:>3} distractors: compatible {r['compatible']:.3f} incompatible "
                f"{r['incompatible']:.3f} delta {r['delta']:+.3f} [{lo:+.3f},{hi:+.3f}] "
                f"({row['n_queries']} queries, {row['n_dropped']} unmatched)"
            )
        else:
            print(f"  {size:>3} distractors: no query could be matched ({row['n_dropped']})")
    f = report["failures"]
    print(
        f"  retrieved banks: {f['top10_failures']}/{f['n_queries']} top-10 failures, "
        f"{f['orderable_failures']} orderable, {f['crowded_failures']} crowded, "
        f"{f['absent_failures']} absent from the top 100"
    )
    if args.out:
        print(f"report, summary, figures and labels written to {args.out}/")
    return report


def cmd_export(args: argparse.Namespace) -> None:
    """Write a checkpoint as a self-contained, checksummed directory for serving."""
    from fincrowd_ltr.serving.reranker import FinCrowdReranker

    reranker = FinCrowdReranker.from_pretrained(args.checkpoint, base_ranker=args.ranker)
    reranker.save_pretrained(args.out)
    if args.onnx:
        from fincrowd_ltr.serving.onnx_export import export_onnx

        for path in export_onnx(reranker.scorer, reranker.gate, args.out):
            print(f"wrote {path}")
    print(
        f"exported {args.checkpoint} (base ranker {reranker.base_ranker!r}, gate domains: "
        f"{', '.join(sorted(reranker.domains)) or 'none'}) to {args.out}"
    )


def cmd_serve(args: argparse.Namespace) -> None:
    """Serve a checkpoint over HTTP (GET /health, POST /rerank)."""
    from fincrowd_ltr.serving.http import Limits, serve
    from fincrowd_ltr.serving.reranker import FinCrowdReranker

    reranker = FinCrowdReranker.from_pretrained(args.checkpoint, base_ranker=args.ranker)
    limits = Limits(args.max_candidates, args.max_text_chars, args.max_query_chars)
    print(f"serving {args.checkpoint} on http://{args.host}:{args.port} (limits {limits})")
    serve(reranker, args.host, args.port, limits)


def cmd_banks(args: argparse.Namespace) -> None:
    dataset = load_dataset(args.dataset, args.data_root, args.split)
    bankset = build_banks(dataset, args.split, _rankers(args.ranker), _spec(args), args.cache_dir)
    if args.out:
        bankset.save(args.out)
        print(f"{len(bankset.banks)} banks written to {args.out}")


def cmd_first_stage(args: argparse.Namespace) -> dict:
    from fincrowd_ltr.evaluation.first_stage import ablation, format_ablation, retrieve_runs
    from fincrowd_ltr.retrieval.bm25 import BM25Index

    dataset = load_dataset(args.dataset, args.data_root, args.split)
    variants = list(FIRST_STAGES) if args.variants == "all" else args.variants.split(",")
    for name in variants:
        parse_first_stage(name)
    index = BM25Index.build(dataset.passages, BM25Config(stemmer=args.stemmer), args.cache_dir)
    runs = retrieve_runs(dataset, index, variants, args.depth)
    report = ablation(dataset, runs, args.folds, args.seed)
    print(format_ablation(report))
    _write_report(args, report)
    return report


def _named_runs(items: list[str], dataset) -> dict[str, dict[str, dict[str, float]]]:
    """``NAME=FILE`` TREC runs (e.g. out-of-fold cross-encoder scores), read and checked."""
    from fincrowd_ltr.data.beir import read_trec_run

    runs = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise DataError(f"--scores {item!r}: write NAME=FILE (a TREC run)")
        runs[name] = read_trec_run(Path(path), dataset)
    return runs


def cmd_cascade(args: argparse.Namespace) -> dict:
    """Cross-validate the cascade (first stage -> stage-2 top k -> optional gated correction)."""
    from fincrowd_ltr.evaluation.cascade import (
        crossvalidate_cascade,
        fold_corrections,
        gated_cascade,
        run_scores,
    )
    from fincrowd_ltr.retrieval.cascade import CascadeSettings, settings_grid

    dataset = load_dataset(args.dataset, args.data_root, args.split)
    stage2 = _rankers(args.stage2)
    spec = BankSpec(size=args.n, mode="retrieved", first_stage=args.first_stage)
    bankset = build_banks(dataset, args.split, stage2, spec, args.cache_dir)
    extra = {
        name: run_scores(run, bankset)
        for name, run in _named_runs(args.scores or [], dataset).items()
    }
    grid = settings_grid(stage2, args.n, args.k)
    fixed = [CascadeSettings(args.n, args.k, r) for r in [*stage2, *extra]]
    report, chosen = crossvalidate_cascade(
        dataset, bankset, grid, args.folds, args.seed, extra, fixed
    )
    report["first_stage"] = spec.stage(dataset)
    report["scores_from_runs"] = {
        item.partition("=")[0]: item.partition("=")[2] for item in args.scores or []
    }
    _print_cascade(
        report["systems"],
        f"{dataset.name}: cascade n={args.n} k={args.k} "
        f"({report['n_queries']} questions, {report['n_groups']} groups)",
    )
    print(f"chosen per fold on training folds: {report['chosen_per_fold']}")
    if args.gated:
        from fincrowd_ltr.training.gating import GateFitter

        fitter = GateFitter(
            args.dataset,
            args.correction_ranker,
            args.data_root,
            args.split,
            args.folds,
            args.seed,
            str(args.cache_dir),
            first_stage=args.first_stage,
        )
        corrections = fold_corrections(fitter)
        limits = {
            "cap": getattr(args, "regression_cap", 0.03),
            "min_queries": getattr(args, "min_calibration", MIN_CALIBRATION_QUERIES),
        }
        report["gated"] = {
            "selected": gated_cascade(fitter, corrections, bankset, chosen, extra, **limits)
        }
        _print_cascade(report["gated"]["selected"]["systems"], "gated correction on top-k")
        for name in extra:  # a run-based stage 2 (e.g. cross-encoder) with the correction
            same = dict.fromkeys(chosen, CascadeSettings(args.n, args.k, name))
            report["gated"][name] = gated_cascade(
                fitter, corrections, bankset, same, extra, label=f"cascade:{name}", **limits
            )
            _print_cascade(report["gated"][name]["systems"], f"gated correction on {name} top-k")
    _write_report(args, report)
    return report


def _print_cascade(systems: dict, title: str) -> None:
    print(f"\n{title}")
    for name, s in systems.items():
        ci = s["ci95"]
        print(
            f"  {name:<44} R@10 {s['recall@10']:.3f} [{ci['recall@10'][0]:.3f},"
            f"{ci['recall@10'][1]:.3f}]  nDCG@10 {s['ndcg@10']:.3f}  R@100 {s['recall@100']:.3f}"
            f"  dR@10 {s['delta']['recall@10']:+.3f}  regression {s['regression_rate']:.3f}"
        )


def cmd_train_cross_encoder(args: argparse.Namespace) -> None:
    """Out-of-fold scores on group folds (a TREC run), then a final adapter on every group."""
    from fincrowd_ltr.crossencoder import CrossEncoder, CrossEncoderConfig, train_cross_encoder
    from fincrowd_ltr.crossencoder.crossfit import crossfit
    from fincrowd_ltr.crossencoder.training import hard_negative_groups
    from fincrowd_ltr.data.beir import write_trec_run

    dataset = load_dataset(args.dataset, args.data_root, args.split)
    spec = BankSpec(size=args.depth, mode="retrieved", first_stage=args.first_stage)
    bankset = build_banks(dataset, args.split, [args.negatives_from], spec, args.cache_dir)
    config = CrossEncoderConfig(max_length=args.max_length)
    train_kwargs = {
        "max_epochs": args.epochs,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "max_groups": args.max_groups,
    }
    report: dict = {
        "dataset": dataset.name,
        "first_stage": spec.stage(dataset),
        "depth": args.depth,
        "config": vars(config),
        "train": train_kwargs,
    }
    if args.run_out is not None:
        run, folds = crossfit(
            dataset,
            bankset,
            args.negatives_from,
            config,
            args.folds,
            args.seed,
            args.depth,
            train_kwargs,
        )
        args.run_out.parent.mkdir(parents=True, exist_ok=True)
        write_trec_run(args.run_out, run, "cross-encoder")
        report["folds"] = folds
        print(f"out-of-fold scores of {len(run)} questions written to {args.run_out}")
    if args.out is not None:
        covered = [q for q in dataset.queries if q in bankset.banks and dataset.covered(q)]
        groups = hard_negative_groups(dataset, bankset, args.negatives_from, covered)
        model = CrossEncoder.from_minilm(config)
        model.config.training = {
            **train_cross_encoder(model, groups, seed=args.seed, **train_kwargs),
            "dataset": dataset.name,
            "split": args.split,
            "query_ids": covered,
        }
        model.save(args.out)
        print(f"cross-encoder adapter ({len(groups)} groups) saved to {args.out}")
    _write_report(args, report)


def cmd_pack(args: argparse.Namespace) -> dict:
    """Prune and pack each ranking into a token budget; report evidence-in-context."""
    from fincrowd_ltr.evaluation.packing import (
        INERT_NOTE,
        NOT_MEASURED,
        evaluate_packing,
        split_and_fuse_check,
    )
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.packing import POLICIES, Packer, TokenCounter, assemble, format_summary

    dataset = load_dataset(args.dataset, args.data_root, args.split)
    if args.orders is not None:
        from fincrowd_ltr.data.jsonl import require_file

        require_file(args.orders, "cross-validation report")
        saved = json.loads(args.orders.read_text())
        try:
            systems = saved["gated"]["modes"]["retrieved"]["rankings"]
        except KeyError:
            raise DataError(
                f"{args.orders}: no held-out rankings (field gated.modes.retrieved.rankings); "
                "write it with `fincrowd fit-residual --report`"
            ) from None
        unknown = sorted({q for r in systems.values() for q in r} - set(dataset.queries))
        if unknown:
            raise DataError(f"{args.orders}: unknown query id {unknown[0]!r} for {dataset.name}")
    else:
        ranker = _rankers(args.ranker)[0]
        spec = BankSpec(size=args.bank_size, mode="retrieved", first_stage=args.first_stage)
        bankset = build_banks(dataset, args.split, [ranker], spec, args.cache_dir)
        systems = {f"base:{ranker}": {q: b.ranking(ranker) for q, b in bankset.banks.items()}}
    counter = TokenCounter(path=args.tokenizer)
    packer = Packer(counter, args.budget)
    extractor = FieldExtractor.from_passages(dataset.passages.values())
    report: dict = {
        "dataset": dataset.name,
        "split": args.split,
        "budget": args.budget,
        "tokenizer": counter.name,
        "depth": args.depth,
        "answer_accuracy": NOT_MEASURED,
        "orders_note": INERT_NOTE,
        "systems": {},
        "rank_halves": {},
    }
    for name, rankings in systems.items():
        report["systems"][name] = {
            policy.name: evaluate_packing(dataset, rankings, policy, packer, extractor, args.depth)
            for policy in POLICIES
        }
        report["rank_halves"][name] = split_and_fuse_check(dataset, rankings, packer)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    summary = format_summary(report)
    (args.out / "summary.md").write_text(summary)
    name, rankings = list(systems.items())[-1]
    with open(args.out / "contexts.jsonl", "w", encoding="utf-8") as fh:
        for qid, ranking in rankings.items():
            ranked = [dataset.passages[p] for p in ranking[: args.depth]]
            packing = assemble(packer.pack(dataset.queries[qid].text, ranked), "score")
            row = {
                "qid": qid,
                "system": name,
                "policy": "budget",
                "order": "score",
                "tokens": packing.tokens,
                "prompt": packing.prompt(),
                "citations": [vars(p.citation) for p in packing.passages],
                "dropped": packing.dropped,
            }
            fh.write(json.dumps(row) + "\n")
    print(summary)
    print(f"report, summary and packed contexts ({name}, budget, score order) in {args.out}/")
    return report


def cmd_audit(args: argparse.Namespace) -> None:
    from fincrowd_ltr.fields.audit import run_audit

    run_audit(args.labels, args.data_root)


DEFAULT_DEMO_CONFIG = Path("configs/demo.yaml")


def load_demo_config(path: Path) -> dict:
    """Read and check the demo's YAML config (datasets, splits, rankers, bank modes)."""
    import yaml

    if not path.is_file():
        raise DataError(f"expected the demo config at {path} but it does not exist")
    config = yaml.safe_load(path.read_text()) or {}
    runs = config.get("runs")
    if not isinstance(runs, list) or not runs:
        raise DataError(f"{path}: field 'runs' must be a non-empty list")
    for i, run in enumerate(runs):
        for key in ("dataset", "split", "rankers", "modes"):
            if key not in run:
                raise DataError(f"{path}: runs[{i}] lacks field {key!r}")
        _rankers(",".join(run["rankers"]))
        bad = [m for m in run["modes"] if m not in MODES]
        if bad:
            raise DataError(f"{path}: runs[{i}].modes has unknown mode(s) {bad}")
    for section in ("runs", "diagnose", "cascade", "first_stage"):
        for i, item in enumerate(config.get(section) or []):
            if "first_stage" in item:
                try:
                    parse_first_stage(item["first_stage"])
                except DataError as err:
                    raise DataError(f"{path}: {section}[{i}].first_stage: {err}") from None
    return config


def cmd_demo(args: argparse.Namespace) -> None:
    """Build banks and print the baseline report of every run in the demo config."""
    config = load_demo_config(args.config)
    out = Path(config.get("out_dir", "runs"))
    for run in config["runs"]:
        for mode in run["modes"]:
            ns = argparse.Namespace(**vars(args))
            ns.dataset, ns.split, ns.bank_mode, ns.run = run["dataset"], run["split"], mode, None
            ns.ranker = ",".join(run["rankers"])
            ns.first_stage = run.get("first_stage", args.first_stage)
            ns.bank_size = int(config.get("bank_size", DEFAULT_BANK_SIZE))
            ns.dense_pooling = config.get("dense_pooling", "max")
            ns.out = out / f"baseline-{run['dataset']}-{mode}.json"
            print()
            cmd_evaluate(ns)
    for item in config.get("first_stage", []):
        fs = argparse.Namespace(**vars(args))
        fs.dataset, fs.split = item["dataset"], item.get("split", "all")
        fs.variants, fs.depth, fs.folds, fs.seed = "all", DEFAULT_BANK_SIZE, 5, 0
        fs.stemmer, fs.report = None, out / f"first-stage-{fs.dataset}.json"
        print()
        cmd_first_stage(fs)
    for item in config.get("diagnose", []):
        dg = argparse.Namespace(**vars(args))
        dg.dataset, dg.split, dg.ranker = item["dataset"], item.get("split", "all"), item["ranker"]
        dg.run, dg.pool_depth = None, int(item.get("pool_depth", DEFAULT_BANK_SIZE))
        dg.pool_sizes, dg.similarity, dg.caliper = "10,30,60", "dense", 1.0
        dg.first_stage = item.get("first_stage", args.first_stage)
        dg.out = out / "diagnose" / f"{dg.dataset}-{dg.ranker}-depth{dg.pool_depth}"
        print()
        cmd_diagnose(dg)
    for item in config.get("cascade", []):
        cs = argparse.Namespace(**vars(args))
        cs.dataset, cs.split = item["dataset"], item.get("split", "all")
        cs.first_stage = item.get("first_stage", args.first_stage)
        cs.stage2, cs.n, cs.k = ",".join(item["stage2"]), int(item["n"]), int(item["k"])
        cs.scores, cs.gated = None, bool(item.get("gated", True))
        cs.correction_ranker = item.get("correction_ranker", "dense")
        cs.folds, cs.seed = 5, 0
        cs.report = out / f"cascade-{cs.dataset}.json"
        print()
        cmd_cascade(cs)
    correction = config.get("correction")
    if correction:
        ns = argparse.Namespace(**vars(args))
        ns.dataset, ns.split = correction["dataset"], correction.get("split", "all")
        ns.ranker, ns.train_mode = correction["ranker"], correction.get("train_mode", "injected")
        ns.first_stage = correction.get("first_stage", args.first_stage)
        ns.val_mode, ns.select = correction.get("val_mode", "retrieved"), True
        ns.folds, ns.seed = int(correction.get("folds", 5)), int(correction.get("seed", 0))
        ns.out = Path(correction.get("out", "checkpoints/default"))
        ns.report = out / f"crossval-{ns.dataset}-{ns.ranker}.json"
        ns.gate, ns.domain = bool(correction.get("gate", True)), correction.get("domain")
        ns.regression_cap = float(correction.get("regression_cap", 0.03))
        ns.min_calibration = MIN_CALIBRATION_QUERIES
        ns.ablation = False
        cmd_fit_residual(ns)
        for item in correction.get("calibrate", []):
            cal = argparse.Namespace(**vars(args))
            cal.checkpoint, cal.domain = ns.out, item["domain"]
            cal.dataset, cal.split = item["dataset"], item.get("split", "all")
            cal.fold, cal.folds = item.get("fold"), int(item.get("folds", 5))
            cal.seed, cal.regression_cap = int(item.get("seed", 0)), ns.regression_cap
            cal.min_calibration = MIN_CALIBRATION_QUERIES
            cal.first_stage = item.get("first_stage")  # default: the checkpoint's
            cal.bank_size = int(config.get("bank_size", DEFAULT_BANK_SIZE))
            print()
            cmd_calibrate(cal)
        for item in correction.get("evaluate", []):
            ev = argparse.Namespace(**vars(args))
            ev.dataset, ev.split, ev.run = item["dataset"], item.get("split", "all"), None
            ev.ranker, ev.bank_mode = correction["ranker"], item.get("mode", "retrieved")
            ev.first_stage = item.get("first_stage", args.first_stage)
            ev.bank_size = int(config.get("bank_size", DEFAULT_BANK_SIZE))
            ev.dense_pooling = config.get("dense_pooling", "max")
            ev.checkpoint, ev.domain = ns.out, item.get("domain")
            ev.domain_fallback = "error"
            ev.out = out / f"corrected-{item['dataset']}-{ev.bank_mode}-{item.get('domain')}.json"
            print()
            cmd_evaluate(ev)
    print(f"\nreports in {out}/")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fincrowd", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("evaluate", help="evaluate base rankers on candidate banks")
    _add_data_args(p)
    _add_bank_args(p)
    p.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="a residual checkpoint: adds residual:<ranker> (always-on correction)",
    )
    p.add_argument(
        "--domain",
        default=None,
        help="with --checkpoint: also report gated:<ranker> with this domain's calibration",
    )
    p.add_argument(
        "--domain-fallback",
        choices=("error", "identity"),
        default="error",
        help="a domain without calibration: fail (default) or keep the base order",
    )
    p.add_argument(
        "--cross-encoder",
        type=Path,
        default=DEFAULT_CROSS_ENCODER,
        help="adapter folder for --ranker cross-encoder (default checkpoints/cross-encoder)",
    )
    p.add_argument(
        "--cascade",
        action="append",
        help="add a cascade over the banks: RANKER[:NORM:WEIGHT] keeps the top --cascade-k by "
        "WEIGHT * norm(RANKER) + (1 - WEIGHT) * norm(first stage), e.g. dense:zscore:0.75",
    )
    p.add_argument("--cascade-k", type=int, default=20, help="candidates stage 2 keeps")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("fit-residual", help="cross-validate, train and save the residual")
    _add_data_args(p)
    p.add_argument("--ranker", default="dense", help="the base ranker to correct")
    _add_first_stage_arg(p)
    p.add_argument(
        "--train-mode",
        choices=MODES,
        default="injected",
        help="bank mode of the training banks (evaluation reports both)",
    )
    p.add_argument(
        "--val-mode",
        choices=MODES,
        default="retrieved",
        help="bank mode of the validation banks (early stopping, choosing alpha/weight decay)",
    )
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("checkpoints/default"))
    p.add_argument("--report", type=Path, default=None, help="write the cross-validation JSON")
    p.add_argument(
        "--ablation",
        action="store_true",
        help="also cross-validate with each feature family removed",
    )
    p.add_argument(
        "--no-select",
        dest="select",
        action="store_false",
        help="train the package defaults only (skip choosing alpha and weight decay per fold)",
    )
    p.add_argument(
        "--no-gate",
        dest="gate",
        action="store_false",
        help="residual only: no identity gate, trained on every group",
    )
    p.add_argument("--domain", default=None, help="gate domain to calibrate (default: dataset)")
    _add_cap_arg(p)
    p.set_defaults(func=cmd_fit_residual)

    p = sub.add_parser("calibrate", help="calibrate a checkpoint's gate for a domain")
    _add_data_args(p)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--domain", required=True, help="name to store the calibration under")
    p.add_argument(
        "--fold",
        type=int,
        default=None,
        help="calibrate on this group fold only (default: every query of --split)",
    )
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bank-size", type=int, default=DEFAULT_BANK_SIZE)
    p.add_argument(
        "--first-stage",
        type=_first_stage,
        default=None,
        help="first stage of the calibration banks (default: the checkpoint's)",
    )
    _add_cap_arg(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("diagnose", help="crowding diagnostics: matched pools, crowded failures")
    _add_data_args(p)
    p.add_argument("--ranker", default="dense", help="the base ranker to diagnose (or 'run')")
    p.add_argument("--run", type=Path, default=None, help="a TREC run file (use --ranker run)")
    p.add_argument(
        "--pool-depth",
        type=int,
        default=DEFAULT_BANK_SIZE,
        help="first-stage candidates the matched pools are drawn from (default 100)",
    )
    p.add_argument("--pool-sizes", default="10,30,60", help="distractors per pool, nested")
    p.add_argument(
        "--similarity",
        default="dense",
        help="ranker whose score is the 'model similarity' matching covariate",
    )
    p.add_argument("--caliper", type=float, default=1.0, help="nearest-neighbour caliper (z units)")
    p.add_argument("--out", type=Path, default=None, help="output folder")
    p.set_defaults(func=cmd_diagnose)

    p = sub.add_parser("export", help="write a checkpoint as a checksummed serving directory")
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ranker", default=None, help="refuse a checkpoint fitted for another ranker")
    p.add_argument(
        "--onnx",
        action="store_true",
        help="also write residual.onnx and gate.onnx (needs the 'onnx' extra)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("serve", help="serve a checkpoint over HTTP: /health, /rerank")
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--ranker", default=None, help="refuse a checkpoint fitted for another ranker")
    p.add_argument("--max-candidates", type=int, default=1000)
    p.add_argument("--max-text-chars", type=int, default=20_000)
    p.add_argument("--max-query-chars", type=int, default=2_000)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("banks", help="build, score and save candidate banks")
    _add_data_args(p)
    _add_bank_args(p)
    p.add_argument("--out", type=Path, default=None, help="also write the banks here (JSONL)")
    p.set_defaults(func=cmd_banks)

    p = sub.add_parser(
        "first-stage", help="first-stage ablation on group folds and the training-fold choice"
    )
    _add_data_args(p)
    p.add_argument(
        "--variants",
        default="all",
        help=f"comma-separated first stages, or 'all' ({', '.join(FIRST_STAGES)})",
    )
    p.add_argument("--depth", type=int, default=100, help="passages retrieved per question")
    p.add_argument("--folds", type=int, default=5, help="group folds for the choice")
    p.add_argument("--seed", type=int, default=0, help="fold assignment seed")
    p.add_argument("--stemmer", default=None, help="BM25 stemmer (PyStemmer name), default none")
    p.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    p.set_defaults(func=cmd_first_stage)

    p = sub.add_parser("cascade", help="cross-validate the reranker cascade (and the gate)")
    _add_data_args(p)
    _add_first_stage_arg(p)
    p.add_argument("--stage2", default="dense,hybrid", help="stage-2 rankers to choose from")
    p.add_argument("--n", type=int, default=200, help="candidates stage 1 passes on")
    p.add_argument("--k", type=int, default=20, help="candidates stage 2 keeps")
    p.add_argument(
        "--scores",
        action="append",
        help="NAME=FILE: a TREC run reported as another stage-2 ranker (not part of the "
        "choice), e.g. out-of-fold cross-encoder scores",
    )
    p.add_argument("--gated", action="store_true", help="add the residual and gate on top-k")
    p.add_argument("--correction-ranker", default="dense", help="base ranker of the residual")
    _add_cap_arg(p)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    p.set_defaults(func=cmd_cascade)

    p = sub.add_parser(
        "train-cross-encoder", help="LoRA cross-encoder: out-of-fold scores and a final adapter"
    )
    _add_data_args(p)
    _add_first_stage_arg(p)
    p.add_argument("--depth", type=int, default=200, help="bank candidates scored per question")
    p.add_argument("--negatives-from", default="dense", help="ranker ordering hard negatives")
    p.add_argument("--max-length", type=int, default=128, help="word pieces per pair")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4, help="groups (1 + 7 negatives) per step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-groups", type=int, default=120, help="cap on training groups (CPU time)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-out", type=Path, default=None, help="write out-of-fold scores (TREC)")
    p.add_argument("--out", type=Path, default=None, help="save the final adapter here")
    p.add_argument("--report", type=Path, default=None, help="write the JSON summary here")
    p.set_defaults(func=cmd_train_cross_encoder)

    p = sub.add_parser("pack", help="prune and pack rankings into a token budget")
    _add_data_args(p)
    _add_first_stage_arg(p)
    p.add_argument("--ranker", default="dense", help="base ranker (without --orders)")
    p.add_argument("--bank-size", type=int, default=DEFAULT_BANK_SIZE)
    p.add_argument("--budget", type=int, default=32_000, help="tokens of the whole prompt")
    p.add_argument("--depth", type=int, default=30, help="ranked candidates considered")
    p.add_argument(
        "--orders",
        type=Path,
        default=None,
        help="a `fit-residual --report` JSON: pack its held-out base, always-on and gated orders",
    )
    p.add_argument(
        "--tokenizer", type=Path, default=None, help="tokenizer folder (default: MiniLM's)"
    )
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.set_defaults(func=cmd_pack)

    p = sub.add_parser("audit", help="field extractor precision/recall/F1 on the audit labels")
    p.add_argument("--labels", type=Path, default=Path("audit/labels.jsonl"))
    p.add_argument("--data-root", default=None)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("demo", help="banks and baseline report on FinanceBench and TAT-QA dev")
    _add_data_args(p)
    _add_bank_args(p)
    p.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_DEMO_CONFIG,
        help="YAML listing the runs (default configs/demo.yaml)",
    )
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fincrowd`` console script."""
    _quiet_libraries()
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except DataError as err:
        print(f"fincrowd: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
