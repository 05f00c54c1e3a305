"""Query processing steps on hand-written questions, and the entity-aware first stage with its
fallback when the question names no company the corpus has."""

import json

import pytest

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.first_stage import FirstStage
from fincrowd_ltr.retrieval.query import QueryProcessor

FX = FieldExtractor()


@pytest.mark.parametrize(
    ("steps", "question", "expected"),
    [
        (
            ("instructions",),
            "What was the capex? Round your answer to two decimal places.",
            "What was the capex?",
        ),
        (
            ("instructions",),
            "Give a response to the question by relying on the details shown in the filing. "
            "What was revenue?",
            "What was revenue?",
        ),
        (("instructions",), "Round your answer to two decimal places.", None),  # kept whole
        (
            ("periods",),
            "Revenue in FY2018 and FY 19 and FY'20?",
            "Revenue in 2018 and 2019 and 2020?",
        ),
    ],
)
def test_each_step(steps, question, expected):
    out = QueryProcessor(FX, steps)(question)
    assert out == (expected if expected is not None else question)


def test_synonyms_add_the_filing_wording():
    out = QueryProcessor(FX, ("synonyms",))("What was the capital expenditure in 2018?")
    assert "property" in out.lower() and out.startswith("What was the capital expenditure")
    with pytest.raises(ValueError, match="unknown query processing step"):
        QueryProcessor(FX, ("stemming",))


def _corpus(root):
    corpus = []
    for company in ("Acme", "Globex"):
        for year in (2019, 2020):
            corpus.append(
                {
                    "_id": f"{company}-{year}",
                    "text": f"{company} annual report {year}: revenue grew and margins held",
                    "metadata": {"company": company, "period": year},
                }
            )
    corpus.append({"_id": "other", "text": "revenue revenue revenue grew grew margins"})
    root.mkdir()
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    queries = [{"_id": "q1", "text": "How did Globex revenue grow?"}]
    (root / "queries.jsonl").write_text(json.dumps(queries[0]) + "\n")
    (root / "qrels.tsv").write_text("q1\tGlobex-2020\t1\n")
    return load_dataset("beir", str(root), "all")


def test_entity_first_stage_ranks_the_named_company_first_and_falls_back(tmp_path):
    data = _corpus(tmp_path / "c")
    index = BM25Index.build(data.passages, progress=False)
    stage = FirstStage(
        "bm25+entity", index, data.passages, FieldExtractor.from_passages(data.passages.values())
    )
    pids, scores = stage.search("How did Globex revenue grow?", 3)
    assert set(pids[:2]) == {"Globex-2019", "Globex-2020"} and len(pids) == 3
    assert list(scores) == sorted(scores, reverse=True)
    plain, _ = index.search("How did Initech revenue grow?", 5)
    fallback, _ = stage.search("How did Initech revenue grow?", 5)  # no such company: plain BM25
    assert fallback == plain
    assert (
        stage.score_ids("How did Globex revenue grow?", ["Globex-2019"])[0]
        == scores[pids.index("Globex-2019")]
    )
