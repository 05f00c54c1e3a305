"""The sharded BM25 index and the page store: shard/merge scores equal one bm25s index over the
same pages (global IDF and mean length), workers open shards from storage, bad files are named."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.retrieval.bm25 import BM25Index
from fincrowd_ltr.retrieval.sharded import ShardedBM25, build_sharded_index, plan_shards
from tests.synthesis.test_synthesis import statement_page

QUERIES = [
    "What was the FY2019 capital expenditure of Acme?",
    "operating income of the cloud segment in 2020",
    "net revenue",
    "zzzz unknownword",  # nothing in the vocabulary: every score 0
    "revenue revenue margin",  # a repeated term counts twice, as in bm25s
    "net income of Initech Xpress in 2019",  # the company by the name its pages give it
]


def _write_corpus(pages: list[Passage], path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for p in pages:
            meta = {"company": p.company, "period": p.period, "doc_type": p.doc_type}
            fh.write(json.dumps({"_id": p.pid, "text": p.text, "metadata": meta}) + "\n")
            fh.write("\n")  # blank lines are skipped
    return path


@pytest.fixture(scope="module")
def made_up_pages() -> list[Passage]:
    """Made-up filing pages (no dataset text): repeated texts make ties, one page is empty."""
    rng = np.random.default_rng(0)
    words = (
        *("revenue", "net", "income", "operating", "margin", "cloud", "segment", "capital"),
        *("expenditure", "cash", "flow", "dividends", "2018", "2019", "2020", "fiscal", "year"),
        *("quarter", "total", "assets", "liabilities", "the", "of", "and"),
    )
    pages = []
    for i in range(240):
        text = " ".join(rng.choice(words, size=int(rng.integers(5, 60))))
        if i % 40 == 7:
            text = pages[i - 1].text  # a tie
        if i == 13:
            text = ""
        company = ("Acme", "Globex", "INX")[i % 3]  # INX: a ticker its pages name
        if i % 3 == 2 and i < 30:
            text += " Initech Xpress, Inc."
        pages.append(Passage(f"p{i}", text, company=company, period=str(2018 + i % 3)))
    return pages


@pytest.fixture(scope="module")
def sharded(made_up_pages, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sharded")
    corpus = _write_corpus(made_up_pages, folder / "corpus.jsonl")
    return build_sharded_index([corpus], folder / "index", shard_bytes=2_000, progress=False)


def test_shard_and_merge_scores_equal_one_index_over_all_pages(made_up_pages, sharded):
    single = BM25Index.build({p.pid: p for p in made_up_pages}, progress=False)
    assert len(sharded.names) > 5  # really sharded
    assert sharded.pids == single.pids
    for query in QUERIES:
        assert np.array_equal(sharded.scores(query), single.scores(query)), query
        for k in (1, 10, 500):
            ids, scores = sharded.search(query, k)
            want_ids, want_scores = single.search(query, k)
            assert ids == want_ids and np.array_equal(scores, want_scores), (query, k)
        some = ["p5", "p100", "p13"]
        assert np.array_equal(sharded.score_ids(query, some), single.score_ids(query, some))
    with pytest.raises(DataError, match="'nope' is not in the index"):
        sharded.score_ids("revenue", ["nope"])


def test_the_index_pickles_as_its_folder_and_reopens_from_storage(sharded):
    blob = pickle.dumps(sharded)
    assert len(blob) < 1_000  # no postings, ids or vocabulary in a task graph
    again = pickle.loads(blob)
    assert np.array_equal(again.scores(QUERIES[0]), sharded.scores(QUERIES[0]))


def test_page_store_reads_texts_from_the_corpus_and_notices_a_changed_file(made_up_pages, tmp_path):
    corpus = _write_corpus(made_up_pages[:30], tmp_path / "corpus.jsonl")
    index = build_sharded_index([corpus], tmp_path / "index", progress=False)
    store = index.page_store()
    assert len(store) == 30 and list(store) == [p.pid for p in made_up_pages[:30]]
    assert store["p4"].text == made_up_pages[4].text and store["p4"].company == "Globex"
    assert store.headers["p4"].text == "" and store.headers["p4"].period == "2019"
    with pytest.raises(KeyError):
        store["p999"]
    text = corpus.read_text()
    corpus.write_text(text.replace("Globex", "Globix", 1))  # an edit of the same length
    import os

    os.utime(corpus, ns=(0, 0))  # its time moved, whatever the file system's clock grain
    with pytest.warns(UserWarning, match="modified since it was indexed"):
        index.page_store()
    corpus.write_text("\n" + text)  # every page one byte later: refused when opened
    with pytest.raises(DataError, match=r"corpus.jsonl: .* bytes, .* when it was indexed"):
        index.page_store()
    for shard in (tmp_path / "index").iterdir():  # an index that recorded no size reads on
        if (shard / "pages.json").is_file():
            info = json.loads((shard / "pages.json").read_text())
            del info["size"], info["mtime_ns"]
            (shard / "pages.json").write_text(json.dumps(info))
    fresh = index.page_store()
    with pytest.raises(DataError, match="corpus.jsonl: page 'p4' is no longer at byte"):
        fresh["p4"]


def test_bad_corpus_files_are_refused_naming_file_and_line(tmp_path):
    bad = tmp_path / "corpus.jsonl"
    bad.write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n')
    with pytest.raises(DataError, match=r"corpus.jsonl:2: malformed JSON"):
        build_sharded_index([bad], tmp_path / "index", progress=False)
    bad.write_text('{"_id": "a", "text": "x"}\n{"_id": "b"}\n')
    with pytest.raises(DataError, match=r"corpus.jsonl:2: .*'text'"):
        build_sharded_index([bad], tmp_path / "index", progress=False)
    (tmp_path / "corpus.jsonl.gz").write_bytes(b"")
    with pytest.raises(DataError, match="gunzip"):
        plan_shards([tmp_path / "corpus.jsonl.gz"])
    with pytest.raises(DataError, match="sharded index"):
        ShardedBM25(tmp_path / "nothing")


def test_a_failed_rebuild_leaves_the_earlier_index_whole(made_up_pages, tmp_path):
    """The tenth walk: re-indexing into a folder overwrote shards and then failed on a bad line,
    leaving the old merge files over new shards: an index that opened and mixed two corpora."""
    corpus = _write_corpus(made_up_pages, tmp_path / "corpus.jsonl")
    first = build_sharded_index([corpus], tmp_path / "index", shard_bytes=2_000, progress=False)
    before = first.search("capital expenditure 2019", 5)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(corpus.read_text() + '{"_id": "z", "text": \n')
    with pytest.raises(DataError, match="malformed JSON"):
        build_sharded_index([bad], tmp_path / "index", shard_bytes=2_000, progress=False)
    again = ShardedBM25(tmp_path / "index")
    assert again.search("capital expenditure 2019", 5)[0] == before[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "corpus.jsonl", "index"]
    rebuilt = build_sharded_index([corpus], tmp_path / "index", shard_bytes=4_000, progress=False)
    assert len(rebuilt) == len(first) and len(rebuilt.names) < len(first.names)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    with pytest.raises(DataError, match=r"holds files that are not an index's \(notes.txt\)"):
        build_sharded_index([corpus], tmp_path / "mine", progress=False)
    (tmp_path / "index" / "notes.txt").write_text("mine")  # beside an index: kept, refused
    with pytest.raises(DataError, match=r"not an index's \(notes.txt\)"):
        build_sharded_index([corpus], tmp_path / "index", progress=False)
    (tmp_path / "index" / "notes.txt").unlink()
    (tmp_path / "link").symlink_to(tmp_path / "index")  # the target is rebuilt, the link kept
    build_sharded_index([corpus], tmp_path / "link", shard_bytes=2_000, progress=False)
    assert (tmp_path / "link").is_symlink() and len(ShardedBM25(tmp_path / "link")) == 240
    import os
    from pathlib import Path

    real = Path.rename  # a failed swap puts the earlier index back (a review)

    def failing(self, target):
        if str(self).endswith(".new"):
            raise OSError("cannot rename here")
        return real(self, target)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "rename", failing)
        with pytest.raises(OSError, match="cannot rename"):
            build_sharded_index([corpus], tmp_path / "index", progress=False)
    assert len(ShardedBM25(tmp_path / "index")) == 240
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # nothing left aside
    shard = next(p for p in (tmp_path / "index").iterdir() if p.is_dir())
    docs = shard / "docs.npy"
    docs.write_bytes(docs.read_bytes()[:-8])  # truncated: named, not numpy's bare mmap error
    with pytest.raises(DataError, match=r"index: a file of the index is damaged or missing"):
        ShardedBM25(tmp_path / "index")


def test_shards_cut_at_line_ends_and_count_lines(made_up_pages, tmp_path):
    corpus = _write_corpus(made_up_pages, tmp_path / "corpus.jsonl")
    tasks = plan_shards([corpus], shard_bytes=3_000)
    data = corpus.read_bytes()
    assert tasks[0].start == 0 and tasks[-1].stop == len(data)
    for before, after in zip(tasks, tasks[1:], strict=False):
        assert before.stop == after.start and data[after.start - 1 : after.start] == b"\n"
        assert after.line == data[: after.start].count(b"\n") + 1


def test_dask_workers_build_the_same_index_reading_shards_from_storage(made_up_pages, tmp_path):
    pytest.importorskip("dask.distributed")
    from fincrowd_ltr.data.schema import Dataset, Query
    from fincrowd_ltr.engine import make_engine, using
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.retrieval.banks import retrieve_candidates
    from fincrowd_ltr.retrieval.first_stage import FirstStage

    corpus = _write_corpus(made_up_pages, tmp_path / "corpus.jsonl")
    local = build_sharded_index([corpus], tmp_path / "local", shard_bytes=2_000, progress=False)
    queries = {f"q{i}": Query(f"q{i}", text, "made-up") for i, text in enumerate(QUERIES * 20)}
    store = local.page_store()
    extractor = FieldExtractor.from_passages(store.headers.values())
    data = Dataset("made-up", queries, store, {})
    stage = FirstStage("bm25+entity", local, store.headers, extractor)
    want = retrieve_candidates(data, stage, 20)
    engine = make_engine("dask", workers=2, device="cpu")
    try:
        with using(engine):
            index = build_sharded_index(
                [corpus], tmp_path / "dask", shard_bytes=2_000, progress=False
            )
            got = retrieve_candidates(
                data, FirstStage("bm25+entity", index, store.headers, extractor), 20
            )
    finally:
        engine.close()
    for query in QUERIES:
        assert np.array_equal(index.scores(query), local.scores(query))
    for qid, bank in want.banks.items():
        assert got.banks[qid].pids == bank.pids
        assert np.array_equal(got.banks[qid].first_stage, bank.first_stage)


def test_index_command_builds_an_index_and_refuses_a_bad_file(made_up_pages, tmp_path, capsys):
    from fincrowd_ltr.cli import main

    corpus = _write_corpus(made_up_pages, tmp_path / "corpus.jsonl")
    out = tmp_path / "index"
    assert main(["index", "--corpus", str(corpus), "--out", str(out), "--query", "revenue"]) == 0
    printed = capsys.readouterr().out
    assert "240 pages" in printed and json.loads(printed.strip().splitlines()[-1])["pages"] == 240
    assert ShardedBM25(out).search("revenue", 1)[0][0] in printed
    (tmp_path / "bad.jsonl").write_text("not json\n")
    assert main(["index", "--corpus", str(tmp_path / "bad.jsonl"), "--out", str(out)]) == 2
    assert "bad.jsonl:1: malformed JSON" in capsys.readouterr().err


def test_banks_over_the_page_store_and_sharded_index_equal_the_in_memory_ones(
    made_up_pages, sharded
):
    import fincrowd_ltr as fc
    from fincrowd_ltr.data.schema import Dataset, Query

    queries = {f"q{i}": Query(f"q{i}", text, "made-up") for i, text in enumerate(QUERIES)}
    qrels = {"q0": {"p3": 1}, "q1": {"p8": 1}}
    memory = Dataset("made-up", queries, {p.pid: p for p in made_up_pages}, qrels)
    on_disk = Dataset("made-up", queries, sharded.page_store(), qrels)
    assert [p.text for p in on_disk.passages.values()] == [p.text for p in made_up_pages]
    assert on_disk.corpus_fingerprint() == memory.corpus_fingerprint()
    from fincrowd_ltr.synthesis import page_table_questions, taught

    assert page_table_questions(on_disk) is None  # not read whole to teach its page table
    assert page_table_questions(memory) is not None
    assert not taught(on_disk) and taught(memory)  # what a checkpoint's recipe records
    for stage in ("bm25", "bm25+entity"):
        want = fc.build_banks(memory, "bm25", first_stage=stage, cache_dir=None, progress=False)
        got = fc.build_banks(
            on_disk, "bm25", first_stage=stage, cache_dir=None, index=sharded, progress=False
        )
        for qid, bank in want.banks.items():
            assert got.banks[qid].pids == bank.pids
            assert np.array_equal(got.banks[qid].scores["bm25"], bank.scores["bm25"])
    with pytest.raises(DataError, match="other|stemmer"):
        fc.build_banks(
            on_disk,
            "bm25",
            first_stage="bm25",
            cache_dir=None,
            index=sharded,
            stemmer="english",
            progress=False,
        )
    # the tenth walk: another corpus's index gave banks of pages the corpus lacks
    part = Dataset("part", queries, {p.pid: p for p in made_up_pages[:100]}, qrels)
    with pytest.raises(DataError, match=r"the index holds 240 pages and part 100 \(the index's"):
        fc.build_banks(part, "bm25", first_stage="bm25", cache_dir=None, index=sharded)


def test_repeated_ids_empty_corpora_and_nan_scores_are_handled(made_up_pages, tmp_path):
    from fincrowd_ltr.retrieval.bm25 import top_k

    one = _write_corpus(made_up_pages[:5], tmp_path / "a.jsonl")
    with pytest.raises(DataError, match="duplicate passage id 'p0'"):
        build_sharded_index([one, one], tmp_path / "twice", progress=False)
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(DataError, match="no pages"):
        build_sharded_index([tmp_path / "blank.jsonl"], tmp_path / "blank", progress=False)
    with pytest.raises(DataError, match="positive"):
        plan_shards([one], shard_bytes=0)
    scores = np.array([1.0, 2.0, np.nan, 3.0, 4.0])
    assert top_k(scores, 2).tolist() == [4, 3] and top_k(scores, 5).tolist() == [4, 3, 1, 0, 2]


def _beir_questions(folder: Path, qrels: dict[str, str]) -> Path:
    """A BEIR folder of questions and judgements alone: its corpus is the index's."""
    folder.mkdir()
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        for i, text in enumerate(QUERIES):
            fh.write(json.dumps({"_id": f"q{i}", "text": text, "metadata": {"company": "Acme"}}))
            fh.write("\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{p}\t1" for q, p in qrels.items()]
    (folder / "qrels.tsv").write_text("\n".join(lines) + "\n")
    return folder


