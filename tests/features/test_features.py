"""Bank features on hand-made banks."""

import math

import numpy as np
import pytest
from scipy import sparse

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.features import FEATURE_NAMES, BankFeaturizer
from fincrowd_ltr.features.bank_features import schema_coverage, zscore
from fincrowd_ltr.features.lexical import bank_bm25, local_concentration
from fincrowd_ltr.fields import FieldExtractor, FinancialFields


def col(name):
    return FEATURE_NAMES.index(name)


@pytest.fixture
def bank():
    passages = {
        "gold": Passage(
            "gold", "Acme capital expenditure 2018 was 10", company="Acme", period="2018"
        ),
        "wrong_year": Passage(
            "wrong_year", "Acme capital expenditure 2017 was 9", company="Acme", period="2017"
        ),
        "other": Passage("other", "unrelated text about weather"),
    }
    return BankFeaturizer(FieldExtractor.from_passages(passages.values()), passages)


def test_typed_compatibility_features(bank):
    x = bank.features(
        "What was Acme's FY2018 capital expenditure?", ["gold", "wrong_year", "other"]
    )
    assert x.shape == (3, len(FEATURE_NAMES))
    assert x[0, col("period_match")] == 1 and x[0, col("period_conflict")] == 0
    assert x[1, col("period_conflict")] == 1 and x[1, col("period_match")] == 0
    # the unrelated passage observes no period: unknown is neither match nor conflict
    assert x[2, col("period_match")] == 0 and x[2, col("period_conflict")] == 0
    assert x[0, col("entity_match")] == 1 and x[0, col("metric_match")] == 1
    # coverage: query observes entity, metric, period; gold observes all three
    assert x[0, col("coverage")] == pytest.approx(1.0)
    assert x[2, col("coverage")] == pytest.approx(0.0)


def test_permuting_the_bank_permutes_the_rows(bank):
    q = "What was Acme's FY2018 capital expenditure?"
    a = bank.features(q, ["gold", "wrong_year", "other"])
    b = bank.features(q, ["other", "gold", "wrong_year"])
    np.testing.assert_allclose(a[[2, 0, 1]], b)


def test_bank_bm25_by_hand():
    # two docs, query term 0 appears once in doc 0 (length 2) and never in doc 1 (length 2)
    docs = sparse.csr_matrix(np.array([[1.0, 1.0], [0.0, 2.0]]))
    scores = bank_bm25(docs, np.array([0]))
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    expected = idf * (1 * 2.5) / (1 + 1.5 * (1 - 0.75 + 0.75 * 2 / 2))
    assert scores[0] == pytest.approx(expected) and scores[1] == 0.0


