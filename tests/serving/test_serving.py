"""The reranking API: exact export round trip, clear load errors, explanations, bad input."""

import json
import os

import numpy as np
import pytest

from fincrowd_ltr.cli import main
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.model.checkpoint import write_manifest
from fincrowd_ltr.model.correction import GatedCorrection, UnreadMetadataWarning
from tests.serving.conftest import BASE, QUERY, candidates


def test_export_round_trip_is_exact(checkpoint, tmp_path):
    assert main(["export", f"--checkpoint={checkpoint}", f"--out={tmp_path / 'export'}"]) == 0
    assert (tmp_path / "export" / "manifest.json").is_file()
    first = GatedCorrection.from_pretrained(checkpoint)
    again = GatedCorrection.from_pretrained(tmp_path / "export", base_ranker="dense")
    for domain in ("open", "closed"):
        a = first.rerank(QUERY, candidates(), BASE, domain=domain)
        b = again.rerank(QUERY, candidates(), BASE, domain=domain)
        assert a.ranking == b.ranking
        assert np.allclose(a.scores, b.scores, atol=1e-9, rtol=0)
    again.save_pretrained(tmp_path / "export2")
    manifest = json.loads((tmp_path / "export2" / "manifest.json").read_text())
    assert set(manifest["sha256"]) == {"config.json", "residual.safetensors", "gate.safetensors"}


def test_load_errors_are_clear_and_nothing_loads_half(checkpoint, tmp_path):
    GatedCorrection.from_pretrained(checkpoint).save_pretrained(tmp_path / "e")
    with pytest.raises(DataError, match="fitted for base ranker 'dense', not 'bm25'"):
        GatedCorrection.from_pretrained(tmp_path / "e", base_ranker="bm25")
    weights = tmp_path / "e" / "gate.safetensors"
    weights.write_bytes(weights.read_bytes()[:-7])  # truncated
    with pytest.raises(DataError, match="gate.safetensors: SHA-256 differs"):
        GatedCorrection.from_pretrained(tmp_path / "e")
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**config, "format_version": 1}))
    with pytest.raises(DataError, match="config.json: SHA-256 differs"):
        GatedCorrection.from_pretrained(checkpoint)
    write_manifest(checkpoint)  # an edit the manifest vouches for: the format check speaks
    with pytest.raises(DataError, match="format 1 is not supported"):
        GatedCorrection.from_pretrained(checkpoint)


def test_serve_hands_its_workers_every_option(checkpoint, monkeypatch):
    """``serve --workers N``: N worker processes (it once served from one whatever N said),
    each loading the checkpoint with the command's ranker, runtime and trust; the parent keeps
    no model of its own."""
    from fincrowd_ltr.serving import http

    seen = {}
    monkeypatch.setattr(http, "serve", lambda model, *a, **k: seen.update(model=model, **k))
    assert main(["serve", f"--checkpoint={checkpoint}", "--workers=3", "--trust-unverified"]) == 0
    assert seen["workers"] == 3 and seen["model"] is None
    assert seen["factory"] == "fincrowd_ltr.cli.commands:worker_app"
    assert seen["spec"] == {
        "checkpoint": str(checkpoint), "ranker": None, "runtime": "torch", "trust_unverified": True
    }  # fmt: skip
    assert main(["serve", f"--checkpoint={checkpoint}", "--workers=1"]) == 0
    assert seen["workers"] == 1 and seen["model"] is not None


def test_a_deleted_manifest_or_an_unlisted_file_is_refused(checkpoint, tmp_path):
    """Issue 23: without manifest.json an edited config.json loaded silently."""
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**config, "alpha": 9.0}))
    (checkpoint / "manifest.json").unlink()
    with pytest.raises(DataError, match="manifest.json: missing"):
        GatedCorrection.from_pretrained(checkpoint)
    assert main(["serve", f"--checkpoint={checkpoint}", "--port=1"]) == 2  # refused before serving
    hand_made = GatedCorrection.from_pretrained(checkpoint, trust_unverified=True)
    assert hand_made.config["alpha"] == 9.0
    # each worker of `serve --workers N --trust-unverified` loads it as the command did
    from fincrowd_ltr.serving import http

    spec = {"checkpoint": str(checkpoint), "ranker": None, "runtime": "torch"}
    limits = {"max_candidates": 10, "max_text_chars": 100, "max_query_chars": 100}
    os.environ[http.ENV] = json.dumps({**spec, "trust_unverified": True, "limits": limits})
    try:
        assert http.app_from_env() is not None
        os.environ[http.ENV] = json.dumps({**spec, "limits": limits})
        with pytest.raises(DataError, match="manifest.json: missing"):
            http.app_from_env()
    finally:
        del os.environ[http.ENV]
    hand_made.save_pretrained(tmp_path / "ok")
    (tmp_path / "ok" / "residual.onnx").write_bytes(b"an earlier model's graph")
    with pytest.raises(DataError, match="residual.onnx: not listed in manifest.json"):
        GatedCorrection.from_pretrained(tmp_path / "ok")


