"""Loaders on hand-written files of each format, bad input, and the real data."""

import gzip
import json
import warnings

import pytest

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.data.beir import load_beir, read_trec_run, write_trec_run
from fincrowd_ltr.data.financebench import load_financebench
from fincrowd_ltr.data.registry import resolve_data_root
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.data.tatqa import load_tatqa


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_financebench(root, questions=None):
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        root / "financebench_document_information.jsonl",
        [
            {"doc_name": "ACME_2020_10K", "company": "Acme", "doc_type": "10k", "doc_period": 2020},
            {"doc_name": "ACME_2021_10K", "company": "Acme", "doc_type": "10k", "doc_period": 2021},
        ],
    )
    pages = [
        {
            "doc_name": "ACME_2020_10K",
            "page_num": 0,
            "text": "Acme revenue 2020 was 10 million dollars",
        },
        {
            "doc_name": "ACME_2020_10K",
            "page_num": 1,
            "text": "Boilerplate risk factors repeated every year here",
        },
        {
            "doc_name": "ACME_2021_10K",
            "page_num": 0,
            "text": "Acme revenue 2021 was 12 million dollars",
        },
        {
            "doc_name": "ACME_2021_10K",
            "page_num": 1,
            "text": "Boilerplate risk factors repeated every year here",
        },
        {"doc_name": "ACME_2022Q1_10Q", "page_num": 0, "text": "Acme first quarter 2022 revenue"},
    ]
    with gzip.open(root / "financebench_pages_pymupdf.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in pages)
    write_jsonl(
        root / "financebench_open_source.jsonl",
        questions
        or [
            {
                "financebench_id": "q1",
                "company": "Acme",
                "question": "Acme FY2021 revenue?",
                "evidence": [{"doc_name": "ACME_2021_10K", "evidence_page_num": 0}],
            },
            {
                "financebench_id": "q2",
                "company": "Acme",
                "question": "Acme risk factors in 2020?",
                "evidence": [
                    {"doc_name": "ACME_2020_10K", "evidence_page_num": 1},
                    {"doc_name": "ACME_2019_10K", "evidence_page_num": 3},
                ],
            },
        ],
    )


def test_financebench_format_quirks_and_coverage(tmp_path):
    make_financebench(tmp_path / "financebench")
    ds = load_dataset("financebench", tmp_path, "all")
    assert ds.qrels["q1"] == {"ACME_2021_10K:0": 1}
    assert ds.covered("q1") and not ds.covered("q2")  # q2 keeps its question, gold partly absent
    assert ds.missing_gold["q2"] == ["ACME_2019_10K:3"]
    # identical boilerplate pages expand relevance
    assert ds.gold_equivalents["q2"] == {"ACME_2021_10K:1": "ACME_2020_10K:1"}
    # a filing missing from document information: metadata from its name
    p = ds.passages["ACME_2022Q1_10Q:0"]
    assert (p.company, p.period, p.doc_type) == ("Acme", "2022Q1", "10q")
    assert any(
        "missing from document information" in n and "ACME_2022Q1_10Q" in n for n in ds.notes
    )


def test_financebench_other_question_file_runs_unchanged(tmp_path):
    make_financebench(tmp_path)
    write_jsonl(
        tmp_path / "financebench_heldout.jsonl",
        [
            {
                "financebench_id": "h1",
                "company": "NewCo",
                "question": "NewCo revenue?",
                "evidence": [{"doc_name": "ACME_2020_10K", "evidence_page_num": 0}],
            }
        ],
    )
    ds = load_financebench(tmp_path, "heldout")
    assert list(ds.queries) == ["h1"] and ds.queries["h1"].group == "NewCo"
    assert len(load_financebench(tmp_path, "all").queries) == 3


def test_malformed_jsonl_names_file_and_line(tmp_path):
    make_financebench(tmp_path)
    path = tmp_path / "financebench_open_source.jsonl"
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(DataError, match=r"financebench_open_source\.jsonl:3: malformed JSON"):
        load_financebench(tmp_path)


def test_missing_field_and_duplicate_id(tmp_path):
    make_financebench(tmp_path, [{"financebench_id": "q1", "company": "Acme", "evidence": []}])
    with pytest.raises(DataError, match=r":1: missing required field 'question'"):
        load_financebench(tmp_path)
    row = {"financebench_id": "q1", "company": "A", "question": "x?", "evidence": []}
    make_financebench(tmp_path, [row, row])
    with pytest.raises(DataError, match=r":2: duplicate question id 'q1'"):
        load_financebench(tmp_path)


def test_missing_file_names_expected_path(tmp_path):
    with pytest.raises(DataError, match="financebench_document_information.jsonl"):
        load_financebench(tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        resolve_data_root(tmp_path / "nowhere")


def make_beir(root):
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        root / "corpus.jsonl",
        [
            {
                "_id": "d1",
                "title": "ACME 10-K",
                "text": "revenue 2021",
                "metadata": {"company": "Acme", "period": 2021},
            },
            {"_id": "d2", "text": "revenue 2020"},
        ],
    )
    write_jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "Acme revenue 2021"}])
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")


