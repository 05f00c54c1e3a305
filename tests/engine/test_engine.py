"""The Dask engine gives the banks, scores, features and fields of the single-process path, on a
small real slice (TAT-QA dev) with a local 2-worker cluster started by the test."""

from __future__ import annotations

import numpy as np
import pytest

from fincrowd_ltr import engine as engines
from fincrowd_ltr.data.schema import Dataset


@pytest.fixture(scope="module")
def tatqa_slice(tatqa) -> Dataset:
    qids = list(tatqa.queries)[:40]
    gold = {p for q in qids for p in tatqa.qrels.get(q, {})}
    pids = [p for p in tatqa.passages if p in gold][:200] + list(tatqa.passages)[:300]
    return Dataset(
        name="tatqa-slice",
        queries={q: tatqa.queries[q] for q in qids},
        passages={p: tatqa.passages[p] for p in dict.fromkeys(pids)},
        qrels={q: tatqa.qrels[q] for q in qids if q in tatqa.qrels},
    )


def _everything(data: Dataset):
    from fincrowd_ltr.api import build_banks
    from fincrowd_ltr.features import BankFeaturizer
    from fincrowd_ltr.features.examples import make_examples
    from fincrowd_ltr.fields import FieldExtractor, extract_passages

    banks = build_banks(data, ["bm25", "dense"], first_stage="bm25", size=20, cache_dir=None)
    extractor = FieldExtractor.from_passages(data.passages.values())
    # features of 100-candidate banks too, where OpenBLAS would split a product over threads
    wide = build_banks(data, ["bm25"], first_stage="bm25", size=100, cache_dir=None)
    features = {}
    for bankset, ranker, tag in ((banks, "dense", ""), (wide, "bm25", ":100")):
        found = make_examples(data, bankset, ranker, BankFeaturizer(extractor, data.passages))
        features.update({e.qid + tag: e.features for e in found})
    fields = extract_passages(extractor, list(data.passages.values()))
    return banks, features, fields


def test_dask_engine_builds_the_banks_of_one_process(tatqa_slice, monkeypatch):
    pytest.importorskip("dask.distributed")
    import fincrowd_ltr.features.examples as examples
    import fincrowd_ltr.fields.extractor as extractor
    import fincrowd_ltr.retrieval.banks as banks
    import fincrowd_ltr.retrieval.windowed_encoder as encoder

    # small chunks, so that this slice is split over both workers at every step
    monkeypatch.setattr(banks, "QUERIES_PER_CHUNK", 8)
    monkeypatch.setattr(encoder, "TEXTS_PER_CHUNK", 64)
    monkeypatch.setattr(examples, "BANKS_PER_CHUNK", 8)
    monkeypatch.setattr(extractor, "PASSAGES_PER_CHUNK", 100)

    local_banks, local_features, local_fields = _everything(tatqa_slice)
    engine = engines.make_engine("dask", workers=2)
    try:
        assert engine.workers == 2
        with engines.using(engine):
            assert engines.current() is engine
            dask_banks, dask_features, dask_fields = _everything(tatqa_slice)
    finally:
        engine.close()
    assert engines.current().name == "local"

    assert list(dask_banks.banks) == list(local_banks.banks)
    for qid, bank in local_banks.banks.items():
        other = dask_banks.banks[qid]
        assert other.pids == bank.pids
        assert np.array_equal(other.first_stage, bank.first_stage)
        assert np.array_equal(other.scores["bm25"], bank.scores["bm25"])
        # embeddings computed in another process with another thread count: same to float32
        assert np.allclose(other.scores["dense"], bank.scores["dense"], atol=1e-6)
    # term order follows the terms' text and the similarity product runs on one BLAS thread, so
    # features are the same bits in every process (a worker has one thread, this process more)
    assert dask_features.keys() == local_features.keys()
    for key, features in local_features.items():
        assert np.array_equal(dask_features[key], features)
    assert dask_fields == local_fields


