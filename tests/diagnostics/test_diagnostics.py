"""Crowding diagnostics: matched pools, balance, the crowded-failure rule, and the CLI on a
user's BEIR corpus with a TREC run."""

import json

import numpy as np
import pytest

from fincrowd_ltr.cli import main
from fincrowd_ltr.data.beir import write_trec_run
from fincrowd_ltr.data.schema import Dataset, Passage, Query
from fincrowd_ltr.diagnostics.crowding import label_failure, summarise_failures
from fincrowd_ltr.diagnostics.matching import (
    match_cem,
    match_nearest,
    standardised_mean_differences,
)
from fincrowd_ltr.diagnostics.stress import StressConfig, run_stress
from fincrowd_ltr.features import BankFeaturizer
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.compatibility import conflicts
from fincrowd_ltr.retrieval.banks import CandidateBank

N_EACH = 20


def toy_dataset() -> tuple[Dataset, CandidateBank]:
    """One Acme FY2021 revenue question: gold, wrong-year pages (incompatible) and other pages of
    the right filing (compatible). The ranker prefers the wrong years: crowding by design."""
    passages = {
        "gold": Passage("gold", "Acme revenue for fiscal 2021 was 120.", "Acme", "A21", "2021"),
    }
    for i in range(N_EACH):
        year = "2019" if i % 2 else "2020"
        passages[f"inc{i}"] = Passage(
            f"inc{i}", f"Acme revenue for fiscal {year} note {i}.", "Acme", f"A{year}", year
        )
        passages[f"comp{i}"] = Passage(
            f"comp{i}", f"Acme revenue discussion for fiscal 2021 note {i}.", "Acme", "A21", "2021"
        )
    data = Dataset(
        "toy",
        {"q": Query("q", "What was Acme revenue in FY2021?", "Acme")},
        passages,
        {"q": {"gold": 1}},
    )
    pids = list(passages)
    rng = np.random.default_rng(0)
    dense = np.array([0.5] + [0.9 if p.startswith("inc") else 0.1 for p in pids[1:]]) + rng.normal(
        0, 0.01, len(pids)
    )
    bank = CandidateBank(
        "q", pids, first_stage=np.linspace(10, 1, len(pids)), scores={"dense": dense}
    )
    return data, bank


@pytest.fixture(scope="module")
def stress():
    data, bank = toy_dataset()
    featurizer = BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)
    config = StressConfig(sizes=(5, 10, 15), caliper=10.0)
    return data, featurizer, run_stress(data, {"q": bank}, "dense", featurizer, config)


def test_pools_are_nested_sized_and_typed(stress):
    data, featurizer, report = stress
    q_fields = featurizer.query_fields(data.queries["q"].text)
    previous = {"incompatible": [], "compatible": []}
    for size in ("5", "10", "15"):
        row = report["per_query"][size]["q"]
        for cond in ("incompatible", "compatible"):
            pool = row[cond]["distractors"]
            assert len(pool) == len(set(pool)) == int(size)
            assert pool[: len(previous[cond])] == previous[cond]  # nested
            found = [conflicts(q_fields, featurizer.passage_fields(p)) for p in pool]
            if cond == "compatible":
                assert not any(found) and "gold" not in pool
            else:
                assert all(found)
            previous[cond] = pool


def test_incompatible_pools_displace_the_gold(stress):
    _, _, report = stress
    for size in ("5", "10", "15"):
        row = report["variants"]["primary"][size]
        assert row["n_queries"] == 1 and row["n_dropped"] == 0
        assert row["recall@10"]["compatible"] == 1.0
        assert row["ndcg@10"]["delta"] < 0
        assert row["gold_rank_shift"] > 0
    assert report["variants"]["primary"]["15"]["recall@10"]["delta"] == -1.0
    # every incompatible distractor conflicts on the period only
    assert report["variants"]["typed:period"]["5"]["n_queries"] == 1
    assert report["variants"]["typed:segment"]["5"]["n_queries"] == 0


def test_standardised_mean_differences_by_hand():
    treated = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
    controls = np.array([[2.0, 5.0], [3.0, 5.0], [4.0, 5.0]])
    smd = standardised_mean_differences(treated, controls)
    # means 2 vs 3, variances 2/3 each: (2 - 3) / sqrt(2/3)
    assert smd[0] == pytest.approx(-1.0 / np.sqrt(2.0 / 3.0))
    assert smd[1] == 0.0


