"""Label-free training questions: statement rows read from page text, relevance that never makes a
restatement a negative, typed negatives, determinism, no question or qrels ever read, the BEIR
folder, fold scoping in training, and the zero-label journey (synthesize, fit, evaluate)."""

import dataclasses
import json
import math
import re
import warnings
from collections import Counter

import numpy as np
import pytest
import torch

import fincrowd_ltr as fc
from fincrowd_ltr.api.fit import _Folds
from fincrowd_ltr.api.synthetic import SyntheticExamples, SyntheticSettings
from fincrowd_ltr.data.beir import load_beir, write_trec_run
from fincrowd_ltr.data.splits import FoldPlan
from fincrowd_ltr.features.examples import BankExample
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.model.correction import SyntheticDomainWarning
from fincrowd_ltr.synthesis import read_table, synthesize
from fincrowd_ltr.synthesis.questions import filing_kind_of
from fincrowd_ltr.synthesis.tables import figure_key
from tests.conftest import dump_beir, user_corpus

YEARS = (2019, 2020, 2021, 2022)


def _figures(company: int, year: int) -> dict[str, int]:
    base = 1000 + 137 * company + 91 * (year - 2000)
    return {"Net sales": base * 3, "Cost of sales": base * 2, "Net income": base // 4}


def statement_page(name: str, c: int, year: int) -> str:
    """An income statement as a PDF text layer prints it: one cell per line, '$' on its own."""
    lines = [name.upper(), "CONSOLIDATED STATEMENTS OF OPERATIONS", "(in millions)", "Year Ended"]
    lines += [str(year), str(year - 1)]
    for label in ("Net sales", "Cost of sales", "Net income"):
        now, before = _figures(c, year)[label], _figures(c, year - 1)[label]
        lines += [label, "$", f"{now:,}", "$", f"{before:,}"]
    return "\n".join(lines)


def filings_corpus(companies: int = 12, questions: bool = True) -> fc.Dataset:
    """Each company's 10-Ks: a statement page, a prose page and a cover page per year; labelled
    questions (when asked) ask for one year's net sales."""
    passages, queries, qrels = {}, {}, {}
    for c in range(companies):
        name = f"Firm{c}"
        for year in YEARS:
            doc = f"{name}_{year}_10K"
            pages = {
                f"{doc}:1": f"{name} annual report for fiscal {year}. Commission file 1-{c}.",
                f"{doc}:2": statement_page(name, c, year),
                f"{doc}:3": (
                    f"Management discussion. Net sales were ${_figures(c, year)['Net sales']:,} "
                    f"million in fiscal {year}, driven by demand for our products."
                ),
            }
            for pid, text in pages.items():
                passages[pid] = fc.Passage(
                    pid, text, company=name, document=doc, period=str(year), doc_type="10k",
                    position=int(pid.rsplit(":", 1)[1]),
                )  # fmt: skip
        if questions:
            qid = f"q-{name}"
            queries[qid] = fc.Query(qid, f"What were {name}'s net sales in FY2021?", group=name)
            qrels[qid] = {f"{name}_2021_10K:2": 1}
    return fc.Dataset("filings", queries, passages, qrels)


def test_statement_rows_are_read_one_cell_per_line_and_one_row_per_line():
    extractor = FieldExtractor()
    table = read_table("p", statement_page("Firm1", 1, 2021), extractor)
    assert table.periods == ("2021", "2020")
    assert [(r.label, r.metric) for r in table.rows] == [
        ("Net sales", "revenue"),
        ("Cost of sales", "cost_of_revenue"),
        ("Net income", "net_income"),
    ]
    assert table.rows[0].values == (f"{_figures(1, 2021)['Net sales']:,}",) + (
        f"{_figures(1, 2020)['Net sales']:,}",
    )
    inline = (
        "Summary\n(in thousands)\n2023 2022\nTotal revenues $ 1,200 $ 1,100\nNet loss (45) (12)"
    )
    rows = read_table("q", inline, extractor).rows
    assert [(r.metric, r.values) for r in rows] == [
        ("revenue", ("1,200", "1,100")),
        ("net_income", ("(45)", "(12)")),
    ]
    # no year header, or a row with the wrong number of figures: nothing is guessed
    assert read_table("r", "Net sales\n100\n90", extractor) is None
    assert read_table("s", "2021\n2020\nNet sales\n100", extractor) is None
    assert figure_key("$ (1,234.5)") == "-1234.5" and figure_key("—") == "0"


def _segment_page(name: str, year: int, ireland: int) -> str:
    """A revenue-by-geography table whose rows no metric of the vocabulary names."""
    lines = [f"{name} revenue by geography", "(in thousands)", f"{year} {year - 1}"]
    lines += [f"Ireland {ireland:,} {ireland - 400:,}", f"Malaysia {ireland // 2:,} 1,000"]
    lines += [f"Total {ireland + ireland // 2:,} 2,000", f"Net sales {5_000 + year} {4_000 + year}"]
    return "\n".join(lines)


def test_any_line_item_asks_about_rows_by_their_own_label():
    extractor = FieldExtractor()
    page = _segment_page("Firm1", 2021, 7_300)
    assert [r.metric for r in read_table("p", page, extractor).rows] == ["revenue"]
    rows = read_table("p", page, extractor, any_label=True).rows
    # rows the vocabulary does not name are read by their label; "Total" names nothing alone
    assert [r.metric for r in rows] == ["row:ireland", "row:malaysia", "revenue"]
    # a second header line or a dated balance is no line item: never asked about
    dated = page.replace("Ireland", "Years ended December 31, 2021 2020\nIreland", 1)
    dated += "\nBalance at end of June 1,234 1,100\nStock-based compensation 812 790"
    rows = read_table("p", dated, extractor, any_label=True).rows
    assert [r.metric for r in rows][-1] == "row:stock-based compensation"
    assert not any("december" in r.metric or "june" in r.metric for r in rows)
    passages = {
        f"Firm{c}_{y}:{k}": fc.Passage(
            f"Firm{c}_{y}:{k}", text, company=f"Firm{c}", document=f"Firm{c}_{y}", period=str(y)
        )
        for c in range(3)
        for y in (2021, 2022)
        for k, text in enumerate(
            (_segment_page(f"Firm{c}", y, 7_300 + 100 * c + y), f"Firm{c} cover page {y}")
        )
    }
    # a prose page restating the Ireland figure next to its label: relevant, never a negative
    passages["Firm1_2021:9"] = fc.Passage(
        "Firm1_2021:9", "Revenue in Ireland was 9,421 thousand in 2021.", company="Firm1",
        document="Firm1_2021", period="2021",
    )  # fmt: skip
    # the label and digits of the figure inside another number: not the row, not relevant
    passages["Firm1_2021:8"] = fc.Passage(
        "Firm1_2021:8", "Northern Ireland employed 19,421 people in 2021.", company="Firm1",
        document="Firm1_2021", period="2021",
    )  # fmt: skip
    data = fc.Dataset("geo", {}, passages, {})
    known = synthesize(data, n=500, seed=0, templates=("line_item",), line_items="known")
    every = synthesize(data, n=500, seed=0, templates=("line_item",))  # "any", the default
    assert SyntheticSettings().line_items == "any"
    assert {q.metric for q in known.questions} == {"revenue"}
    assert {q.metric for q in every.questions} == {"revenue", "row:ireland", "row:malaysia"}
    assert len(every.questions) == 3 * len(known.questions)
    ireland = next(
        q for q in every.questions if q.source == "Firm1_2021:0" and q.metric == "row:ireland"
    )
    assert "ireland" in ireland.text.lower() and "2021" in ireland.text
    assert set(ireland.relevant) == {"Firm1_2021:0", "Firm1_2021:9"}
    assert all(not p.startswith("Firm1_") for p in ireland.negatives["other_company"])
    assert ireland.negatives["other_company"]  # the same label in other companies' tables
    with pytest.raises(fc.DataError, match="line_items"):
        synthesize(data, line_items="all")
    with pytest.raises(fc.DataError, match="line_items"):
        SyntheticSettings(n=10, line_items="all")


def test_restating_pages_are_relevant_and_negatives_are_typed():
    data = filings_corpus(questions=False)
    syn = synthesize(data, n=200, seed=0, templates=("line_item",))
    q = next(q for q in syn.questions if q.source == "Firm3_2021_10K:2" and q.metric == "revenue")
    assert q.period == "2021" and "Firm3" in q.text and "2021" in q.text
    # the 2022 10-K prints fiscal 2021's net sales again, and the 2021 MD&A states the figure in
    # prose: both relevant, never negatives
    assert set(q.relevant) == {"Firm3_2021_10K:2", "Firm3_2022_10K:2", "Firm3_2021_10K:3"}
    # other_period: pages of the same line item whose columns never print 2021
    assert q.negatives["other_period"] and all(
        "2021" not in p and "2022" not in p for p in q.negatives["other_period"]
    )
    assert all(not p.startswith("Firm3_") for p in q.negatives["other_company"])
    assert not set(q.relevant) & {p for v in q.negatives.values() for p in v}


def test_a_change_runs_from_the_earlier_column_to_the_later_either_way_round():
    """Tables print their columns newest first or oldest first: a `change` question asks from
    the earlier year to the later one in both."""
    from dataclasses import replace

    data = filings_corpus(companies=1, questions=False)
    page = data.passages["Firm0_2021_10K:2"]
    lines = page.text.split("\n")
    ascending = lines[:4] + ["2020", "2021"] + lines[6:]
    for k in range(6, len(ascending), 5):  # label, $, now, $, before -> label, $, before, $, now
        ascending[k + 2], ascending[k + 4] = ascending[k + 4], ascending[k + 2]
    data.passages[page.pid] = replace(page, text="\n".join(ascending))
    syn = synthesize(data, n=500, seed=0, templates=("change",))
    asked = [q.text for q in syn.questions if q.source in ("Firm0_2021_10K:2", "Firm0_2022_10K:2")]
    assert len(asked) == 6
    for text in asked:
        start, end = map(int, re.search(r"from \D*(\d{4}) to \D*(\d{4})\?", text).groups())
        assert end == start + 1
    # fewer questions than asked: the note says how many found ones repeated a wording
    from fincrowd_ltr.synthesis.questions import _shortfall

    (note,) = _shortfall(syn.questions[:4], 500, 7, list(data.passages.values()))
    assert note.startswith("4 of the 500 questions asked for: the templates found 7")
    assert "3 of them repeating another question of the same company word for word" in note
    (note,) = _shortfall(syn.questions[:4], 500, 4, list(data.passages.values()))
    assert "repeating" not in note


def test_synthesis_is_deterministic_balanced_and_scoped_to_companies():
    data = filings_corpus(questions=False)
    a = synthesize(data, n=60, seed=3)
    b = synthesize(data, n=60, seed=3)
    assert [q.to_dict() for q in a.questions] == [q.to_dict() for q in b.questions]
    assert [q.text for q in synthesize(data, n=60, seed=4).questions] != [
        q.text for q in a.questions
    ]
    report = a.report()
    assert report["n_questions"] == 60 and report["n_companies"] == 12
    assert max(report["per_company"].values()) - min(report["per_company"].values()) <= 1
    assert {"line_item", "change", "text_figure"} <= set(report["per_template"])
    scoped = synthesize(data, n=60, companies=["Firm0", "Firm1"])
    assert {q.company for q in scoped.questions} == {"Firm0", "Firm1"}
    with pytest.raises(fc.DataError, match="unknown template"):
        synthesize(data, templates=("poem",))
    # the ninth walk: a string, unknown names and a negative count gave 0 questions, said as
    # the tables' fault or not at all
    with pytest.raises(fc.DataError, match="companies must be a list of names"):
        fc.synthesize(data, n=5, companies="Firm0", cache_dir=None)
    with pytest.raises(fc.DataError, match=r"no page of .* belongs to companies \['firm0'\]"):
        fc.synthesize(data, n=5, companies=["firm0"], cache_dir=None)
    with pytest.raises(fc.DataError, match="n must be a count"):
        fc.synthesize(data, n=-3, cache_dir=None)


def test_questions_from_interim_filings_are_counted_and_their_wording_named():
    """The report counts questions per filing kind of their source page, and a synthesis that
    draws from 10-Q pages says that their questions name only the column's year."""
    from dataclasses import replace

    data = filings_corpus(questions=False)
    annual = synthesize(data, n=60, seed=3)
    assert annual.report()["per_filing_kind"] == {"annual": 60}
    assert not any("interim filings" in note for note in annual.notes)
    quarterly = {"Firm0", "Firm1", "Firm2"}  # their filings relabelled as 10-Qs
    passages = {
        pid: replace(p, doc_type="10q") if p.company in quarterly else p
        for pid, p in data.passages.items()
    }
    mixed = synthesize(fc.Dataset("filings", {}, passages, {}), n=60, seed=3)
    interim = sum(q.company in quarterly for q in mixed.questions)
    assert 0 < interim < 60
    assert mixed.report()["per_filing_kind"] == {"annual": 60 - interim, "quarterly": interim}
    said = f"{interim} of the templates' 60 questions come from interim filings' pages"
    assert [note for note in mixed.notes if said in note]
    unknown = {pid: replace(p, doc_type=None) for pid, p in data.passages.items()}
    blind = synthesize(fc.Dataset("filings", {}, unknown, {}), n=60, seed=3)
    assert blind.report()["per_filing_kind"] == {"unknown": 60} and not blind.notes
    kinds = {"10-K/A": "annual", "10-Q": "quarterly", "8-K": "release", "Earnings": "release"}
    kinds |= {"10k_annualreport": "annual", "Proxy statement": "other", " 20-F ": "annual"}
    assert {t: filing_kind_of(t) for t in kinds} == kinds
    amended = {pid: replace(p, doc_type="10-K/A") for pid, p in data.passages.items()}
    assert not synthesize(fc.Dataset("filings", {}, amended, {}), n=60, seed=3).notes


def test_a_share_of_questions_leaves_their_company_unnamed():
    import hashlib

    data = filings_corpus(questions=False)
    named = synthesize(data, n=80, seed=3)
    assert all(q.company in q.text for q in named.questions)
    # the default writes the questions written before the option existed (008ac41)
    texts = "\n".join(q.text for q in named.questions).encode()
    assert hashlib.sha1(texts).hexdigest()[:16] == "63eb3f814f0b6889"
    for share in (0.0, 0.5):
        other = synthesize(data, n=80, seed=3, named_share=share)
        # the same questions, pages and relevance: only the wording drops the company
        assert [(q.source, q.relevant, q.template) for q in other.questions] == [
            (q.source, q.relevant, q.template) for q in named.questions
        ]
        for q, was in zip(other.questions, named.questions, strict=True):
            if q.text != was.text:
                assert q.company not in q.text and "other_company" not in q.negatives
                assert {k: v for k, v in was.negatives.items() if k != "other_company"} == (
                    q.negatives
                )
            else:
                assert q.negatives == was.negatives
        unnamed = sum(q.company not in q.text for q in other.questions) / len(other.questions)
        assert unnamed == 1.0 if share == 0.0 else 0.25 < unnamed < 0.75
    with pytest.raises(fc.DataError, match="named_share"):
        synthesize(data, named_share=1.5)


def test_a_row_label_that_names_the_company_keeps_the_question_named():
    label = "Net income attributable to Firm0"
    page = statement_page("Firm0", 0, 2021).replace("Net income", label)
    data = fc.Dataset(
        "one", {}, {"Firm0:1": fc.Passage("Firm0:1", page, company="Firm0", document="D")}, {}
    )
    found = synthesize(data, n=20, seed=0, named_share=0.0, templates=("line_item",))
    labelled = [q for q in found.questions if "attributable" in q.text]
    assert labelled
    assert all("Firm0's" in q.text and "other_company" in q.negatives for q in labelled)
    assert any("Firm0" not in q.text for q in found.questions)


class _Forbidden(dict):
    def _refuse(self, *args, **kwargs):
        raise AssertionError("synthesis read a question or a relevance judgement")

    __getitem__ = __iter__ = items = keys = values = get = __len__ = __contains__ = _refuse


def test_no_question_record_or_qrels_line_is_read():
    data = filings_corpus()
    data.queries, data.qrels = _Forbidden(), _Forbidden()
    data.missing_gold = _Forbidden()
    syn = synthesize(data, n=20)
    assert len(syn.questions) == 20


def test_a_user_generator_adds_checked_questions():
    data = filings_corpus(companies=3, questions=False)

    def generator(passages):
        yield {"text": "Which firm sells the most?", "relevant": ["Firm0_2019_10K:2"]}

    syn = synthesize(data, n=5, generator=generator)
    assert syn.questions[-1].template == "generator" and syn.questions[-1].company == "Firm0"

    def broken(passages):
        yield {"text": "Q?", "relevant": ["no-such-page"]}

    with pytest.raises(fc.DataError, match="unknown ids"):
        synthesize(data, n=5, generator=broken)

    def elsewhere(passages):
        yield {"text": "Q?", "relevant": ["Firm0_2019_10K:2"], "source": "no-such-page"}

    with pytest.raises(fc.DataError, match="generator record 0: field 'source' names no passage"):
        synthesize(data, n=5, generator=elsewhere)


def test_beir_folder_round_trips(tmp_path):
    data = filings_corpus(companies=4, questions=False)
    syn = fc.synthesize(data, n=12, cache_dir=None)
    assert syn.difficulty["n_questions"] == 12
    out = fc.write_beir(syn, tmp_path / "syn")
    loaded = load_beir(out)
    assert set(loaded.queries) == {q.qid for q in syn.questions}
    assert loaded.qrels == {q.qid: dict.fromkeys(q.relevant, 1) for q in syn.questions}
    first = json.loads((out / "queries.jsonl").read_text().splitlines()[0])
    assert {"source", "template", "negatives", "group"} <= set(first)


def test_training_sets_take_only_their_own_companies_synthetic_banks():
    data = filings_corpus()
    plan = FoldPlan.by_group(data, 4, 0)
    groups = [{data.queries[q].group for q in fold} for fold in plan.folds]
    syn = synthesize(data, n=48)
    examples = [BankExample(q.qid, [], None, None, None) for q in syn.questions]
    found = SyntheticExamples(examples, {q.qid: q.company for q in syn.questions}, syn)
    folds = _Folds(plan, {"injected": {}}, "injected", None, found, SyntheticSettings(n=48),
                   groups, set())  # fmt: skip
    used = {found.groups[e.qid] for e in folds.train((0, 1))}
    assert used == groups[0] | groups[1]
    everything = _Folds(plan, {"injected": {}}, "injected", None, found,
                        SyntheticSettings(n=48, scope="transductive"), groups, set())  # fmt: skip
    assert len(everything.train((0,))) == 48


@pytest.mark.parametrize("labelled", [False, True])
def test_the_calibration_fold_never_validates_a_residual(tmp_path, labelled):
    """No residual (the round's, the gate's cross-fitted ones, the final one) is early-stopped or
    selected on the fold that calibrates its gate. With synthetic training questions only, the
    labelled training folds validate; with labelled training banks, each training fold validates
    a fit on the others (the setting and epoch count), and the residuals are refit for that many
    epochs on their whole training folds with no validation banks."""
    from fincrowd_ltr.api.fit import _CrossValidation, _final_round, _gate_splits
    from fincrowd_ltr.settings import FitSettings

    data = filings_corpus(companies=10)
    # an unjudged (not covered) question never validates: it scores 0 whatever the residual does
    data.queries["q-unjudged"] = fc.Query("q-unjudged", "Firm0's net sales in FY2020?", "Firm0")
    settings = FitSettings().replace(
        folds=5, grid=None, first_stage="bm25", cache_dir=tmp_path / "c",
        synthetic=SyntheticSettings(n=40, labelled=labelled),
    )  # fmt: skip
    cv = _CrossValidation(data, "bm25", settings, None, {}, False)
    plan, ex = cv.plan, cv.ex
    assert ex.refits == labelled
    banked = set(cv.examples["retrieved"]) - {"q-unjudged"}
    assert "q-unjudged" in cv.examples["retrieved"]

    def qids(examples):
        return {e.qid for e in examples if not e.synthetic}

    calib, final, val = _final_round(data, plan)
    # the final model: calibrated on fold calib, its training folds validate
    rounds = [(r, r.validation, r.validation) for r in plan.rounds()] + [(final, calib, val)]
    for r, calibrating, validation in rounds:
        calibration = set(plan.qids([calibrating]))
        training, validating = ex.split(r.train, validation)
        assert not qids(training) & calibration
        splits = list(_gate_splits(ex, r.train, validation))
        if labelled:
            assert not validating and all(not v for _, _, v in splits)
            selection = ex.selection_splits(r.train, validation)
            assert len(selection) == len(r.train)
            for (train, val), fold in zip(selection, r.train, strict=True):
                assert qids(val) == set(plan.qids([fold])) & banked
                assert not qids(train) & (calibration | qids(val))
            continue
        assert qids(validating) and not qids(validating) & calibration
        assert qids(validating) == set(plan.qids(r.train)) & banked
        for inner_test, inner_train, inner_val in splits:
            assert all(e.synthetic for e in inner_train)
            assert qids(inner_val) and not qids(inner_val) & calibration
            assert not qids(inner_val) & set(plan.qids([inner_test]))


@pytest.mark.parametrize("gate", [True, False], ids=["gated", "no-gate"])
def test_average_mixing_deploys_every_weights_residual_at_its_own_epoch_count(tmp_path, gate):
    """With mixing ``average`` no weight is chosen: each round's residual, and the final one,
    averages the residuals of every mixing weight (a repeated weight once), each refit for the
    epoch count its own inner cross-validation found (gated), or early-stopped on the
    validation fold (no gate)."""
    import torch

    from fincrowd_ltr.api.fit import _CrossValidation, _final_round
    from fincrowd_ltr.defaults import AVERAGED
    from fincrowd_ltr.settings import FitSettings
    from fincrowd_ltr.training.fitting import validate_grid

    data = filings_corpus(companies=10)
    mixed = SyntheticSettings(n=40, select_weights=(0.0, 0.3, 0.3), mixing="average")
    settings = FitSettings().replace(
        folds=5, grid=None, first_stage="bm25", cache_dir=tmp_path / "c", min_calibration=1,
        synthetic=mixed, gate=gate,
    )  # fmt: skip
    cv = _CrossValidation(data, "bm25", settings, None, {}, False)
    report = cv.cross_validate()
    chosen = report.info["selection"]["chosen_per_fold"]
    seed = settings.training.seed
    if gate:
        _, final, val = _final_round(data, cv.plan)
        rounds = [(r.train, r.validation) for r in cv.plan.rounds()] + [(final.train, val)]
        for (train, validation), setting in zip(rounds, [*chosen, cv.setting], strict=True):
            parts = setting[AVERAGED]
            assert [p["synthetic_weight"] for p in parts] == [0.0, 0.3]
            splits = cv.ex.selection_splits(train, validation)
            _, epochs = validate_grid(splits, cv.grid, seed, cv.fits)
            assert [p["epochs"] for p in parts] == epochs
        final_train, final_val = cv.ex.split(final.train, val)
    else:
        assert cv.setting == {AVERAGED: [{"synthetic_weight": 0.0}, {"synthetic_weight": 0.3}]}
        assert all(setting == cv.setting for setting in chosen)
        final_train, final_val = cv.ex.split(tuple(range(len(cv.plan))), 0)
    model = cv.final_model()
    assert model.summary.setting == cv.setting
    # the kept residual scores the mean of its parts' residuals, which differ
    parts = [cv.fits.get(final_train, final_val, p, seed)[0].scorer for p in cv.setting[AVERAGED]]
    x = torch.from_numpy(np.concatenate([e.features for e in final_train[:20]]))
    each = torch.stack([p.residual(x) for p in parts])
    assert not torch.allclose(each[0], each[1])
    assert torch.allclose(model.residual.residual(x), each.mean(0), rtol=1e-9, atol=1e-9)


def test_draws_average_one_residual_per_draw_each_on_its_own_questions(tmp_path):
    """With ``draws`` K, n x K questions are written and dealt into K draws by position (the
    first draw is what n alone writes), and the kept residual averages one residual per draw
    and weight, each trained on the labelled banks and its own draw's synthetic banks (a
    weight-0 part, which reads none, is one fit standing for every draw)."""
    import torch

    from fincrowd_ltr.api.fit import _CrossValidation
    from fincrowd_ltr.api.synthetic import synthesis_for
    from fincrowd_ltr.defaults import AVERAGED
    from fincrowd_ltr.settings import FitSettings

    data = filings_corpus(companies=10)
    drawn = SyntheticSettings(n=20, select_weights=(0.0, 0.3), mixing="average", draws=2)
    settings = FitSettings().replace(
        folds=5, grid=None, first_stage="bm25", cache_dir=tmp_path / "c", synthetic=drawn,
        gate=False,
    )  # fmt: skip
    cv = _CrossValidation(data, "bm25", settings, None, {}, False)
    questions = cv.syn.synthesis.questions
    written = [q.qid for q in questions]
    assert len(written) == 40
    single = synthesis_for(SyntheticSettings(n=20), data, cv.extractor).questions
    assert [(q.text, q.relevant) for q in questions[:20]] == [(q.text, q.relevant) for q in single]
    assert {e.draw for e in cv.syn.examples} == {0, 1}
    assert all(e.draw == written.index(e.qid) // 20 for e in cv.syn.examples)
    cv.cross_validate()
    parts = cv.setting[AVERAGED]
    assert parts == [{"synthetic_weight": 0.0}] * 2 + [
        {"synthetic_weight": 0.3, "synthetic_draw": k} for k in (0, 1)
    ]
    train, val = cv.ex.split(tuple(range(len(cv.plan))), 0)
    fitted = [cv.fits.get(train, val, p, 0)[0].scorer for p in parts]
    x = torch.from_numpy(np.concatenate([e.features for e in train[:20]]))
    each = torch.stack([f.residual(x) for f in fitted])
    assert not torch.allclose(each[2], each[3])  # the draws' residuals differ
    model = cv.final_model()
    assert torch.allclose(model.residual.residual(x), each.mean(0), rtol=1e-9, atol=1e-9)
    assert model.summary.extra["synthetic"]["draws"] == 2
    assert not any("synthetic draws" in note for note in cv.notes)
    # more draws than the corpus has questions for: the empty draws are named
    many = SyntheticSettings(n=20, select_weights=(0.0, 0.3), mixing="average", draws=50)
    short = _CrossValidation(data, "bm25", settings.replace(synthetic=many), None, {}, False)
    assert any("hold fewer than 20 questions" in note for note in short.notes)


@pytest.mark.parametrize("gate_rows", ["both", "synthetic"])
def test_the_gate_learns_from_cross_fitted_synthetic_rows(tmp_path, monkeypatch, gate_rows):
    """With ``gate_rows`` asking for them, the gate's predictor learns from the synthetic banks of
    each inner test fold's companies, scored by a residual that never trained on them (with the
    labelled rows for ``both``); its calibration stays on labelled retrieved banks only."""
    from fincrowd_ltr.api import fit
    from fincrowd_ltr.settings import FitSettings

    data = filings_corpus(companies=10)
    settings = FitSettings().replace(
        folds=5, grid=None, first_stage="bm25", cache_dir=tmp_path / "c", min_calibration=1,
        synthetic=SyntheticSettings(n=40), gate_rows=gate_rows,
    )  # fmt: skip
    cv = fit._CrossValidation(data, "bm25", settings, None, {}, False)
    plan, ex = cv.plan, cv.ex
    synthetic_qids = {e.qid for e in cv.syn.examples}
    seen = 0
    for r in plan.rounds():
        for inner_test, inner_train, _ in fit._gate_splits(ex, r.train, r.validation):
            sources = {source: banks for source, _, banks in ex.gate_banks(inner_test, data)}
            assert ex.teaches_gate("retrieved") == (gate_rows == "both")
            assert ex.teaches_gate("synthetic")
            rows = {e.qid for e in sources["synthetic"]}
            assert rows <= synthetic_qids
            # cross-fitted: the residual scoring them trained on none of them
            assert not rows & {e.qid for e in inner_train}
            groups = {cv.syn.groups[q] for q in rows}
            assert groups <= {data.queries[q].group for q in plan.folds[inner_test]}
            seen += len(rows)
    assert seen

    trained_on, calibrated_on, pooled = [], [], []
    learn, calibrate = fit._train_gate_on, fit.fit_calibration
    monkeypatch.setattr(
        fit, "_train_gate_on", lambda rows, *a: trained_on.append(rows) or learn(rows, *a)
    )

    def recording_calibration(model, dataset, examples, *args, cross_fitted=None, **kwargs):
        calibrated_on.extend(e.qid for e in examples)
        calibrated_on.extend(q for rows in cross_fitted or [] for q in rows[0])
        pooled.append([q for rows in cross_fitted or [] for q in rows[0]])
        return calibrate(model, dataset, examples, *args, cross_fitted=cross_fitted, **kwargs)

    monkeypatch.setattr(fit, "fit_calibration", recording_calibration)
    report = cv.cross_validate()
    final = cv.final_model()
    assert report.info["gate_rows"] == gate_rows and report.info["gate_labels"] == "improved"
    assert final.summary.extra["gate_rows"] == gate_rows
    sources = {row[1] for rows in trained_on for row in rows if len(row[2])}
    assert sources == ({"synthetic", "retrieved", "injected"} if gate_rows == "both"
                       else {"synthetic"})  # fmt: skip
    # each gate is followed by its out-of-fold gates, each trained without one fold's rows
    full, out_of_fold = None, 0
    for rows in trained_on:
        folds = {row[0] for row in rows}
        if full is None or not folds < full:
            full = folds
            continue
        assert len(full - folds) == 1
        out_of_fold += 1
    assert out_of_fold
    # the pooled calibration keeps the labelled training folds' cross-fitted retrieved rows
    # (once each: an injected row would repeat a qid) and no synthetic one, either way
    assert calibrated_on and not set(calibrated_on) & synthetic_qids
    assert pooled and all(pooled) and all(len(set(p)) == len(p) for p in pooled)
    # each round reports its gate's logits on the held-out fold's synthetic questions: label-free
    # rows of companies no fit of the round trained on
    held_out, orderable_gains, companies = 0, [], set()
    for fold in report.info["gate_folds"]:
        rows = fold["rows"].get("synthetic_test")
        if rows is None:
            assert not ex.synthetic_of(fold["test_fold"])
            continue
        assert set(rows["qids"]) == {e.qid for e in ex.synthetic_of(fold["test_fold"])}
        train = next(r.train for r in plan.rounds() if r.test == fold["test_fold"])
        assert not set(rows["qids"]) & {e.qid for e in ex.train(train)}
        assert len(rows["logits"]) == len(rows["gains"]) == len(rows["qids"])
        held_out += len(rows["qids"])
        for q, gain, orderable in zip(rows["qids"], rows["gains"], rows["orderable"], strict=True):
            if orderable:
                orderable_gains.append(gain)
                companies.add(cv.syn.groups[q])
    assert held_out
    # the report pools them into its label-free check, clustered by the questions' companies
    check = report.info["synthetic_held_out"]
    assert check["n_questions"] == held_out and check["n_orderable"] == len(orderable_gains)
    assert check["ndcg@10_gain"] == pytest.approx(sum(orderable_gains) / len(orderable_gains))
    assert check["n_groups"] == len(companies) < check["n_orderable"]


def test_synthetic_gate_rows_need_synthetic_questions_no_fit_trained_on(tmp_path, monkeypatch):
    """Asking for synthetic gate rows where there are none to cross-fit is an error that names
    the option, before any bank is built; folds without synthetic banks add no row, and a gate
    that would learn from synthetic rows of too few folds is refused before any fit."""
    from fincrowd_ltr.api import fit

    data = filings_corpus(companies=10)
    options = {"folds": 5, "grid": None, "first_stage": "bm25", "cache_dir": None}

    def no_banks(*args, **kwargs):
        raise AssertionError("banks built before the settings were checked")

    monkeypatch.setattr(fit, "_examples_by_mode", no_banks)
    cases = [
        ({"gate_rows": "both"}, "no synthetic questions"),
        ({"gate_rows": "synthetic", "gate": False}, "without a gate"),
        (
            {"gate_rows": "both", "synthetic": SyntheticSettings(n=40, scope="transductive")},
            "transductive",
        ),
    ]
    for extra, why in cases:
        with pytest.raises(fc.DataError, match=why) as caught:
            fc.fit_correction(data, "bm25", progress=False, **options, **extra)
        assert caught.value.field == "gate_rows"
    with pytest.raises(fc.DataError, match="gate_rows must be one of"):
        fc.fit_correction(data, "bm25", gate_rows="synth", **options)
    with pytest.raises(fc.DataError, match="no synthetic questions"):
        fc.nested_cross_validation(data, "bm25", gate_rows="both", folds=5, cache_dir=None)

    plan = FoldPlan.by_group(data, 5, 0)
    groups = [{data.queries[q].group for q in fold} for fold in plan.folds]
    syn = synthesize(data, n=40)
    only = groups[0]  # synthetic banks of fold 0's companies alone
    examples = [BankExample(q.qid, [], None, None, None) for q in syn.questions
                if q.company in only]  # fmt: skip
    found = SyntheticExamples(examples, {q.qid: q.company for q in syn.questions}, syn)
    assert examples
    for rows, fails in (("synthetic", True), ("both", False)):
        folds = _Folds(plan, {"injected": {}, "retrieved": {}}, "injected", None, found,
                       SyntheticSettings(n=40), groups, set(), gate_rows=rows)  # fmt: skip
        assert {source for source, _, _ in folds.gate_banks(1, data)} == {"injected", "retrieved"}
        assert [source for source, _, _ in folds.gate_banks(0, data)][-1] == "synthetic"
        folds.require_synthetic_gate_rows([(0, 2)], pooled=False)
        if fails:
            with pytest.raises(fc.DataError, match="needs 2") as caught:
                folds.require_synthetic_gate_rows([(0, 2)], pooled=True)
            assert caught.value.field == "gate_rows"
        else:
            folds.require_synthetic_gate_rows([(0, 2)], pooled=True)
    # the default: synthetic rows join a gated fit's gate when cross-fitting can give them
    from fincrowd_ltr.settings import FitSettings

    default = FitSettings().replace(synthetic=40)
    assert default.calibration.gate_rows == "auto"
    assert fit._gate_rows(default, True) == "both"
    assert fit._gate_rows(default, False) == "labelled"  # the corpus yielded no synthetic bank
    assert fit._gate_rows(default.replace(gate_rows="labelled"), True) == "labelled"
    assert fit._gate_rows(default.replace(gate=False), True) == "labelled"
    transductive = default.replace(synthetic=SyntheticSettings(n=40, scope="transductive"))
    assert fit._gate_rows(transductive, True) == "labelled"
    # an empty row (a fold without banks of a source) is left out of the gate's training data
    width = 4
    full = (["a", "b", "c"], np.ones((3, width)), np.array([0.1, -0.1, 0.2]), np.ones(3, bool))
    empty = ([], np.zeros((0, 0)), np.zeros(0), np.zeros(0, bool))
    gate = fit._train_gate_on([(0, "synthetic", *full), (1, "synthetic", *empty)], seed=0)
    assert gate is not None


@pytest.mark.parametrize("labelled", [False, True])
def test_a_fit_trains_each_fit_once_and_its_final_model_never_sees_its_calibration(
    tmp_path, monkeypatch, fit_log, labelled
):
    """The whole run: every fit is trained by the prefetches (none trained again because a later
    lookup asked for other validation banks); the final model's residual and its gate's
    cross-fitted residuals, setting chosen among two, never validate on its calibration fold;
    its calibration labels moved, the final residual is the same (with labelled training banks
    as with synthetic questions only)."""
    from fincrowd_ltr.api.fit import _CrossValidation, _first_best
    from fincrowd_ltr.settings import FitSettings
    from fincrowd_ltr.training import fitting
    from fincrowd_ltr.training.fitting import validate_grid

    data = filings_corpus(companies=10)
    settings = FitSettings().replace(
        folds=5, grid=({"alpha": 1.0}, {"alpha": 2.0}), first_stage="bm25",
        cache_dir=tmp_path / "c", min_calibration=1,
        synthetic=SyntheticSettings(n=40, labelled=labelled),
    )  # fmt: skip
    cv = _CrossValidation(data, "bm25", settings, None, {}, False)
    prefetched, validations = fit_log.prefetched, fit_log.validations
    selections = []

    def recording_validation(splits, grid, seed=0, fits=None):
        scores, epochs = validate_grid(splits, grid, seed, fits)
        best = _first_best(scores)
        chosen_on = set().union(*({e.qid for e in val} for _, val in splits))
        selections.append((chosen_on, grid[best]))
        return scores, epochs

    monkeypatch.setattr(fitting, "validate_grid", recording_validation)
    cv.cross_validate()
    validations.clear()
    final = cv.final_model()
    assert cv.fits.trained == len(prefetched)
    calibration = set(cv.plan.qids([final.summary.calibration_fold]))
    assert validations and all(not v & calibration for v in validations)
    assert all(bool(v) != labelled for v in validations)  # labelled: refits, no validation
    # its setting was chosen on its own training folds, not averaged over rounds whose
    # validation folds hold its calibration fold
    chosen_on = set(cv.plan.qids(r for r in range(5) if r != final.summary.calibration_fold))
    setting = {k: v for k, v in final.summary.setting.items() if k != "epochs"}
    assert (chosen_on & set(cv.examples["retrieved"]), setting) in selections
    assert ("epochs" in final.summary.setting) == labelled

    # the calibration fold's labels decide nothing but the gate's calibration: point them at
    # each company's cover page and the final residual, its setting included, stays the same
    moved = fc.Dataset(data.name, data.queries, data.passages, dict(data.qrels))
    for q in calibration:
        moved.qrels[q] = {f"{data.queries[q].group}_2021_10K:1": 1}
    again = _CrossValidation(moved, "bm25", settings, None, {}, False)
    again.cross_validate()
    refit = again.final_model()
    assert refit.summary.calibration_fold == final.summary.calibration_fold
    assert refit.summary.setting == final.summary.setting
    assert torch.equal(refit.residual.weight, final.residual.weight)


def test_fit_synthesises_with_the_settings_named_share():
    from fincrowd_ltr.api.synthetic import synthetic_examples
    from fincrowd_ltr.features.bank_features import BankFeaturizer

    data = filings_corpus(questions=False)
    featurizer = BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)
    found = synthetic_examples(
        SyntheticSettings(n=24, named_share=0.0), data, featurizer, "bm25", "bm25", "injected",
        20, None, False,
    )  # fmt: skip
    assert found.synthesis.questions
    assert not any(q.company in q.text for q in found.synthesis.questions)


def test_questions_written_in_the_background_are_those_written_in_place(monkeypatch):
    """A fit writes its synthetic questions in a forked child while it builds the labelled
    banks: the same questions, over the caller's own passages (which never travel back)."""
    from fincrowd_ltr import engine as engines
    from fincrowd_ltr.api.synthetic import synthesis_for, synthesis_in_background

    monkeypatch.setattr(engines, "available_cores", lambda: 2)
    monkeypatch.delenv(engines.WORKERS_VARIABLE, raising=False)
    data = filings_corpus(questions=False)
    extractor = FieldExtractor.from_passages(data.passages.values())
    settings = SyntheticSettings(n=30, named_share=0.5)
    pending = synthesis_in_background(settings, data, extractor)
    assert (pending._child is not None) == engines.fork_safe()  # written by a child
    in_place = synthesis_for(settings, data, extractor)
    found = pending.result()
    assert found.questions and found.questions == in_place.questions
    assert (found.candidates, found.notes) == (in_place.candidates, in_place.notes)
    assert found.passages == in_place.passages
    assert all(found.passages[p] is data.passages[p] for p in data.passages)


def test_retrieved_synthetic_banks_hold_only_what_the_first_stage_found():
    """``train_mode="retrieved"``: a synthetic bank is the first stage's own candidates (no
    relevant page added), kept only when they hold a relevant page; gold-injected banks differ
    from them by relevant pages alone."""
    from fincrowd_ltr.api.synthetic import synthetic_examples
    from fincrowd_ltr.features.bank_features import BankFeaturizer

    data = filings_corpus(questions=False)
    featurizer = BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)
    banks = {
        mode: synthetic_examples(
            SyntheticSettings(n=40), data, featurizer, "bm25", "bm25", mode, 3, None, False
        )
        for mode in ("retrieved", "injected")
    }
    retrieved = {e.qid: e for e in banks["retrieved"].examples}
    injected = {e.qid: e for e in banks["injected"].examples}
    assert retrieved and all(e.has_support for e in retrieved.values())
    assert set(retrieved) < set(injected)  # some source pages lie beyond the first stage's 3
    syn = banks["injected"].synthesis.dataset()
    for qid, e in retrieved.items():
        added = set(injected[qid].pids) - set(e.pids)
        assert all(syn.qrels[qid].get(p, 0) > 0 for p in added)


