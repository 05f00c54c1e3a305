"""The public Python API on a user's own in-memory corpus: train, calibrate, save, reload and
rerank in a few lines; a held-out fold; the user's own ranker as base ranker and first stage."""

import json
import re

import numpy as np
import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.model.calibration import GateCalibrationWarning
from tests.conftest import user_corpus


def test_readme_example_trains_calibrates_saves_reloads_and_reranks(tmp_path):
    data = user_corpus()
    model, report = fc.fit_correction(data, "bm25", folds=4, min_calibration=2, cache_dir=None)
    model.save_pretrained(tmp_path / "model")
    model = fc.GatedCorrection.from_pretrained(tmp_path / "model")
    candidates = [
        {
            "id": f"acme-{year}",
            "text": f"Acme revenue for fiscal {year} rose strongly",
            "metadata": {"company": "Acme", "period": year},
        }
        for year in (2021, 2019, 2020, 2018, 2017)
    ]
    result = model.rerank(
        "What was Acme revenue in FY2020?", candidates, [2.0, 1.95, 1.9, 1.0, 0.5]
    )
    assert result.ranking[0] == "acme-2020"  # the always-on correction lifts the asked year
    assert result.gate["mode"] == "always-on"
    assert "mycorpus" in model.domains  # the final model calibrated the dataset's domain
    assert report.system("retrieved", "residual:bm25").delta["ndcg@10"] > 0
    saved = report.to_dict()  # the JSON contract of `fit-residual --report`
    assert saved["modes"]["retrieved"]["residual:bm25"]["delta"]["ndcg@10"] > 0
    assert set(saved["gated"]["modes"]["retrieved"]["rankings"]) == {
        "base:bm25",
        "residual:bm25",
        "gated:bm25",
    }
    assert report.info["residual_fits"] > 0


def test_residual_fits_are_never_trained_twice(fit_log):
    prefetched = fit_log.prefetched
    data = user_corpus()
    _, report = fc.fit_correction(
        data, "bm25", folds=4, min_calibration=2, cache_dir=None, grid=None
    )
    # without a selection grid, per round: 2 selection fits (each training fold validating a
    # fit on the other), the refit and 2 cross-fitted inner residuals; the final model: 3
    # selection fits, the refit and 3 inner ones: 4 x 5 + 7 = 27 at most (refits of the same
    # folds for the same epochs are one fit); training any of them again would add to the count
    assert set(fit_log.asked) == prefetched
    assert report.info["residual_fits"] == len(prefetched) <= 4 * 5 + 7
    # the selection fits (8 + 3), the final refit, the rounds' two-fold refits (4) and at least
    # 4 one-fold inner refits are all different fits (the old procedure trained 16)
    assert len(prefetched) >= 20


def test_a_grid_cannot_fix_the_epochs():
    with pytest.raises(fc.DataError, match="epochs") as error:
        fc.fit_correction(user_corpus(), "bm25", folds=4, cache_dir=None, grid=({"epochs": 3},))
    assert error.value.field == "grid"


