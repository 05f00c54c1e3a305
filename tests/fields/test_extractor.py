import pytest
from hypothesis import given
from hypothesis import strategies as st

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.fields import Compatibility, FieldExtractor, FinancialFields, compatibility
from fincrowd_ltr.fields.compatibility import compare_period
from fincrowd_ltr.fields.extractor import FIELD_NAMES, looks_like_table

fx = FieldExtractor()


@pytest.mark.parametrize(
    ("text", "periods"),
    [
        ("What is the FY2018 capital expenditure?", {"2018"}),
        ("revenue in fiscal 2022", {"2022"}),
        ("EPS for Q2 2023", {"2023Q2"}),
        ("quick ratio for Q2 of FY2023", {"2023Q2"}),
        ("second quarter of 2023 sales", {"2023Q2"}),
        ("2Q23 margin", {"2023Q2"}),
        ("margin in the fiscal 2021 third quarter", {"2021Q3"}),  # year before the quarter
        ("the 2017 1st quarter low", {"2017Q1"}),
        ("returns for the years ended 12/31/2015 and 12/31/07", {"2015", "2007"}),  # dates
        ("shipped 13/45/2015 units in 2/2016", set()),  # not dates
        ("a ratio of 1/2/10 and item .5/1/12", set()),  # short fields: not dates either
        ("cash as of 6/30/19", {"2019"}),
        ("net income for the year ended December 31, 2019", {"2019"}),
        ("average capex over FY2017 - FY2019", {"2017", "2018", "2019"}),
        ("between 2015 and 2017", {"2015", "2016", "2017"}),
        ("FY18 revenue", {"2018"}),
        ("What drove revenue?", set()),
        ("It paid $2019 million in 2,020 units", set()),
    ],
)
def test_query_periods(text, periods):
    assert set(fx.extract_query(text).period) == periods


def test_query_fields_of_a_financebench_style_question():
    # hand-written in the style of FinanceBench's questions (no dataset text)
    f = fx.extract_query(
        "For 3M, how large was capital expenditure in FY2018 (in USD millions), according to "
        "its cash flow statement?"
    )
    assert f.entity == {"3M"}
    assert f.metric == {"capital_expenditure"}
    assert f.table_scope == {"cash_flow_statement"}
    assert f.unit == {"millions"}
    assert f.currency == {"USD"}


def test_metric_synonyms_map_to_one_canonical_name():
    a = fx.extract_text("Purchases of property, plant and equipment")
    b = fx.extract_query("capex")
    assert a.metric == b.metric == {"capital_expenditure"}


def test_entities_aliases_and_ambiguous_short_tickers():
    assert fx.extract_query("How did JPMorgan Chase grow?").entity == {"JPMorgan"}
    assert fx.extract_query("Johnson & Johnson sales").entity == {"Johnson & Johnson"}
    # lower-case common words are not companies; upper-case tickers are
    assert "Block" not in fx.extract_query("a block of shares").entity
    assert fx.extract_query("AMD revenue").entity == {"AMD"}
    assert fx.extract_query("the ko and ba tickers").entity == frozenset()


def test_corpus_companies_extend_the_vocabulary():
    extractor = FieldExtractor.from_passages([Passage("p", "x", company="Zebra Widgets Inc")])
    assert extractor.extract_query("Zebra Widgets revenue 2021").entity == {"Zebra Widgets Inc"}


def test_segments_named_and_from_vocabulary():
    f = fx.extract_query("What was the revenue of the Safety and Industrial segment?")
    assert "industrial" in f.segment
    assert fx.extract_query("Net sales by segment were").segment == frozenset()
    assert "data_center" in fx.extract_query("Data Center revenue grew").segment


def test_passage_metadata_wins_over_text():
    passage = Passage("p", "In 2017 and 2016 revenue rose.", company="3M", period="2018")
    f = fx.extract_passage(passage)
    assert f.entity == {"3M"} and f.period == {"2018"}
    f_text = fx.extract_passage(Passage("q", "In 2017 and 2016 revenue rose."))
    assert f_text.period == {"2016", "2017"} and f_text.entity == frozenset()