def test_an_auto_named_share_is_read_from_the_questions_texts(tmp_path):
    """``named_share="auto"``: synthetic questions name their company as often as the user's
    questions do (the extractor reads them; the fit leaves its held-out test fold out)."""
    import argparse
    import dataclasses

    from fincrowd_ltr.settings import share_or_auto
    from fincrowd_ltr.synthesis import named_share_of

    data = filings_corpus(companies=8)
    for i, qid in enumerate(sorted(data.queries)):
        if i % 4:  # three questions of four ask about "the" company
            data.queries[qid] = dataclasses.replace(
                data.queries[qid], text="What were the net sales in FY2021?"
            )
    extractor = FieldExtractor.from_passages(data.passages.values())
    assert named_share_of((q.text for q in data.queries.values()), extractor) == 0.25
    found = fc.synthesize(data, n=24, named_share="auto", cache_dir=None)
    assert found.named_share == 0.25 and found.report()["named_share"] == 0.25
    assert fc.synthesize(data, n=24, cache_dir=None).named_share == 1.0
    named = [any(f"Firm{c}" in q.text for c in range(8)) for q in found.questions]
    assert 0 < sum(named) < len(named)

    settings = SyntheticSettings(n=24, labelled=False, named_share="auto")
    fit = dict(folds=4, test_fold=0, grid=None, gate=False, first_stage="bm25", progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, _ = fc.fit_correction(
            data, "bm25", synthetic=settings, cache_dir=tmp_path / "c", **fit
        )
    assert not [w for w in caught if "to match your questions" in str(w.message)]
    # the default share (every question names its company), far from the user's: a fit warns
    # as `synthesize` does (a seventh walk's fit said nothing)
    with pytest.warns(UserWarning, match=r"fit: \d+% of the dataset's \d+ questions name a co"):
        fc.fit_correction(
            data, "bm25", synthetic=dataclasses.replace(settings, named_share=1.0),
            cache_dir=tmp_path / "c", **fit,
        )  # fmt: skip
    held = set(FoldPlan.by_group(data, 4, 0).folds[0])
    asked = [q.text for qid, q in data.queries.items() if qid not in held]
    model.save_pretrained(tmp_path / "ckpt")
    synthetic = fc.GatedCorrection.from_pretrained(tmp_path / "ckpt").summary.extra["synthetic"]
    assert synthetic["named_share"] == "auto" and synthetic["ranker"] == "bm25"  # resolved
    assert synthetic["named_share_used"] == named_share_of(asked, extractor) != 0.25

    with pytest.raises(fc.DataError, match="none were given"):
        fc.synthesize(filings_corpus(questions=False), n=4, named_share="auto", cache_dir=None)
    with pytest.raises(fc.DataError, match="or 'auto'"):
        SyntheticSettings(named_share="half")
    with pytest.raises(fc.DataError, match="named_share_of reads it"):
        synthesize(data, n=4, named_share="auto")
    assert share_or_auto("auto") == "auto" and share_or_auto("0.3") == 0.3
    for bad in ("1.5", "most"):
        with pytest.raises(argparse.ArgumentTypeError, match=bad):
            share_or_auto(bad)


def test_zero_label_journey_synthesize_fit_calibrate_evaluate(tmp_path, capsys):
    """The README's journey from the command line: a corpus and no labelled training questions;
    synthesise, fit residual and gate on the synthetic folder (every fold trains; no domain is
    calibrated on synthetic questions), calibrate the gate on a few labelled questions, evaluate
    on the others; the correction lifts the asked year's page."""
    from fincrowd_ltr.cli import main

    data = filings_corpus(companies=16)
    dump_beir(data, tmp_path / "mine")
    cache = f"--cache-dir={tmp_path / 'c'}"
    mine = ["--dataset=beir", f"--data-root={tmp_path / 'mine'}", cache]
    assert main(["synthesize", *mine, "--n=160", f"--out={tmp_path / 'syn'}"]) == 0
    printed = capsys.readouterr().out
    assert "per filing kind of the source page: annual 160" in printed
    assert re.search(r"typed distractor recorded \(of 160\): other_company \d+", printed)
    ckpt = tmp_path / "ckpt"
    fit = ["fit", "--dataset=beir", f"--data-root={tmp_path / 'syn'}", cache, "--ranker=bm25",
           "--first-stage=bm25", "--no-select", "--monotone", "--min-calibration=1",
           f"--out={ckpt}"]  # fmt: skip
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntheticDomainWarning)
        assert main(fit) == 0
    printed = capsys.readouterr().out
    assert "beir-synthetic bm25: held-out folds" in printed
    assert "its gate calibrated for no domain" in printed and "--fold 0 --folds 2`" in printed
    assert "these are synthetic questions, each round's gate calibrated on them" in printed
    model = fc.GatedCorrection.from_pretrained(ckpt)
    synthetic = load_beir(tmp_path / "syn")
    # no calibration fold: every synthetic question trained the residual or its gate
    assert sorted(model.summary.query_ids) == sorted(synthetic.queries)
    assert model.gate is not None and not model.domains
    assert model.summary.calibration_fold is None
    # a domain calibrated on synthetic questions, asked for, says what it is good for
    pooled = tmp_path / "ckpt-pooled"
    with pytest.warns(UserWarning, match="'beir-synthetic' is calibrated on synthetic questions"):
        assert main([*fit[:-1], "--gate-calibration=pooled", f"--out={pooled}"]) == 0
    assert list(fc.GatedCorrection.from_pretrained(pooled).domains) == ["beir-synthetic"]
    calibrate = ["calibrate", *mine, f"--checkpoint={ckpt}", "--domain=mine", "--fold=0",
                 "--folds=4", "--first-stage=bm25", "--min-calibration=1"]  # fmt: skip
    assert main(calibrate) == 0
    out = tmp_path / "report.json"
    evaluate = ["evaluate", *mine, "--ranker=bm25", "--first-stage=bm25", f"--checkpoint={ckpt}",
                "--domain=mine", f"--out={out}"]  # fmt: skip
    assert main([*evaluate[:-2], "--domain=beir", f"--out={out}"]) == 2  # not calibrated
    # gating real questions with the synthetic domain says what it is (a sixth walk: silent)
    synthetic_gate = [*evaluate[:-3], f"--checkpoint={pooled}", "--domain=beir-synthetic"]
    with pytest.warns(UserWarning, match="'beir-synthetic' is calibrated on synthetic questions"):
        assert main([*synthetic_gate, f"--out={out}"]) == 0
    assert main(evaluate) == 0
    systems = json.loads(out.read_text())["systems"]
    held = set(FoldPlan.by_group(data, 4, 0).folds[0])
    assert set(systems["gated:bm25"]["per_query"]) == set(data.queries) - held
    assert systems["residual:bm25"]["ndcg@10"] > systems["base:bm25:unseen"]["ndcg@10"] + 0.1

    # The same checkpoint over the user's own ranker (a year-blind word-overlap run): a gate
    # calibrated with that base, written to a new checkpoint; the trained one is unchanged.
    run = tmp_path / "mine.trec"
    write_trec_run(run, _overlap_run(data))
    yours = ["--first-stage=run", f"--run={run}"]
    mine_ckpt = tmp_path / "ckpt-run"
    capsys.readouterr()
    assert main([*calibrate, "--base-ranker=run", *yours]) == 2
    assert "give it a folder with --out" in capsys.readouterr().err
    rebase = [*calibrate[:-2], f"--run={run}", "--min-calibration=1", "--base-ranker=run",
              f"--out={mine_ckpt}"]  # fmt: skip
    assert main(rebase) == 0  # banks: the run's own top N unless --first-stage says otherwise
    rebased = fc.GatedCorrection.from_pretrained(mine_ckpt)
    assert rebased.base_ranker == "run" and list(rebased.domains) == ["mine"]
    assert rebased.summary.first_stage == "run"
    assert rebased.summary.extra["trained_base_ranker"] == "bm25"
    assert rebased.summary.extra["trained_first_stage"] == "bm25"
    assert fc.GatedCorrection.from_pretrained(ckpt).base_ranker == "bm25"
    capsys.readouterr()
    assert main(rebase) == 2  # an existing checkpoint is never overwritten by --out
    assert "already holds files" in capsys.readouterr().err
    assert list(fc.GatedCorrection.from_pretrained(mine_ckpt).domains) == ["mine"]
    evaluate = ["evaluate", *mine, "--ranker=run", *yours, f"--checkpoint={mine_ckpt}",
                "--domain=mine", f"--out={out}"]  # fmt: skip
    assert main(evaluate) == 0
    systems = json.loads(out.read_text())["systems"]
    assert set(systems["gated:run"]["per_query"]) == set(data.queries) - held
    assert systems["residual:run"]["ndcg@10"] > systems["base:run:unseen"]["ndcg@10"] + 0.1


