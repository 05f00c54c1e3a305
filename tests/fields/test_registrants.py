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