def test_held_out_fold_is_left_out_of_training_and_reported(tmp_path):
    data = user_corpus(companies=30)
    model, _ = fc.fit_correction(
        data, "bm25", folds=5, test_fold=2, min_calibration=1, cache_dir=None
    )
    plan = fc.FoldPlan.by_group(data, 5, 0)
    held = set(plan.folds[2])
    assert held and not held & set(model.summary.query_ids)
    cal = model.domains["mycorpus"]
    assert not held & set(cal.query_ids)
    assert not set(cal.query_ids) & set(model.summary.query_ids)  # calibration never trained
    report = fc.evaluate(data, "bm25", checkpoint=model, domain="mycorpus", cache_dir=None)
    assert set(report["systems"]["gated:bm25"]["per_query"]) == held
    assert set(report["rankings"]) == set(report["systems"])  # every row's orders are kept
    for name, rankings in report["rankings"].items():
        assert set(rankings) == set(report["systems"][name]["per_query"]), name
    assert report["excluded"]["n_excluded"] > 0  # said once, in the report's own line
    assert "correction rows leave out" in str(report) and not any(
        "left out of the correction rows" in n for n in report["notes"]
    )
    # 90 passages in banks of 100: a recall at the bank's depth is 1 whatever the first stage did
    assert any("the corpus holds 90 passages, no more than a bank's 100" in n
               for n in report["notes"])  # fmt: skip
    systems = fc.EvaluationSettings(checkpoint=model, domain="mycorpus")
    again = fc.evaluate(data, "bm25", systems=systems, cache_dir=None)
    assert json.dumps(again, sort_keys=True) == json.dumps(report, sort_keys=True)  # NaN != NaN
    with pytest.raises(TypeError, match="domian"):
        fc.evaluate(data, "bm25", checkpoint=model, domian="mycorpus", cache_dir=None)
    # another ranker named: the correction's rows come with their own base row, and a note
    named = ["first-stage"]
    other = fc.evaluate(data, named, checkpoint=model, domain="mycorpus", cache_dir=None)
    assert named == ["first-stage"]  # the caller's list is left as given
    assert {"base:first-stage", "base:bm25", "gated:bm25"} <= set(other["systems"])
    assert any("corrects base ranker 'bm25', not one of those named (first-stage)" in n
               for n in other["notes"])  # fmt: skip
    assert other["rankings"]["gated:bm25"] == report["rankings"]["gated:bm25"]


def test_training_question_under_a_new_id_is_still_excluded():
    data = user_corpus()
    model, _ = fc.fit_correction(data, "bm25", folds=4, min_calibration=2, cache_dir=None)
    renamed = fc.Dataset(
        "beir",
        {f"new-{q}": fc.Query(f"new-{q}", v.text, v.group) for q, v in data.queries.items()},
        data.passages,
        {f"new-{q}": r for q, r in data.qrels.items()},
    )
    assert model.seen(renamed) == {f"new-{q}" for q in model.summary.query_ids}
    # the corpus re-extracted after training (every gold text changed): still the same
    # questions, by id and text (a sixth walk lengthened one passage and a training question
    # joined the held-out rows)
    edited = {p: fc.Passage(p, v.text + " (re-extracted)", company=v.company, period=v.period)
              for p, v in data.passages.items()}  # fmt: skip
    again = fc.Dataset("beir", data.queries, edited, data.qrels)
    assert not {again.question_fingerprint(q) for q in again.queries} & set(
        model.summary.query_fingerprints
    )
    assert model.seen(again) == set(model.summary.query_ids)


def test_own_ranker_as_base_and_as_first_stage():
    data = user_corpus()
    rng = np.random.default_rng(0)
    run = {q: {p: float(rng.normal()) for p in list(data.passages)[:30]} for q in data.queries}
    banks = fc.build_banks(data, ["bm25", "run"], run=run, size=10, cache_dir=None)
    assert any("did not score" in n for n in banks.notes)  # counted, never silent
    said = next(n for n in banks.notes if "did not score" in n)  # the mean of the banks named
    missed, where = (int(w) for w in re.findall(r"score (\d+) bank candidates in (\d+)", said)[0])
    assert f"mean {missed / where:.1f} in each of those" in said
    assert not any("no score of your run" in n for n in banks.notes)
    # a question the run never scored keeps the first stage's order: named (a sixth walk)
    first = sorted(data.queries)[0]
    partial = {q: s for q, s in run.items() if q != first}
    banks = fc.build_banks(data, ["bm25", "run"], run=partial, size=10, cache_dir=None)
    assert any(f"1 questions have no score of your run for any of their bank's candidates "
               f"(first: {first!r})" in n for n in banks.notes)  # fmt: skip
    with pytest.raises(fc.DataError, match=rf"empty bank for 1 questions \(first: '{first}'\)"):
        fc.build_banks(data, ["run"], first_stage="run", run=partial, size=10, cache_dir=None)
    own = fc.build_banks(data, ["run"], first_stage="run", run=run, size=10, cache_dir=None)
    for qid, bank in own.banks.items():
        top = sorted(run[qid], key=lambda p: -run[qid][p])[:10]
        assert bank.pids == top
    report = fc.evaluate(data, "run", banks=own, cache_dir=None)
    assert "base:run" in report["systems"]