def test_a_corpus_alone_synthesizes_and_the_commands_that_need_questions_say_so(tmp_path, capsys):
    """A user with one company's filings and no questions at all (the third and fourth walks,
    2026-12-06): no queries.jsonl is needed to synthesise; the synthetic folder groups its
    questions finer than by company, so a fit on it fills its folds; fitting on the corpus
    itself says what to do instead; a synthesis that writes nothing fails before any folder is
    written."""
    from fincrowd_ltr.cli import main

    dump_beir(filings_corpus(companies=1, questions=False), tmp_path / "mine")
    (tmp_path / "mine" / "queries.jsonl").unlink()
    corpus = load_beir(tmp_path / "mine")
    assert not corpus.queries and corpus.notes == [f"{tmp_path / 'mine'}: no queries.jsonl, "
                                                   "a corpus without questions"]  # fmt: skip
    mine = ["--dataset=beir", f"--data-root={tmp_path / 'mine'}", f"--cache-dir={tmp_path / 'c'}"]
    assert main(["synthesize", *mine, "--n=12", f"--out={tmp_path / 'syn'}"]) == 0
    assert re.search(r"grouped by page \(\d+ groups\): too few companies .* \(1 company\)",
                     capsys.readouterr().out)  # fmt: skip
    synthetic = load_beir(tmp_path / "syn")
    assert synthetic.name == "syn-synthetic"
    assert {q.group for q in synthetic.queries.values()} <= set(synthetic.passages)  # pages
    syn = ["--dataset=beir", f"--data-root={tmp_path / 'syn'}", mine[2], "--first-stage=bm25"]
    fit = ["fit", *syn, "--no-gate", "--ranker=bm25", "--no-select", f"--out={tmp_path / 'ck'}"]
    assert main(fit) == 0
    capsys.readouterr()
    fit = ["fit-residual", *mine, "--ranker=bm25", "--no-select", f"--out={tmp_path / 'ck2'}"]
    assert main(fit) == 2
    assert "nothing to train on" in capsys.readouterr().err
    assert main(["synthesize", *mine, "--named-share=auto", f"--out={tmp_path / 'a'}"]) == 2
    assert "has no questions" in capsys.readouterr().err
    dump_beir(user_corpus(companies=3), tmp_path / "figureless")  # no figure for any period
    plain = ["--dataset=beir", f"--data-root={tmp_path / 'figureless'}", mine[2]]
    assert main(["synthesize", *plain, "--n=5", f"--out={tmp_path / 'none'}"]) == 2
    assert "synthesize wrote no question: 0 of the 5" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_a_named_share_far_from_the_questions_is_warned():
    data = filings_corpus(companies=6)  # every labelled question names its company
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fc.synthesize(data, 12, cache_dir=None, difficulty=False)
    with pytest.warns(UserWarning, match=r"100% of the dataset's 6 questions name a company, "
                      r"and 0% of the synthetic ones name theirs \(named_share 0\)"):  # fmt: skip
        fc.synthesize(data, 12, cache_dir=None, difficulty=False, named_share=0.0)
    # pages that name no company (TAT-QA's) write no question naming one, whatever the share
    # asked: questions that name none are matched, not warned about (a review found the warning
    # on every TAT-QA fit)
    for pid, p in data.passages.items():
        data.passages[pid] = dataclasses.replace(p, company=None)
    for qid, q in data.queries.items():
        data.queries[qid] = dataclasses.replace(q, text="What were the net sales in FY2021?")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = fc.synthesize(data, 12, cache_dir=None, difficulty=False)
    assert found.questions and found.named_share == 1.0