def test_saving_over_a_checkpoint_leaves_nothing_of_the_earlier_model(checkpoint, tmp_path):
    """Issue 23: export A --onnx into X, then export B into X, and serve X with onnx: the old
    graphs were kept and served with B's config. Now X holds B alone and the onnx runtime says
    the graphs are missing."""
    pytest.importorskip("onnxruntime")
    a = tmp_path / "a"
    assert main(["export", f"--checkpoint={checkpoint}", f"--out={a}"]) == 0
    config = json.loads((a / "config.json").read_text())
    (a / "config.json").write_text(json.dumps({**config, "alpha": 0.25}))  # another model: B
    write_manifest(a)
    x = tmp_path / "x"
    assert main(["export", f"--checkpoint={checkpoint}", f"--out={x}", "--onnx"]) == 0
    assert (x / "residual.onnx").is_file()
    assert main(["export", f"--checkpoint={a}", f"--out={x}"]) == 2  # refused without --overwrite
    assert main(["export", f"--checkpoint={a}", f"--out={x}", "--overwrite"]) == 0
    assert sorted(p.name for p in x.iterdir()) == [
        "config.json", "gate.safetensors", "manifest.json", "residual.safetensors"
    ]  # fmt: skip
    assert GatedCorrection.from_pretrained(x).config["alpha"] == 0.25
    with pytest.raises(DataError, match="residual.onnx is missing"):
        GatedCorrection.from_pretrained(x, runtime="onnx")
    modes = {p.name: p.stat().st_mode & 0o777 for p in x.iterdir()}
    assert len(set(modes.values())) == 1, modes  # safetensors no longer 0600 beside 0644
    (x / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="notes.txt"):  # never deleted by a save
        GatedCorrection.from_pretrained(x, trust_unverified=True).save_pretrained(x)
    assert (x / "notes.txt").read_text() == "mine"


def test_explanation_and_gate_decision(checkpoint):
    reranker = GatedCorrection.from_pretrained(checkpoint)
    opened = reranker.rerank(QUERY, candidates(), BASE, domain="open")
    assert opened.gate["applied"] and opened.gate["probability"] > opened.gate["threshold"]
    # a calibration written before the guarantee existed says what it promised: the empirical cap
    assert opened.gate["guarantee"] == {
        "method": "empirical", "cap": 0.03, "delta": None, "risk_bound": None,
        "bound_delta": None, "n_calibration": 20, "n_orderable": None, "exact": False,
        "can_open": True,
    }  # fmt: skip
    assert opened.ranking[:2] == ["c2", "c3"]  # the FY2021 pages move to the top
    exp = opened.explanation
    assert exp["query_constraints"]["period"] == ["2021"]
    assert exp["query_constraints"]["entity"] == ["Acme"]
    assert exp["candidates"]["c0"]["conflicts"] == ["period"]
    assert exp["candidates"]["c2"]["conflicts"] == []
    assert exp["candidates"]["c0"]["fields"]["period"] == ["2019"]
    assert not exp["kept_original_order"]
    closed = reranker.rerank(QUERY, candidates(), BASE, domain="closed")
    assert not closed.gate["applied"] and closed.explanation["kept_original_order"]
    assert closed.ranking == [f"c{i}" for i in np.argsort(-np.array(BASE), kind="stable")]
    kept = reranker.rerank(QUERY, candidates(), BASE, domain="nowhere", fallback="identity")
    assert kept.ranking == closed.ranking
    with pytest.raises(DataError, match=r"no gate calibration for domain 'nowhere'"):
        reranker.rerank(QUERY, candidates(), BASE, domain="nowhere")
    batch = reranker.rerank_batch(
        [{"query": QUERY, "candidates": candidates(), "base_scores": BASE, "domain": "open"}] * 2
    )
    assert [r.ranking for r in batch] == [opened.ranking] * 2
    # the ninth walk: a misspelt "domain" served the always-on correction without a word
    typo = {"query": QUERY, "candidates": candidates(), "base_scores": BASE, "domian": "open"}
    with pytest.raises(DataError, match=r"requests\[0\]: unknown field\(s\) \['domian'\]"):
        reranker.rerank_batch([typo])
    good = {"query": QUERY, "candidates": candidates(), "base_scores": BASE}
    with pytest.raises(DataError) as err:  # the request's field is kept for services
        reranker.rerank_batch([good, {**good, "base_scores": BASE[:3]}])
    assert err.value.field.startswith("requests[1].base_scores")