def test_run_scores_are_matched_by_question_id_not_text():
    data = user_corpus(companies=2)
    # two questions with the same text get their own scores
    q0, q1 = list(data.queries)
    data.queries[q1] = fc.Query(q1, data.queries[q0].text, data.queries[q1].group)
    pids = list(data.passages)
    run = {q0: {pids[0]: 2.0, pids[1]: 1.0}, q1: {pids[0]: 1.0, pids[1]: 2.0}}
    banks = fc.build_banks(data, ["run"], first_stage="run", run=run, size=2, cache_dir=None)
    assert banks.banks[q0].pids == [pids[0], pids[1]]
    assert banks.banks[q1].pids == [pids[1], pids[0]]


def test_uncalibrated_domain_has_one_rule(tmp_path):
    data = user_corpus()
    model, _ = fc.fit_correction(data, "bm25", folds=4, min_calibration=2, cache_dir=None)
    cands = [
        {"id": p, "text": data.passages[p].text, "metadata": data.passages[p].metadata()}
        for p in list(data.passages)[:3]
    ]
    with pytest.raises(fc.DataError, match="no gate calibration for domain 'nowhere'"):
        model.rerank("revenue in 2020?", cands, [3.0, 2.0, 1.0], domain="nowhere")
    kept = model.rerank(
        "revenue in 2020?", cands, [3.0, 2.0, 1.0], domain="nowhere", fallback="identity"
    )
    assert kept.ranking == [c["id"] for c in cands] and kept.gate["mode"] == "identity"


def test_the_readme_python_example_runs(tmp_path, monkeypatch):
    """The README's Python block, run as written on a user's BEIR folder."""
    import re
    from pathlib import Path

    from tests.conftest import write_beir

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    write_beir(tmp_path / "my_corpus", companies=80)
    monkeypatch.chdir(tmp_path)
    namespace = {
        "question": "What was Company3 revenue in FY2020?",
        "candidates": [
            {
                "id": f"c{y}",
                "text": f"Company3 revenue for fiscal {y} rose",
                "metadata": {"company": "Company3", "period": y},
            }
            for y in (2021, 2019, 2020)
        ],
        "base_scores": [2.0, 1.9, 1.85],
    }
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["result"].ranking[0] in {"c2020", "c2021"}
    assert "gated:bm25" in namespace["held_out"]["systems"]
    assert (tmp_path / "checkpoints" / "mine" / "manifest.json").is_file()


def test_checkpoints_without_fingerprints_fall_back_to_ids():
    """A summary or calibration written before 0.2.0 has ids only: they count on a dataset of
    the same name, and a calibration's ids count even when the summary has fingerprints."""
    data = user_corpus()
    qids = list(data.queries)
    legacy = fc.GatedCorrection(summary=fc.TrainingSummary(dataset="mycorpus", query_ids=qids[:3]))
    assert legacy.seen(data) == set(qids[:3])
    assert legacy.seen(fc.Dataset("other", data.queries, data.passages, data.qrels)) == set()
    from fincrowd_ltr.model.calibration import GateCalibration

    mixed = fc.GatedCorrection(
        summary=fc.TrainingSummary(
            dataset="mycorpus", query_fingerprints=[data.question_fingerprint(qids[0])]
        )
    )
    mixed.domains["d"] = GateCalibration(1.0, 0.5, 0.03, 2, 0.0, 0.0, 0.5, qids[5:7], "mycorpus")
    assert mixed.seen(data, calibration_of="d") == {qids[0], *qids[5:7]}