def test_synthetic_banks_take_a_stand_in_ranker_when_the_base_is_your_run(tmp_path):
    """Synthetic questions have no scores in a user's run: the synthetic banks are scored by a
    ranker of the package (``SyntheticSettings.ranker``), and asking without one says so."""
    data = filings_corpus(companies=10)
    options = dict(
        folds=5, test_fold=0, grid=None, gate=False, first_stage="bm25",
        cache_dir=tmp_path / "c", progress=False, run=_overlap_run(data),
    )  # fmt: skip
    with pytest.raises(fc.DataError, match="--synthetic-ranker"):
        fc.fit_correction(data, "run", synthetic=SyntheticSettings(n=40, labelled=False), **options)
    with pytest.raises(fc.DataError, match="unknown synthetic ranker 'bm52'"):
        fc.fit_correction(data, "run", synthetic=SyntheticSettings(n=40, ranker="bm52"), **options)
    with pytest.raises(fc.DataError, match="cannot retrieve their banks"):
        fc.fit_correction(
            data, "run", synthetic=SyntheticSettings(n=40, ranker="bm25"),
            **{**options, "first_stage": "run"},
        )  # fmt: skip
    stand_in = SyntheticSettings(n=40, labelled=False, ranker="bm25")
    model, report = fc.fit_correction(data, "run", synthetic=stand_in, **options)
    assert report.info["synthetic"]["per_filing_kind"] == {"annual": 40}  # the fit's 40 questions
    assert model.base_ranker == "run"
    assert model.summary.extra["synthetic"]["ranker"] == "bm25"
    assert model.summary.extra["synthetic"]["n_banks"] > 0