def test_table_detection():
    table = "\n".join(
        ["Revenue", "1,234", "1,100", "Cost", "(300)", "(250)", "Total", "934", "850"]
    )
    assert looks_like_table(table)
    assert not looks_like_table("This is prose.\nIt has sentences.\n" * 5)
    assert looks_like_table(" | 2019 | 2018\nRevenue | 5 | 4")


def test_compatibility_rules():
    q = FinancialFields(period=frozenset({"2018"}), metric=frozenset({"revenue"}))
    c = FinancialFields(period=frozenset({"2017"}), metric=frozenset({"revenue", "eps"}))
    result = compatibility(q, c)
    assert result["period"] is Compatibility.CONFLICT
    assert result["metric"] is Compatibility.MATCH
    assert result["segment"] is Compatibility.UNKNOWN
    assert compare_period(frozenset({"2023"}), frozenset({"2023Q2"})) is Compatibility.MATCH
    assert compare_period(frozenset({"2023Q1"}), frozenset({"2023Q2"})) is Compatibility.CONFLICT


values = st.frozensets(
    st.sampled_from(["2018", "2019", "2019Q1", "revenue", "eps", "x"]), max_size=3
)


@given(q=values, c=values, name=st.sampled_from(FIELD_NAMES))
def test_unknown_is_never_a_conflict(q, c, name):
    query = FinancialFields(**{name: q})
    cand = FinancialFields(**{name: c})
    outcome = compatibility(query, cand)[name]
    if not q or not c:
        assert outcome is Compatibility.UNKNOWN
    else:
        assert outcome is not Compatibility.UNKNOWN


@given(st.text(max_size=300))
def test_extraction_is_deterministic_and_total(text):
    a = fx.extract_text(text)
    assert a == fx.extract_text(text)
    assert all(isinstance(getattr(a, n), frozenset) for n in FIELD_NAMES)


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        ("Operating\nincome rose", "metric", {"operating_income"}),  # phrase broken by a line
        ("operat-\ning income rose", "metric", {"operating_income"}),  # hyphenated across lines
        ("Revenue1 grew", "metric", {"revenue"}),  # footnote digit touching the word
        ("NetIncome was 5", "metric", {"net_income"}),  # run together by the text layer
        ("Sales grew 5%", "metric", {"revenue"}),  # bare sales
        ("cost of sales rose", "metric", {"cost_of_revenue"}),  # not revenue too
        ("sales and marketing expense", "metric", set()),
        ("Earnings (loss) per share", "metric", {"eps"}),
        ("investments in debt securities rose", "metric", set()),  # held as an investment
        ("Which debt securities are registered under Acme's name?", "metric", {"debt"}),
        ("Net sales ($ million)", "unit", {"millions"}),
        ("(in $ thousands)", "unit", {"thousands"}),
        ("net debt, in us$ million?", "unit", {"millions"}),
        ("assets, in US$ billions", "unit", {"billions"}),
        ("leases (in $ thousand)", "unit", {"thousands"}),
        ("Provision for (benefit from) income taxes 12", "metric", {"income_tax"}),
        ("Provision for/(benefit from) income taxes 12", "metric", {"income_tax"}),
        ("growth in RD&E spending", "metric", {"research_development"}),
    ],
)
def test_pdf_text_is_read_as_printed(text, field, expected):
    assert set(getattr(fx.extract_text(text), field)) >= expected
    if not expected:
        assert not getattr(fx.extract_text(text), field)


def test_passage_segments_need_a_segment_or_region_context():
    plant = Passage("p", "Our consumer plant in China opened.", company="Acme", period="2019")
    assert not fx.extract_passage(plant).segment  # business description, lone location
    table = Passage("t", "Net sales by region\nAmericas 10\nEurope 5", company="Acme")
    assert {"americas", "europe"} <= fx.extract_passage(table).segment
    assert "china" in fx.extract_query("What were Acme's sales in China in 2019?").segment
    assert fx.extract_query("What was Company3 revenue in FY2020?", ["Company3"]).entity
    assert "revenue" not in fx.extract_text("Cost of sales rose").metric


