"""The cross-encoder trained on synthetic questions: each group is a synthetic question's source
page against its typed negatives and its bank's best other candidates; a fold's model never
draws on the held-out fold's companies; a final adapter needs no labelled question."""

import dataclasses
import json

import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.api import build_banks
from fincrowd_ltr.crossencoder import training
from fincrowd_ltr.crossencoder.training import TYPED_NEGATIVES, synthetic_groups
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.data.splits import FoldPlan
from fincrowd_ltr.settings import CrossEncoderSettings
from fincrowd_ltr.synthesis import synthesize
from tests.synthesis.test_synthesis import filings_corpus


def _company(data, text: str) -> str:
    return next(p.company for p in data.passages.values() if p.text == text)


def test_synthetic_groups_mix_typed_and_bank_negatives_and_skip_held_companies():
    data = filings_corpus(companies=6, questions=False)
    found = synthesize(data, 40, seed=0)
    banks = build_banks(found.dataset(), ["bm25"], first_stage="bm25", size=20, cache_dir=None)
    held = {"Firm0", "Firm1"}
    groups = synthetic_groups(found, banks, "bm25", held, negatives=5)
    by_id = {q.qid: q for q in found.questions}
    assert groups and len({g.qid for g in groups}) == len(groups)  # one group per question
    assert {by_id[g.qid].company for g in groups}.isdisjoint(held)
    assert len(groups) == sum(q.company not in held for q in found.questions)
    some_typed = False
    for g in groups:
        q = by_id[g.qid]
        assert g.positive == data.passages[q.source].text and len(g.negatives) == 5
        relevant = {data.passages[p].text for p in q.relevant}
        typed = {data.passages[p].text for pids in q.negatives.values() for p in pids}
        usable = typed - relevant - {g.positive}
        usable = {t for t in usable if _company(data, t) not in held}
        assert not relevant & set(g.negatives) and g.positive not in g.negatives
        assert all(_company(data, t) not in held for t in g.negatives)
        k = min(TYPED_NEGATIVES, len(usable))  # typed negatives first, at most three
        assert set(g.negatives[:k]) <= usable
        ranking = [data.passages[p].text for p in banks.banks[g.qid].ranking("bm25")]
        rest = [ranking.index(t) for t in g.negatives[k:]]
        assert rest == sorted(rest)  # then the bank's best other candidates, in its order
        some_typed |= k > 0
    assert some_typed


def test_settings_refuse_synthetic_only_without_synthetic_questions():
    with pytest.raises(DataError, match="--synthetic N"):
        CrossEncoderSettings(synthetic_only=True)
    with pytest.raises(DataError, match="synthetic"):
        CrossEncoderSettings(synthetic=-1)


@pytest.fixture()
def recorded(monkeypatch):
    """The training groups of every cross-encoder trained, in order."""
    trained = []
    real = training.train_cross_encoder

    def recording(model, groups, **kwargs):
        trained.append(list(groups))
        return real(model, groups, **kwargs)

    monkeypatch.setattr("fincrowd_ltr.crossencoder.crossfit.train_cross_encoder", recording)
    monkeypatch.setattr("fincrowd_ltr.crossencoder.train_cross_encoder", recording)
    return trained


SMALL = dict(depth=8, max_length=16, epochs=1, batch_size=2, max_groups=4, folds=2,
             first_stage="bm25")  # fmt: skip


@pytest.mark.parametrize("grouped_by", ["company", "answer pages"])
def test_zero_label_cross_encoder_out_of_fold_and_final(tmp_path, recorded, grouped_by):
    data = filings_corpus(companies=6)
    if grouped_by == "answer pages":  # a BEIR question without a group: grouped by its answer
        data.queries = {
            q: dataclasses.replace(query, group=" ".join(sorted(data.qrels[q])))
            for q, query in data.queries.items()
        }
    run_out, out = tmp_path / "oof.trec", tmp_path / "ce"
    report = fc.train_cross_encoder(
        data, run_out=run_out, out=out, cache_dir=tmp_path / "cache", synthetic=24,
        synthetic_only=True, **SMALL,
    )  # fmt: skip
    assert report["synthetic"]["questions"] == 24 and report["synthetic"]["only"]
    folds = report["folds"]
    assert len(folds) == 2 and len(recorded) == 3  # two fold models, then the final adapter
    scored = {line.split()[0] for line in run_out.read_text().splitlines()}
    assert scored == {q for q in data.queries if data.covered(q)}
    plan = FoldPlan.by_group(data, 2, 0, scored).folds
    for fold, groups in zip(folds, recorded, strict=False):
        held = {_company(data, data.passages[p].text) for q in plan[fold["test_fold"]]
                for p in data.qrels[q]}  # fmt: skip
        assert groups and held
        assert not {g.qid for g in groups} & set(data.queries)  # synthetic questions only
        texts = [t for g in groups for t in (g.positive, *g.negatives)]
        assert all(_company(data, t) not in held for t in texts)
    assert not {g.qid for g in recorded[2]} & set(data.queries)
    saved = json.loads((out / "cross_encoder.json").read_text())["training"]
    assert saved["query_ids"] == [] and saved["synthetic"]["questions"] == 24


