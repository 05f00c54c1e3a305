"""Score normalisation on hand-made scores, the cascade's stage sizes and order, and its
cross-validated choice on a small corpus."""

import json

import numpy as np
import pytest

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.evaluation.cascade import FIRST, SELECTED, crossvalidate_cascade, top_k_bank
from fincrowd_ltr.retrieval.banks import CandidateBank
from fincrowd_ltr.retrieval.build import BankSpec, build_banks
from fincrowd_ltr.retrieval.cascade import CascadeSettings, cascade_order, settings_grid
from fincrowd_ltr.retrieval.fusion import normalise, weighted_fusion


def test_each_normalisation_on_hand_made_scores():
    s = np.array([3.0, 1.0, 2.0, 1.0])
    np.testing.assert_allclose(normalise(s, "minmax"), [1.0, 0.0, 0.5, 0.0])
    sd = np.std(s)
    np.testing.assert_allclose(normalise(s, "zscore"), (s - 1.75) / sd)
    # ranks 1, 3, 2, 4 (ties in input order) -> 1 - (rank - 1) / 3
    np.testing.assert_allclose(normalise(s, "rank"), [1.0, 1 / 3, 2 / 3, 0.0])
    flat = np.array([2.0, 2.0])
    assert list(normalise(flat, "minmax")) == [0.5, 0.5]
    assert list(normalise(flat, "zscore")) == [0.0, 0.0]
    assert list(normalise(np.array([5.0]), "rank")) == [1.0]
    for method in ("minmax", "zscore", "rank"):
        assert normalise(s, method).dtype == np.float64
    with pytest.raises(ValueError, match="unknown normalisation"):
        normalise(s, "softmax")


def test_weighted_fusion_mixes_normalised_scores():
    first, second = np.array([10.0, 0.0]), np.array([0.0, 1.0])
    np.testing.assert_allclose(weighted_fusion(first, second, 1.0, "minmax"), [0.0, 1.0])
    np.testing.assert_allclose(weighted_fusion(first, second, 0.0, "minmax"), [1.0, 0.0])
    np.testing.assert_allclose(weighted_fusion(first, second, 0.25, "minmax"), [0.75, 0.25])
    with pytest.raises(ValueError, match="weight"):
        weighted_fusion(first, second, 1.5, "minmax")


def test_cascade_stage_sizes_and_order():
    first = np.arange(10, 0, -1, dtype=float)  # first-stage order 0..9
    second = np.array([0, 0, 0, 0, 0, 0, 0, 0, 5, 9], dtype=float)
    settings = CascadeSettings(n=8, k=3, stage2="x")
    order, fused = cascade_order(first, second, settings)
    assert len(order) == 8 and len(fused) == 8  # stage 1 passes on n candidates
    assert list(order[:3]) == [0, 1, 2]  # stage-2 ties keep first-stage order
    bank = CandidateBank("q", [f"p{i}" for i in range(10)], first, {"x": second})
    kept, rest = top_k_bank(bank, CascadeSettings(n=10, k=3, stage2="x"))
    assert kept.pids == ["p9", "p8", "p0"] and len(rest) == 7  # stage 2 keeps k
    assert set(kept.pids).isdisjoint(rest)
    with pytest.raises(ValueError, match="k <= n"):
        CascadeSettings(n=5, k=6)
    grid = settings_grid(["a", "b"], n=10, k=3)
    assert len(grid) == 2 * (1 + 3 * 3) and len({s.name for s in grid}) == len(grid)


def _corpus(root):
    corpus, queries, qrels = [], [], []
    for c in range(6):
        company = f"Company{c}"
        for year in (2019, 2020, 2021):
            corpus.append(
                {
                    "_id": f"{company}-{year}",
                    "text": f"{company} annual report {year} revenue and operating income "
                    f"{'segment ' * (year - 2018)}",
                    "metadata": {"company": company, "period": year},
                }
            )
        queries.append({"_id": f"q{c}", "text": f"What was {company} revenue in 2020?"})
        qrels.append(f"q{c}\t{company}-2020\t1\n")
    root.mkdir()
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels.tsv").write_text("".join(qrels))
    return load_dataset("beir", str(root), "all")