def test_many_local_banks_are_featurised_in_forked_workers_to_the_same_bits(
    tatqa_slice, monkeypatch
):
    """Locally, a large bank set is featurised in forked processes (the parent extracts none of
    its pages), in the order asked for, bit for bit what one process computes."""
    import fincrowd_ltr.features.examples as examples
    from fincrowd_ltr.api import build_banks
    from fincrowd_ltr.features import BankFeaturizer
    from fincrowd_ltr.fields import FieldExtractor

    if not engines.fork_safe():
        pytest.skip("worker processes are forked on Linux only")
    data = tatqa_slice
    wide = build_banks(data, ["bm25"], first_stage="bm25", size=100, cache_dir=None)
    extractor = FieldExtractor.from_passages(data.passages.values())
    qids = list(reversed(wide.banks))
    alone = BankFeaturizer(extractor, data.passages)
    expected = examples.bank_features(data, wide, alone, qids)
    assert alone._fields  # one process: the parent read the pages
    monkeypatch.setattr(examples, "FORK_BANKS", 1)
    monkeypatch.setattr(engines, "available_cores", lambda: 2)
    forked = BankFeaturizer(extractor, data.passages)
    found = examples.bank_features(data, wide, forked, qids)
    assert not forked._fields  # the workers read them
    assert list(found) == qids
    for qid in qids:
        assert np.array_equal(found[qid], expected[qid])


def test_bank_sets_featurised_together_equal_each_set_alone_and_share_the_cache(
    tatqa_slice, monkeypatch, tmp_path
):
    """A fit's retrieved and gold-injected banks are featurised in one pass (forked here): the
    examples and cache files of each set alone, and a cached set is read, not computed."""
    import fincrowd_ltr.features.examples as examples
    from fincrowd_ltr.api import build_banks
    from fincrowd_ltr.features import BankFeaturizer
    from fincrowd_ltr.fields import FieldExtractor

    data = tatqa_slice
    sets = {
        mode: build_banks(
            data, ["bm25"], first_stage="bm25", mode=mode, size=20, cache_dir=tmp_path / "banks"
        )
        for mode in ("retrieved", "injected")
    }
    extractor = FieldExtractor.from_passages(data.passages.values())
    alone = {
        mode: examples.make_examples(
            data, b, "bm25", BankFeaturizer(extractor, data.passages), cache=tmp_path / "alone"
        )
        for mode, b in sets.items()
    }
    monkeypatch.setattr(examples, "FORK_BANKS", 1)
    monkeypatch.setattr(engines, "available_cores", lambda: 2)
    monkeypatch.delenv(engines.WORKERS_VARIABLE, raising=False)
    featurizer = BankFeaturizer(extractor, data.passages)
    together = examples.make_examples_together(
        data, sets, "bm25", featurizer, cache=tmp_path / "together"
    )
    for mode in sets:
        assert [e.qid for e in together[mode]] == [e.qid for e in alone[mode]]
        for a, b in zip(alone[mode], together[mode], strict=True):
            assert np.array_equal(a.features, b.features) and np.array_equal(a.labels, b.labels)
            assert np.array_equal(a.base, b.base) and a.pids == b.pids
    files = sorted(p.name for p in (tmp_path / "alone" / "features").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "together" / "features").iterdir())
    assert len(files) == 2
    for name in files:
        with (
            np.load(tmp_path / "alone" / "features" / name) as a,
            np.load(tmp_path / "together" / "features" / name) as b,
        ):
            assert np.array_equal(a["features"], b["features"])
    monkeypatch.setattr(examples, "_features", None)  # a cached set is never featurised again
    again = examples.make_examples_together(data, sets, "bm25", featurizer, tmp_path / "alone")
    assert all(
        np.array_equal(a.features, b.features)
        for mode in sets
        for a, b in zip(alone[mode], again[mode], strict=True)
    )


def test_fork_map_keeps_item_order_and_runs_in_place_with_one_core(monkeypatch):
    import os

    items = list(range(7))
    assert engines.fork_map(_pid_and_item, items, 10, workers=1) == [
        (os.getpid(), 10 + i) for i in items
    ]
    found = engines.fork_map(_pid_and_item, items, 10, workers=2)
    assert [x for _, x in found] == [10 + i for i in items]
    assert (os.getpid() not in {pid for pid, _ in found}) == engines.fork_safe()
    assert engines.split_evenly(items, 3) == [[0, 1], [2, 3, 4], [5, 6]]
    assert engines.split_evenly(items[:2], 5) == [[0], [1]]


def test_fork_map_raises_a_workers_error_and_never_forks_twice(monkeypatch):
    """A task's error reaches the caller (the pool stopped); a fork_map inside a worker, or in
    a daemonic process, runs in place; so does one while another runs in this process."""
    import multiprocessing
    import os

    if not engines.fork_safe():
        pytest.skip("worker processes are forked on Linux only")
    with pytest.raises(ValueError, match="item 3"):
        engines.fork_map(_fail_on_three, list(range(6)), None, workers=2)
    nested = engines.fork_map(_nested_pids, [0, 1], None, workers=2)
    assert all(pid == inner for pid, inner in nested)  # the inner map ran in the worker itself
    with engines._FORK_LOCK:  # another thread's fork_map is running
        assert engines.fork_map(_pid_and_item, [1, 2], 0, workers=2)[0][0] == os.getpid()
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    assert engines.fork_map(_pid_and_item, [1, 2], 0, workers=2)[0][0] == os.getpid()


