"""One function per ``fincrowd`` command: arguments in, one API call, a table out."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path


def quiet_libraries() -> None:
    """Offline, quiet libraries (set before any of them is imported). Tokenizers' thread pool is
    off (residual fits run in forked workers) except while a corpus is tokenised in bulk
    (``fincrowd_ltr.retrieval.static.bulk_tokenizing``), unless the user set it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if "TOKENIZERS_PARALLELISM" not in os.environ:
        from fincrowd_ltr.defaults import TOKENIZERS_BULK_ONLY

        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        os.environ.setdefault(*TOKENIZERS_BULK_ONLY)
    os.environ.setdefault("WANDB_MODE", "offline")
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=".*treespec.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="torch.onnx")
    for name in ("lightning.pytorch", "lightning.fabric", "lightning", "transformers"):
        logging.getLogger(name).setLevel(logging.WARNING)


def plain_warnings() -> Callable:
    """Print the package's own warnings as one ``fincrowd: warning: ...`` line (Python's default
    adds the file, line number and source line of the call, which say nothing to a user of the
    command); other libraries' warnings keep Python's format. Only the format changes, so
    ``warnings.catch_warnings(record=True)`` still records them. Idempotent; returns the format
    it replaced (``cli.main`` puts it back when it returns)."""
    import warnings

    if getattr(warnings.formatwarning, "plain", False):
        return warnings.formatwarning.replaced
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    formatted = warnings.formatwarning

    def plain(message, category, filename, lineno, line=None):
        # the package's warning classes, or a plain UserWarning it raised (a library's warning
        # attributed to a line of the package, numpy's RuntimeWarning say, keeps its format)
        ours = category.__module__.startswith("fincrowd_ltr.") or (
            category is UserWarning and os.path.abspath(filename).startswith(package)
        )
        if ours:
            return f"fincrowd: warning: {message}\n"
        return formatted(message, category, filename, lineno, line)

    plain.plain, plain.replaced = True, formatted
    warnings.formatwarning = plain
    return formatted


WORKER_APP = "fincrowd_ltr.cli.commands:worker_app"


def worker_app():
    """The app of one ``serve --workers N`` process, with the command's library set-up (a new
    process inherits the environment, not the warning and logging filters)."""
    from fincrowd_ltr.serving.http import app_from_env

    quiet_libraries()
    plain_warnings()
    return app_from_env()


# a command's ranker when none is named and the data is the package's own (a user's corpus, given
# by --data-root, must name its ranker: the dense ones embed every page)
PACKAGE_DATA_RANKERS = {"evaluate": "bm25,dense", "banks": "bm25,dense", "demo": "bm25,dense",
                        "diagnose": "dense", "pack": "dense"}  # fmt: skip


def resolve_defaults(args: argparse.Namespace) -> None:
    """Fill the defaults that depend on other options, or refuse: ``--dataset`` and ``--ranker``
    must be named with ``--data-root``; ``fit`` always names its ranker; ``fit`` and ``export``
    never replace an existing checkpoint without ``--overwrite``."""
    from fincrowd_ltr.data.schema import DataError

    # demo runs the package's own data at any --data-root; its config names the runs
    user_data = getattr(args, "data_root", None) is not None and args.command != "demo"
    if hasattr(args, "dataset") and args.dataset is None:
        if user_data:
            raise DataError(
                "--data-root given: name its --dataset (financebench | tatqa | finqa | beir | "
                "beir:SUBDIR)"
            )
        args.dataset = "financebench"
    ordered = getattr(args, "orders", None) is not None  # `pack --orders`: no ranker is read
    if getattr(args, "ranker", "") is None and args.command in PACKAGE_DATA_RANKERS and not ordered:
        if user_data:
            raise DataError(
                "--data-root given: name the --ranker (bm25 embeds nothing; dense, hybrid and "
                "fused embed every bank page with MiniLM)"
            )
        args.ranker = PACKAGE_DATA_RANKERS[args.command]
    if args.command in ("fit", "fit-residual"):
        if args.ranker is None:
            raise DataError(
                "name the --ranker to correct: bm25, dense, hybrid, fused, splade or run (--run)"
            )
        if args.out is None:
            import time

            stamp = time.strftime("%Y%m%d-%H%M%S")
            name = f"{args.dataset}-{args.ranker}".replace(":", "-").replace("/", "-")
            args.out = Path("checkpoints") / f"{name}-{stamp}"
    if args.command in ("fit", "fit-residual", "export"):
        _refuse_overwrite(args.out, args.overwrite)


