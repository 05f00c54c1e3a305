"""What a new user walking the README's journey with their own small corpus hit (a second walk,
2026-12-04), each a regression test: nothing of theirs is overwritten, a standard BEIR layout is
read, no command succeeds on nothing, and every silent fallback is said."""

import json
import math
import warnings
from types import MappingProxyType

import numpy as np
import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.cli import build_parser, main
from fincrowd_ltr.cli.commands import _promise
from fincrowd_ltr.data.beir import load_beir, read_qrels
from fincrowd_ltr.data.schema import DataError, Query
from fincrowd_ltr.metrics import bootstrap_ci
from fincrowd_ltr.model.calibration import GateCalibration
from fincrowd_ltr.retrieval.rankers import RunRanker, check_scores, scores_from_run
from fincrowd_ltr.settings import CalibrationSettings, from_arguments
from tests.conftest import user_corpus, write_beir, write_corpus


def test_synthesize_never_writes_over_a_folder_that_holds_files(tmp_path):
    corpus = tmp_path / "corpus"
    write_corpus(corpus)
    before = {f.name: f.read_bytes() for f in corpus.iterdir()}
    common = ["synthesize", "--dataset=beir", f"--data-root={corpus}", "--n=5"]
    cache = f"--cache-dir={tmp_path / 'cache'}"
    # the corpus it reads, even with --overwrite
    assert main([*common, f"--out={corpus}", "--overwrite", cache]) == 2
    # any folder that holds files, without --overwrite
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "notes.txt").write_text("mine")
    assert main([*common, f"--out={tmp_path / 'old'}", cache]) == 2
    assert {f.name: f.read_bytes() for f in corpus.iterdir()} == before
    assert (tmp_path / "old" / "notes.txt").read_text() == "mine"
    # the library function refuses too, and replaces only when asked
    found = fc.synthesize(fc.load_dataset("beir", corpus), 5, cache_dir=None, difficulty=False)
    with pytest.raises(DataError, match="already holds files"):
        fc.write_beir(found, tmp_path / "old")
    fc.write_beir(found, tmp_path / "old", overwrite=True)
    assert (tmp_path / "old" / "queries.jsonl").exists()
    assert not list((tmp_path / "old").glob(".*.tmp"))  # written under temporary names, renamed


def test_the_standard_beir_layout_reads_qrels_by_split(tmp_path):
    write_beir(tmp_path, companies=4)
    qrels = (tmp_path / "qrels.tsv").read_text().splitlines()
    (tmp_path / "qrels.tsv").unlink()
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels[0] + "\n")
    (tmp_path / "qrels" / "train.tsv").write_text("\n".join(qrels[1:]) + "\n")
    test = load_beir(tmp_path, split="test")
    assert list(test.queries) == [qrels[0].split("\t")[0]]  # the split's questions only
    assert all(test.covered(q) for q in test.queries)
    everything = load_beir(tmp_path)
    assert len(everything.queries) == 4 and all(everything.covered(q) for q in everything.queries)
    with pytest.raises(DataError, match=r"no dev.tsv for split 'dev' \(splits there: test, train"):
        load_beir(tmp_path, split="dev")


def test_a_corpus_without_qrels_says_so_and_evaluate_refuses_it(tmp_path):
    write_beir(tmp_path, companies=4)
    (tmp_path / "qrels.tsv").unlink()
    data = load_beir(tmp_path)
    assert "no qrels.tsv" in data.notes[0]
    with pytest.raises(DataError, match="no question has a relevant passage.*no qrels.tsv"):
        fc.evaluate(data, "bm25", cache_dir=None, progress=False)


