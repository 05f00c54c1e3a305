"""What a new user could get silently wrong (issue 23), each a regression test: metadata in the
forms users write, commands that never overwrite and name their ranker, distribution-shift
warnings, SIGTERM messages, the packing summary without NaN."""

import json
import warnings

import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.cli import main
from fincrowd_ltr.data.beir import load_beir
from fincrowd_ltr.data.metadata import normalise_metadata, normalise_period
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.compatibility import Compatibility, compare_period
from fincrowd_ltr.model.shift import DistributionShiftWarning
from tests.conftest import write_beir

FORMS_OF_2016 = [2016, "2016", "FY2016", "FY 2016", "FY16", "fiscal 2016", "fiscal year 2016",
                 "2016-12-31", "12/31/2016", "June 30, 2016", [2016, 2015], "2014-2016",
                 "2016, 2015", "FY2014 to FY2016"]  # fmt: skip


@pytest.mark.parametrize("value", FORMS_OF_2016)
def test_every_form_of_a_year_matches_a_question_about_that_year(value):
    question = FieldExtractor().extract_query("What was Acme's revenue in fiscal 2016?").period
    period = normalise_period(value)
    assert compare_period(question, frozenset(period.split(","))) is Compatibility.MATCH
    other = FieldExtractor().extract_query("What was Acme's revenue in fiscal 2012?").period
    assert compare_period(other, frozenset(period.split(","))) is Compatibility.CONFLICT


def test_passages_built_in_python_read_their_period_by_the_same_contract():
    """A ``Passage`` made in Python (not through a loader) with ``period="FY2019"`` matches a
    question about 2019; an unreadable one is an error naming the passage."""
    from fincrowd_ltr.data.schema import Passage

    fx = FieldExtractor()
    question = fx.extract_query("What was revenue in fiscal 2019?").period
    for period in ("FY2019", "FY 2019", "FY19", "Q2 2019", "fiscal year 2019"):
        fields = fx.extract_passage(Passage("x", "Revenue was 5.", company="Acme", period=period))
        assert compare_period(question, fields.period) is Compatibility.MATCH, period
    with pytest.raises(DataError, match="passage 'y': .*cannot read period 'H1 2019'"):
        fx.extract_passage(Passage("y", "Revenue was 5.", company="Acme", period="H1 2019"))


def test_quarters_and_lists_read_as_filings_write_them():
    assert {normalise_period(v) for v in ("Q3 2023", "2023Q3", "2023-Q3", "3Q23", "Q3 FY23")} == {
        "2023Q3"
    }
    assert normalise_period(["FY2016", "fiscal 2015", 2014]) == "2016,2015,2014"
    assert normalise_metadata({"period": None, "company": " Acme  Corp "}) == {
        "company": "Acme Corp"
    }


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"period": False}, "metadata'.period must be a year"),
        ({"period": "H1 2016"}, "cannot read period 'H1 2016'"),
        ({"period": 2016.5}, "2016.5 is not a year"),
        ({"position": -1}, "position must be a non-negative integer"),
        ({"company": {"name": "Acme"}}, "company must be a string or number"),
    ],
)
def test_wrong_metadata_in_a_corpus_names_file_line_and_field(tmp_path, meta, message):
    write_beir(tmp_path, companies=4)
    lines = (tmp_path / "corpus.jsonl").read_text().splitlines()
    row = json.loads(lines[2])
    lines[2] = json.dumps({**row, "metadata": {**row.get("metadata", {}), **meta}})
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"corpus.jsonl:3: .*{message}"):
        load_beir(tmp_path)


def test_a_corpus_with_user_written_periods_has_no_gold_conflict_from_format(tmp_path):
    """The README journey's corpus with FY-style periods: no gold passage conflicts on period
    with its own question because of how the period was written."""
    data = write_beir(tmp_path, companies=8)
    forms = ["FY{}", "fiscal {}", "FY{yy}", "{}-12-31"]
    rows = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        year = row.get("metadata", {}).get("period")
        if year:
            form = forms[i % len(forms)]
            row["metadata"]["period"] = form.format(year, yy=str(year)[2:])
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_beir(tmp_path)
    fx = FieldExtractor.from_passages(loaded.passages.values())
    checked = 0
    for qid, rels in loaded.qrels.items():
        question = fx.extract_query(loaded.queries[qid].text).period
        for pid in rels:
            original = data.passages[pid].period
            if question and original:
                candidate = fx.extract_passage(loaded.passages[pid]).period
                assert compare_period(question, candidate) is not Compatibility.CONFLICT, pid
                checked += 1
    assert checked >= 8