def test_a_corpus_without_synthetic_banks_trains_on_its_labels_and_says_so(tmp_path, capsys):
    """Mixing asked for on a corpus whose pages yield no synthetic bank: the fit goes on with
    the labelled banks alone (no mixing weights crossed into the grid) and its report says why;
    synthetic-only training is refused, naming the cause."""
    from fincrowd_ltr.cli import main

    mixed = SyntheticSettings(n=200, select_weights=(0.0, 0.3))
    _, report = fc.fit_correction(user_corpus(), "bm25", folds=4, gate=False, cache_dir=None,
                                  progress=False, grid=None, synthetic=mixed)  # fmt: skip
    assert "synthetic" not in report.info and report.info["selection"]["grid"] == [{}]
    assert any("no synthetic training bank" in note for note in report.info["notes"])

    dump_beir(user_corpus(), tmp_path / "mine")
    fit = ["fit", "--dataset=beir", f"--data-root={tmp_path / 'mine'}", "--ranker=bm25",
           f"--cache-dir={tmp_path / 'c'}", "--folds=4", "--no-gate", "--no-select",
           "--synthetic=200", f"--out={tmp_path / 'ckpt'}"]  # fmt: skip
    assert main(fit) == 0
    assert "note: no synthetic training bank" in capsys.readouterr().err
    asked = fc.GatedCorrection.from_pretrained(tmp_path / "ckpt").summary.extra["synthetic"]
    assert asked["n"] == 200 and asked["n_banks"] == 0  # asked for, and none built
    alone = SyntheticSettings(n=200, labelled=False)
    with pytest.raises(fc.DataError, match="synthetic-only training has nothing to train on"):
        fc.fit_correction(user_corpus(), "bm25", folds=4, gate=False, cache_dir=None,
                          progress=False, synthetic=alone)  # fmt: skip
    # statement tables, but no page names its company or document: the refusal says so (a
    # seventh walk's corpus was refused for want of tables it had)
    tables = filings_corpus(companies=4)
    anonymous = {p: fc.Passage(p, v.text) for p, v in tables.passages.items()}
    bare = fc.Dataset("beir", tables.queries, anonymous, tables.qrels)
    with pytest.raises(fc.DataError, match="no page names its company or document"):
        fc.fit_correction(bare, "bm25", folds=4, gate=False, cache_dir=None, progress=False,
                          synthetic=alone)  # fmt: skip