def test_crossvalidated_cascade_reports_first_stage_fixed_and_selected(tmp_path):
    data = _corpus(tmp_path / "c")
    banks = build_banks(data, "all", ["bm25"], BankSpec(size=6), None, progress=False)
    # stage-2 "rankers" that know the answer (oracle) or its opposite (anti), over a first stage
    # that ranks the gold last: the oracle must win the choice on every fold
    oracle = {
        q: np.array([float(p in data.qrels[q]) for p in b.pids]) for q, b in banks.banks.items()
    }
    anti = {q: -o for q, o in oracle.items()}
    for q, bank in banks.banks.items():
        bank.first_stage = anti[q].copy()
    report, chosen = crossvalidate_cascade(
        data,
        banks,
        settings_grid(["anti", "oracle"], n=6, k=3),
        folds=3,
        extra={"oracle": oracle, "anti": anti},
        report_fixed=[CascadeSettings(6, 3, "oracle")],
    )
    assert set(report["systems"]) == {FIRST, "cascade:oracle", SELECTED}
    assert report["systems"]["cascade:oracle"]["ndcg@10"] == 1.0
    assert all("oracle" in name for name in report["chosen_per_fold"])
    assert all(s.stage2 == "oracle" for s in chosen.values()) and len(chosen) == 6