def test_qrels_with_tabs_keep_ids_that_hold_spaces(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq 1\tdoc 7\t1\nq2 0 d3 1\nq3\td4\t1\t\nq4 d5\t1\n")
    assert read_qrels(path) == {
        "q 1": {"doc 7": 1},  # tabs: ids keep their spaces
        "q2": {"d3": 1},  # TREC qrels with blanks
        "q3": {"d4": 1},  # a trailing tab
        "q4": {"d5": 1},  # blanks and a tab mixed
    }


def test_an_empty_corpus_is_named(tmp_path):
    write_beir(tmp_path, companies=2)
    (tmp_path / "corpus.jsonl").write_text("")
    with pytest.raises(DataError, match=r"corpus.jsonl: no passages \(the file is empty\)"):
        load_beir(tmp_path)


def test_metadata_keys_nothing_reads_are_named_with_their_line(tmp_path):
    write_beir(tmp_path, companies=3)
    lines = (tmp_path / "corpus.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["metadata"]["Company"] = row["metadata"].pop("company")
    lines[1] = json.dumps(row)
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=r"'Company' \(line 2; did you mean 'company'\?\)"):
        data = load_beir(tmp_path)
    assert any("'Company'" in note for note in data.notes)


def test_a_passage_serve_would_refuse_is_named_when_loaded(tmp_path):
    """A fifth walk loaded a 416,220-character passage without a word; `serve` refuses it."""
    write_beir(tmp_path, companies=3)
    lines = (tmp_path / "corpus.jsonl").read_text().splitlines()
    row = json.loads(lines[2])
    row["text"] = "Revenue rose. " * 2000
    lines[2] = json.dumps(row)
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=r"1 passages longer than 20,000 characters \(first: "):
        data = load_beir(tmp_path)
    assert any(f"{row['_id']!r}, line 3, 28,000" in note for note in data.notes)
    assert data.passages[row["_id"]].text == row["text"]  # kept whole


def test_passages_without_text_or_with_a_number_for_text_are_named_when_loaded(tmp_path):
    """A seventh walk loaded `"text": ""` (which `serve` refuses) and `"text": 12345` without
    a word."""
    write_beir(tmp_path, companies=3)
    lines = (tmp_path / "corpus.jsonl").read_text().splitlines()
    empty, number, null = json.loads(lines[1]), json.loads(lines[3]), json.loads(lines[4])
    empty["text"], number["text"], null["text"] = "  ", 12345, None
    lines[1], lines[3], lines[4] = json.dumps(empty), json.dumps(number), json.dumps(null)
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=r"2 passages with no text \(first: "):
        data = load_beir(tmp_path)
    named = [n for n in data.notes if f"{empty['_id']!r}, line 2" in n]
    assert named and "`fincrowd serve` refuses an empty text" in named[0]
    assert any(f"not a string (first: {number['_id']!r}, line 4)" in n for n in data.notes)
    assert data.passages[number["_id"]].text == "12345"  # read, not lost
    assert data.passages[null["_id"]].text == ""  # null is no text, not the word "None"


def test_synthesize_says_why_it_wrote_fewer_questions_than_asked():
    data = user_corpus(companies=3)
    anonymous = {
        pid: fc.Passage(pid, p.text, period=p.period, doc_type=p.doc_type)
        for pid, p in data.passages.items()
    }
    corpus = fc.Dataset("anon", data.queries, anonymous, data.qrels)
    with pytest.warns(UserWarning, match="no page names its company or document"):
        found = fc.synthesize(corpus, 50, cache_dir=None, difficulty=False)
    assert not found.questions
    assert any("0 of the 50" in note for note in found.report()["notes"])


def test_a_users_run_must_score_every_candidate_and_a_nan_is_counted_once():
    query = Query("q", "revenue 2020", group="Acme")
    with pytest.raises(DataError, match=r"question 'q' returned scores of shape \(2,\) for 3"):
        RunRanker(lambda q, pids: [1.0, 2.0]).score(query, ["a", "b", "c"])
    scores = scores_from_run({"a": 1.0, "b": float("nan")}, ["a", "b", "c", "d"])
    assert scores[2] == scores[3] == 0.0  # unscored: the finite minimum minus one
    with pytest.raises(DataError, match="1 non-finite score"):
        check_scores(scores, "run")