def test_a_synthetic_only_fit_says_what_trained_it(tmp_path, capsys):
    """With synthetic questions only, the saved correction trained on synthetic banks and the
    labelled questions only validated it: the fit says so (a seventh walk read "trained on 81
    questions" of a fit whose labelled questions trained nothing)."""
    from fincrowd_ltr.cli import main

    dump_beir(filings_corpus(companies=6), tmp_path / "mine")
    fit = ["fit", "--dataset=beir", f"--data-root={tmp_path / 'mine'}", "--ranker=bm25",
           "--first-stage=bm25", f"--cache-dir={tmp_path / 'c'}", "--folds=3", "--no-gate",
           "--no-select", "--synthetic=100", "--synthetic-only",
           f"--out={tmp_path / 'ckpt'}"]  # fmt: skip
    assert main(fit) == 0
    said = capsys.readouterr().out
    banks = fc.GatedCorrection.from_pretrained(tmp_path / "ckpt").summary.train_banks
    assert f"correction trained on {banks} banks, synthetic (no label of this corpus read)" in said
    assert "questions only validated it" in said


def _overlap_run(data: fc.Dataset, depth: int = 100) -> dict[str, dict[str, float]]:
    """A user's own ranker: the IDF of the question's words a page holds (blind to years)."""

    def words(text: str) -> set[str]:
        return set(re.findall(r"[a-z][a-z0-9]+", text.lower()))

    pages = {p: words(passage.text) for p, passage in data.passages.items()}
    df = Counter(w for found in pages.values() for w in found)
    run = {}
    for qid, query in data.queries.items():
        asked = words(query.text) - {"fy2019", "fy2020", "fy2021", "fy2022"}
        idf = {w: math.log(len(pages) / df[w]) for w in asked if df[w]}
        scores = {p: sum(v for w, v in idf.items() if w in found) for p, found in pages.items()}
        run[qid] = dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:depth])
    return run