def test_evaluate_reports_fixed_cascades_under_their_names(tmp_path, capsys):
    from fincrowd_ltr.cli import main

    data = _corpus(tmp_path / "c")
    out = tmp_path / "report.json"
    args = [
        "evaluate",
        "--dataset",
        "beir",
        "--data-root",
        str(tmp_path / "c"),
        "--ranker",
        "bm25",
        "--first-stage",
        "bm25",
        "--bank-size",
        "6",
        "--cascade",
        "bm25",
        "--cascade",
        "bm25:rank:0.5",
        "--cascade-k",
        "3",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    systems = json.loads(out.read_text())["systems"]
    assert {"cascade:bm25", "cascade:bm25+first(rank,0.5)"} <= set(systems)
    assert systems["cascade:bm25"]["n"] == len(data.queries)
    assert main([*args[:-2], "--cascade", "bm25:softmax:0.5"]) == 2  # a clear error, not a crash
    # a twelfth walk: flags that changed nothing were accepted
    at = args.index("--cascade")
    plain = args[:at] + args[at + 6 :]  # the two cascades and their k left out
    assert "--cascade" not in plain and "--cascade-k" not in plain and plain[-2] == "--out"
    for extra, said in (
        (["--cascade-k", "3"], "--cascade-k sets the cascades' k: give a --cascade"),
        (["--cascade", "bm25:zscore"], "give the weight too"),
        (["--cross-encoder", str(tmp_path)], "read by the 'cross-encoder' ranker"),
        (["--cascade", "bm25", "--cascade-k", "0"], "k"),  # 0 was read as the default 20
        (["--cascade", "dense"], "stage 2 reads a ranker evaluated here"),  # failed at the end
    ):
        assert main([*plain, *extra]) == 2
        assert said in capsys.readouterr().err


@pytest.mark.parametrize("train_mode", ["retrieved", "injected"])
def test_gated_cascade_on_held_out_folds(tmp_path, capsys, train_mode):
    from fincrowd_ltr.cli import main
    from tests.conftest import write_corpus

    write_corpus(tmp_path / "c")
    report_path = tmp_path / "cascade.json"
    args = [
        "cascade",
        "--dataset=beir",
        f"--data-root={tmp_path / 'c'}",
        "--first-stage=bm25",
        "--stage2=bm25",
        "--n=12",
        "--k=4",
        "--gated",
        "--correction-ranker=bm25",
        "--folds=4",
        "--min-calibration=2",
        f"--train-mode={train_mode}",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--report={report_path}",
    ]
    assert main(args) == 0
    report = json.loads(report_path.read_text())
    assert report["correction_train_mode"] == train_mode  # the residual's training banks
    assert f"residual trained on {train_mode} banks" in capsys.readouterr().out
    gated = report["gated"]["selected"]
    assert len(gated["folds"]) == 4 and gated["n_queries"] == 12
    systems = gated["systems"]
    assert set(systems) == {SELECTED, f"{SELECTED}+residual", f"{SELECTED}+gated"}
    for stats in systems.values():
        assert 0.0 <= stats["recall@10"] <= 1.0 and stats["n"] == 12
    # per question the gate returns either the cascade's order or the corrected one, never a third
    base, residual = systems[SELECTED]["per_query"], systems[f"{SELECTED}+residual"]["per_query"]
    for qid, row in systems[f"{SELECTED}+gated"]["per_query"].items():
        assert row["ndcg@10"] in (base[qid]["ndcg@10"], residual[qid]["ndcg@10"])
    if gated["gate_open_share"] == 0.0:
        assert systems[f"{SELECTED}+gated"]["per_query"] == base
    assert 0.0 <= gated["gate_open_share"] <= 1.0


def test_fold_corrections_train_on_the_named_banks(tmp_path, monkeypatch):
    import fincrowd_ltr.api.fit as fit
    from fincrowd_ltr.api.cascade import correction_folds, train_corrections
    from fincrowd_ltr.data.schema import DataError
    from fincrowd_ltr.data.splits import FoldPlan
    from fincrowd_ltr.settings import BankSettings
    from tests.conftest import write_corpus

    write_corpus(tmp_path / "c")
    data = load_dataset("beir", tmp_path / "c")
    plan = FoldPlan.by_group(data, 4, 0)
    with pytest.raises(DataError, match="train_mode must be one of .*; got 'gold'"):
        correction_folds(data, "bm25", plan, BankSettings(first_stage="bm25", train_mode="gold"))
    trained_on = []  # the examples every residual fit trains on

    def recording(self, folds, _train=fit._Folds.train):
        found = _train(self, folds)
        trained_on.extend(found)
        return found

    monkeypatch.setattr(fit._Folds, "train", recording)
    for train_mode in ("retrieved", "injected"):
        banks = BankSettings(
            first_stage="bm25+query", bank_size=8, train_mode=train_mode, val_mode="injected"
        )
        prepared = correction_folds(data, "bm25", plan, banks)
        ex = prepared.folds
        assert (ex.train_mode, ex.val_mode) == (train_mode, "injected")
        by_mode = {m: set(map(id, found.values())) for m, found in ex.examples.items()}
        assert all(len(e.pids) <= 8 for found in ex.examples.values() for e in found.values())
        trained_on.clear()
        corrections = train_corrections(prepared)
        assert trained_on and {id(e) for e in trained_on} <= by_mode[train_mode]
        summaries = [m.summary for m in corrections.values()]
        assert {(s.bank_mode, s.val_bank_mode) for s in summaries} == {(train_mode, "injected")}
        assert {(s.first_stage, s.bank_size) for s in summaries} == {("bm25+query", 8)}


def test_a_gated_cascade_checks_its_runs_and_its_correction_before_the_cascade(
    tmp_path, monkeypatch
):
    import importlib

    import fincrowd_ltr as fc
    import fincrowd_ltr.api.fit as fit
    from fincrowd_ltr.data.schema import DataError
    from tests.conftest import write_corpus

    # the module (``fincrowd_ltr.api.cascade`` the attribute is the function)
    api_cascade = importlib.import_module("fincrowd_ltr.api.cascade")

    def not_reached(*args, **kwargs):
        raise AssertionError("the cascade ran before its inputs were checked")

    monkeypatch.setattr(api_cascade, "crossvalidate_cascade", not_reached)
    write_corpus(tmp_path / "c")
    run = dict(data_root=tmp_path / "c", first_stage="bm25", folds=4, cache_dir=None, n=12, k=4)
    with pytest.raises(DataError, match="missing.trec"):  # a bad run: before any training
        monkeypatch.setattr(api_cascade, "correction_folds", not_reached)
        api_cascade.cascade(
            "beir", "bm25", gated=True, scores={"mine": tmp_path / "missing.trec"}, **run
        )
    from fincrowd_ltr.settings import CalibrationSettings, FitSettings, SyntheticSettings

    monkeypatch.setattr(api_cascade, "correction_folds", not_reached)
    unread = (  # settings the cascade does not read: refused, not silently dropped
        ({"calibration": CalibrationSettings(gate_labels="decisive")}, "calibration.gate_labels"),
        ({"settings": FitSettings(synthetic=SyntheticSettings(n=50))}, "synthetic.n=50"),
    )
    for given, named in unread:
        with pytest.raises(DataError, match=named.replace(".", r"\.")):
            api_cascade.cascade("beir", "bm25", gated=True, **given, **run)
    # a twelfth walk: these failed with tracebacks deep in the cascade, or were ignored
    shape = {k: v for k, v in run.items() if k not in ("n", "k", "folds")}
    for given, said in (
        ({"n": 12, "k": 13, "folds": 4}, r"k \(--k\) must be a whole number in 1..n \(12\)"),
        ({"n": 12, "k": 0, "folds": 4}, "k .* must be"),
        ({"n": 12, "k": 4, "folds": 1}, r"folds \(--folds\) must be >= 2"),
        ({"n": 12, "k": 4, "folds": 2, "gated": True}, r"folds \(--folds\) must be >= 3"),
        ({"n": 12, "k": 4, "folds": 4, "stage2": ""}, "names no ranker"),
        ({"n": 12, "k": 4, "folds": 4, "scores": {"bm25": {}}}, r"scores \['bm25'\]: a run named"),
        ({"n": 12, "k": 4, "folds": 4, "regression_cap": 0.1}, r"regression_cap \(--regressi"),
        ({"n": 12, "k": 4, "folds": 4, "train_mode": "injected"}, r"train_mode \(--train-m"),
        ({"n": 12, "k": 4, "folds": 4, "correction_ranker": "bm25"}, "correction_ranker .*set the"),
        ({"n": 12, "k": 4, "folds": 4, "scores": {"selected": {}}}, r"scores \['selected'\]"),
    ):  # fmt: skip
        given = {"stage2": "bm25", **given}
        with pytest.raises(DataError, match=said):
            api_cascade.cascade("beir", given.pop("stage2"), **given, **shape)
    monkeypatch.undo()
    # a run that scores part of the banks is said (evaluate --run says it too)
    data = fc.load_dataset("beir", tmp_path / "c")
    part = {q: {p: 1.0 for p in list(data.passages)[:2]} for q in data.queries}
    report = api_cascade.cascade("beir", "bm25", scores={"mine": part}, **run)
    assert any("scores 'mine': did not score" in note for note in report["notes"])
    assert "note: scores 'mine'" in report.table()
    monkeypatch.setattr(api_cascade, "crossvalidate_cascade", not_reached)
    monkeypatch.setattr(fit._Folds, "train", lambda self, folds: [])  # no relevant candidate
    for train_mode, advice in (("retrieved", True), ("injected", False)):
        with pytest.raises(DataError, match=r"gated cascade: no training bank of folds \[") as err:
            api_cascade.cascade(
                "beir", "bm25", gated=True, correction_ranker="bm25", train_mode=train_mode, **run
            )
        assert err.value.field == "train_mode" and "--bank-size" not in str(err.value)
        assert ("--train-mode injected" in str(err.value)) == advice
