"""Packing: never over the budget, nothing dropped silently, splits at sentence and table-row
boundaries, deterministic orders, quotas, near-duplicates, token-bounded split-and-fuse."""

import random

import pytest

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.packing import (
    ORDERS,
    Packer,
    PruningPolicy,
    TokenCounter,
    assemble,
    fuse_groups,
    near_duplicate_of,
    rank_halves_exceed,
    split_passage,
    units,
)

WORDS = ("revenue", "margin", "segment", "cash", "dividend")
WORDS += ("capital", "lease", "inventory", "goodwill", "tax")


@pytest.fixture(scope="module")
def counter():
    return TokenCounter()


def _text(rng, sentences):
    out = []
    for _ in range(sentences):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 30)))
        out.append(words.capitalize() + ".")
        if rng.random() < 0.3:
            out.append(f"\nTotal | {rng.randint(1, 999)} | {rng.randint(1, 999)}\n")
    return " ".join(out)


def _passages(seed, n=12):
    rng = random.Random(seed)
    return [
        Passage(
            f"p{i}",
            _text(rng, rng.randint(1, 60)),
            company=rng.choice(["Acme", "Globex"]),
            document=f"doc{i % 3}",
            period=str(rng.choice([2019, 2020, 2021])),
            position=rng.randint(1, 90),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("budget", [60, 300, 1500])
def test_packing_never_exceeds_the_budget_and_accounts_for_everything(counter, seed, budget):
    passages = _passages(seed)
    packing = Packer(counter, budget).pack("What was Acme revenue in 2020?", passages)
    for order in ORDERS:
        assert counter.count(assemble(packing, order).prompt()) <= budget
    assert packing.tokens <= budget
    packed = {p.citation.pid for p in packing.passages}
    dropped = {d["pid"] for d in packing.dropped}
    assert packed | dropped == {p.pid for p in passages}  # nothing vanishes
    for d in packing.dropped:
        assert d["tokens"] > 0 and d["reason"] == "over budget"


def test_a_passage_over_budget_is_split_at_sentence_and_row_boundaries(counter):
    text = " ".join(f"Sentence number {i} says revenue grew." for i in range(60))
    text += "\nRevenue | 100 | 200\nCost | 50 | 60"
    parts = split_passage(text, 40, counter)
    assert len(parts) > 1 and all(counter.count(p) <= 40 for p in parts)
    assert all(p.rstrip().endswith((".", "200", "60")) for p in parts)
    assert "Revenue | 100 | 200" in " ".join(parts)
    big = Passage("big", text, document="d", position=3)
    packing = Packer(counter, 120).pack("Revenue?", [big])
    assert [p.citation.part.split("/")[0] for p in packing.passages][0] == "1"
    assert packing.dropped and all(d["pid"] == "big" and "part" in d for d in packing.dropped)
    assert [u for u, _ in units("A b. C d.\nx | 1 | 2")] == ["A b.", "C d.", "x | 1 | 2"]
    # a split passage is in the context in part only: never counted as whole
    assert packing.pids == ["big"] and packing.whole_pids == []
    # a BEIR title is the text's first line and the document the header cites: said once
    title = "Acme 2021 annual report"
    titled = Passage("t", f"{title}\nRevenue rose.", document=title)
    (packed,) = Packer(counter, 1000).pack("Revenue?", [titled]).passages
    assert packed.text == "Revenue rose." and "Acme 2021 annual report" in packed.citation.header(1)
    other = Passage("o", "Acme 2021 annual report\nRevenue rose.", document="acme-10k-2021")
    assert Packer(counter, 1000).pack("Revenue?", [other]).passages[0].text == other.text
    assert Packer(counter, 100_000).pack("Revenue?", [big]).whole_pids == ["big"]


def test_orders_are_deterministic(counter):
    packing = Packer(counter, 100_000).pack("q", _passages(1, n=7))
    ranks = [p.rank for p in assemble(packing, "edges").passages]
    assert ranks == [1, 3, 5, 7, 6, 4, 2]
    assert [p.rank for p in assemble(packing, "score").passages] == list(range(1, 8))
    doc = assemble(packing, "document").passages
    keys = [
        (p.citation.company, p.citation.period, p.citation.document, p.citation.position)
        for p in doc
    ]
    assert keys == sorted(keys)
    for order in ORDERS:
        assert assemble(packing, order).prompt() == assemble(packing, order).prompt()
    with pytest.raises(ValueError, match="unknown order"):
        assemble(packing, "random")


def test_constraint_quotas_keep_evidence_for_each_requested_period():
    extractor = FieldExtractor.from_passages([Passage("x", "", company="Acme")])
    ranked = [
        Passage(
            f"a19-{i}", f"Acme {WORDS[i]} fell {i} percent in 2019", company="Acme", period="2019"
        )
        for i in range(10)
    ] + [
        Passage(
            f"a20-{i}",
            f"Acme 2020 {WORDS[i]} {WORDS[i + 3]} {WORDS[i + 6]}",
            company="Acme",
            period="2020",
        )
        for i in range(3)
    ]
    query = "How did Acme revenue change between 2019 and 2020?"
    top = PruningPolicy("top", 4).select(query, ranked, extractor)
    assert all(p.period == "2019" for p in top)
    kept = PruningPolicy("constraint", 4, quota=2).select(query, ranked, extractor)
    assert len(kept) == 4 and sum(p.period == "2020" for p in kept) == 2
    assert sum(p.period == "2019" for p in kept) == 2


def test_constraint_quotas_read_every_period_of_a_multi_year_filing():
    """A 10-K given the years its tables print (``"2018,2019,2020"``) holds evidence of 2020 too:
    the quota read only the string's start, so it counted such a filing for 2018 alone."""
    extractor = FieldExtractor.from_passages([Passage("x", "", company="Acme")])
    ranked = [
        Passage(f"old-{i}", f"Acme {WORDS[i]} in 2017", company="Acme", period="2016,2017")
        for i in range(6)
    ] + [Passage("k", "Acme revenue table", company="Acme", period="2018,2019,2020")]
    for period in ("2018,2019,2020", "2018, 2019, 2020", 2020, "FY2020"):  # as built in Python
        ranked[-1] = Passage("k", "Acme revenue table", company="Acme", period=period)
        kept = PruningPolicy("constraint", 2, quota=1).select(
            "Acme revenue in 2020?", ranked, extractor
        )
        assert "k" in [p.pid for p in kept], period


def test_near_duplicates_on_hand_written_passages():
    texts = [
        "The Company is exposed to market risk from changes in interest rates and currency "
        "exchange rates, which may adversely affect results of operations in fiscal 2019.",
        "Revenue grew 12% driven by the cloud segment and higher subscription renewals.",
        "The Company is exposed to market risk from changes in interest rates and currency "
        "exchange rates, which may adversely affect results of operations in fiscal 2020.",
        "  revenue GREW 12% driven by the cloud segment and higher subscription renewals. ",
    ]
    assert near_duplicate_of(texts) == [None, None, 0, 1]
    policy = PruningPolicy("constraint", 8)
    kept = policy.select(
        "risk?", [Passage(str(i), t) for i, t in enumerate(texts)], FieldExtractor()
    )
    assert [p.pid for p in kept] == ["0", "1"]


def test_split_and_fuse_groups_are_token_bounded(counter):
    passages = _passages(3, n=20)
    budget = 400
    halves = rank_halves_exceed(counter, "q", passages, budget)
    assert halves["split_triggered"] and halves["half_exceeds"]
    groups = fuse_groups(Packer(counter, budget), "q", passages)
    assert len(groups) > 2 and all(g.tokens <= budget for g in groups)
    packed = {pid for g in groups for pid in g.pids}
    assert packed == {p.pid for p in passages}


def test_answer_support_finds_the_figures_an_answer_needs():
    """Issue 25: answer support without a generator. Figures count in any printed scale, as a
    percentage or fraction, up to the coarser side's rounding with three significant digits left,
    signs aside; a small integer never stands for a decimal figure."""
    from fincrowd_ltr.data.answers import figure_of, program_figures, tatqa_figures
    from fincrowd_ltr.evaluation.answers import support

    page = "Capital expenditures (1,577) (1,373) | revenue $32.8 billion | margin 12.5% | page 2"
    assert support(page, ["1577.00", "1373"]) == 1.0
    assert support(page, ["32800", "0.125", "12.46"]) == 1.0  # millions, a fraction, rounding
    assert support(page, ["1577", "1.6"]) == 0.5  # "2" does not print 1.6
    assert support(page, []) is None
    assert figure_of("$1,577.00") == "1577.00" and figure_of("(8.7%)") == "8.7"
    assert figure_of("Revenue grew 5% to $32.8 billion") is None  # text: reported apart
    assert program_figures("subtract(5829, 5735), divide(#0, const_100)") == ["5829", "5735"]
    arithmetic = {"answer_type": "arithmetic", "derivation": "(1,496.5 - 1,202.9) / 1,202.9"}
    assert tatqa_figures(arithmetic) == ["1496.5", "1202.9"]
    assert tatqa_figures({"answer_type": "span", "answer": ["fixed-price type"]}) == []


def test_packing_report_counts_answer_support_per_question():
    from fincrowd_ltr.data.schema import Dataset, Query
    from fincrowd_ltr.evaluation.packing import evaluate_packing
    from fincrowd_ltr.packing import POLICIES

    passages = {
        "a": Passage(
            "a", "Capital expenditures were 1,577 in 2018.", company="Acme", period="2018"
        ),
        "b": Passage("b", "Revenue was 9,000 in 2018.", company="Acme", period="2018"),
    }
    queries = {q: Query(q, "What was Acme's capital expenditure in 2018?", "Acme") for q in "xy"}
    data = Dataset(
        "toy", queries, passages, {"x": {"a": 1}, "y": {"a": 1}}, answer_figures={"x": ["1577"]}
    )
    packed = evaluate_packing(
        data, {"x": ["b", "a"], "y": ["b"]}, POLICIES[0], Packer(TokenCounter(), 2000),
        FieldExtractor(),
    )  # fmt: skip
    assert packed["answer_figures_in_context"]["mean"] == 1.0
    assert packed["answer_figures_in_context"]["n"] == 1
    assert packed["n_without_answer_figures"] == 1
    assert packed["gold_in_context"]["mean"] == 0.5 and packed["gold_partly_in_context"] == 0.0
    # gold split over a budget too small for it: in part, not in context
    long = Passage("a", " ".join(f"Capital expenditures were {i},577." for i in range(60)))
    split = evaluate_packing(
        Dataset("toy", queries, {**passages, "a": long}, {"x": {"a": 1}, "y": {"a": 1}}),
        {"x": ["a"], "y": ["a"]}, POLICIES[0], Packer(TokenCounter(), 120), FieldExtractor(),
    )  # fmt: skip
    assert split["gold_in_context"]["mean"] == 0.0 and split["gold_partly_in_context"] == 1.0


def test_pack_command_packs_a_users_corpus_into_the_budget(tmp_path, capsys):
    import json

    from fincrowd_ltr.cli import main
    from tests.conftest import write_corpus

    write_corpus(tmp_path / "c")
    out = tmp_path / "packed"
    args = ["pack", "--dataset=beir", f"--data-root={tmp_path / 'c'}", "--ranker=bm25",
            "--first-stage=bm25", "--bank-size=8", "--budget=600", "--depth=8",
            f"--cache-dir={tmp_path / 'cache'}", f"--out={out}"]  # fmt: skip
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["budget"] == 600 and set(report["systems"]) == {"base:bm25"}
    rows = [json.loads(line) for line in (out / "contexts.jsonl").read_text().splitlines()]
    assert rows and all(row["tokens"] <= 600 and row["system"] == "base:bm25" for row in rows)
    assert (out / "summary.md").read_text().strip()
    # --orders packs a report's orders as ranked: flags that make banks are refused, not
    # ignored (a twelfth walk), and no --ranker is asked for (a fifth walk was)
    assert main([*args[:-1], f"--out={tmp_path / 'again'}", "--orders=missing.json"]) == 2
    said = capsys.readouterr().err
    assert "--ranker, --first-stage, --bank-size would not be read" in said
    unranked = [a for a in args[:-1] if not a.startswith(("--ranker", "--first", "--bank"))]
    assert main([*unranked, f"--out={tmp_path / 'again'}", "--orders=missing.json"]) == 2
    assert "missing.json" in capsys.readouterr().err
    # an `evaluate --out` report's orders pack as they were evaluated
    common = [a for a in unranked if not a.startswith(("--budget", "--depth"))]
    common += ["--first-stage=bm25", "--bank-size=8"]
    evaluated = tmp_path / "report.json"
    assert main(["evaluate", *common[1:], "--ranker=bm25", f"--out={evaluated}"]) == 0
    assert main([*unranked, f"--out={tmp_path / 'eval'}", f"--orders={evaluated}"]) == 0
    again = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert set(again["systems"]) == {"base:bm25"}
    assert again["systems"]["base:bm25"] == report["systems"]["base:bm25"]
    # systems that rank different questions (a correction's rows rank only those it never saw)
    # are packed on the questions they share, and the report says so
    orders = json.loads(evaluated.read_text())
    base = orders["rankings"]["base:bm25"]
    first = sorted(base)[0]
    orders["rankings"]["gated:bm25"] = {q: r for q, r in base.items() if q != first}
    shared = tmp_path / "shared.json"
    shared.write_text(json.dumps(orders))
    assert main([*unranked, f"--out={tmp_path / 'shared'}", f"--orders={shared}"]) == 0
    both = json.loads((tmp_path / "shared" / "report.json").read_text())
    assert both["systems"]["base:bm25"] == both["systems"]["gated:bm25"]  # the same orders
    assert f"packed on the {len(base) - 1} questions every system ranks" in both["questions_note"]
    assert both["questions_note"] in (tmp_path / "shared" / "summary.md").read_text()
    # a fit without a gate writes its held-out orders too (an eleventh walk's leftover: its
    # report had none, and it recorded a cap and a gate calibration it does not have)
    fitted = tmp_path / "fit.json"
    fit = ["fit", *common[1:4], "--ranker=bm25", "--folds=4", "--no-select", "--no-gate",
           f"--cache-dir={tmp_path / 'cache'}", f"--report={fitted}"]  # fmt: skip
    assert main([*fit, f"--out={tmp_path / 'ungated'}"]) == 0
    written = json.loads(fitted.read_text())
    assert "gated" not in written and "regression_cap" not in written
    assert "gate_calibration" not in written and "gate_rows" not in written
    held = written["rankings"]
    assert set(held) == {"base:bm25", "residual:bm25"}
    assert len(held["base:bm25"]) == written["modes"]["retrieved"]["n_queries"]
    assert main([*unranked, f"--out={tmp_path / 'fitted'}", f"--orders={fitted}"]) == 0
    packed = json.loads((tmp_path / "fitted" / "report.json").read_text())
    assert set(packed["systems"]) == {"base:bm25", "residual:bm25"}
    assert "gate_folds" not in written
    # a gated fit's orders stay under `gated` only (a top-level copy would be packed first)
    gated_fit = [a for a in fit if a != "--no-gate"] + ["--min-calibration=1"]
    assert main([*gated_fit, f"--out={tmp_path / 'gated'}"]) == 0
    gated = json.loads(fitted.read_text())
    assert "rankings" not in gated and gated["gated"]["modes"]["retrieved"]["rankings"]
    del gated["gated"]
    fitted.write_text(json.dumps(gated))
    assert main([*unranked, f"--out={tmp_path / 'none'}", f"--orders={fitted}"]) == 2
    assert "no rankings in this report" in capsys.readouterr().err


def test_pack_refuses_orders_and_budgets_it_cannot_pack(tmp_path):
    """A twelfth walk: a passage ranked twice was packed twice, empty orders wrote a report of
    nulls, and the rest failed with tracebacks that named no file, question or field."""
    import json

    import fincrowd_ltr as fc
    from tests.conftest import write_corpus

    write_corpus(tmp_path / "c")
    data = fc.load_dataset("beir", tmp_path / "c")
    good = {"rankings": {"base:x": {"qCompany0": ["0-2021", "0-2020"]}}}
    pack = lambda orders, **kw: fc.pack(data, tmp_path / "out", orders=orders, cache_dir=None, **kw)  # noqa: E731
    assert pack(good, budget=600)["systems"]["base:x"]
    for rankings, said in (
        ({"base:x": {"qCompany0": ["0-2021", "0-2019", "0-2021"]}}, "'0-2021' ranked twice"),
        ({"base:x": {}}, "system 'base:x' ranks no question"),
        ({}, "name no system"),
        ({"base:x": {"qCompany0": ["nope"]}}, "question 'qCompany0': unknown passage id 'nope'"),
        ({"base:x": {"qCompany0": "0-2021"}}, "a ranking is a list of passage ids"),
        ({"base:x": {"qx": ["0-2021"]}}, "question 'qx': not a question of beir"),
    ):  # fmt: skip
        with pytest.raises(fc.DataError, match=said):
            pack({"rankings": rankings})
    for bad, said in (
        ({"budget": 0}, r"budget \(--budget\) must be a whole number >= 1"),
        ({"budget": float("nan")}, "must be a whole number"),
        ({"depth": -1}, r"depth \(--depth\) must be a whole number >= 1"),
        ({"budget": 5}, "budget: question 'qCompany0': the question alone takes"),
        ({"tokenizer": tmp_path / "none"}, "no tokenizer folder at"),
        ({"first_stage": "bm25"}, "first_stage .*would not be read"),
        ({"ranker": "bm25"}, "ranker .*would not be read"),
        ({"depth": True}, "depth .*must be a whole number"),
    ):  # fmt: skip
        with pytest.raises(fc.DataError, match=said):
            pack(good, **bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"rankings": {\n')
    with pytest.raises(fc.DataError, match=f"{broken}:2: malformed JSON"):
        pack(broken)
    (tmp_path / "ok.json").write_text(json.dumps(good))
    assert pack(tmp_path / "ok.json", budget=600)["systems"]["base:x"]
    assert pack(good, budget=600.0)["budget"] == 600  # a whole number written as a float
    from fincrowd_ltr.cli import main

    # a review: `--bank-size 0` was read as the default 100 once it could be left out
    bad = ["pack", "--dataset=beir", f"--data-root={tmp_path / 'c'}", "--ranker=bm25",
           "--first-stage=bm25", "--bank-size=0", f"--out={tmp_path / 'o'}",
           f"--cache-dir={tmp_path / 'cache'}"]  # fmt: skip
    assert main(bad) == 2