def test_a_title_is_read_as_the_corpus_loader_reads_it(checkpoint, tmp_path):
    """A candidate with a BEIR record's ``title`` is the passage `evaluate` scored: the title on
    a first line before the text, and the document when the metadata names none."""
    from fincrowd_ltr.data.beir import load_beir

    reranker = GatedCorrection.from_pretrained(checkpoint)
    records = [
        {"id": c["id"], "title": f"Acme {2017 + i} annual report", "text": "Revenue rose.",
         "metadata": {"company": "Acme"}}
        for i, c in enumerate(candidates())
    ]  # fmt: skip
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({**r, "_id": r.pop("id")}) + "\n" for r in [dict(r) for r in records])
    )
    passages = load_beir(tmp_path).passages
    as_loaded = [
        {"id": r["id"], "text": passages[r["id"]].text, "metadata": passages[r["id"]].metadata()}
        for r in records
    ]
    titled = reranker.rerank(QUERY, records, BASE, domain="open")
    assert titled.ranking == reranker.rerank(QUERY, as_loaded, BASE, domain="open").ranking
    assert titled.ranking[0] == "c4"  # its title names FY2021: the only period match
    assert titled.explanation["candidates"]["c4"]["fields"]["period"] == ["2021"]
    untitled = [{**r, "title": ""} for r in records]
    assert reranker.rerank(QUERY, untitled, BASE, domain="open").ranking[0] == "c0"
    with pytest.raises(DataError, match=r"candidates\[0\]\.title must be a string"):
        reranker.rerank(QUERY, [{**records[0], "title": 3}], BASE[:1])


def test_unread_metadata_keys_are_named_not_dropped_silently(checkpoint):
    import warnings

    reranker = GatedCorrection.from_pretrained(checkpoint)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreadMetadataWarning)
        clean = reranker.rerank(QUERY, candidates(), BASE, domain="open")
    cands = candidates()
    for c in cands[2:]:  # the year under a key nothing reads: the period is lost
        c["metadata"]["fiscal_year"] = c["metadata"].pop("period")
    cands[3]["metadata"]["Company"] = "Acme"
    with pytest.warns(UnreadMetadataWarning) as caught:
        result = reranker.rerank(QUERY, cands, BASE, domain="open")
    assert str(caught[0].message).startswith(
        "rerank: candidate metadata key(s) 'Company' (did you mean 'company'?), 'fiscal_year' "
        "are not read"
    )
    # a note about the request, not a distribution shift of the bank
    assert result.warnings == clean.warnings
    assert sorted(result.ranking) == sorted(c["id"] for c in cands)