def _acme_corpus():
    return [
        Passage("a1", "Net sales of our Connected Fitness segment rose.", company="Acme"),
        Passage("a2", "The new segment and the following segments were reorganized.", "Acme"),
        Passage("a3", "Results of the Investing & Lending segment.", company="Acme"),
        Passage("a4", "Revenue of our Corporate segment fell.", company="Acme"),
        Passage("b1", "Our Wholesale Banking segment grew.", company="Beta"),
        Passage("c1", "operating loss in our marine services operating segment rose ."),
    ]


def test_segment_names_are_harvested_from_each_companys_filings():
    extractor = FieldExtractor.from_passages(_acme_corpus())
    names = extractor.segment_names
    assert names["Acme"] == ["connected fitness", "corporate", "investing & lending"]
    assert names["Beta"] == ["wholesale banking"]
    assert names[""] == ["marine services"]  # lower-case text: no descriptive words in it
    # a table row of the company's filing names the segment without the word "segment"
    row = Passage("a9", "Connected Fitness | 53.4 | 19.2", company="Acme")
    assert "connected fitness" in extractor.extract_passage(row).segment
    other = Passage("b9", "Connected Fitness | 53.4 | 19.2", company="Beta")
    assert "connected fitness" not in extractor.extract_passage(other).segment
    # a one-word name is ambiguous: only in a text about segments
    assert (
        "corporate"
        not in extractor.extract_passage(Passage("a8", "Corporate offices", "Acme")).segment
    )
    about = Passage("a7", "Corporate 12 by segment", company="Acme")
    assert "corporate" in extractor.extract_passage(about).segment


def test_questions_read_the_harvested_names_of_their_companies():
    extractor = FieldExtractor.from_passages(_acme_corpus())
    q = "How did connected fitness's operating margin move in 2014?"
    assert "connected fitness" in extractor.extract_query(q).segment  # no company: every name
    assert "connected fitness" not in extractor.extract_query(q, ["Beta"]).segment
    assert (
        "investing & lending" in extractor.extract_query("Acme investing & lending revenue").segment
    )
    # a one-word name counts only for a question about its company
    assert "corporate" not in extractor.extract_query("corporate tax rate").segment
    assert "corporate" in extractor.extract_query("Acme corporate costs in 2019").segment
    assert FieldExtractor().segment_names == {}


def test_without_harvest_the_fields_a_first_stage_reads_are_the_same():
    """``harvest=False`` (the first stage's extractor) skips the segment names only: the
    companies, and every question's entities, periods and metrics, are those of the harvested
    extractor."""
    corpus = _acme_corpus()
    full = FieldExtractor.from_passages(corpus)
    plain = FieldExtractor.from_passages(corpus, harvest=False)
    assert full.segment_names and plain.segment_names == {}
    assert plain.companies == full.companies
    for q in (
        "How did Acme's connected fitness operating margin move in 2014?",
        "Beta wholesale banking revenue FY2019 (USD millions)",
        "What was the marine services operating loss in Q3 2020?",
    ):
        a, b = full.extract_query(q), plain.extract_query(q)
        assert (a.entity, a.period, a.metric) == (b.entity, b.period, b.metric)
    assert full.extract_query(corpus[0].text).segment  # the harvested names do differ


def test_audit_scores_per_field_and_pooled_over_values():
    """Issue 25: the pooled value-level F1 beside the unweighted per-field mean. A field with one
    gold value (segment, missed) pulls the mean far more than the pooled figure."""
    from fincrowd_ltr.fields.audit import pooled_f1, score
    from fincrowd_ltr.fields.extractor import FinancialFields

    labels = [
        {"record": "r1", "labels": {"period": ["2018", "2019"], "segment": ["cloud"]}},
        {"record": "r2", "labels": {"period": ["2020"], "segment": []}},
    ]
    predictions = {
        "r1": FinancialFields(period=frozenset({"2018", "2019"})),
        "r2": FinancialFields(period=frozenset({"2020", "2021"})),
    }
    fields = score(labels, predictions)
    assert (fields["period"]["tp"], fields["period"]["fp"], fields["period"]["fn"]) == (3, 1, 0)
    assert fields["segment"]["f1"] == 0.0 and fields["segment"]["gold_values"] == 1
    assert pooled_f1(fields) == 2 * 3 / (2 * 3 + 1 + 1)