def _pid_and_item(item: int, shared: int) -> tuple[int, int]:
    import os

    return os.getpid(), item + shared


def _fail_on_three(item: int, shared) -> int:
    if item == 3:
        raise ValueError("item 3")
    return item


def _nested_pids(item: int, shared) -> tuple[int, int]:
    import os

    inner = engines.fork_map(_pid_and_item, [0, 1], 0, workers=2)
    return os.getpid(), inner[0][0]


def test_a_forked_call_returns_its_value_or_error_and_can_be_cancelled(monkeypatch):
    """``Forked`` runs a closure (nothing pickled but its value) in a child from the start, and
    ``finish`` turns the value into the result here; the child's error is raised with its type;
    a child that dies or sends what cannot be pickled is named; ``cancel`` ends it. With one
    core the call runs here, when its result is first asked."""
    import os
    import threading
    import time

    from fincrowd_ltr.data.schema import DataError

    if not engines.fork_safe():
        pytest.skip("worker processes are forked on Linux only")
    monkeypatch.setattr(engines, "available_cores", lambda: 2)
    monkeypatch.delenv(engines.WORKERS_VARIABLE, raising=False)
    lock = threading.Lock()  # a closure over what cannot be pickled
    done = engines.Forked(lambda: (os.getpid(), lock.locked()), lambda v: (*v, "finished"))
    pid, locked, tag = done.result()
    assert pid != os.getpid() and not locked and tag == "finished"
    assert done.result() == (pid, locked, tag)  # asked again: the same, no second child

    def fail():
        raise DataError("corpus.jsonl line 3: bad")

    with pytest.raises(DataError, match="line 3") as raised:
        engines.Forked(fail).result()
    assert isinstance(raised.value.__cause__, engines.RemoteTraceback)
    assert "in fail" in str(raised.value.__cause__)  # the child's own traceback

    def bad_finish(value):
        raise ValueError("finish failed")

    finishing = engines.Forked(lambda: 1, bad_finish)
    for _ in range(2):  # asked again: the same error, never the unfinished value
        with pytest.raises(ValueError, match="finish failed"):
            finishing.result()
    with pytest.raises(RuntimeError, match="exit code 3"):
        engines.Forked(lambda: os._exit(3)).result()
    with pytest.raises(RuntimeError, match="could not be sent back"):
        engines.Forked(lambda: threading.Lock()).result()
    slow = engines.Forked(lambda: time.sleep(60))
    started = time.monotonic()
    slow.cancel()
    assert time.monotonic() - started < 30 and not slow._child.is_alive()
    assert slow._conn.closed
    other = engines.Forked(lambda: time.sleep(60))
    engines._end(other._child, other._conn, os.getpid() + 1)  # as run in a later fork: no-op
    assert other._child.is_alive()
    other.cancel()
    dropped = engines.Forked(lambda: time.sleep(60))
    child = dropped._child
    del dropped  # never read (an error on the way): the child ends with the object
    child.join(timeout=30)
    assert not child.is_alive()
    with pytest.raises(RuntimeError, match="cancelled"):
        slow.result()

    class Cluster:
        distributed = True

    monkeypatch.setattr(engines, "current", lambda: Cluster())
    assert engines.Forked(os.getpid)._child is None  # a cluster client's threads: no fork
    monkeypatch.setattr(engines, "available_cores", lambda: 1)
    ran = []
    here = engines.Forked(lambda: ran.append(os.getpid()) or len(ran))
    assert ran == []  # not yet run: in place, on demand
    assert here.result() == 1 and ran == [os.getpid()]