def test_local_concentration_and_degenerate_banks():
    docs = sparse.csr_matrix(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    conc = local_concentration(docs, neighbours=1)
    assert conc[0] == pytest.approx(1.0) and conc[1] == pytest.approx(1.0)
    assert conc[2] == pytest.approx(0.0)
    assert local_concentration(docs[:1]).tolist() == [0.0]
    assert zscore(np.array([3.0, 3.0])).tolist() == [0.0, 0.0]


def test_schema_coverage_without_query_fields():
    assert schema_coverage(FinancialFields(), FinancialFields(period=frozenset({"2018"}))) == 0.0


def test_page_features_read_filing_printed_periods_metric_rows_and_roles():
    restated = (
        "Consolidated Statements of Cash Flows\nYears 2019 and 2018\nCapital expenditures\n$ 1,577"
    )
    passages = {
        "k2019": Passage(
            "k2019",
            "Capital expenditures rose. 2019",
            company="Acme",
            period="2019",
            doc_type="10k",
        ),
        "k2020": Passage("k2020", restated, company="Acme", period="2020", doc_type="10k"),
        "q2017": Passage(
            "q2017",
            "Notes to Consolidated Financial Statements\nNOTE 4 leases 2017",
            company="Acme",
            period="2017Q2",
            doc_type="10q",
        ),
        "bare": Passage("bare", "no period, no metadata"),
    }
    featurizer = BankFeaturizer(FieldExtractor.from_passages(passages.values()), passages)
    pids = list(passages)
    x = featurizer.features("What was Acme's FY2019 capital expenditure?", pids)
    assert list(x[:, col("filing_fit")]) == [1.0, 0.5, 0.0, 0.0]  # own year, restated, other
    assert list(x[:, col("text_period_match")]) == [1, 1, 0, 0]  # the 2020 filing prints 2019
    assert list(x[:, col("text_period_conflict")]) == [0, 0, 1, 0]
    assert list(x[:, col("metric_row")]) == [0, 1, 0, 0]  # a figure follows only on k2020
    assert x[1, col("role_statement")] == 1 and x[2, col("role_notes")] == 1
    assert x[:, [col(f"role_{r}") for r in ("statement", "notes", "mdna", "other")]].sum() == 2
    no_period = featurizer.features("What is Acme's capital expenditure?", pids)
    assert not no_period[:, col("filing_fit") : col("text_period_conflict") + 1].any()


@pytest.mark.parametrize(
    "text",
    [
        "Capital Expenditures\n$ 1,577",
        "capital expenditures were 2019",  # a year is not a line-item figure
        "precapital expenditures 12",  # no word boundary before the form
        "NET SALES 4,210 and Revenue (in millions) 3",
        "İstanbul revenue 12",  # lower() changes the length: the whole page is searched
        "Revenue rose strongly across all regions and products without a figure anywhere here",
    ],
)
def test_metric_row_tries_the_pattern_only_where_a_form_can_start(text):
    from fincrowd_ltr.features.page_cues import _metric_row, has_metric_row

    for metrics in ({"capital_expenditure"}, {"revenue"}, {"revenue", "net_income"}):
        pattern, _ = _metric_row(frozenset(metrics))
        assert has_metric_row(text, frozenset(metrics)) == bool(pattern.search(text))
    assert has_metric_row("Revenue 12", frozenset({"revenue"}))
    assert not has_metric_row("Revenue 12", frozenset())


def test_a_pages_metric_rows_are_read_once_per_metric_set():
    """``metric_row`` answers as ``has_metric_row`` and remembers the answer per metric set."""
    from fincrowd_ltr.features.page_cues import has_metric_row, metric_row

    text = "Consolidated statements of income\nNet sales 4,210 3,990\nNet income (loss) 12"
    known: dict[frozenset[str], bool] = {}
    for wanted in ({"revenue"}, {"net_income"}, {"revenue", "debt"}, {"capital_expenditure"}):
        wanted = frozenset(wanted)
        assert metric_row(text, wanted, known) == has_metric_row(text, wanted)
        assert known[wanted] == has_metric_row(text, wanted)
    known[frozenset({"revenue"})] = False  # a remembered answer is not read again
    assert metric_row(text, frozenset({"revenue"}), known) is False


def test_corpus_featurizers_harvest_each_corpus_once_and_are_shared(monkeypatch):
    from fincrowd_ltr.data.schema import Passage
    from fincrowd_ltr.features.corpus import CorpusFeaturizers
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.model.correction import GatedCorrection

    calls = []
    real = FieldExtractor.harvest_segments

    def counted(self, passages):
        calls.append(1)
        return real(self, passages)

    monkeypatch.setattr(FieldExtractor, "harvest_segments", counted)
    a = {"p": Passage("p", "Acme revenue rose", company="Acme", period="2020")}
    b = {"q": Passage("q", "Acme revenue fell", company="Acme", period="2021")}
    shared = CorpusFeaturizers()
    one, two = GatedCorrection(features=shared), GatedCorrection(features=shared)
    assert one.featurizer(a) is two.featurizer(a)  # one corpus, harvested once for both
    assert len(calls) == 1
    assert one.featurizer(b) is not one.featurizer(a) and len(calls) == 2
    own = GatedCorrection()  # a model built alone holds its own
    own.featurizer(a)
    assert len(calls) == 3 and own.features is not shared
    small = CorpusFeaturizers(limit=1)
    small.featurizer(FieldExtractor(), a)
    small.featurizer(FieldExtractor(), b)
    assert len(small._featurizers) == 1  # bounded


def test_remembered_segment_names_are_what_a_harvest_gives_and_skip_it(monkeypatch):
    """A fit harvests its corpus once (``from_passages``) and hands the names to the models'
    featurizers: the same featurizer output as a fresh harvest, no second pass."""
    from fincrowd_ltr.data.schema import Passage
    from fincrowd_ltr.features.corpus import CorpusFeaturizers
    from fincrowd_ltr.fields import FieldExtractor
    from fincrowd_ltr.model.correction import GatedCorrection

    corpus = {
        "a": Passage("a", "Revenue of our Connected Fitness segment rose.", company="Acme"),
        "b": Passage("b", "Connected Fitness | 53.4 | 19.2", company="Acme", period="2020"),
    }
    fx = FieldExtractor.from_passages(corpus.values())
    assert fx.segment_names == {"Acme": ["connected fitness"]}
    fresh = GatedCorrection(companies=fx.companies, segments=fx.segment_names)
    shared = CorpusFeaturizers()
    shared.remember_segments(fx, corpus, fx.segment_names)
    kept = GatedCorrection(companies=fx.companies, segments=fx.segment_names, features=shared)
    calls = []
    real = FieldExtractor.harvest_segments
    monkeypatch.setattr(
        FieldExtractor, "harvest_segments", lambda self, p: calls.append(1) or real(self, p)
    )
    question = "Acme connected fitness revenue in 2020"
    want = fresh.featurizer(corpus).features(question, ["a", "b"])
    assert len(calls) == 1
    got = kept.featurizer(corpus).features(question, ["a", "b"])
    assert len(calls) == 1 and np.array_equal(got, want)


def test_features_are_the_same_bits_whatever_the_featurizer_met_before(financebench):
    """Term order follows the terms' text, not the order a process met them: a featurizer that
    served other banks first gives bit-identical features (before, the last bits moved)."""
    data = financebench
    extractor = FieldExtractor.from_passages(data.passages.values())
    pids = sorted(data.passages)
    qids = sorted(data.queries)[:12]
    banks = [(data.queries[q].text, pids[i * 500 : i * 500 + 60]) for i, q in enumerate(qids)]
    fresh = BankFeaturizer(extractor, data.passages)
    expected = [fresh.features(query, bank) for query, bank in banks]
    served = BankFeaturizer(extractor, data.passages)
    for query, bank in reversed(banks):  # other term ids for the same terms
        served.features(query, list(reversed(bank)))
    assert served.terms.vocab != fresh.terms.vocab
    for (query, bank), want in zip(banks, expected, strict=True):
        assert np.array_equal(served.features(query, bank), want)


def test_features_are_the_same_bits_whatever_the_blas_thread_count(financebench):
    """The bank's similarity product runs on one BLAS thread whatever the process allows (a Dask
    worker gets one, a local process all cores): 100-candidate banks, where OpenBLAS would split
    the product over threads."""
    from threadpoolctl import ThreadpoolController

    data = financebench
    extractor = FieldExtractor.from_passages(data.passages.values())
    pids = sorted(data.passages)
    qids = sorted(data.queries)[:8]
    banks = [(data.queries[q].text, pids[i * 700 : i * 700 + 100]) for i, q in enumerate(qids)]
    blas = ThreadpoolController()
    with blas.limit(limits=1, user_api="blas"):
        one = [BankFeaturizer(extractor, data.passages).features(q, b) for q, b in banks]
    with blas.limit(limits=2, user_api="blas"):
        two = [BankFeaturizer(extractor, data.passages).features(q, b) for q, b in banks]
    for a, b in zip(one, two, strict=True):
        assert np.array_equal(a, b)


def test_term_order_does_not_depend_on_what_a_counter_met_first():
    """Without the data: random texts, counted in two orders, give the same bank features."""
    rng = np.random.default_rng(0)
    words = [f"w{i}x" for i in range(3000)]
    texts = {
        f"p{i}": " ".join(rng.choice(words, size=int(rng.integers(50, 400)))) for i in range(80)
    }
    passages = {pid: Passage(pid, text) for pid, text in texts.items()}
    extractor = FieldExtractor.from_passages(passages.values())
    query = " ".join(rng.choice(words, size=12))
    bank = list(passages)
    fresh = BankFeaturizer(extractor, passages).features(query, bank)
    served = BankFeaturizer(extractor, passages)
    served.features(" ".join(reversed(words[:500])), list(reversed(bank)))
    assert np.array_equal(served.features(query, bank), fresh)


def test_a_forked_child_starts_with_the_blas_lock_free():
    """Another thread may hold the BLAS lock when a worker is forked: the child gets a free one
    (that thread does not exist there), instead of waiting for ever at its first bank."""
    import os

    from fincrowd_ltr.features import lexical

    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    with lexical._BLAS_LOCK:  # held, as by another thread computing a bank's features
        pid = os.fork()
        if pid == 0:  # the child: exit 0 if the lock is free, 1 if not (never waits)
            os._exit(0 if lexical._BLAS_LOCK.acquire(blocking=False) else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