def test_a_fit_lends_its_questions_to_the_page_table_only_when_they_are_the_same():
    """A fit whose synthesis settings are the teaching ones hands its own questions to the page
    table (not written twice); any other setting writes other questions, so it may not."""
    from dataclasses import replace

    from fincrowd_ltr.api.synthetic import synthesis_for
    from fincrowd_ltr.synthesis import (
        TEACHING_QUESTIONS,
        page_table_questions,
        writes_teaching_questions,
    )

    data = filings_corpus(companies=4)
    extractor = FieldExtractor.from_passages(data.passages.values())
    fit = SyntheticSettings(n=TEACHING_QUESTIONS)  # a fit's defaults at fold seed 0
    assert writes_teaching_questions(fit.n, fit.seed, fit.named_share, fit.line_items)
    own = page_table_questions(data, extractor=extractor)
    lent = page_table_questions(data, extractor=extractor, written=lambda: synthesis_for(
        fit, data, extractor))  # fmt: skip
    assert lent.key == own.key and lent.make() == own.make() and all(own.make())
    # a fit of three draws writes 3 x n questions, whose first n are the teaching ones
    drawn = replace(fit, draws=3, mixing="average")
    assert writes_teaching_questions(drawn.total, drawn.seed, drawn.named_share, drawn.line_items)
    lent = page_table_questions(data, extractor=extractor, written=lambda: synthesis_for(
        drawn, data, extractor))  # fmt: skip
    assert lent.make() == own.make()
    # the first k questions of a larger synthesis are what k alone writes, whole (negatives,
    # wording with an unnamed share), across the round-robin's rounds
    larger = synthesize(data, 30, 0, extractor=extractor, named_share=0.5).questions
    for k in (3, 5, 13, 29):
        alone = synthesize(data, k, 0, extractor=extractor, named_share=0.5).questions
        assert [q.to_dict() for q in alone] == [q.to_dict() for q in larger[:k]]
    # where the corpus holds more than n questions the first n of a larger synthesis are lent
    few = page_table_questions(data, n=10, extractor=extractor)
    more = synthesize(data, 30, 0, extractor=extractor)
    assert len(more.questions) == 30
    lent = page_table_questions(data, n=10, extractor=extractor, written=lambda: more)
    assert lent.key == few.key and lent.make() == few.make() and len(few.make()[0]) == 10
    others = [replace(fit, seed=1), replace(fit, n=40), replace(fit, named_share=0.5)]
    for other in [*others, replace(fit, line_items="known")]:  # (the same rows on this corpus)
        assert not writes_teaching_questions(
            other.n, other.seed, other.named_share, other.line_items
        )
    for other in others:
        written = [(q.text, q.source) for q in synthesis_for(other, data, extractor).questions]
        assert written != own.make()[0]  # not the first teaching draw (seed 1 is the second's)
        # lent by mistake, they are refused by what wrote them, not taught silently
        wrong = page_table_questions(data, extractor=extractor, written=lambda o=other: (
            synthesis_for(o, data, extractor)))  # fmt: skip
        with pytest.raises(ValueError, match="lent questions were written by"):
            wrong.make()