def test_beir_and_trec_run(tmp_path):
    make_beir(tmp_path / "mine")
    ds = load_dataset("beir:mine", tmp_path)
    assert ds.passages["d1"].company == "Acme" and ds.passages["d1"].period == "2021"
    # the ninth walk: an absolute folder read the (missing) default data root first
    own = load_dataset(f"beir:{tmp_path / 'mine'}", tmp_path / "nowhere")
    assert own.name == f"beir:{tmp_path / 'mine'}" and sorted(own.passages) == sorted(ds.passages)
    from fincrowd_ltr.data.registry import beir_folder  # what `synthesize` reads, too

    assert beir_folder(f"beir:{tmp_path / 'mine'}", tmp_path / "nowhere") == tmp_path / "mine"
    assert ds.passages["d1"].text.startswith("ACME 10-K")
    run_path = tmp_path / "run.trec"
    write_trec_run(run_path, {"q1": {"d2": 2.0, "d1": 1.5}})
    assert read_trec_run(run_path, ds) == {"q1": {"d2": 2.0, "d1": 1.5}}
    assert read_trec_run(str(run_path)) == {"q1": {"d2": 2.0, "d1": 1.5}}  # a str path too


def test_files_saved_with_a_byte_order_mark_read_as_without(tmp_path):
    """Editors on Windows save UTF-8 with a leading byte-order mark; every file reads past it."""
    make_beir(tmp_path / "mine")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
        path = tmp_path / "mine" / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    ds = load_dataset("beir:mine", tmp_path)
    assert sorted(ds.passages) == ["d1", "d2"] and list(ds.queries) == ["q1"]
    assert ds.covered("q1")
    run_path = tmp_path / "run.trec"
    run_path.write_bytes(b"\xef\xbb\xbfq1 Q0 d2 1 2.0 x\n")
    assert read_trec_run(run_path, ds) == {"q1": {"d2": 2.0}}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q1 Q0 d1 1 nan x", "must be finite"),
        ("q1 Q0 d1 1 inf x", "must be finite"),
        ("q1 Q0 d9 1 1.0 x", "unknown passage id 'd9'"),
        ("q1 d1 1.0", "expected 'qid Q0 docid rank score tag'"),
    ],
)
def test_bad_run_lines(tmp_path, line, message):
    make_beir(tmp_path)
    ds = load_beir(tmp_path)
    (tmp_path / "run.trec").write_text("q1 Q0 d2 1 2.0 x\n" + line + "\n")
    with pytest.raises(DataError, match=rf"run\.trec:2: .*{message}"):
        read_trec_run(tmp_path / "run.trec", ds)


def test_a_run_of_other_questions_is_skipped_with_a_warning_and_of_none_is_an_error(tmp_path):
    make_beir(tmp_path)
    ds = load_beir(tmp_path)
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d2 1 2.0 x\nq9 Q0 d1 1 1.0 x\nq9 Q0 d2 2 0.5 x\n")
    with pytest.warns(
        UserWarning, match=r"run\.trec: 1 of its 2 question ids is not a question"
    ) as seen:
        assert read_trec_run(path, ds) == {"q1": {"d2": 2.0}}
    assert "(e.g. 'q9', line 2)" in str(seen[0].message) and seen[0].filename == __file__
    # attributed to the caller (a script, the console entry point), yet the package's own: the
    # command line prints it as one `fincrowd: warning:` line
    from fincrowd_ltr.cli.commands import plain_warnings

    replaced = plain_warnings()
    try:
        shown = warnings.formatwarning(seen[0].message, seen[0].category, "/usr/bin/fincrowd", 6)
    finally:
        warnings.formatwarning = replaced
    assert shown.startswith("fincrowd: warning: ") and "run.trec: 1 of its 2" in shown
    path.write_text("q1 Q0 d2 1 2.0 x\nq9 Q0 d1 1 1.0 x\nq9 Q0 d1 2 0.5 x\n")
    with pytest.raises(DataError, match=r"run\.trec:3: passage 'd1' listed twice for query 'q9'"):
        read_trec_run(path, ds)  # a skipped question's lines are checked too
    for text in ("q9 Q0 d1 1 1.0 x\n", ""):
        path.write_text(text)
        with pytest.raises(DataError, match=r"scores none of the \d+ questions of .*the split"):
            read_trec_run(path, ds)