def _refuse_overwrite(out: Path, overwrite: bool) -> None:
    from fincrowd_ltr.data.schema import DataError

    if out.exists() and any(out.iterdir()) and not overwrite:
        raise DataError(
            f"{out}: already holds files; pass --overwrite to replace the checkpoint there, or "
            "choose another --out"
        )


def _calibration(args: argparse.Namespace):
    """The ``CalibrationSettings`` of a command's gate options."""
    from fincrowd_ltr.settings import CalibrationSettings

    return CalibrationSettings(
        regression_cap=args.regression_cap,
        min_calibration=args.min_calibration,
        delta=args.delta,
        gate_method=args.gate_method,
    )


def _dataset(args: argparse.Namespace):
    """The dataset name, or the dataset loaded with ``--allow-unknown-qrels`` or over an
    ``--index``."""
    unknown, index = getattr(args, "allow_unknown_qrels", False), getattr(args, "index", None)
    if not unknown and index is None:
        return args.dataset
    from fincrowd_ltr.api.corpus import load_dataset

    return load_dataset(args.dataset, args.data_root, args.split, unknown, index)


def _similarity(args: argparse.Namespace) -> str:
    """diagnose's covariate ranker; the dense default is stated before it starts embedding."""
    if args.similarity is None:
        print(
            "diagnose: the model-similarity covariate defaults to the dense ranker (MiniLM embeds "
            "every pool page not cached yet; --similarity bm25 costs nothing)",
            file=sys.stderr,
        )
        return "dense"
    return args.similarity


def _common(args: argparse.Namespace) -> dict:
    return {"split": args.split, "data_root": args.data_root, "cache_dir": args.cache_dir}


def _write(path: Path | None, report: dict | object) -> None:
    if path is not None:
        from fincrowd_ltr.evaluation.results import write_report

        write_report(path, report.to_dict() if hasattr(report, "to_dict") else report)
        print(f"report written to {path}")


def evaluate(args: argparse.Namespace) -> dict:
    import warnings

    from fincrowd_ltr.api import evaluate as run
    from fincrowd_ltr.api.corpus import rankers_of
    from fincrowd_ltr.data.schema import DataError
    from fincrowd_ltr.model.shift import DistributionShiftWarning
    from fincrowd_ltr.retrieval.cascade import DEFAULT_K, CascadeSettings

    cascades = []
    if args.cascade_k is not None and not args.cascade:
        raise DataError("--cascade-k sets the cascades' k: give a --cascade", "--cascade-k")
    for item in args.cascade or []:  # RANKER[:NORM:WEIGHT], checked before any work
        ranker, _, rest = item.partition(":")
        norm, _, weight = rest.partition(":")
        if norm and not weight:  # weight 1 mixes in no first stage: a norm would change nothing
            raise DataError(f"--cascade {item!r}: give the weight too (RANKER:NORM:WEIGHT)")
        if ranker not in (*rankers_of(args.ranker or ""), "run"):  # banks hold the named only
            raise DataError(
                f"--cascade {item!r}: stage 2 reads a ranker evaluated here ({args.ranker}, or "
                "run with --run): add it to --ranker",
                "--cascade",
            )
        try:
            k = DEFAULT_K if args.cascade_k is None else args.cascade_k
            cascades.append(
                CascadeSettings(args.bank_size, k, ranker, norm or "zscore", float(weight or 1.0))
            )
        except ValueError as err:
            raise DataError(f"--cascade {item!r}: {err}") from None
    with warnings.catch_warnings():
        # the table below prints each distribution-shift warning: once is enough
        warnings.simplefilter("ignore", DistributionShiftWarning)
        report = run(
            _dataset(args),
            args.ranker,
            checkpoint=args.checkpoint,
            domain=args.domain,
            fallback=args.domain_fallback,
            first_stage=args.first_stage,
            mode=args.bank_mode,
            size=args.bank_size,
            dense_pooling=args.dense_pooling,
            dense_window=args.dense_window,
            stemmer=args.stemmer,
            run=args.run,
            cross_encoder=args.cross_encoder,
            cascades=cascades,
            **_reader(args),
            **_common(args),
        )
    print(report)
    _write(args.out, report)
    return report