def test_a_run_given_as_a_dict_is_checked_like_a_trec_file():
    data = user_corpus(companies=2)
    q, p = next(iter(data.queries)), next(iter(data.passages))
    build = dict(first_stage="run", size=5, cache_dir=None, progress=False)
    for run, message in [
        ({q: {"no-such-page": 1.0}}, r"run\['.+'\]\['no-such-page'\]: unknown passage id"),
        ({"no-such-question": {p: 1.0}}, r"scores none of the 2 questions .*'no-such-question'"),
        ({}, r"the run scores none of the 2 questions of mycorpus as loaded: check the ids"),
        ({q: {}}, r"the run scores none of the 2 questions"),
        ({q: {p: 10**400}}, r"score is too large for a float"),
        ({q: {p: True}}, r"score True is a bool, not a number"),
        ({q: {p: np.True_}}, r"score .*True_? is a bool, not a number"),
        ({q: {p: "1.5"}}, r"score '1.5' is text, not a number"),
        ({1: {p: 1.0}}, r"run\[1\]: question ids are strings, not int"),
        ({q: {p: float("nan")}}, r"run\['.+'\]\['.+'\]: score is nan \(must be finite\)"),
        ({q: {p: "high"}}, r"score 'high' is text, not a number"),
        ({q: {p: None}}, r"score None is not a number"),
        ({q: [p]}, r"is a list, not a mapping"),
    ]:
        with pytest.raises(DataError, match=message):
            fc.build_banks(data, ["run"], run=run, **build)
    run = {qid: {p: np.float32(2.0)} for qid in data.queries}  # numpy scores are numbers
    assert fc.build_banks(data, ["run"], run=run, **build).banks[q].pids == [p]
    # any mapping; a run of every question read for some of them warns and reads theirs
    some = data.subset(list(data.queries)[:1])
    with pytest.warns(
        UserWarning, match=r"the run: 1 of its 2 question ids is not a question"
    ) as seen:
        banks = fc.build_banks(some, ["run"], run=MappingProxyType(run), **build)
    assert list(banks.banks) == [q]
    assert seen[0].filename == __file__  # the warning points at the user's call
    with pytest.raises(DataError, match="run is a list: give a TREC run file's path"):
        fc.build_banks(data, ["run"], run=[q, p], **build)


def test_too_few_companies_for_the_folds_is_an_error_naming_the_option():
    with pytest.raises(DataError, match=r"use --folds 3 or fewer"):
        fc.fit_correction(user_corpus(companies=3), "bm25", folds=5, progress=False)


def test_bad_gate_and_mixing_options_fail_before_any_work():
    with pytest.raises(DataError, match="regression_cap must be in"):
        CalibrationSettings(regression_cap=1.5)
    with pytest.raises(DataError, match="min_calibration must be at least 1"):
        CalibrationSettings(min_calibration=0)
    args = build_parser().parse_args(["fit", "--ranker=bm25", "--synthetic-weights=0,abc"])
    with pytest.raises(DataError, match="--synthetic-weights '0,abc': expected a comma list"):
        from_arguments(args)


def test_each_gate_method_states_its_own_promise():
    cal = GateCalibration(1.0, 0.5, 0.03, 40, 0.1, 0.0, 0.5)
    for method, says in (
        ("ltt", "with probability >= 0.90"),
        ("crc", "expected regression"),
        ("empirical", "no promise for new ones"),
    ):
        text = _promise(GateCalibration(**{**vars(cal), "method": method, "delta": 0.1}))
        assert text.startswith(method) and says in text
        assert method == "ltt" or "with probability" not in text


def test_one_group_gives_no_interval_rather_than_a_certain_looking_one():
    lo, hi = bootstrap_ci(np.array([0.2, 0.6, 0.9]), groups=["Acme"] * 3)
    assert math.isnan(lo) and math.isnan(hi)
    lo, hi = bootstrap_ci(np.array([0.2, 0.6, 0.9]), groups=["Acme", "Acme", "Bolt"])
    assert lo < hi


