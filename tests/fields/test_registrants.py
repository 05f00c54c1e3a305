from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.registrants import looks_like_ticker, registrant_names


def _pages(company: str, *texts: str) -> list[Passage]:
    return [Passage(f"{company}:{i}", t, company=company) for i, t in enumerate(texts)]


UPX = _pages(
    "UPX",
    "Annual report of United Parcel Xpress, Inc. and subsidiaries for 2019.",
    "The shareholders of United Parcel Xpress, Inc. approved the plan; see Exhibit 4.",
    "Revenue grew 4% (in millions).",
)
OTHER = _pages("ZZQ", "Zeta Quarry Corporation sells gravel.", "Zeta Quarry Corporation grew.")


def test_tickers_look_like_tickers():
    assert all(map(looks_like_ticker, ["UPS", "L", "BRK.B", "MMM"]))
    assert not any(map(looks_like_ticker, ["Foot Locker", "BOSTONPROPERTIES", "ups", "3M"]))


def test_a_ticker_takes_the_name_its_own_filings_give_it():
    names = registrant_names(UPX + OTHER, ["UPX", "ZZQ"])
    assert names == {"UPX": "United Parcel Xpress", "ZZQ": "Zeta Quarry"}
    fx = FieldExtractor.from_passages(UPX + OTHER)
    assert fx.canonical_company("UPX") == "United Parcel Xpress"
    assert fx.extract_passage(UPX[2]).entity == {"United Parcel Xpress"}
    question = fx.extract_query("what was the revenue of united parcel xpress inc . in 2019?")
    assert question.entity == {"United Parcel Xpress"}


def test_names_need_two_mentions_the_ticker_letters_and_no_word_of_prose():
    once = _pages("UPX", "United Parcel Xpress, Inc. once.", "Nothing else here.")
    assert registrant_names(once, ["UPX"]) == {}
    other_letters = _pages("UPX", "Acme Widgets, Inc. sold.", "Acme Widgets, Inc. bought.")
    assert registrant_names(other_letters, ["UPX"]) == {}
    prose = _pages("UPX", "paid under plan xyz to us, Inc.", "paid under plan xyz to us, Inc.")
    assert registrant_names(prose, ["UPX"]) == {}


def test_a_word_of_everyones_filings_is_not_a_name():
    own = _pages("PKG", "Packaging Corporation reported.", "Packaging Corporation grew.")
    others = _pages("ZZQ", *["Our packaging costs rose."] * 3)
    assert "PKG" not in registrant_names(own + others, ["PKG", "ZZQ"])
    assert FieldExtractor.from_passages(own + others).canonical_company("PKG") == "PKG"


def test_lower_case_corpora_and_names_that_are_the_ticker():
    lower = _pages("LKX", "lkx corporation and subsidiaries", "lkx corporation grew")
    assert registrant_names(lower, ["LKX"]) == {"LKX": "LKX"}
    titled = _pages("GPX", "global parts xchange inc . grew", "global parts xchange inc . sold")
    assert registrant_names(titled, ["GPX"]) == {"GPX": "Global Parts Xchange"}


def test_a_ticker_whose_filings_name_a_known_company_becomes_its_alias():
    pages = _pages("GBX", "Globex Corporation reported.", "Globex Corporation grew.")
    fx = FieldExtractor.from_passages(pages, companies={"Globex": ["globex"]})
    assert fx.canonical_company("GBX") == "Globex"
    assert fx.extract_passage(pages[0]).entity == {"Globex"}
    assert set(fx.companies) == {"Globex"}


def test_a_harvested_name_that_is_a_vocabulary_alias_joins_that_company():
    pages = _pages("GBX", "Globex Corporation reported.", "Globex Corporation grew.")
    fx = FieldExtractor.from_passages(pages, companies={"Globex Holdings": ["globex"]})
    assert fx.canonical_company("GBX") == "Globex Holdings"
    assert set(fx.companies) == {"Globex Holdings"}


def test_a_metadata_name_that_is_an_alias_is_that_company_in_text_too():
    # before: the alias became a second company whose text pattern overrode the first one's,
    # so a question naming it conflicted with the company's own pages
    pages = _pages("GBX", "Revenue grew 4%.")
    fx = FieldExtractor.from_passages(pages, companies={"Globex": ["globex", "gbx"]})
    assert set(fx.companies) == {"Globex"}
    assert fx.extract_passage(pages[0]).entity == {"Globex"}
    assert fx.extract_query("What was GBX's revenue?").entity == {"Globex"}


def test_the_name_as_the_pages_write_it_and_no_name_across_a_sentence_end():
    heading = "ACME WIDGETS CORPORATION"
    cased = _pages("AWG", heading, heading, "Acme Widgets Corporation grew.")
    assert registrant_names(cased, ["AWG"]) == {"AWG": "Acme Widgets"}
    split = _pages("UPX", "Agreed upon. Parcel Xpress, Inc.", "Agreed upon. Parcel Xpress, Inc.")
    assert registrant_names(split, ["UPX"]) == {}
    assert registrant_names(_pages("BRK.B", *["Bark Rock Kilns, Inc."] * 2), ["BRK.B"]) == {
        "BRK.B": "Bark Rock Kilns"
    }


def test_text_less_headers_read_their_texts_and_the_order_of_names_does_not_matter():
    headers = [Passage(p.pid, "", company=p.company) for p in UPX]
    fx = FieldExtractor.from_passages(headers, texts={p.pid: p for p in UPX})
    assert fx.canonical_company("UPX") == "United Parcel Xpress"
    named_first = [Passage("n", "Filler.", company="United Parcel Xpress"), *UPX]
    for pages in (named_first, [*UPX, named_first[0]]):
        fx = FieldExtractor.from_passages(pages)
        assert fx.canonical_company("UPX") == "United Parcel Xpress"


def test_a_name_the_metadata_writes_in_other_capitals_stays_one_company():
    pages = [*UPX, Passage("n", "Filler.", company="united parcel xpress")]
    fx = FieldExtractor.from_passages(pages)
    assert fx.canonical_company("UPX") == fx.canonical_company("united parcel xpress")
    assert len([c for c in fx.companies if c.lower() == "united parcel xpress"]) == 1