def test_a_beir_folder_over_an_index_never_indexes_its_pages_in_memory(
    made_up_pages, sharded, tmp_path, monkeypatch, capsys
):
    import fincrowd_ltr as fc
    from fincrowd_ltr.cli import main
    from fincrowd_ltr.data.store import PageStore

    folder = _beir_questions(tmp_path / "mine", {"q0": "p3", "q1": "p8"})
    mine = fc.load_dataset(f"beir:{folder}", index=sharded.folder)  # no corpus.jsonl there
    memory = fc.Dataset("mine", mine.queries, {p.pid: p for p in made_up_pages}, mine.qrels)
    want = fc.build_banks(memory, "bm25", first_stage="bm25+entity", cache_dir=None, progress=False)

    def refuse(*args, **kwargs):
        raise AssertionError("the pages were indexed in memory")

    monkeypatch.setattr(BM25Index, "build", refuse)  # the index must serve every search
    assert isinstance(mine.passages, PageStore) and mine.qrels == {"q0": {"p3": 1}, "q1": {"p8": 1}}
    got = fc.build_banks(mine, "bm25", first_stage="bm25+entity", cache_dir=None, progress=False)
    for qid, bank in want.banks.items():
        assert got.banks[qid].pids == bank.pids
        assert np.array_equal(got.banks[qid].scores["bm25"], bank.scores["bm25"])
    with pytest.raises(DataError, match=r"index.* built with BM25 settings .*stemmer"):
        fc.build_banks(mine, "bm25", stemmer="english", cache_dir=None, progress=False)
    # the commands read the questions over the index too
    out = tmp_path / "banks.jsonl"
    args = ["--dataset", f"beir:{folder}", "--index", str(sharded.folder), "--ranker", "bm25"]
    assert main(["banks", *args, "--first-stage", "bm25+entity", "--out", str(out)]) == 0
    assert out.exists()
    assert main(["evaluate", *args, "--first-stage", "bm25", "--cache-dir", str(tmp_path)]) == 0
    assert "R@10" in capsys.readouterr().out
    # bad input: a judgement of a page the index lacks, no index, an index of a bundled dataset
    _beir_questions(tmp_path / "other", {"q0": "p999"})
    with pytest.raises(
        DataError, match=rf"unknown passage id 'p999' \(not in the index {sharded.folder}"
    ):
        fc.load_dataset(f"beir:{tmp_path / 'other'}", index=sharded)
    with pytest.raises(DataError, match="not a sharded index"):
        fc.load_dataset(f"beir:{folder}", index=tmp_path)
    with pytest.raises(DataError, match="serves a BEIR folder"):
        fc.load_dataset("financebench", index=sharded)
    assert main(["banks", "--dataset", "tatqa", "--index", str(sharded.folder)]) == 2
    assert "serves a BEIR folder" in capsys.readouterr().err