def test_questions_without_a_group_answered_by_the_same_pages_share_one(tmp_path):
    """Folds never split questions answered by the same pages when the questions name no group
    (a group per question otherwise: a corpus of one company still fills every fold)."""
    pages = [{"_id": pid, "text": "x", "metadata": {"company": "Acme"}} for pid in "abc"]
    write_jsonl(tmp_path / "corpus.jsonl", pages)
    rows = [{"_id": q, "text": "revenue?"} for q in ("q1", "q2", "q3", "q4", "q5", "q6")]
    rows[4]["group"], rows[5]["metadata"] = "mine", {"company": "Beta"}
    write_jsonl(tmp_path / "queries.jsonl", rows)
    judged = ["q1 a", "q1 b", "q2 b", "q2 a", "q3 a", "q5 a", "q6 a"]
    (tmp_path / "qrels.tsv").write_text("".join(f"{pair} 1\n" for pair in judged))
    data = load_beir(tmp_path)
    groups = {q: v.group for q, v in data.queries.items()}
    assert groups == {"q1": "a b", "q2": "a b", "q3": "a", "q4": "q4", "q5": "mine", "q6": "Beta"}
    assert "1 of 6 questions have no positive judgement in the qrels (first: 'q4')" in data.notes[0]
    # said, so that a fold or an interval over "groups" is read as what it is
    assert "4 of 6 questions give no `group` or `metadata.company`" in data.notes[-1]


def test_beir_unknown_qrels_id_and_empty_query(tmp_path):
    make_beir(tmp_path)
    (tmp_path / "qrels.tsv").write_text("q7\td1\t1\n")
    with pytest.raises(DataError, match="unknown query id 'q7'"):
        load_beir(tmp_path)
    make_beir(tmp_path)
    write_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "  "}])
    with pytest.raises(DataError, match=r"queries\.jsonl:1: query 'q1' has empty text"):
        load_beir(tmp_path)


def test_tatqa_format(tmp_path):
    contexts = [
        {
            "table": {"uid": "t1", "table": [["", "2019"], ["Revenue", "5"]]},
            "paragraphs": [
                {"uid": "p1", "order": 1, "text": "Revenue rose."},
                {"uid": "p2", "order": 2, "text": "Costs fell."},
            ],
            "questions": [
                {
                    "uid": "a",
                    "question": "What was revenue?",
                    "answer_from": "table-text",
                    "rel_paragraphs": ["1"],
                },
                {"uid": "b", "question": "Unlabelled?"},
            ],
        }
    ]
    (tmp_path / "tatqa_dataset_test_gold.json").write_text(json.dumps(contexts))
    ds = load_tatqa(tmp_path, "test_gold")
    assert ds.qrels["a"] == {"t1": 1, "p1": 1}
    assert ds.qrels["b"] == {} and not ds.covered("b")
    assert ds.passages["t1"].is_table and ds.passages["t1"].text == " | 2019\nRevenue | 5"


def test_real_data_counts(financebench, tatqa, data_root):
    assert len(financebench.passages) == 49942
    assert len(financebench.queries) == 108
    assert sum(financebench.covered(q) for q in financebench.queries) == 88
    assert len(tatqa.queries) == 1668 and len(tatqa.passages) == 1634
    finqa = load_dataset("finqa", data_root)
    assert len(finqa.queries) == 300 and all(finqa.qrels[q] for q in finqa.queries)


def test_a_split_asked_of_one_qrels_file_is_warned(tmp_path):
    """The ninth walk: `split="test"` on a folder with one `qrels.tsv` loaded every question,
    said only in `ds.notes`."""
    make_beir(tmp_path / "mine")
    with pytest.warns(UserWarning, match="split 'test' is not applied: every question loads"):
        ds = load_dataset("beir:mine", tmp_path, split="test")
    assert list(ds.queries) == ["q1"]
