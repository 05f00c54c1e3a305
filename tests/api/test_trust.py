"""Results a user can trust: caches keyed by what they depend on, a cache shared by concurrent
processes, strict loaders, and checkpoint files checked against their manifest."""

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

import fincrowd_ltr as fc
from fincrowd_ltr.data.beir import load_beir
from fincrowd_ltr.features import BankFeaturizer
from fincrowd_ltr.features.examples import vocabulary_key
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.retrieval.build import BankSpec
from tests.conftest import user_corpus, write_beir


def _key(data, **spec):
    return BankSpec(**spec).key(data, "all")


def test_bank_cache_key_changes_with_every_ingredient():
    data = user_corpus()
    base = _key(data)
    pid = next(iter(data.passages))
    text = replace(data.passages[pid], text=data.passages[pid].text + " restated")
    meta = replace(data.passages[pid], period="2018")
    qid = next(iter(data.queries))
    for changed in (
        fc.Dataset(data.name, data.queries, {**data.passages, pid: text}, data.qrels),
        fc.Dataset(data.name, data.queries, {**data.passages, pid: meta}, data.qrels),
        fc.Dataset(
            data.name,
            {**data.queries, qid: replace(data.queries[qid], text="another question?")},
            data.passages,
            data.qrels,
        ),
    ):
        assert _key(changed) != base
    assert _key(data, first_stage="bm25+entity") != base
    assert _key(data, size=50) != base
    # judgements: injected banks depend on them, retrieved banks do not
    relabelled = fc.Dataset(data.name, data.queries, data.passages, {**data.qrels, qid: {pid: 1}})
    assert _key(relabelled, mode="injected") != _key(data, mode="injected")
    assert _key(relabelled) == base


def test_two_data_roots_with_the_same_ids_and_other_qrels_get_their_own_banks(tmp_path):
    for name, year in (("a", "2020"), ("b", "2019")):
        write_beir(tmp_path / name, companies=6)
        qrels = (tmp_path / name / "qrels.tsv").read_text().replace("-2020", f"-{year}")
        (tmp_path / name / "qrels.tsv").write_text(qrels)
    banks = {
        name: fc.build_banks(
            load_beir(tmp_path / name, "beir"),
            ["bm25"],
            mode="injected",
            size=1,
            cache_dir=tmp_path / "cache",
            progress=False,
        )
        for name in ("a", "b")
    }
    for qid, bank in banks["a"].banks.items():
        assert bank.pids != banks["b"].banks[qid].pids  # each root's own injected gold


def test_feature_cache_key_follows_the_vocabulary():
    data = user_corpus()
    one = BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)
    two = BankFeaturizer(FieldExtractor({"Other": []}), data.passages)
    assert vocabulary_key(one) != vocabulary_key(two)


WRITER = """
import sys
import numpy as np
from pathlib import Path
from fincrowd_ltr.retrieval.embedding_cache import EmbeddingCache
cache = EmbeddingCache(Path(sys.argv[1]))
for i in range(200):
    cache.put(f"{sys.argv[2]} text {i}", np.full((2, 4), float(i), np.float32))
    if i % 20 == 19:
        cache.save()
cache.save()
"""


def test_embedding_cache_keeps_what_two_processes_write_at_once(tmp_path):
    from fincrowd_ltr.retrieval.embedding_cache import EmbeddingCache

    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name]) for name in "ab"]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    cache = EmbeddingCache(tmp_path)
    assert len(cache) == 400
    for name in "ab":
        assert np.array_equal(cache.get(f"{name} text 7"), np.full((2, 4), 7.0, np.float32))


def test_qrels_naming_unknown_passages_fail_with_file_and_line(tmp_path):
    write_beir(tmp_path, companies=3)
    with open(tmp_path / "qrels.tsv", "a") as fh:
        fh.write("q-Company1\tno-such-page\t1\n")
    with pytest.raises(fc.DataError, match=r"qrels.tsv:4: unknown passage id 'no-such-page'"):
        load_beir(tmp_path)
    data = load_beir(tmp_path, allow_unknown_qrels=True)  # a counted warning instead
    assert not data.covered("q-Company1") and any("outside the corpus" in n for n in data.notes)


def test_empty_queries_file_is_named(tmp_path):
    write_beir(tmp_path, companies=2)
    (tmp_path / "queries.jsonl").write_text("")
    with pytest.raises(fc.DataError, match="queries.jsonl: no queries"):
        load_beir(tmp_path)


def test_corrupted_onnx_file_is_refused(tmp_path):
    data = user_corpus()
    model, _ = fc.fit_correction(data, "bm25", folds=4, min_calibration=2, cache_dir=None)
    model.save_pretrained(tmp_path / "m", onnx=True)
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert {"residual.onnx", "gate.onnx", "config.json"} <= set(manifest["sha256"])
    again = fc.GatedCorrection.from_pretrained(tmp_path / "m")
    again.save_pretrained(tmp_path / "copy")  # the ONNX graphs are kept
    assert (tmp_path / "copy" / "gate.onnx").is_file()
    with open(tmp_path / "m" / "residual.onnx", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(fc.DataError, match="residual.onnx: SHA-256 differs"):
        fc.GatedCorrection.from_pretrained(tmp_path / "m", runtime="onnx")