def test_matching_respects_exact_covariates_caliper_and_reuse():
    # columns: model, lexical, same_company, table, length, numeric density
    x = np.array(
        [
            [0.0, 0.0, 1, 0, 0.0, 0.0],  # treated 0
            [0.1, 0.0, 1, 0, 0.0, 0.0],  # treated 1
            [5.0, 0.0, 1, 0, 0.0, 0.0],  # treated 2: nothing within the caliper
            [0.0, 0.0, 0, 0, 0.0, 0.0],  # control 3: other company
            [0.05, 0.0, 1, 0, 0.0, 0.0],  # control 4
            [0.2, 0.0, 1, 0, 0.0, 0.0],  # control 5
        ]
    )
    pairs = match_nearest([0, 1, 2], [3, 4, 5], x, limit=10, caliper=1.0)
    assert pairs == [(0, 4), (1, 5)]
    assert match_nearest([0, 1, 2], [3, 4, 5], x, limit=1, caliper=1.0) == pairs[:1]
    assert all(x[t, 2] == x[c, 2] for t, c in match_cem([0, 1, 2], [3, 4, 5], x, limit=10))


@pytest.mark.parametrize(
    ("ranking", "conflicts", "status", "reason"),
    [
        (["g", *[f"x{i}" for i in range(20)]], {}, "hit", None),
        ([f"x{i}" for i in range(20)], {"x0": ("period",)}, "absent", None),
        ([*[f"x{i}" for i in range(12)], "g"], {}, "orderable", "no conflicting candidate above"),
        (
            [*[f"x{i}" for i in range(12)], "g"],
            {"x0": ("period",)},
            "orderable",
            "deleting conflicts is not enough",
        ),
        (
            [*[f"x{i}" for i in range(12)], "g"],
            {"x0": ("period",), "x1": ("period", "entity"), "x2": ("entity",), "x3": ("period",)},
            "crowded",
            None,
        ),
    ],
)
def test_crowded_failure_rule(ranking, conflicts, status, reason):
    label = label_failure(ranking, {"g"}, conflicts)
    assert label["status"] == status
    if reason:
        assert label["reason"] == reason
    if status == "crowded":
        assert label["rank"] == 13 and label["rank_without_conflicts"] == 9
        assert label["primary_field"] == "period"  # three of the four conflicts above
        assert label["sufficient_fields"] == ["period"]  # entity alone leaves it at 11


def test_failure_summary_counts():
    labels = {
        "a": {"status": "hit"},
        "b": {"status": "absent"},
        "c": {"status": "orderable"},
        "d": {
            "status": "crowded",
            "primary_field": "period",
            "sufficient_fields": ["period"],
            "conflict_fields": {"period": 2},
        },
    }
    s = summarise_failures(labels)
    assert (s["top10_failures"], s["orderable_failures"], s["crowded_failures"]) == (3, 2, 1)
    assert s["share_crowded_of_orderable"] == 0.5
    assert s["crowded_by_primary_field"] == {"period": 1}