def test_extra_training_banks_join_training_and_count_as_training_questions():
    data = user_corpus()
    other = user_corpus(prefix="Other", companies=6)
    other.name = "othercorpus"
    plain, _ = fc.fit_correction(data, "bm25", folds=4, min_calibration=2, cache_dir=None)
    model, _ = fc.fit_correction(
        data, "bm25", folds=4, min_calibration=2, cache_dir=None,
        extra_training=[other], extra_limit=4,
    )  # fmt: skip
    drawn = model.summary.extra["extra_training"]["othercorpus"]
    assert len(drawn) == 4 and set(drawn) <= set(other.queries)
    assert model.summary.train_banks == plain.summary.train_banks + 4
    fingerprints = set(model.summary.query_fingerprints)
    assert {other.question_fingerprint(q) for q in drawn} <= fingerprints


def test_pooled_gate_calibration_adds_the_cross_fitted_training_rows():
    data = user_corpus()
    fold, _ = fc.fit_correction(
        data, "bm25", folds=4, min_calibration=2, cache_dir=None, gate_calibration="fold"
    )
    model, report = fc.fit_correction(data, "bm25", folds=4, min_calibration=2, cache_dir=None)
    alone, pooled = fold.domains["mycorpus"], model.domains["mycorpus"]
    assert pooled.n_queries > alone.n_queries  # the training folds' cross-fitted rows join
    assert pooled.query_ids == alone.query_ids  # only the held-out fold counts as calibration
    assert not set(pooled.query_ids) & set(model.summary.query_ids)
    assert report.info["gate_calibration"] == "pooled"  # "auto" on a labelled corpus
    assert all(f["query_ids"] > 4 for f in report.info["gate_folds"])
    with pytest.raises(fc.DataError, match="gate_calibration must be one of"):
        fc.fit_correction(data, "bm25", folds=4, cache_dir=None, gate_calibration="all")


def test_a_fit_without_gate_calibration_trains_on_every_fold_and_calibrates_later(tmp_path):
    """``gate_calibration="none"``: the gate's predictor is trained, no domain is calibrated,
    every question trains; ``calibrate_domain`` fits a domain on questions it never saw."""
    data = user_corpus()
    with pytest.warns(GateCalibrationWarning) as held:  # the rounds' calibrations only
        model, report = fc.fit_correction(
            data, "bm25", folds=5, test_fold=0, min_calibration=2, cache_dir=None,
            gate_calibration="none",
        )  # fmt: skip
    said = [str(w.message) for w in held if issubclass(w.category, GateCalibrationWarning)]
    assert said and not any("saved model" in m for m in said)
    assert report.info["gate_calibration"] == "none" and report.info["gate_folds"]
    assert model.gate is not None and not model.domains
    held = set(model.summary.extra["held_out_query_ids"])
    assert set(model.summary.query_ids) == set(data.queries) - held
    assert model.summary.calibration_fold is None and model.summary.calibrate_hint() == ""
    with pytest.raises(fc.DataError, match=r"calibrated: none\); calibrate it first"):
        model.rerank("q", [{"id": "a", "text": "x"}], [1.0], domain="mycorpus")
    model.save_pretrained(tmp_path / "ckpt")  # a gate and no domain: saved and loaded as such
    assert fc.GatedCorrection.from_pretrained(tmp_path / "ckpt").gate is not None
    calibrated, calibration = fc.calibrate_domain(
        tmp_path / "ckpt", "mine", data, qids=sorted(held), min_calibration=1, cache_dir=None
    )
    assert list(calibrated.domains) == ["mine"] and calibration.n_queries >= 1
    from fincrowd_ltr.model.shift import DistributionShiftWarning

    # the tenth walk: calibrating on banks of another first stage than training said nothing
    with pytest.warns(DistributionShiftWarning, match="trained on banks of first stage"):
        fc.calibrate_domain(model, "y", data, qids=sorted(held), min_calibration=1,
                            cache_dir=None, first_stage="bm25+entity", save=False)  # fmt: skip
    with pytest.raises(fc.DataError, match=r"qids: 1 of 2 are not questions of .*\['nope'\]"):
        fc.calibrate_domain(model, "x", data, qids=[sorted(held)[0], "nope"], cache_dir=None)
    assert list(fc.GatedCorrection.from_pretrained(tmp_path / "ckpt").domains) == ["mine"]
    with pytest.raises(fc.DataError, match="domain 'mine' would be dropped"):
        fc.fit_correction(data, "bm25", cache_dir=None, gate_calibration="none", domain="mine")
    with pytest.raises(fc.DataError, match="calibrates none"):
        fc.nested_cross_validation(data, "bm25", cache_dir=None, gate_calibration="none")