@pytest.mark.parametrize(
    ("cands", "scores", "message"),
    [
        (candidates(), [*BASE[:-1], float("nan")], r"base_scores\[5\] is not finite"),
        (candidates(), [*BASE[:-1], "4"], r"base_scores\[5\] is str '4', not a number"),
        (candidates(), [None, *BASE[1:]], r"base_scores\[0\] is NoneType None, not a number"),
        (candidates(), [*BASE[:2], True, *BASE[3:]], r"base_scores\[2\] is bool True"),
        (candidates(), 4.0, "base_scores must be a list of numbers"),
        (candidates(), BASE[:3], "3 values for 6 candidates"),
        ([], [], "candidates is empty"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], [1.0, 2.0], "unique"),
        ([{"id": "a"}], [1.0], r"candidates\[0\]: missing field\(s\) \['text'\]"),
        ([{"text": "t"}], [1.0], r"candidates\[0\]: missing field\(s\) \['id'\]"),
        ([{"id": " ", "text": "t"}], [1.0], r"candidates\[0\]\.id must be a non-empty id"),
        ([{"id": "a", "text": 3}], [1.0], r"candidates\[0\]\.text must be a string"),
        ([{"id": None, "text": "t"}], [1.0], r"candidates\[0\]\.id must be a non-empty id"),
        (
            [{"id": "a", "text": "t"}, {"id": "b", "text": "t", "metadata": ["x"]}],
            [1.0, 2.0],
            r"candidates\[1\]\.metadata must be an object",
        ),
        (
            [{"id": "a", "text": "t", "metadata": {"company": ["x"]}}],
            [1.0],
            r"candidates\[0\]\.metadata\.company must be a string or number",
        ),
        (
            [{"id": "a", "text": "t", "metadata": {"period": False}}],
            [1.0],
            r"candidates\[0\]\.metadata\.period must be a year",
        ),
        (
            [{"id": "a", "text": "t", "metadata": {"period": "H1 2016"}}],
            [1.0],
            r"candidates\[0\]\.metadata\.period: cannot read period 'H1 2016'",
        ),
    ],
)
def test_bad_input_is_named(checkpoint, cands, scores, message):
    reranker = GatedCorrection.from_pretrained(checkpoint)
    with pytest.raises(DataError, match=message):
        reranker.rerank(QUERY, cands, scores, domain="open")


def test_base_scores_come_as_any_sequence_or_array_of_numbers(checkpoint):
    """A tensor (one that requires grad too), a NumPy array, Decimals or 0-d tensors rerank as
    the same floats; a dict (whose keys are no scores) is refused."""
    import decimal

    import torch

    reranker = GatedCorrection.from_pretrained(checkpoint)
    expected = reranker.rerank(QUERY, candidates(), BASE, domain="open")
    for scores in (
        torch.tensor(BASE, requires_grad=True),
        np.asarray(BASE, dtype=np.float32).astype(np.float64),
        [decimal.Decimal(repr(b)) for b in BASE],
        [torch.tensor(b, dtype=torch.float64) for b in BASE],
    ):
        found = reranker.rerank(QUERY, candidates(), scores, domain="open")
        assert found.ranking == expected.ranking and np.allclose(found.scores, expected.scores)
    with pytest.raises(DataError, match="base_scores must be a list of numbers"):
        reranker.rerank(QUERY, candidates(), dict(enumerate(BASE)), domain="open")


def test_onnx_runtime_reranks_like_pytorch_without_torch(checkpoint, tmp_path):
    """The torch-free runtime (residual.onnx, gate.onnx, NumPy features and decision) returns
    the same order, scores and gate decision as PyTorch; a subprocess shows torch never loads."""
    pytest.importorskip("onnxruntime")
    out = tmp_path / "exported"
    assert main(["export", f"--checkpoint={checkpoint}", f"--out={out}", "--onnx"]) == 0
    torch_model = GatedCorrection.from_pretrained(out)
    onnx_model = GatedCorrection.from_pretrained(out, runtime="onnx")
    for domain in (None, "open"):
        a = torch_model.rerank(QUERY, candidates(), BASE, domain=domain)
        b = onnx_model.rerank(QUERY, candidates(), BASE, domain=domain)
        assert a.ranking == b.ranking and a.gate["applied"] == b.gate["applied"]
        assert np.allclose(a.scores, b.scores, atol=1e-9)
    script = (
        "import json, sys\n"
        "from fincrowd_ltr.model.correction import GatedCorrection, UnreadMetadataWarning\n"
        f"m = GatedCorrection.from_pretrained({str(out)!r}, runtime='onnx')\n"
        f"r = m.rerank({QUERY!r}, json.loads(sys.argv[1]), {BASE!r}, domain='open')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print(json.dumps(r.ranking))\n"
    )
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(candidates())], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == torch_model.rerank(QUERY, candidates(), BASE, "open").ranking