def _reader(args: argparse.Namespace) -> dict:
    """``--static-questions`` when given (else the API's default, or a checkpoint's record)."""
    given = getattr(args, "static_questions", None)
    return {} if given is None else {"static_questions": given}


def _source_folder(args: argparse.Namespace) -> Path | None:
    """The BEIR folder a ``beir`` / ``beir:SUBDIR`` dataset is read from (``None`` otherwise)."""
    from fincrowd_ltr.data.registry import beir_folder

    return beir_folder(str(args.dataset), args.data_root)


def synthesize(args: argparse.Namespace) -> None:
    import json

    from fincrowd_ltr.api.synthetic import folder_groups, require_writable, write_beir
    from fincrowd_ltr.api.synthetic import synthesize as run
    from fincrowd_ltr.data.schema import DataError

    data = _dataset(args)
    read = [_source_folder(args)]  # the folders the pages and questions are read from
    pages = getattr(data, "passages", None)
    if hasattr(pages, "files"):  # an index's pages: its folder and its corpus files' folders
        read += [pages.folder, *(path.parent for path in pages.files)]
    if any(f is not None and args.out.resolve() == f.resolve() for f in read):
        raise DataError(f"--out {args.out} is the corpus being read; choose another folder")
    require_writable(args.out, args.overwrite)  # before any work
    found = run(
        data,
        args.n,
        args.seed,
        data_root=args.data_root,
        cache_dir=args.cache_dir,
        named_share=args.named_share,
        line_items=args.line_items,
    )
    if not found.questions:  # nothing to train on: no folder a later step would fail to read
        why = "; ".join(found.notes) or "no page states a figure for a period"
        raise DataError(f"synthesize wrote no question: {why}")
    out = write_beir(found, args.out, overwrite=args.overwrite)
    report = found.report()
    companies = f"{report['n_companies']} compan{'y' if report['n_companies'] == 1 else 'ies'}"
    print(
        f"{report['n_questions']} questions of {companies} (or documents, where a page names no "
        f"company; {report['n_candidates']} possible), named share {report['named_share']:.2f}, "
        f"written to {out}"
    )
    print("per template: " + ", ".join(f"{k} {v}" for k, v in report["per_template"].items()))
    kinds = report["per_filing_kind"]
    print("per filing kind of the source page: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    typed = ", ".join(f"{k} {v}" for k, v in report["questions_with_negatives"].items())
    print(f"questions with a typed distractor recorded (of {report['n_questions']}): {typed}")
    unit, groups = folder_groups(found)
    if unit != "company":  # a fit's folds keep a group together
        print(
            f"questions grouped by {unit} ({len(set(groups.values()))} groups): too few "
            f"companies for a fit's company folds ({companies})"
        )
    if report["difficulty"]:
        d = report["difficulty"]
        print(
            f"source page ranked first by BM25: {d['bm25_first_share']:.1%}; "
            f"outside the top {d['depth']}: {d['unreachable_share']:.1%}"
        )
    print("sample:")
    for row in report["sample"][:6]:
        print(f"  [{row['template']}] {row['text']}")
    print(json.dumps({"report": str(out / "report.json")}))


def index(args: argparse.Namespace) -> None:
    import json
    import time

    from fincrowd_ltr.api.corpus import index_corpus

    start = time.perf_counter()
    built = index_corpus(args.corpus, args.out, shard_mb=args.shard_mb, stemmer=args.stemmer)
    seconds = time.perf_counter() - start
    print(
        f"{len(built):,} pages in {len(built.names)} shards, {len(built.vocabulary):,} terms, "
        f"indexed in {seconds:.0f} s under {args.out}"
    )
    if args.query:
        for pid, score in zip(*built.search(args.query, 10), strict=True):
            print(f"  {score:8.3f}  {pid}")
    print(json.dumps({"index": str(args.out), "pages": len(built), "seconds": round(seconds, 1)}))


def fit_residual(args: argparse.Namespace) -> None:
    from fincrowd_ltr import settings
    from fincrowd_ltr.api import fit_correction

    fit = settings.from_arguments(args)
    grid = fit.training.grid
    weights = fit.synthetic.select_weights if fit.synthetic.active else ()
    how = "residuals averaged over" if fit.synthetic.mixing == "average" else "chosen among"
    mixing = f", mixing weight {how} {list(weights)}" if weights else ""
    print(
        f"selecting the residual setting per fold among {len(grid)} (alpha x weight decay; "
        f"--no-select: the package defaults alone){mixing}"
        if grid
        else f"training the package defaults (no selection grid){mixing}",
        file=sys.stderr,
    )
    model, report = fit_correction(_dataset(args), args.ranker, fit, run=args.run)
    data = report.to_dict()
    for note in data.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    chosen = data["selection"]
    print(f"setting chosen per fold on {chosen['validated_on']}: {chosen['chosen_per_fold']}")
    print(f"the saved model's setting: {model.summary.setting or 'the package defaults'}")
    print(report.table())
    if args.ablation:
        from fincrowd_ltr.api.fit import feature_ablation

        setting = model.summary.setting
        ablation = feature_ablation(
            _dataset(args),
            args.ranker,
            setting,
            folds=args.folds,
            seed=args.seed,
            first_stage=args.first_stage,
            bank_size=args.bank_size,
            train_mode=args.train_mode,
            val_mode=args.val_mode,
            static_questions=args.static_questions,
            run=args.run,
            objective=args.objective,
            hard_negatives=args.hard_negatives,
            monotone=args.monotone,
            committee=args.committee,
            workers=args.workers or None,
            **_common(args),
        )
        print(f"\nfeature ablation at {setting} (cross-validated delta over base, family removed):")
        for family, row in ablation.items():
            cells = "".join(
                f"  {m}: dR@10 {v['recall@10_delta']:+.3f} dnDCG {v['ndcg@10_delta']:+.3f}"
                for m, v in row.items()
            )
            print(f"  without {family:<14}{cells}")
        report.info["ablation"] = ablation
    _write(args.report, report)
    model.save_pretrained(args.out, onnx=args.onnx)
    s = model.summary
    if model.domains:
        where = (
            f"; domain {sorted(model.domains)} calibrated on fold {s.calibration_fold_in_plan} "
            f"of {s.folds}" + (f" (fold {s.test_fold} held out)" if s.test_fold is not None else "")
        )
    elif model.gate is not None:  # --gate-calibration none (auto, on synthetic questions)
        where = (
            "; its gate calibrated for no domain: fit one on labelled questions of yours the "
            "correction never saw before gating with it, e.g. on half of them (`fincrowd "
            "calibrate --dataset beir --data-root YOUR_CORPUS"
            + (f" --index {args.index}" if args.index is not None else "")
            + f" --checkpoint {args.out} --domain "
            "NAME --fold 0 --folds 2`), then `fincrowd evaluate ... --checkpoint "
            f"{args.out} --domain NAME` reports on the other half"
        )
    else:
        where = ""
    print(f"{_trained(s, fit.synthetic)}{where}; saved to {args.out} "
          f"({report.info['residual_fits']} residual fits)")  # fmt: skip


def _trained(s, synthetic) -> str:
    """What the saved correction trained on: with synthetic questions only, their banks (the
    labelled questions of the training folds only validated it)."""
    if synthetic.active and not synthetic.labelled:
        others = ", ".join(s.extra.get("extra_training", {}))
        return (
            f"correction trained on {s.train_banks} banks, synthetic (no label of this corpus "
            "read)" + (f" and labelled ones of {others}" if others else "") + "; the training "
            f"folds' {len(s.query_ids)} questions only validated it"
        )
    made = (s.extra.get("synthetic") or {}).get("n_banks", 0)
    return (
        f"correction trained on {len(s.query_ids)} questions of the training folds "
        f"({s.train_banks} banks with support" + (", labelled and synthetic" if made else "") + ")"
    )


def calibrate(args: argparse.Namespace) -> None:
    from fincrowd_ltr.api import calibrate_domain
    from fincrowd_ltr.data.schema import DataError
    from fincrowd_ltr.model.correction import GatedCorrection

    checkpoint, first_stage = args.checkpoint, args.first_stage
    if args.qids is not None and args.fold is not None:
        raise DataError("give --fold or --qids, not both", "--qids")
    if args.base_ranker is not None or args.out is not None:
        if args.out is None:
            raise DataError(
                "--base-ranker makes a new checkpoint (one base ranker per checkpoint): "
                "give it a folder with --out",
                "--out",
            )
        if args.out.exists() and any(args.out.iterdir()):
            raise DataError(
                f"--out {args.out} already holds files; calibrate another domain into a "
                "checkpoint with --checkpoint DIR (no --out), or choose an empty folder",
                "--out",
            )
        checkpoint = GatedCorrection.from_pretrained(args.checkpoint)
        if args.base_ranker is not None:
            if first_stage is None and args.base_ranker == "run":
                first_stage = "run"  # your run's own top N, not the training stage's banks
            checkpoint = checkpoint.with_base_ranker(args.base_ranker, first_stage)
    dataset, qids = _dataset(args), None
    if args.qids is not None:
        dataset, qids = _listed_questions(args, dataset)
    model, cal = calibrate_domain(
        checkpoint,
        args.domain,
        dataset,
        qids=qids,
        fold=args.fold,
        first_stage=first_stage,
        run=args.run,
        replace=args.replace,
        folds=args.folds,
        seed=args.seed,
        bank_size=args.bank_size,
        regression_cap=args.regression_cap,
        min_calibration=args.min_calibration,
        delta=args.delta,
        gate_method=args.gate_method,
        **_common(args),
    )
    if args.out is not None:
        model.save_pretrained(args.out)
    print(
        f"domain {args.domain!r}: calibrated on {cal.n_queries} questions (temperature "
        f"{cal.temperature:.2f}, threshold {cal.threshold:.3f}, opens on "
        f"{cal.calibration_open:.3f} of {cal.n_orderable} orderable, mean nDCG@10 gain "
        f"{cal.calibration_gain:+.4f}, regression {cal.calibration_regression:.3f}; "
        f"{_promise(cal)}); stored in {args.out or args.checkpoint}"
    )
    if args.out is not None:
        print(f"{args.out}: base ranker {model.base_ranker!r}, domains {sorted(model.domains)}")


def _listed_questions(args: argparse.Namespace, dataset) -> tuple:
    """The dataset, loaded, and the question ids ``--qids`` lists (one per line; blank lines
    and ``#`` comments skipped); a duplicate or unknown id is an error naming its line, one
    without a judged page in the corpus (it cannot calibrate) is warned with its line."""
    from fincrowd_ltr.api.corpus import load_dataset
    from fincrowd_ltr.data.jsonl import read_lines
    from fincrowd_ltr.data.schema import DataError

    path = args.qids
    data = load_dataset(dataset, args.data_root, args.split)
    lines: dict[str, int] = {}
    for lineno, line in read_lines(path, "a question id list (--qids)"):
        qid = line.strip()
        if not qid or qid.startswith("#"):
            continue
        if qid in lines:
            raise DataError(f"{path}:{lineno}: question {qid!r} again (first on line {lines[qid]})")
        if qid not in data.queries:
            raise DataError(
                f"{path}:{lineno}: {qid!r} is not a question of {data.name} (split {args.split})"
            )
        lines[qid] = lineno
    if not lines:
        raise DataError(f"{path}: lists no question id")
    if uncovered := [(n, q) for q, n in lines.items() if not data.covered(q)]:
        warnings.warn(
            f"{path}: {len(uncovered)} listed questions have no judged page in the corpus "
            f"(first: line {uncovered[0][0]}, {uncovered[0][1]!r}): they cannot calibrate and "
            "are left out",
            stacklevel=2,
        )
    return data, list(lines)


def _promise(cal) -> str:
    """What a calibration promises, in words (its method's own guarantee)."""
    bound = f"{cal.risk_bound:.3f}" if cal.risk_bound is not None else "n/a"
    if not cal.can_open:
        from fincrowd_ltr.model.calibration import uncertifiable

        few = cal.method == "ltt" and cal.n_orderable is not None and cal.delta is not None
        why = (
            "too few orderable questions to certify an opening"
            if few and uncertifiable(cal.n_orderable, cal.regression_cap, cal.delta)
            else "no threshold opened with a positive mean gain within the cap"
        )
        return (
            f"{cal.method}: the gate never opens ({why} at cap {cal.regression_cap}), so it "
            "keeps your base order"
        )
    if cal.method == "ltt":
        chance = f">= {1 - cal.delta:.2f}" if cal.delta is not None else "1 - delta"
        return (
            f"ltt: regression among orderable questions <= {cal.regression_cap} with probability "
            f"{chance} (upper bound at the chosen threshold {bound})"
        )
    if cal.method == "crc":
        return f"crc: expected regression among orderable questions <= {cal.regression_cap}"
    return (
        f"empirical: regression on these calibration questions <= {cal.regression_cap}, no "
        f"promise for new ones (upper bound {bound})"
    )


def diagnose(args: argparse.Namespace) -> dict:
    from fincrowd_ltr.api import diagnose as run

    report = run(
        _dataset(args),
        args.ranker,
        out_dir=args.out,
        pool_depth=args.pool_depth,
        pool_sizes=_counts(args.pool_sizes, "--pool-sizes"),
        similarity=_similarity(args),
        caliper=args.caliper,
        run=args.run,
        first_stage=args.first_stage,
        **_common(args),
    )
    print(report)
    return report


def _counts(text: str, flag: str) -> tuple[int, ...]:
    """Comma-separated whole numbers (``10,30,60``); anything else is an error naming ``flag``."""
    from fincrowd_ltr.data.schema import DataError

    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise DataError(f"{flag} takes whole numbers separated by commas (e.g. 10,30,60); got "
                        f"{text!r}", flag) from None  # fmt: skip


def export(args: argparse.Namespace) -> None:
    from fincrowd_ltr.data.schema import DataError
    from fincrowd_ltr.model.correction import GatedCorrection

    if (args.checkpoint is None) == (args.from_lightning is None):
        raise DataError("give exactly one of --checkpoint DIR or --from-lightning CKPT")
    if args.from_lightning is not None:
        from fincrowd_ltr.training.export import from_lightning

        model = from_lightning(args.from_lightning, ranker=args.ranker)
    else:
        model = GatedCorrection.from_pretrained(
            args.checkpoint, base_ranker=args.ranker, trust_unverified=args.trust_unverified
        )
    model.save_pretrained(args.out, onnx=args.onnx)
    print(
        f"exported (base ranker {model.base_ranker!r}, gate domains: "
        f"{', '.join(sorted(model.domains)) or 'none'}) to {args.out}"
    )


def serve(args: argparse.Namespace) -> None:
    from fincrowd_ltr.model.correction import GatedCorrection
    from fincrowd_ltr.serving.http import Limits
    from fincrowd_ltr.serving.http import serve as run

    model = GatedCorrection.from_pretrained(
        args.checkpoint,
        base_ranker=args.ranker,
        runtime=args.runtime,
        trust_unverified=args.trust_unverified,
    )
    from fincrowd_ltr.engine import worker_count

    limits = Limits(args.max_candidates, args.max_text_chars, args.max_query_chars)
    workers = args.workers or worker_count()
    print(
        f"serving {args.checkpoint} on http://{args.host}:{args.port} with {workers} worker "
        f"process(es) (limits {limits})"
    )
    spec = {
        "checkpoint": str(args.checkpoint),
        "ranker": args.ranker,
        "runtime": args.runtime,
        "trust_unverified": args.trust_unverified,
    }
    if workers > 1:
        model = None  # loaded above to refuse a bad checkpoint at once; each worker loads its own
    run(model, args.host, args.port, limits, workers=workers, spec=spec, factory=WORKER_APP)


def banks(args: argparse.Namespace) -> None:
    from fincrowd_ltr.api import build_banks

    bankset = build_banks(
        _dataset(args),
        args.ranker,
        first_stage=args.first_stage,
        mode=args.bank_mode,
        size=args.bank_size,
        run=args.run,
        dense_pooling=args.dense_pooling,
        dense_window=args.dense_window,
        stemmer=args.stemmer,
        **_reader(args),
        **_common(args),
    )
    for note in bankset.notes:
        print(note)
    if args.out:
        bankset.save(args.out)
        print(f"{len(bankset.banks)} banks written to {args.out}")


def nested(args: argparse.Namespace) -> dict:
    from fincrowd_ltr import settings
    from fincrowd_ltr.api.nested import nested_cross_validation, seed_spread
    from fincrowd_ltr.retrieval.first_stage import FIRST_STAGES

    variants = FIRST_STAGES if args.variants == "all" else tuple(args.variants.split(","))
    data, reports = _dataset(args), []
    for seed in [int(x) for x in args.seeds.split(",") if x]:
        # the fold plan's and synthesis's seed; each outer fold sets its own first stage
        args.seed, args.first_stage = seed, "auto"
        fit = settings.from_arguments(args)
        report = nested_cross_validation(data, args.ranker, fit, variants=variants)
        print(report)
        reports.append(report)
    out = {"reports": reports, "spread": seed_spread(reports)}
    print(f"gated R@10 over fold seeds {out['spread']['seeds']}: {out['spread']['values']} "
          f"(spread {out['spread']['spread']:.3f})")  # fmt: skip
    _write(args.report, out)
    return out


def first_stage(args: argparse.Namespace) -> dict:
    from fincrowd_ltr.api import first_stage_ablation

    report = first_stage_ablation(
        _dataset(args),
        args.variants,
        depth=args.depth,
        folds=args.folds,
        seed=args.seed,
        stemmer=args.stemmer,
        **_common(args),
    )
    print(report)
    _write(args.report, report)
    return report


def cascade(args: argparse.Namespace) -> dict:
    from fincrowd_ltr.api import cascade as run
    from fincrowd_ltr.data.schema import DataError

    scores = {}
    for item in args.scores or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise DataError(f"--scores {item!r}: write NAME=FILE (a TREC run)")
        scores[name] = Path(path)
    report = run(
        _dataset(args),
        args.stage2,
        n=args.n,
        k=args.k,
        gated=args.gated,
        correction_ranker=args.correction_ranker,
        scores=scores,
        first_stage=args.first_stage,
        train_mode=args.train_mode,
        folds=args.folds,
        seed=args.seed,
        calibration=_calibration(args),
        **_common(args),
    )
    print(report)
    _write(args.report, report)
    return report


def train_cross_encoder(args: argparse.Namespace) -> None:
    from fincrowd_ltr.api import train_cross_encoder as run
    from fincrowd_ltr.settings import CrossEncoderSettings

    fields = [f.name for f in dataclasses.fields(CrossEncoderSettings)]
    chosen = CrossEncoderSettings(**{f: getattr(args, f) for f in fields})
    report = run(
        _dataset(args), chosen, run_out=args.run_out, out=args.out, overwrite=args.overwrite,
        **_common(args),
    )  # fmt: skip
    if args.run_out:
        for fold in report["folds"]:
            print(
                f"fold {fold['test_fold']}: a model trained on {fold['train_groups']} groups "
                f"scored its {fold['test_questions']} questions"
            )
        print(f"out-of-fold scores written to {args.run_out}")
    if args.out:
        print(
            f"cross-encoder adapter (trained on {report['final_trained_groups']} of "
            f"{report['final_groups']} groups, --max-groups {args.max_groups}) saved to {args.out}"
        )
    _write(args.report, report)


def pack(args: argparse.Namespace) -> dict:
    from fincrowd_ltr.api import pack as run
    from fincrowd_ltr.data.schema import DataError
    from fincrowd_ltr.defaults import DEFAULT_BANK_SIZE

    banks = {"--ranker": args.ranker, "--first-stage": args.first_stage,
             "--bank-size": args.bank_size, "--run": args.run}  # fmt: skip
    if args.orders is None:
        banks = {
            "first_stage": "auto" if args.first_stage is None else args.first_stage,
            "size": DEFAULT_BANK_SIZE if args.bank_size is None else args.bank_size,
            "run": args.run,
        }
    elif given := [flag for flag, value in banks.items() if value is not None]:
        raise DataError(
            f"--orders packs the report's orders as they were ranked: {', '.join(given)} would "
            "not be read (they make banks); give them without --orders",
            given[0],
        )
    else:
        banks = {}
    report = run(
        _dataset(args),
        args.out,
        ranker=args.ranker,
        orders=args.orders,
        budget=args.budget,
        depth=args.depth,
        tokenizer=args.tokenizer,
        **banks,
        **_common(args),
    )
    print(report)
    print(
        f"report, summary and packed contexts ({report['contexts_system']}, budget, score "
        f"order) in {args.out}/"
    )
    return report


def audit(args: argparse.Namespace) -> None:
    from fincrowd_ltr.fields.audit import run_audit

    run_audit(args.labels, args.data_root)


def demo(args: argparse.Namespace) -> None:
    from fincrowd_ltr.api.demo import load_demo_config, run_demo

    run_demo(load_demo_config(args.config), args.data_root, args.cache_dir, args.first_stage)