def test_a_committee_fit_is_recorded_trains_every_member_once_and_serves(tmp_path, fit_log):
    data = user_corpus()
    _, plain = fc.fit_correction(data, "bm25", folds=4, min_calibration=2, cache_dir=None)
    fit_log.clear()
    model, report = fc.fit_correction(
        data, "bm25", folds=4, min_calibration=2, cache_dir=None, committee=3
    )
    assert report.info["committee"] == 3 and model.summary.extra["committee"] == 3
    assert report.info["residual_fits"] > plain.info["residual_fits"]
    # every member was listed for a prefetch, none trained twice
    trained, prefetched = fit_log.trained, fit_log.prefetched
    assert set(trained) <= prefetched and len(trained) == len(set(trained))
    assert report.info["residual_fits"] == len(prefetched)
    model.save_pretrained(tmp_path / "model")
    again = fc.GatedCorrection.from_pretrained(tmp_path / "model")
    assert again.summary.extra["committee"] == 3
    for bad in (0, 2.5):
        with pytest.raises(fc.DataError, match="committee"):
            fc.fit_correction(data, "bm25", folds=4, cache_dir=None, committee=bad)


def test_retrieved_training_banks_count_the_questions_they_leave_out():
    """Training banks as the first stage returns them (the default): a covered question
    whose relevant page the first stage missed trains nothing, and the report says how many
    (a held-out test fold's questions are not counted)."""
    from fincrowd_ltr.api.fit import _retrieved_training
    from fincrowd_ltr.features.bank_features import BankFeaturizer
    from fincrowd_ltr.features.examples import make_examples
    from fincrowd_ltr.fields import FieldExtractor

    data = user_corpus()
    banks = fc.build_banks(data, ["bm25"], mode="retrieved", size=2, cache_dir=None)
    missing = {
        q for q in data.queries if not any(data.qrels[q].get(p, 0) > 0 for p in banks.banks[q].pids)
    }
    assert 0 < len(missing) < len(data.queries)
    notes = {}
    for mode in ("default", "injected"):
        options = {} if mode == "default" else {"train_mode": mode}
        _, report = fc.fit_correction(
            data, "bm25", folds=4, cache_dir=None, grid=None, gate=False, bank_size=2,
            progress=False, **options,
        )  # fmt: skip
        assert report.info["train_mode"] == options.get("train_mode", "retrieved")
        notes[mode] = [n for n in report.info["notes"] if n.startswith("training banks")]

    def note(missed: int, covered: int) -> list[str]:
        return [
            f"training banks as retrieved: {missed} of {covered} covered questions have no "
            "relevant candidate in their bank and train nothing (train_mode='injected', "
            "--train-mode injected, adds their relevant pages)"
        ]

    assert notes["default"] == note(len(missing), len(data.queries))
    assert notes["injected"] == []
    featurizer = BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)
    examples = {e.qid: e for e in make_examples(data, banks, "bm25", featurizer)}
    held = set(sorted(data.queries)[:4])
    assert _retrieved_training(data, examples, held) == note(len(missing - held), 12)


def test_a_training_set_without_a_relevant_candidate_is_named_before_any_fit():
    """Retrieved banks can leave a training set with no relevant candidate at all (here the
    one round's one training fold): a ``DataError`` naming the folds and the option, not a
    worker's traceback."""
    with pytest.raises(
        fc.DataError, match=r"no training bank of folds \[\d+\] holds a relev"
    ) as err:
        fc.fit_correction(
            user_corpus(), "bm25", folds=4, test_fold=0, cache_dir=None, grid=None,
            gate=False, bank_size=2, progress=False,
        )  # fmt: skip
    assert err.value.field == "train_mode"