def test_a_report_over_one_group_prints_after_a_save_and_load(tmp_path):
    report = fc.evaluate(user_corpus(companies=1), "bm25", cache_dir=None, progress=False)
    back = type(report).load(report.save(tmp_path / "r.json"))
    assert "[-,-]" in str(back) and "one group only" in str(back)


def test_a_plan_over_some_questions_is_the_whole_plan_with_the_others_left_out():
    from fincrowd_ltr.data.splits import FoldPlan

    data = fc.Dataset(
        "toy", {f"q{i}": Query(f"q{i}", "t", group=g) for i, g in enumerate("abcdefgh")}, {}, {}
    )
    for seed in range(40):
        full = FoldPlan.by_group(data, 6, seed).folds
        some = [q for q in data.queries if q != "q7"]
        part = FoldPlan.by_group(data, 6, seed, some).folds
        assert part == tuple(tuple(q for q in f if q != "q7") for f in full)


def test_the_top_level_help_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":mod:" not in out
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        help_text = build_parser()._subparsers._group_actions[0].choices["synthesize"].format_help()
    assert "--overwrite" in help_text
    assert "new or empty one (default" not in " ".join(help_text.split())  # --out is required


def test_a_cascade_reads_a_run_given_as_a_mapping():
    data = user_corpus()
    rng = np.random.default_rng(1)
    mine = {q: {p: float(rng.normal()) for p in data.passages} for q in data.queries}
    options = dict(n=10, k=3, first_stage="bm25", cache_dir=None)
    report = fc.cascade(data, "bm25", scores={"mine": mine}, **options)
    assert report["scores_from_runs"] == {"mine": "a mapping"}
    assert "cascade:mine" in report.to_dict()["systems"]
    with pytest.raises(DataError, match=r"scores\['mine'\]: a cascade reads a run's scores"):
        fc.cascade(data, "bm25", scores={"mine": lambda q, pids: np.zeros(len(pids))}, **options)


def test_a_fit_says_which_questions_it_cannot_use_and_what_it_saved(tmp_path, capsys):
    """A fifth walk (2026-12-06): a fit left out unjudged questions without a word (evaluate
    named them) and printed only the per-fold settings, not the saved model's."""
    write_beir(tmp_path / "corpus", companies=12)
    with open(tmp_path / "corpus" / "queries.jsonl", "a") as fh:
        fh.write(json.dumps({"_id": "unjudged", "text": "What was revenue?", "group": "x"}) + "\n")
    common = ["--dataset=beir", f"--data-root={tmp_path / 'corpus'}", f"--cache-dir={tmp_path}/c"]
    fit = ["fit", *common, "--ranker=bm25", "--no-select", "--no-gate", f"--out={tmp_path}/m"]
    assert main(fit) == 0
    out = capsys.readouterr()
    assert "have no positive judgement in the qrels (first: 'unjudged')" in out.err
    assert "the saved model's setting: the package defaults" in out.out