def test_a_fit_hands_its_own_synthesis_to_the_page_table(monkeypatch):
    """A fit at the teaching settings teaches the page table with its own (forked) synthesis,
    not a second one; at any other setting the table writes its own questions."""
    from dataclasses import replace
    from types import SimpleNamespace

    import fincrowd_ltr.synthesis.teaching as teaching
    from fincrowd_ltr.api.fit import _CrossValidation
    from fincrowd_ltr.api.synthetic import synthesis_for
    from fincrowd_ltr.synthesis import TEACHING_QUESTIONS
    from fincrowd_ltr.synthesis.teaching import TEACHING_SEEDS

    data = filings_corpus(companies=4)
    extractor = FieldExtractor.from_passages(data.passages.values())
    written, real = [], teaching.synthesize
    monkeypatch.setattr(
        teaching, "synthesize", lambda *a, **kw: written.append(1) or real(*a, **kw)
    )
    fit = SyntheticSettings(n=TEACHING_QUESTIONS)
    lent = synthesis_for(fit, data, extractor)
    pending = SimpleNamespace(result=lambda: lent)  # what the fit's forked synthesis returns
    drawn = replace(fit, draws=3, mixing="average")  # lends the first n of its 3 x n
    cases = ((fit, 0), (drawn, 0), (replace(fit, seed=1), 1), (replace(fit, n=40), 1))
    for settings, writes in cases:
        written.clear()
        own = synthesis_for(settings, data, extractor)  # what this fit's fork would return
        pending = SimpleNamespace(result=lambda o=own: o)
        cv = SimpleNamespace(synthetic=settings, data=data, extractor=extractor)
        pairs = _CrossValidation._teaching(cv, pending)
        draws = pairs.make()
        assert draws[0] == [(q.text, q.source) for q in lent.questions]
        assert len(written) == writes + len(TEACHING_SEEDS) - 1  # the other draws are written


def test_zero_label_journey_over_a_sharded_index(tmp_path, capsys, monkeypatch):
    """The journey on a corpus kept on disk (`fincrowd index`, then `--index` on every command):
    the same synthetic questions as from `corpus.jsonl` in memory, and no BM25 index built in
    memory by any step."""
    from fincrowd_ltr.cli import main
    from fincrowd_ltr.retrieval.bm25 import BM25Index

    data = filings_corpus(companies=16)
    dump_beir(data, tmp_path / "memory")
    index = tmp_path / "index"
    assert (
        main(["index", f"--corpus={tmp_path / 'memory' / 'corpus.jsonl'}", f"--out={index}"]) == 0
    )
    mine = tmp_path / "mine"  # the questions alone: the pages are the index's
    mine.mkdir()
    for name in ("queries.jsonl", "qrels.tsv"):
        (mine / name).write_bytes((tmp_path / "memory" / name).read_bytes())
    cache = f"--cache-dir={tmp_path / 'c'}"
    memory = ["--dataset=beir", f"--data-root={tmp_path / 'memory'}", cache]
    assert main(["synthesize", *memory, "--n=160", f"--out={tmp_path / 'syn-memory'}"]) == 0

    def refuse(*args, **kwargs):
        raise AssertionError("the pages were indexed in memory")

    monkeypatch.setattr(BM25Index, "build", refuse)
    over = ["--dataset=beir", f"--data-root={mine}", f"--index={index}", cache]
    assert main(["synthesize", *over, "--n=160", f"--out={tmp_path / 'syn'}"]) == 0
    for name in ("queries.jsonl", "qrels.tsv", "corpus.jsonl"):
        assert (tmp_path / "syn" / name).read_text() == (tmp_path / "syn-memory" / name).read_text()
    ckpt = tmp_path / "ckpt"
    fit = ["fit", "--dataset=beir", f"--data-root={tmp_path / 'syn'}", f"--index={index}",
           cache, "--ranker=bm25", "--first-stage=bm25", "--no-select", "--monotone",
           f"--out={ckpt}"]  # fmt: skip
    assert main(fit) == 0
    assert (index / "fingerprint.json").is_file()  # hashed once, recorded for the next command
    calibrate = ["calibrate", *over, f"--checkpoint={ckpt}", "--domain=mine", "--fold=0",
                 "--folds=4", "--first-stage=bm25", "--min-calibration=1"]  # fmt: skip
    assert main(calibrate) == 0
    out = tmp_path / "report.json"
    evaluate = ["evaluate", *over, "--ranker=bm25", "--first-stage=bm25", f"--checkpoint={ckpt}",
                "--domain=mine", f"--out={out}"]  # fmt: skip
    assert main(evaluate) == 0
    systems = json.loads(out.read_text())["systems"]
    assert systems["residual:bm25"]["ndcg@10"] > systems["base:bm25:unseen"]["ndcg@10"] + 0.1
    # a labelled fit mixing synthetic questions it writes itself, over the same index
    mixed = ["fit", *over, "--ranker=bm25", "--first-stage=bm25", "--no-select",
             "--synthetic=48", f"--out={tmp_path / 'mixed'}"]  # fmt: skip
    assert main(mixed) == 0
    extra = fc.GatedCorrection.from_pretrained(tmp_path / "mixed").summary.extra
    assert extra["synthetic"]["n_banks"] > 0