def test_a_worker_cap_bounds_every_parallel_step(monkeypatch):
    """``FINCROWD_WORKERS`` and :func:`worker_cap` (what ``fit --workers N`` sets) bound the
    worker processes every parallel step starts; a value that is no number is named."""
    import threading

    from fincrowd_ltr.data.schema import DataError

    monkeypatch.setattr(engines, "available_cores", lambda: 4)
    monkeypatch.delenv(engines.WORKERS_VARIABLE, raising=False)
    assert engines.worker_count() == 4
    monkeypatch.setenv(engines.WORKERS_VARIABLE, "3")
    assert engines.worker_count() == 3
    with engines.worker_cap(2):
        assert engines.worker_count() == 2
        with engines.worker_cap(1):
            assert engines.worker_count() == 1
        assert engines.worker_count() == 2
    with engines.worker_cap(None):
        assert engines.worker_count() == 3
    assert engines.worker_count(8) == 3  # an asked count is capped too
    seen = []
    with engines.worker_cap(1):  # another thread's block does not bound this one
        thread = threading.Thread(target=lambda: seen.append(engines.worker_count()))
        thread.start()
        thread.join()
    assert seen == [3]
    for bad in ("two", "0", "-1"):
        monkeypatch.setenv(engines.WORKERS_VARIABLE, bad)
        with pytest.raises(DataError, match=f"FINCROWD_WORKERS='{bad}'"):
            engines.worker_count()
    with pytest.raises(ValueError, match="at least 1"), engines.worker_cap(0):
        pass
    from fincrowd_ltr.settings import TrainingSettings

    for bad in (0, -1, 1.5, True):
        with pytest.raises(DataError, match="workers must be (a whole number|int or None)"):
            TrainingSettings(workers=bad)


def test_a_fit_with_one_worker_forks_nothing(monkeypatch):
    """``workers=1``: the residual fits, the bank features and the synthetic questions all run
    in this process (a fork would fail here); without it, the same fit forks."""
    import os

    import fincrowd_ltr as fc
    import fincrowd_ltr.features.examples as examples
    from tests.conftest import user_corpus

    if not engines.fork_safe():
        pytest.skip("worker processes are forked on Linux only")
    monkeypatch.setattr(engines, "available_cores", lambda: 2)
    monkeypatch.setattr(examples, "FORK_BANKS", 1)
    monkeypatch.delenv(engines.WORKERS_VARIABLE, raising=False)

    def no_fork():
        raise AssertionError("a process was forked")

    monkeypatch.setattr(os, "fork", no_fork)
    data = user_corpus()
    options = dict(folds=4, min_calibration=2, cache_dir=None, grid=None, synthetic=40)
    _, report = fc.fit_correction(data, "bm25", progress=False, workers=1, **options)
    assert report.info["residual_fits"] > 0
    with pytest.raises(AssertionError, match="forked"):
        fc.fit_correction(data, "bm25", progress=False, **options)


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown engine"):
        engines.make_engine("spark")


def test_device_auto_is_the_cpu_without_a_gpu_and_cuda_must_exist():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        assert engines.resolve_device("auto") == "cuda"
    else:
        assert engines.resolve_device("auto") == "cpu"
        with pytest.raises(ValueError, match="no CUDA GPU"):
            engines.resolve_device("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        engines.resolve_device("tpu")


def test_dense_scores_on_cuda_equal_the_cpu_ones(tiny_bert):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    from fincrowd_ltr.retrieval.dense import DenseEncoder

    model, tokenizer = tiny_bert
    texts = ["Revenue rose 5% in fiscal 2021.", "Segment operating income " * 80]
    with engines.using(engines.LocalEngine("cpu")):
        cpu = DenseEncoder(model=model, tokenizer=tokenizer).score("revenue 2021", texts)
    with engines.using(engines.LocalEngine("cuda")):
        import copy

        encoder = DenseEncoder(model=copy.deepcopy(model), tokenizer=tokenizer)
        assert encoder.device == "cuda"
        gpu = encoder.score("revenue 2021", texts)
    assert np.allclose(cpu, gpu, atol=1e-4)


def test_available_cores_reads_affinity_and_a_cgroup_quota(monkeypatch, tmp_path):
    import os
    from pathlib import Path

    from fincrowd_ltr import engine

    assert 1 <= engine.available_cores() <= (os.cpu_count() or 1)
    quota = tmp_path / "cpu.max"
    real_path = Path

    def fake_path(p):
        return quota if str(p) == "/sys/fs/cgroup/cpu.max" else real_path(p)

    monkeypatch.setattr(engine, "Path", fake_path)
    monkeypatch.setattr(engine.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    quota.write_text("200000 100000\n")  # a container of 2 CPUs on a 64-core host
    assert engine.available_cores() == 2
    quota.write_text("max 100000\n")
    assert engine.available_cores() == 64
    quota.write_text("50000 100000\n")  # half a CPU: one worker
    assert engine.available_cores() == 1