def test_the_eighth_walks_silences_are_said(tmp_path):
    """An eighth walk (2026-12-07, 10-K pages of three companies, zero labels): a BEIR question's
    `metadata.company` was never read, so the other-company share was "-" with no reason; a
    filing given a range of periods was off-period for gold sharing its years; `evaluate` kept
    silent about an uncalibrated domain under the identity fallback and about no domain at all;
    a calibration that can never open printed its guarantee as if it could."""
    root = tmp_path / "mine"
    write_corpus(root)
    rows = [json.loads(line) for line in (root / "queries.jsonl").read_text().splitlines()]
    for row in rows:  # the question's company, as queries.jsonl may give it (spaces and all)
        row["metadata"] = {"company": row.pop("group") + " "}
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = load_beir(root)
    assert data.queries["qCompany0"].company == "Company0"  # as the passages' companies read
    report = fc.evaluate(data, "bm25", first_stage="bm25", cache_dir=None, progress=False)
    shares = report["contamination@10"]["base:bm25"]
    assert 0 < shares["other_company"] < 1 and 0 < shares["off_period"] < 1
    assert "other-company share -" not in str(report)
    assert not any("first stage 'auto' is plain BM25" in n for n in report["notes"])
    auto = fc.evaluate(data, "bm25", cache_dir=None, progress=False)  # filings metadata: said
    assert any("most of its pages give a company and a period" in n for n in auto["notes"])
    finqa_like = fc.Dataset("finqa", data.queries, data.passages, data.qrels)  # its own ablation
    assert not any(
        "plain BM25" in n for n in fc.evaluate(finqa_like, "bm25", cache_dir=None)["notes"]
    )

    from fincrowd_ltr.evaluation.report import contamination

    ranges = fc.Dataset(
        "r", {"q": Query("q", "FY2016 revenue?", "g", "Acme")},
        {"gold": fc.Passage("gold", "a", company="Acme", period="2014,2015,2016"),
         "next": fc.Passage("next", "b", company="Acme", period="2015,2016,2017"),
         "old": fc.Passage("old", "c", company="Acme", period="2011,2012,2013")},
        {"q": {"gold": 1}},
    )  # fmt: skip
    shares = contamination(ranges, {"q": ["gold", "next", "old"]}, ["q"])
    assert shares["off_period"] == pytest.approx(1 / 3)  # only the report sharing no year
    from fincrowd_ltr.evaluation.results import gold_metadata_filter

    # the reference row drops the report sharing no year, not the next one sharing two
    assert gold_metadata_filter(ranges, ["old", "next", "gold"], "q") == ["next", "gold"]

    unnamed = fc.evaluate(user_corpus(), "bm25", first_stage="bm25", cache_dir=None)
    assert math.isnan(unnamed["contamination@10"]["base:bm25"]["other_company"])
    assert "other-company share -: no question gives its company" in str(unnamed)

    model, _ = fc.fit_correction(
        data, "bm25", folds=5, test_fold=0, min_calibration=2, cache_dir=None,
        gate_calibration="none", first_stage="bm25", progress=False,
    )  # fmt: skip
    held = fc.evaluate(data, "bm25", first_stage="bm25", checkpoint=model, cache_dir=None)
    assert any(n.startswith("no domain given: the correction rows are the always-on") for n in
               held["notes"])  # fmt: skip
    fallback = fc.evaluate(data, "bm25", first_stage="bm25", checkpoint=model, domain="nosuch",
                           fallback="identity", cache_dir=None)  # fmt: skip
    assert any("'nosuch' is not calibrated in this checkpoint" in n for n in fallback["notes"])

    never = GateCalibration(1.0, 1.0000000000000002, 0.03, 4, 0.0, 0.0, 0.0, method="ltt",
                            delta=0.1, n_orderable=4, risk_bound=0.0)  # fmt: skip
    assert not never.can_open and never.guarantee()["can_open"] is False
    assert "the gate never opens (too few orderable questions" in _promise(never)
    assert "probability" not in _promise(never)
    gainless = GateCalibration(**{**vars(never), "n_queries": 200, "n_orderable": 200})
    assert "no threshold opened with a positive mean gain" in _promise(gainless)


def test_the_ninth_walks_python_surface_reads_in_a_notebook():
    """A notebook echoed a whole corpus (7.6 MB) for ``ds``, every training id for a summary,
    the default object repr for a model, and ``importlib`` in ``dir(fc)``."""
    data = user_corpus()
    assert repr(data).startswith(f"Dataset({data.name!r}: {len(data.queries)} queries")
    assert len(repr(data)) < 200
    model, _ = fc.fit_correction(
        data, "bm25", folds=4, min_calibration=2, cache_dir=None, first_stage="bm25",
        grid=None, progress=False,
    )  # fmt: skip
    assert repr(model).startswith("GatedCorrection(base 'bm25', domains [")
    summary = repr(model.summary)
    assert f"query_ids=<{len(model.summary.query_ids)}>" in summary
    assert model.summary.query_ids[0] not in summary
    assert "importlib" not in dir(fc) and "fit_correction" in dir(fc)