def test_failed_requests_leave_no_state(checkpoint):
    reranker = GatedCorrection.from_pretrained(checkpoint)
    fresh = [{**c, "id": f"n{i}", "text": c["text"] + " new"} for i, c in enumerate(candidates())]
    for domain, scores in (("nowhere", BASE), ("open", [*BASE[:-1], float("inf")])):
        with pytest.raises(DataError):
            reranker.rerank(QUERY, fresh, scores, domain=domain)
    requests = reranker._requests
    assert len(requests.passages) == 0 and not requests.featurizer.terms.vocab
    reranker.rerank(QUERY, fresh, BASE, domain="open")
    assert len(requests.passages) == len(fresh)


def test_extractor_version_mismatch_is_refused(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    assert "METRICS" in config["extractor"]["vocabularies"]
    (checkpoint / "config.json").write_text(json.dumps({**config, "extractor_version": "0.9"}))
    write_manifest(checkpoint)
    with pytest.raises(DataError, match="fitted with field extractor 0.9"):
        GatedCorrection.from_pretrained(checkpoint)


def test_a_checkpoint_of_other_feature_code_is_flagged(checkpoint):
    """A checkpoint records the versions of the code computing its features (the filing prior's
    among them); one fitted with another loads with a warning naming it, and one saved before
    the versions were recorded loads silently."""
    import warnings

    from fincrowd_ltr.features.bank_features import FEATURE_VERSIONS
    from fincrowd_ltr.model.checkpoint import FeatureVersionWarning

    config = json.loads((checkpoint / "config.json").read_text())
    assert config["feature_versions"] == FEATURE_VERSIONS
    old = {**FEATURE_VERSIONS, "filings": FEATURE_VERSIONS["filings"] - 1}
    (checkpoint / "config.json").write_text(json.dumps({**config, "feature_versions": old}))
    write_manifest(checkpoint)
    with pytest.warns(FeatureVersionWarning, match=r"other feature code \(filings \d+ \(now"):
        loaded = GatedCorrection.from_pretrained(checkpoint)
    loaded.save_pretrained(
        checkpoint
    )  # a re-save (calibrate, export) keeps what it was fitted with
    with pytest.warns(FeatureVersionWarning):
        GatedCorrection.from_pretrained(checkpoint)
    assert json.loads((checkpoint / "config.json").read_text())["feature_versions"] == old
    config = json.loads((checkpoint / "config.json").read_text())
    del config["feature_versions"]
    (checkpoint / "config.json").write_text(json.dumps(config))
    write_manifest(checkpoint)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureVersionWarning)
        GatedCorrection.from_pretrained(checkpoint).save_pretrained(checkpoint)
    assert "feature_versions" not in json.loads((checkpoint / "config.json").read_text())


def test_a_serve_worker_caps_torch_and_blas_threads_and_quiets_libraries(checkpoint):
    """Each ``serve --workers N`` process (the command's ``worker_app``) takes its share of the
    cores for torch and for BLAS (only torch's was capped: N workers could each start a BLAS
    pool of every core), and the command's warning and logging filters (a new process does not
    inherit them)."""
    import subprocess
    import sys

    from fincrowd_ltr.serving import http

    limits = {"max_candidates": 10, "max_text_chars": 100, "max_query_chars": 100}
    spec = {"checkpoint": str(checkpoint), "ranker": None, "runtime": "torch", "threads": 1}
    probe = (
        "import json, logging, torch, threadpoolctl\n"
        "from fincrowd_ltr.cli.commands import worker_app\n"
        "worker_app()\n"
        "blas = [p['num_threads'] for p in threadpoolctl.threadpool_info()"
        " if p['user_api'] == 'blas']\n"
        "import warnings\n"
        "quiet = logging.getLogger('lightning').level == logging.WARNING and getattr("
        "warnings.formatwarning, 'plain', False)\n"
        "print(json.dumps([torch.get_num_threads(), blas, quiet]))\n"
    )
    env = {**os.environ, http.ENV: json.dumps({**spec, "limits": limits})}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout
    threads, blas, quiet = json.loads(out.strip().splitlines()[-1])
    assert threads == 1 and blas and set(blas) == {1} and quiet
