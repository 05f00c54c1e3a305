"""The documented journey on one corpus of a user's own, from the command line: fit with a
held-out fold, evaluate on it; LightningCLI output that serves; a terminated fit never looks
finished."""

import json
import signal
import subprocess
import sys
import time

from fincrowd_ltr.cli import main
from fincrowd_ltr.data.splits import FoldPlan
from fincrowd_ltr.model.correction import GatedCorrection
from tests.conftest import write_beir


def test_fit_with_a_held_out_fold_then_evaluate_on_it(tmp_path):
    data = write_beir(tmp_path / "corpus")
    common = [
        "--dataset=beir",
        f"--data-root={tmp_path / 'corpus'}",
        f"--cache-dir={tmp_path / 'c'}",
    ]
    ckpt, out = tmp_path / "ckpt", tmp_path / "report.json"
    fit = ["fit-residual", *common, "--ranker=bm25", "--no-select", "--test-fold=0"]
    assert main([*fit, "--min-calibration=1", f"--out={ckpt}", "--onnx"]) == 0
    assert (ckpt / "residual.onnx").is_file() and (ckpt / "manifest.json").is_file()
    evaluate = ["evaluate", *common, "--ranker=bm25", f"--checkpoint={ckpt}", "--domain=beir"]
    assert main([*evaluate, f"--out={out}"]) == 0
    report = json.loads(out.read_text())
    held = set(FoldPlan.by_group(data, 5, 0).folds[0])
    assert set(report["systems"]["gated:bm25"]["per_query"]) == held


def test_lightning_cli_writes_a_servable_model(tmp_path):
    from fincrowd_ltr.training.cli import run_cli

    write_beir(tmp_path / "corpus", companies=12)
    run_cli(
        [
            "fit",
            "--data.dataset=beir",
            f"--data.source.data_root={tmp_path / 'corpus'}",
            "--data.ranker=bm25",
            "--data.banks.bank_size=6",
            "--data.folds.folds=3",
            f"--data.source.cache_dir={tmp_path / 'c'}",
            "--trainer.max_epochs=3",
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            f"--trainer.default_root_dir={tmp_path / 'run'}",
        ]
    )
    model = GatedCorrection.from_pretrained(tmp_path / "run" / "model")
    assert model.base_ranker == "bm25" and model.summary.dataset == "beir"
    assert (model.summary.folds, model.summary.bank_mode) == (3, "retrieved")
    assert model.summary.query_fingerprints  # the leakage checks have what they need
    # the checkpoint exported on its own records the same questions (evaluate leaves them out)
    from fincrowd_ltr.cli import main

    ckpt = next((tmp_path / "run").rglob("*.ckpt"))
    out = ["export", f"--from-lightning={ckpt}", f"--out={tmp_path / 'exported'}"]
    assert main([*out, "--ranker=dense"]) == 2  # another base ranker is refused, not ignored
    assert main(out) == 0
    exported = GatedCorrection.from_pretrained(tmp_path / "exported")
    assert exported.summary.query_ids == model.summary.query_ids
    assert exported.extractor.segment_names == model.extractor.segment_names
    assert exported.summary.bank_size == model.summary.bank_size == 6


def test_terminated_fit_exits_non_zero_and_writes_no_checkpoint(tmp_path):
    write_beir(tmp_path / "corpus", companies=40)
    ckpt = tmp_path / "ckpt"
    cmd = [
        sys.executable,
        "-m",
        "fincrowd_ltr.cli",
        "fit-residual",
        "--dataset=beir",
        f"--data-root={tmp_path / 'corpus'}",
        f"--cache-dir={tmp_path / 'c'}",
        "--ranker=bm25",
        "--min-calibration=1",
        f"--out={ckpt}",
    ]  # the full grid: long enough to be stopped mid-way
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((tmp_path / "c").glob("features/*.npz")):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "terminated" in err or "stopped" in err
    assert not (ckpt / "config.json").exists()
    assert not list(tmp_path.rglob("*.tmp*"))  # nothing half-written kept


def test_evaluate_run_flag_adds_base_run(tmp_path):
    """`evaluate --run FILE` reports the run as base:run beside the named rankers (the flag's
    contract since 0.1.0)."""
    data = write_beir(tmp_path / "corpus", companies=6)
    run = tmp_path / "mine.trec"
    with open(run, "w") as fh:
        for qid in data.queries:
            for rank, pid in enumerate(list(data.passages)[:5], start=1):
                fh.write(f"{qid} Q0 {pid} {rank} {10 - rank} mine\n")
    out = tmp_path / "report.json"
    common = [
        "--dataset=beir",
        f"--data-root={tmp_path / 'corpus'}",
        f"--cache-dir={tmp_path / 'c'}",
    ]
    assert main(["evaluate", *common, "--ranker=bm25", f"--run={run}", f"--out={out}"]) == 0
    report = json.loads(out.read_text())
    assert {"base:bm25", "base:run"} <= set(report["systems"])
    assert any("did not score" in n for n in report["notes"])


def test_fit_residual_ablation_flag_reports_each_feature_family(tmp_path):
    write_beir(tmp_path / "corpus", companies=16)
    report = tmp_path / "cv.json"
    common = [
        "--dataset=beir",
        f"--data-root={tmp_path / 'corpus'}",
        f"--cache-dir={tmp_path / 'c'}",
    ]
    # gated: the final setting carries its refit's epoch count, which the ablation's fits
    # (validated, no gate) must leave out
    args = ["fit-residual", *common, "--ranker=bm25", "--no-select", "--folds=4"]
    args.append("--min-calibration=1")
    assert main([*args, "--ablation", f"--report={report}", f"--out={tmp_path / 'm'}"]) == 0
    ablation = json.loads(report.read_text())["ablation"]
    assert {"none", "period", "compatibility", "lexical", "all_periods"} <= set(ablation)
    full = ablation["none"]["retrieved"]["ndcg@10_delta"]
    # the toy questions differ only by year: without any period evidence (the field, the years
    # printed on the page, the filing's fit) the residual loses it
    assert ablation["all_periods"]["retrieved"]["ndcg@10_delta"] < full
