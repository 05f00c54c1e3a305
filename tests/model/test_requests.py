"""Candidates as callers send them: checked in a fixed order, each fault named with its field."""

from types import SimpleNamespace

import pytest

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model.requests import Candidate, parse_candidate


@pytest.mark.parametrize(
    ("candidate", "message", "field"),
    [
        ({}, r"missing field\(s\) \['id', 'text'\]", "candidates[4].id"),
        ({"id": "a"}, r"missing field\(s\) \['text'\]", "candidates[4].text"),
        # several faults at once: the id first, then the text, then the metadata
        ({"id": " ", "text": 3, "metadata": ["x"]}, "id must be a non-empty", "candidates[4].id"),
        ({"id": "a", "text": 3, "metadata": ["x"]}, "text must be a string", "candidates[4].text"),
        (
            {"id": "a", "text": "t", "metadata": ["x"]},
            "must be an object",
            "candidates[4].metadata",
        ),
        (Candidate("", "t"), "id must be a non-empty", "candidates[4].id"),
        (SimpleNamespace(id="a"), r"missing field\(s\) \['text'\]", "candidates[4].text"),
        (SimpleNamespace(text="t"), r"missing field\(s\) \['id'\]", "candidates[4].id"),
        (
            {"id": "a", "text": "t", "metadata": {"period": "H1 2016"}},
            "cannot read period",
            "candidates[4].metadata.period",
        ),
    ],
)
def test_a_bad_candidate_is_named_with_its_field(candidate, message, field):
    with pytest.raises(DataError, match=message) as caught:
        parse_candidate(candidate, 4)
    assert caught.value.field == field


def test_a_good_candidate_is_read_and_the_callers_object_kept():
    given = {"id": 7, "text": "t", "metadata": {"period": "FY16", "source": "x"}}
    parsed = parse_candidate(given, 0)
    assert parsed == Candidate("7", "t", {"source": "x", "period": "2016"})
    assert given["metadata"] == {"period": "FY16", "source": "x"}
    assert parse_candidate({"id": "a", "text": "t", "metadata": None}, 0).metadata == {}
    assert parse_candidate(Candidate(3, "t"), 0).id == 3  # a Candidate's id is kept as given
    assert parse_candidate(SimpleNamespace(id="a", text="t"), 0) == Candidate("a", "t", {})


def test_a_title_is_joined_as_the_loader_joins_it_and_never_overrides_a_document():
    titled = parse_candidate({"id": "a", "text": "Revenue rose.", "title": " 10-K 2021 "}, 0)
    assert titled.text == "10-K 2021\nRevenue rose." and titled.metadata["document"] == "10-K 2021"
    given = {"id": "a", "text": "t", "title": "T", "metadata": {"document": "D"}}
    assert parse_candidate(given, 0).metadata["document"] == "D"
    for empty in (None, "", "  "):  # HTTP's `"title": null` arrives as None
        plain = parse_candidate({"id": "a", "text": "t", "title": empty}, 0)
        assert plain.text == "t" and "document" not in plain.metadata
    again = parse_candidate(titled, 0)  # a parsed candidate carries no title: joined once
    assert again.text == titled.text


def test_a_checkpoint_reads_its_own_first_stage_only_on_its_own_dataset():
    from fincrowd_ltr.api.evaluate import trained_stage
    from fincrowd_ltr.model.summary import TrainingSummary

    def model(**fields):
        return SimpleNamespace(summary=TrainingSummary(**fields))

    corpus = SimpleNamespace(name="financebench")
    stage = "bm25+query+entity+filing"
    assert trained_stage(model(dataset="financebench", first_stage=stage, query_ids=["q"]), corpus)
    assert not trained_stage(model(dataset="tatqa", first_stage=stage, query_ids=["q"]), corpus)
    assert not trained_stage(model(dataset="financebench", first_stage=stage), corpus)


@pytest.mark.parametrize(("held", "fold", "in_plan"), [(2, 0, 0), (2, 1, 1), (2, 2, 3), (2, 3, 4)])
def test_the_calibration_fold_is_counted_in_the_whole_plan(held, fold, in_plan):
    from fincrowd_ltr.data.splits import FoldPlan
    from fincrowd_ltr.model.summary import TrainingSummary

    s = TrainingSummary(folds=5, seed=0, test_fold=held, calibration_fold=fold)
    assert s.calibration_fold_in_plan == in_plan
    plan = FoldPlan(tuple((f"q{i}",) for i in range(5)), 0)
    assert plan.without(held).folds[fold] == plan.folds[in_plan]
    assert f"`calibrate --fold {in_plan} --folds 5 --seed 0`" in s.calibrate_hint()
    assert TrainingSummary(folds=5, calibration_fold=fold).calibration_fold_in_plan == fold
