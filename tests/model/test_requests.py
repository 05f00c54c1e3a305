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