def test_diagnose_on_a_beir_corpus_with_a_trec_run(tmp_path, capsys):
    root = tmp_path / "corpus"
    root.mkdir()
    corpus, queries, qrels, run = [], [], [], {}
    for c in range(4):
        company = f"Company{c}"
        for year in range(2015, 2022):
            for page in range(3):
                corpus.append(
                    {
                        "_id": f"{c}-{year}-{page}",
                        "text": f"{company} revenue for fiscal {year} rose, page {page}",
                        "metadata": {"company": company, "period": year, "document": f"{c}-{year}"},
                    }
                )
        queries.append({"_id": f"q{c}", "text": f"What was {company} revenue in FY2021?"})
        qrels.append(f"q{c}\t{c}-2021-0\t1")
        # the user's ranker puts the gold at rank 12, under wrong-year pages
        docs = [d["_id"] for d in corpus if d["_id"].startswith(f"{c}-")]
        others = [d for d in docs if d != f"{c}-2021-0"]
        order = others[:11] + [f"{c}-2021-0"] + others[11:]
        run[f"q{c}"] = {d: float(len(order) - i) for i, d in enumerate(order)}
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    write_trec_run(tmp_path / "run.trec", run)
    out = tmp_path / "diag"
    code_args = [
        "diagnose",
        "--dataset=beir",
        f"--data-root={root}",
        f"--cache-dir={tmp_path / 'cache'}",
        "--ranker=run",
        f"--run={tmp_path / 'run.trec'}",
        "--similarity=bm25",
        "--pool-sizes=2,4",
        f"--out={out}",
    ]
    code = main(code_args)
    assert code == 0
    assert "retrieved banks: 4/4 top-10 failures" in capsys.readouterr().out  # the printed report
    report = json.loads((out / "report.json").read_text())
    labels = [json.loads(line) for line in (out / "crowding_labels.jsonl").read_text().splitlines()]
    assert len(labels) == 4 and report["failures"]["n_queries"] == 4
    # the wrong years above the gold are period conflicts: every query is a crowded failure
    assert {lab["status"] for lab in labels} == {"crowded"}
    assert report["failures"]["crowded_by_primary_field"] == {"period": 4}
    for name in ("summary.md", "recall_vs_pool.png", "typed_deltas.png", "failures.png"):
        assert (out / name).stat().st_size > 0
    summary = (out / "summary.md").read_text()
    for heading in ("## Matched-pool stress test", "## Covariate balance", "## Crowded failures",
                    "## Top-k composition", "Near duplicates"):  # fmt: skip
        assert summary.count(heading) == 1, heading
    assert report["first_stage"] == "bm25"  # 'auto' on a BEIR corpus
    # pools drawn by the filing-aware first stage: the asked company's pages of every period
    filing = tmp_path / "diag-filing"
    stage = "bm25+query+entity+filing"
    argv = [f"--out={filing}", f"--first-stage={stage}", "--ranker=bm25"]
    base = [a for a in code_args if not a.startswith(("--out", "--ranker", "--run"))]
    assert main([*base, *argv]) == 0
    report = json.loads((filing / "report.json").read_text())
    assert report["first_stage"] == stage and report["stress"]["n_eligible"] == 4


@pytest.mark.parametrize(
    "shortcut, said",
    [
        ({"caliper": "x"}, "caliper must be a number > 0"),
        ({"pool_sizes": 5}, "pool sizes must be a list of counts > 0"),
        ({"similarity": "bm52"}, "similarity must be one of"),
        # a twelfth walk: 10,10 counted every question twice; depth 0 spoke of a bank size
        ({"pool_sizes": (10, 10)}, "pool sizes must differ"),
        ({"pool_depth": 0}, r"pool_depth \(--pool-depth\) must be >= 1"),
    ],
)
def test_diagnose_names_a_bad_setting_before_it_embeds_anything(shortcut, said):
    """The ninth walk: a bad caliper failed in numpy after minutes of MiniLM, an int pool size
    as 'not iterable', a misspelt keyword as an internal class's argument."""
    import fincrowd_ltr as fc

    with pytest.raises(fc.DataError, match=said):
        fc.diagnose("nowhere", "bm25", **shortcut)
    with pytest.raises(TypeError, match=r"diagnose does not use .*'simlarity'.*'similarity'"):
        fc.diagnose("nowhere", "bm25", simlarity="bm25")
    with pytest.raises(TypeError, match=r"'pool_dept'\] \(did you mean 'pool_depth'\?\)"):
        fc.diagnose("nowhere", "bm25", pool_dept=50)
    import numpy as np  # numpy counts and any iterable of sizes are counts (a review)

    assert StressConfig(sizes=tuple(np.array([10, 30])), caliper=np.float32(0.2)).bins > 0
    assert StressConfig(similarity_ranker="run").similarity_ranker == "run"
    with pytest.raises(fc.DataError, match="pool sizes must be a list"):
        StressConfig(sizes=())
    from fincrowd_ltr.cli import main

    for sizes in ("abc", "", "10,,30"):  # a traceback before
        assert main(["diagnose", "--dataset=finqa", "--ranker=bm25", f"--pool-sizes={sizes}"]) == 2