def test_the_pages_fingerprint_is_hashed_once_per_index_and_state_of_its_files(
    made_up_pages, tmp_path, monkeypatch
):
    import os

    import fincrowd_ltr.data.store as store_module
    from fincrowd_ltr.data.schema import Dataset, pages_fingerprint

    corpus = _write_corpus(made_up_pages[:40], tmp_path / "corpus.jsonl")
    index = build_sharded_index([corpus], tmp_path / "index", shard_bytes=500, progress=False)
    want = pages_fingerprint({p.pid: p for p in made_up_pages[:40]})
    hashed = []

    def counted(passages):
        hashed.append(1)
        return pages_fingerprint(passages)

    monkeypatch.setattr(store_module, "pages_fingerprint", counted)

    def fingerprint() -> str:  # a new process's dataset over the index
        return Dataset("mine", {}, index.page_store(), {}).corpus_fingerprint()

    assert fingerprint() == want and len(hashed) == 1
    assert (tmp_path / "index" / "fingerprint.json").is_file()
    assert fingerprint() == want and len(hashed) == 1  # read, not hashed again
    text, stat = corpus.read_text(), corpus.stat()
    corpus.write_text(text.replace("Globex", "Globix", 1))  # an edit of the same length
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # its time put back (cp -p)
    edited = fingerprint()  # the page store trusts size and time; the record does not
    assert edited != want and len(hashed) == 2  # the edit is hashed, not the old record read
    os.utime(corpus, ns=(0, 0))
    with pytest.warns(UserWarning, match="modified since it was indexed"):
        assert fingerprint() == edited and len(hashed) == 3
    corpus.write_text(text)
    os.utime(corpus, ns=(5, 5))
    (tmp_path / "index" / "fingerprint.json").write_text("{damaged")
    with pytest.warns(UserWarning, match="modified since"):
        assert fingerprint() == want and len(hashed) == 4
    # an index folder holding its recorded fingerprint (and one a killed reader left half
    # written) is its own: indexing again replaces it
    (tmp_path / "index" / ".fingerprint.json.123").write_text("")
    build_sharded_index([corpus], tmp_path / "index", shard_bytes=500, progress=False)
    assert not (tmp_path / "index" / "fingerprint.json").exists()