def test_a_corpus_without_labels_trains_a_final_adapter_only(tmp_path, recorded):
    data = filings_corpus(companies=6, questions=False)
    report = fc.train_cross_encoder(
        data, out=tmp_path / "ce", cache_dir=tmp_path / "cache", synthetic=12,
        synthetic_only=True, **SMALL,
    )  # fmt: skip
    assert report["final_trained_groups"] == 4 and len(recorded) == 1
    with pytest.raises(DataError, match="out .--out. alone trains"):
        fc.train_cross_encoder(
            data, run_out=tmp_path / "oof.trec", cache_dir=tmp_path / "cache", synthetic=12,
            synthetic_only=True, **SMALL,
        )  # fmt: skip
    with pytest.raises(DataError, match="negatives_from"):  # its default named, too
        fc.train_cross_encoder(
            data, out=tmp_path / "ce2", synthetic=12, synthetic_only=True, negatives_from="dense"
        )
    with pytest.raises(DataError, match="takes no run"):
        fc.train_cross_encoder(data, out=tmp_path / "ce2", synthetic=12, first_stage="run")
    (tmp_path / "file").write_text("mine")
    with pytest.raises(DataError, match="not a folder"):
        fc.train_cross_encoder(data, out=tmp_path / "file", synthetic=12, synthetic_only=True)
    with pytest.raises(DataError, match="overwrite"):  # the adapter trained above
        fc.train_cross_encoder(data, out=tmp_path / "ce", synthetic=12, synthetic_only=True)
    assert len(recorded) == 1  # each refused before any training
    (tmp_path / "ce" / "stale.txt").write_text("old")
    fc.train_cross_encoder(
        data, out=tmp_path / "ce", overwrite=True, cache_dir=tmp_path / "cache", synthetic=12,
        synthetic_only=True, **SMALL,
    )  # fmt: skip
    assert not (tmp_path / "ce" / "stale.txt").exists()
    assert (tmp_path / "ce" / "cross_encoder.json").exists()


def test_a_corpus_that_yields_no_synthetic_question_is_named(tmp_path):
    data = filings_corpus(companies=3, questions=False)
    data.passages = {
        pid: dataclasses.replace(p, text="An annual report.") for pid, p in data.passages.items()
    }
    with pytest.raises(DataError, match="no question could be synthesised"):
        fc.train_cross_encoder(
            data, out=tmp_path / "ce", cache_dir=tmp_path / "cache", synthetic=12,
            synthetic_only=True, **SMALL,
        )  # fmt: skip


def test_evaluate_notes_an_adapter_synthesised_from_the_same_corpus():
    from types import SimpleNamespace

    from fincrowd_ltr.api.evaluate import _trained_on

    record = {"dataset": "filings", "query_ids": [], "synthetic": {"questions": 24}}
    model = SimpleNamespace(config=SimpleNamespace(training=record))
    assert "24 questions synthesised from this corpus" in _trained_on(model, filings_corpus(3))
    other = dataclasses.replace(filings_corpus(3), name="another")
    assert _trained_on(model, other) is None
    record["corpus"] = filings_corpus(4).corpus_fingerprint()  # same name, other pages
    assert _trained_on(model, filings_corpus(3)) is None
    record["corpus"] = filings_corpus(3).corpus_fingerprint()
    assert _trained_on(model, filings_corpus(3)) is not None


def test_labelled_questions_of_a_held_out_company_never_train_its_fold(tmp_path, recorded):
    """Questions without a group are grouped by their answer's pages, so one company's
    questions may fall in two folds: a fold's model must not train on the other's."""
    data = filings_corpus(companies=6)
    for c in range(6):  # a second question per company, answered by another year's page
        qid = f"q-Firm{c}-2020"
        data.queries[qid] = dataclasses.replace(data.queries[f"q-Firm{c}"], qid=qid)
        data.qrels[qid] = {f"Firm{c}_2020_10K:2": 1}
    data.queries = {
        q: dataclasses.replace(query, group=" ".join(sorted(data.qrels[q])))
        for q, query in data.queries.items()
    }
    run_out = tmp_path / "oof.trec"
    settings = {**SMALL, "max_groups": 50, "negatives_from": "bm25", "depth": 40}
    fc.train_cross_encoder(data, run_out=run_out, cache_dir=tmp_path / "cache", **settings)
    plan = FoldPlan.by_group(data, 2, 0, set(data.queries)).folds
    companies = [
        {_company(data, data.passages[p].text) for q in fold for p in data.qrels[q]}
        for fold in plan
    ]
    assert companies[0] & companies[1]  # the plan splits some company's two questions
    for held, groups in zip(companies, recorded, strict=True):
        assert groups and all(g.qid in data.queries for g in groups)
        texts = [t for g in groups for t in (g.positive, *g.negatives)]
        assert all(_company(data, t) not in held for t in texts)
