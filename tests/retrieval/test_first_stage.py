"""Query processing steps on hand-written questions, and the entity-aware first stage with its
fallback when the question names no company the corpus has."""

import json

import numpy as np
import pytest

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.data.metadata import normalise_metadata
from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.defaults import AUTO_FALLBACK, AUTO_FIRST_STAGE
from fincrowd_ltr.evaluation.first_stage import ablation, retrieve_runs
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.filings import filing_score, implied_kinds
from fincrowd_ltr.retrieval.first_stage import (
    FILING_WEIGHT,
    STATIC_WEIGHT,
    FirstStage,
    StageParts,
    parse_first_stage,
    resolve_first_stage,
)
from fincrowd_ltr.retrieval.query import QUERY_STEPS, QueryProcessor

FX = FieldExtractor()


@pytest.mark.parametrize(
    ("steps", "question", "expected"),
    [
        (
            ("instructions",),
            "What was the capex? Round the answer to one decimal place.",
            "What was the capex?",
        ),
        (
            ("instructions",),
            "Give a response to the question by reading the annual report closely. "
            "What was revenue?",
            "What was revenue?",
        ),
        (("instructions",), "Round your answer to the nearest million.", None),  # kept whole
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


def test_filing_scores_follow_period_restatement_quarter_and_type():
    asked, annual = frozenset({"2019"}), implied_kinds("What was FY2019 capex?")
    assert annual == {"annual"}
    assert filing_score("2019", "10k", asked, annual) == 1.0
    assert filing_score("2020", "10k", asked, annual) == 0.5  # restates 2019
    assert filing_score("2018", "10k", asked, annual) == 0.0
    assert filing_score("2020", "10q", asked, annual) == 0.0  # a 10-Q restates nothing a year on
    assert filing_score("2019Q2", "10q", asked, annual) == 0.5  # another type than asked
    assert filing_score(None, "10k", asked, annual) == 0.0  # unknown period: no lift
    q2 = frozenset({"2023Q2"})
    hint = implied_kinds("What was revenue in Q2 2023 per the 10-Q?")
    assert hint == {"quarterly"}
    assert filing_score("2023Q2", "10q", q2, hint) == 1.0
    assert filing_score("2023Q3", "10q", q2, hint) == 0.25
    assert filing_score("2023", "10k", q2, hint) == 0.5
    assert filing_score("2023Q2", "earnings", q2, frozenset()) == 0.5  # no hint: annual first
    assert implied_kinds("What did the 8-K say?") == {"release"}


def test_a_filing_given_the_years_its_tables_print_is_its_latest_years_report():
    """docs/data.md: give a 10-K the years its tables print (a range, or a list): the filing
    prior reads its own year as the latest of them (the eighth walk: it read the earliest, so
    a question on FY2015 lifted the 2017 report and dropped the 2015 one)."""
    asked, annual = frozenset({"2015"}), implied_kinds("What was FY2015 capex?")
    canonical = normalise_metadata({"period": "2013-2015"}, "x")["period"]
    assert canonical == "2013,2014,2015"
    assert filing_score(canonical, "10k", asked, annual) == 1.0  # the 2015 report
    assert filing_score("2014,2015,2016", "10k", asked, annual) == 0.5  # restates 2015
    assert filing_score("2015,2016,2017", "10k", asked, annual) == 0.0
    assert filing_score("2016,2015,2014", "10k", asked, annual) == 0.5  # order does not matter
    q2 = frozenset({"2023Q2"})
    hint = implied_kinds("What was revenue in Q2 2023 per the 10-Q?")
    assert filing_score("2023Q2,2022Q2", "10q", q2, hint) == 1.0
    assert filing_score("2023Q3,2023Q2", "10q", q2, hint) == 0.25  # the Q3 report
    assert filing_score("2023,2023Q3", "10q", q2, hint) == 0.25  # a 10-Q's own: its quarter
    assert filing_score("2023,2024Q1", "10k", frozenset({"2023"}), annual) == 1.0  # a 10-K's: year


def test_filing_first_stage_lifts_the_asked_filing_and_falls_back_without_a_year(tmp_path):
    data = _corpus(tmp_path / "c")
    index = BM25Index.build(data.passages, progress=False)
    fx = FieldExtractor.from_passages(data.passages.values())
    entity = FirstStage("bm25+entity", index, data.passages, fx)
    filing = FirstStage("bm25+entity+filing=1", index, data.passages, fx)
    question = "How did Globex revenue grow in fiscal year 2019?"
    assert filing.search(question, 1)[0] == ["Globex-2019"]
    assert set(filing.search(question, 2)[0]) == {"Globex-2019", "Globex-2020"}
    no_year = "How did Globex revenue grow?"
    (pids, scores), (plain_pids, plain_scores) = (
        filing.search(no_year, 5),
        entity.search(no_year, 5),
    )
    assert pids == plain_pids and np.array_equal(scores, plain_scores)
    other = "How did Initech revenue grow in 2019?"  # no company of the corpus: no lift either
    assert filing.search(other, 5)[0] == entity.search(other, 5)[0]


def test_keywords_step_appends_key_phrases():
    question = "What was the capital expenditure of Acme in 2018?"
    out = QueryProcessor(FX, ("keywords",))(question)
    assert out.startswith(question) and len(out) > len(question)
    assert "capital expenditure" in out[len(question) :].lower()


def test_first_stage_names_parse_and_auto_resolves_per_dataset():
    assert parse_first_stage("bm25") == StageParts((), False)
    assert parse_first_stage("bm25+query+entity") == StageParts(QUERY_STEPS, True)
    assert parse_first_stage("bm25+keywords+periods") == StageParts(("periods", "keywords"))
    assert parse_first_stage("bm25+entity+filing").filing == FILING_WEIGHT
    assert parse_first_stage("bm25+entity+filing=0.25").filing == 0.25 != FILING_WEIGHT
    assert parse_first_stage("bm25+static").static == STATIC_WEIGHT
    assert parse_first_stage("bm25+entity+filing+static=0.1") == StageParts((), True, 1.0, 0.1)
    for bad in (
        "bm25+stemming",
        "dense+query",
        "bm25+query+query",
        "bm25+query+filing",  # filing ranks the named company's filings: needs entity
        "bm25+entity+filing=0",
        "bm25+entity+filing=x",
        "bm25+entity+filing+filing=1",
        "bm25+static=0",
        "bm25+static=-1",
        "bm25+static+static=1",
    ):
        with pytest.raises(DataError, match="unknown first stage"):
            parse_first_stage(bad)
    # 'auto' is whatever the ablation chose, per dataset
    for name, stage in AUTO_FIRST_STAGE.items():
        assert resolve_first_stage("auto", name) == stage
        parse_first_stage(stage)
    assert resolve_first_stage("auto", "my-corpus") == AUTO_FALLBACK == "bm25"
    # a synthetic question set over a corpus shares the corpus's stage (it used to fall back)
    fb = resolve_first_stage("auto", "financebench")
    assert resolve_first_stage("auto", "financebench-synthetic") == fb != AUTO_FALLBACK
    assert resolve_first_stage("auto", "my-corpus-synthetic") == AUTO_FALLBACK
    assert resolve_first_stage("bm25+periods", "financebench") == "bm25+periods"


def test_ablation_reports_every_variant_and_chooses_on_training_folds(tmp_path):
    data = _corpus(tmp_path / "c")
    index = BM25Index.build(data.passages, progress=False)
    variants = ["bm25", "bm25+entity"]
    runs = retrieve_runs(data, index, variants, depth=3)
    report = ablation(data, runs, k=2)
    assert set(report["variants"]) == {"bm25", "bm25+entity", "selected"}
    assert report["variants"]["bm25+entity"]["recall@100"] == 1.0  # Globex pages first
    assert report["chosen_on_all"] in variants
    assert len(report["chosen_per_fold"]) == 2
    # one question, one group: no fold has both training and test questions, nothing is chosen
    assert report["variants"]["selected"]["n"] == 0
    assert "delta_recall@100_vs_bm25" in report["variants"]["bm25+entity"]


def test_training_fold_choice_with_many_groups_picks_the_better_variant(tmp_path):
    """Twelve companies in three folds: on every fold's training folds the entity-aware first
    stage finds the asked company's pages and plain BM25 (distracted by another company's pages
    that name the asked one many times) does not, so every fold chooses it and 'selected'
    equals it."""
    from tests.conftest import user_corpus

    data = user_corpus(companies=12)
    for c in range(12):
        for k in range(3):
            pid = f"stuffed-{c}-{k}"
            text = f"Company{c} revenue " * 8 + f"compared with Other{c} revenue"
            data.passages[pid] = Passage(pid, text, company=f"Other{c}")
    index = BM25Index.build(data.passages, progress=False)
    runs = retrieve_runs(data, index, ["bm25", "bm25+entity"], depth=3)
    report = ablation(data, runs, k=3)
    assert report["chosen_per_fold"] == ["bm25+entity"] * 3
    chosen = report["variants"]["selected"]
    assert chosen["n"] == 12
    assert chosen["recall@100"] == report["variants"]["bm25+entity"]["recall@100"]
    assert report["variants"]["bm25+entity"]["recall@10"] > report["variants"]["bm25"]["recall@10"]