def test_a_stemmed_index_a_misspelt_folder_and_a_damaged_record_are_handled(
    made_up_pages, tmp_path, monkeypatch, capsys
):
    import fincrowd_ltr as fc
    from fincrowd_ltr.cli import main
    from fincrowd_ltr.data.schema import Dataset
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.fields.corpus import corpus_extractor

    pages = [  # segment names are harvested from page texts streamed from disk too
        *made_up_pages[:60],
        Passage("s1", "Revenue of our Cloud Services segment rose.", company="Acme", period="2019"),
        Passage("s2", "The Industrial Parts segment shrank.", company="INX", period="2020"),
        *(
            Passage(f"t{y}", statement_page("Acme", 1, y), company="Acme", period=str(y))
            for y in (2019, 2020, 2021)
        ),
    ]
    corpus = _write_corpus(pages, tmp_path / "corpus.jsonl")
    out = tmp_path / "stemmed"
    assert main(["index", f"--corpus={corpus}", f"--out={out}", "--stemmer=english"]) == 0
    store = ShardedBM25(out).page_store()
    memory = FieldExtractor.from_passages(pages)
    built = corpus_extractor(store)
    assert built.segment_names == memory.segment_names and built.segment_names
    assert built.companies == memory.companies
    folder = _beir_questions(tmp_path / "mine", {"q0": "p3", "q1": "p8"})
    args = ["--dataset", f"beir:{folder}", "--index", str(out), "--ranker", "bm25"]
    assert main(["banks", *args, "--first-stage", "bm25"]) == 2  # unstemmed banks asked
    assert "--stemmer` of `banks`, `evaluate` and `first-stage`" in capsys.readouterr().err
    assert main(["banks", *args, "--first-stage", "bm25", "--stemmer", "english"]) == 0
    report = tmp_path / "report.json"  # evaluate's --stemmer was accepted and ignored before
    evaluate = ["evaluate", *args, "--first-stage", "bm25", "--stemmer", "english"]
    assert main([*evaluate, f"--cache-dir={tmp_path / 'c'}", f"--out={report}"]) == 0
    # synthesis measures its questions' difficulty with the index as it was built
    mine = fc.load_dataset(f"beir:{folder}", index=out)
    found = fc.synthesize(mine, 5, cache_dir=None, named_share="auto")
    assert found.passages is mine.passages and found.difficulty["n_questions"] == 5
    capsys.readouterr()
    assert (
        main(
            [
                "synthesize",
                "--dataset",
                f"beir:{folder}",
                "--index",
                str(out),
                "--n=5",
                f"--out={tmp_path}",
            ]
        )
        == 2
    )  # fmt: skip  (the folder of the indexed corpus)
    assert "is the corpus being read" in capsys.readouterr().err
    with pytest.raises(DataError, match="no such BEIR folder"):
        fc.load_dataset(f"beir:{tmp_path / 'typo'}", index=out)
    with pytest.raises(SystemExit):
        main(["demo", "--index", str(out)])  # the demo's config names its datasets
    # the recorded fingerprint: damaged, unwritable, or its corpus file gone
    (out / "fingerprint.json").write_text("[]")
    want = Dataset("m", {}, {p.pid: p for p in pages}, {}).corpus_fingerprint()
    assert Dataset("d", {}, ShardedBM25(out).page_store(), {}).corpus_fingerprint() == want
    (out / "fingerprint.json").unlink()

    def refuse(*args):
        raise PermissionError("read-only")

    with monkeypatch.context() as patched:
        patched.setattr("fincrowd_ltr.data.store.os.replace", refuse)
        with pytest.warns(UserWarning, match="cannot record the pages' fingerprint"):
            assert ShardedBM25(out).page_store().corpus_fingerprint() == want
    assert not list(out.glob(".fingerprint*"))
    store = ShardedBM25(out).page_store()
    corpus.rename(tmp_path / "moved.jsonl")
    with pytest.raises(DataError, match="indexed corpus file is gone"):
        store.corpus_fingerprint()