def test_commands_name_dataset_and_ranker_and_never_overwrite(tmp_path, monkeypatch, capsys):
    write_beir(tmp_path / "corpus", companies=12)
    monkeypatch.chdir(tmp_path)
    root, cache = "--data-root=corpus", "--cache-dir=c"
    assert main(["fit", root, cache, "--ranker=bm25"]) == 2
    assert "name its --dataset" in capsys.readouterr().err
    assert main(["evaluate", "--dataset=beir", root, cache]) == 2
    assert "name the --ranker" in capsys.readouterr().err
    fit = ["fit", "--dataset=beir", root, cache, "--no-gate", "--folds=4", "--no-select"]
    assert main(fit) == 2
    assert "name the --ranker to correct" in capsys.readouterr().err
    assert main([*fit, "--ranker=bm25"]) == 0
    made = list((tmp_path / "checkpoints").iterdir())
    assert len(made) == 1 and made[0].name.startswith("beir-bm25-")  # a new folder, no default
    assert "training the package defaults" in capsys.readouterr().err
    before = (made[0] / "config.json").read_bytes()
    assert main([*fit, "--ranker=bm25", f"--out={made[0]}"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (made[0] / "config.json").read_bytes() == before
    assert main([*fit, "--ranker=bm25", f"--out={made[0]}", "--overwrite"]) == 0


def test_banks_unlike_the_training_banks_warn(tmp_path, capsys):
    write_beir(tmp_path / "corpus", companies=12)
    common = ["--dataset=beir", f"--data-root={tmp_path / 'corpus'}", f"--cache-dir={tmp_path}/c"]
    ckpt = tmp_path / "ckpt"
    fit = ["fit", *common, "--ranker=bm25", "--no-select", "--test-fold=0", f"--out={ckpt}"]
    # a fifth walk held out a fold of 4 questions and was not told
    with pytest.warns(UserWarning, match="the held-out fold 0 holds 3 covered questions of 3 gr"):
        assert main([*fit, "--min-calibration=1"]) == 0
    assert json.loads((ckpt / "config.json").read_text())["training"]["bank_size"] == 100
    # the calibration fold as `calibrate --fold` names it (it read "fold 0 of the 4 left")
    assert "calibrated on fold 1 of 5 (fold 0 held out)" in capsys.readouterr().out
    # a user's own domain on the only questions the correction did not train on (not the
    # held-out fold): the error names them as `calibrate` takes them (a fifth walk went round)
    calibrate = ["calibrate", *common, f"--checkpoint={ckpt}", "--domain=mine",
                 "--min-calibration=1", f"--out={tmp_path / 'mine'}"]  # fmt: skip
    assert main(calibrate) == 2
    hint = "`calibrate --fold 1 --folds 5 --seed 0`"
    assert hint in capsys.readouterr().err
    assert main([*calibrate, *hint.strip("`").split()[1:]]) == 0
    # or on part of the held-out fold, listed (CRLF, a byte-order mark), and evaluate the rest
    held = json.loads((ckpt / "config.json").read_text())["training"]["held_out_query_ids"]
    covered = [q for q in held if fc.load_dataset("beir", tmp_path / "corpus").covered(q)]
    listed = tmp_path / "half.txt"
    listed.write_bytes(("\ufeff" + "\r\n".join(covered[:2]) + "\r\n").encode())
    half = [*calibrate[:-1], f"--qids={listed}", f"--out={tmp_path / 'half'}"]
    assert main(half) == 0
    domain = json.loads((tmp_path / "half/config.json").read_text())["gate"]["domains"]["mine"]
    assert domain["query_ids"] == sorted(covered[:2])
    assert main(["evaluate", *common, "--ranker=bm25", f"--checkpoint={tmp_path / 'half'}",
                 "--domain=mine", f"--out={tmp_path / 'half.json'}"]) == 0  # fmt: skip
    rest = json.loads((tmp_path / "half.json").read_text())["systems"]["gated:bm25"]["per_query"]
    assert sorted(rest) == sorted(covered[2:])
    listed.write_bytes(b"\xff\xfe bad")
    assert main([*half[:-1], f"--out={tmp_path / 'bad'}"]) == 2
    assert f"{listed}: not UTF-8 text" in capsys.readouterr().err
    with pytest.raises(fc.DataError, match="give fold or qids, not both"):
        fc.calibrate_domain(ckpt, "x", "beir", data_root=tmp_path / "corpus", fold=1,
                            qids=covered[:1], save=False)  # fmt: skip
    evaluate = ["evaluate", *common, "--ranker=bm25", f"--checkpoint={ckpt}"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*evaluate, "--first-stage=bm25+query", f"--out={tmp_path / 'r.json'}"]) == 0
    printed = capsys.readouterr().out
    assert "(size 100, first stage bm25+query)" in printed  # whose candidates the banks hold
    assert printed.count("warning: the correction was trained on banks of first stage 'bm25'") == 1
    # the table prints it: the command does not say it again on stderr
    assert not any(issubclass(w.category, DistributionShiftWarning) for w in caught)
    report = json.loads((tmp_path / "r.json").read_text())
    assert any("'bm25+query'" in w for w in report["warnings"])
    assert any("the correction rows rest on 3 questions of 3 groups" in n for n in report["notes"])
    with warnings.catch_warnings(record=True) as caught:  # in Python, a warning says it
        warnings.simplefilter("always")
        fc.evaluate(
            "beir", "bm25", checkpoint=ckpt, first_stage="bm25+query",
            data_root=tmp_path / "corpus", cache_dir=tmp_path / "c", progress=False,
        )  # fmt: skip
    assert any(issubclass(w.category, DistributionShiftWarning) for w in caught)
    assert main([*evaluate, "--first-stage=bm25", f"--out={tmp_path / 'r.json'}"]) == 0
    assert not any(
        "first stage" in w for w in json.loads((tmp_path / "r.json").read_text())["warnings"]
    )
    # without --first-stage, evaluate builds the banks of the checkpoint's own first stage
    other = tmp_path / "other"
    assert main([*fit[:-1], f"--out={other}", "--first-stage=bm25+query", "--no-gate"]) == 0
    evaluate[-1] = f"--checkpoint={other}"
    assert main([*evaluate, f"--out={tmp_path / 'r.json'}"]) == 0
    assert not any(
        "first stage" in w for w in json.loads((tmp_path / "r.json").read_text())["warnings"]
    )


def test_calibrating_an_existing_domain_needs_replace(tmp_path, capsys):
    from fincrowd_ltr.model.checkpoint import add_domain
    from fincrowd_ltr.model.correction import GatedCorrection
    from tests.serving.conftest import make_checkpoint

    folder = make_checkpoint(tmp_path)
    calibration = GatedCorrection.from_pretrained(folder).domains["open"]
    with pytest.raises(DataError, match="'open' is already calibrated.*--replace"):
        add_domain(folder, "open", calibration)
    add_domain(folder, "open", calibration, replace=True)
    GatedCorrection.from_pretrained(folder)  # the manifest was refreshed


def test_packing_summary_prints_no_nan():
    from fincrowd_ltr.evaluation.reports import PackingReport

    nan = float("nan")
    report = {
        "dataset": "d", "split": "all", "budget": 1000, "tokenizer": "t", "depth": 5,
        "answer_accuracy": "", "orders_note": "", "systems": {
            "base": {"p": {
                "gold_in_context": {"mean": 0.5, "ci95": [0.1, 0.9], "n": 2},
                "gold_in_context_multi_period_or_company": {"mean": 0.5, "ci95": [0, 1], "n": 2},
                "off_period_token_share": {"mean": 0.1, "ci95": [0, 0.2], "n": 2},
                "near_duplicate_token_share": 0.0, "max_packed_tokens": 900,
                "orders": {"score": {"first_gold_relative_position": nan,
                                     "gold_at_an_end_share": nan}},
            }}},
        "rank_halves": {"base": {"n_queries": 2, "split_triggered": 0,
                                 "rank_half_exceeds_budget": 0, "largest_top20_tokens": 800,
                                 "token_groups_when_split": {"mean": nan, "max": 0}}},
    }  # fmt: skip
    text = PackingReport(report).to_markdown()
    assert "nan" not in text.lower() and "no split" in text
    # an order row with no gold in any context is left out, and the count said
    assert "| base | p | score |" not in text and "1 system, policy and order rows left" in text
