"""Where the heavy, embarrassingly parallel steps run: this process, or a Dask cluster.

Embedding passages, first-stage retrieval over many questions and field extraction split into
independent chunks. An engine maps a function over the chunks; every step asks
:func:`current` which engine to use, so one setting (``fincrowd ... --engine dask`` or
``with using(make_engine("dask")):``) moves all of them. The results are the same as in one
process: chunks are the ones the local path computes, in the same order.

Dask (``dask.distributed``) was chosen over Ray: it is pure Python (a ~15 MB install with no
server binaries), a ``LocalCluster`` starts in seconds for tests and laptops, and an existing
cluster is one address away (``Client("tcp://scheduler:8786")``).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import multiprocessing
import os
import signal
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from fincrowd_ltr.progress import Progress

ENGINES = ("local", "dask")
DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str = "auto") -> str:
    """``auto`` is ``cuda`` when PyTorch sees a GPU, else ``cpu``; ``cuda`` without one is an
    error."""
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; choose from {DEVICES}")
    if name == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise ValueError("device 'cuda' asked for, but PyTorch sees no CUDA GPU here")
    return "cpu"


class Engine(Protocol):
    name: str
    workers: int
    device: str

    @property
    def distributed(self) -> bool: ...

    def map(
        self, fn: Callable, items: list, shared: Any = None, what: str = "", progress: bool = False
    ) -> list: ...

    def close(self) -> None: ...


class LocalEngine:
    """Everything in this process (the default); models run on ``device``."""

    name = "local"
    workers = 1
    distributed = False

    def __init__(self, device: str = "auto") -> None:
        self.device = device

    def map(
        self, fn: Callable, items: list, shared: Any = None, what: str = "", progress: bool = False
    ) -> list:
        """``[fn(item, shared) for item in items]``."""
        bar = Progress(len(items), what, enabled=progress and bool(what), unit=" chunks")
        out = []
        for item in items:
            out.append(fn(item, shared))
            bar.update()
        bar.close()
        return out

    def close(self) -> None:
        pass


class DaskEngine:
    """Chunks run as Dask tasks on a cluster's workers.

    Args:
        address: A running scheduler (``tcp://host:8786``); ``None`` starts a local cluster of
            ``workers`` processes with one thread each.
        workers: Worker processes of the local cluster.
        device: Where each worker runs the models (``auto``: its GPU when it has one).
    """

    name = "dask"
    distributed = True

    def __init__(self, address: str | None = None, workers: int = 2, device: str = "auto") -> None:
        self.device = device
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "the dask engine needs the [distributed] extra: "
                "pip install 'fincrowd_ltr[distributed]'"
            ) from None
        self.cluster = None
        if address:
            self.client = Client(address)
        else:
            self.cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            )
            self.client = Client(self.cluster)
        self.workers = len(self.client.scheduler_info(n_workers=-1)["workers"]) or workers
        self._shared: dict[int, tuple[Any, Any]] = {}  # id -> (object, its scattered future)

    def _send(self, shared: Any):
        """``shared`` on every worker, sent once for the engine's lifetime (a first stage with
        its index, an encoder): later maps with the same object reuse it."""
        held = self._shared.get(id(shared))
        if held is None or held[0] is not shared:
            future = self.client.scatter(shared, broadcast=True, hash=False)
            held = self._shared[id(shared)] = (shared, future)
        return held[1]

    def map(
        self, fn: Callable, items: list, shared: Any = None, what: str = "", progress: bool = False
    ) -> list:
        """``fn(item, shared)`` for every item on the workers (``shared`` is sent to each worker
        once per engine); results in item order."""
        from dask.distributed import as_completed

        if not items:
            return []
        held = self._send(shared) if shared is not None else None
        futures = self.client.map(fn, items, shared=held, pure=False)
        bar = Progress(len(items), what, enabled=progress and bool(what), unit=" chunks")
        for _ in as_completed(futures):
            bar.update()
        bar.close()
        return self.client.gather(futures)

    def close(self) -> None:
        self._shared.clear()
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def available_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota (a
    container limited to 2 CPUs on a 64-core host has 2)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity (macOS, Windows)
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota readable: the affinity stands
    return cores


WORKERS_VARIABLE = "FINCROWD_WORKERS"
# the caps of the worker_cap blocks the running code is inside (per thread and task)
_CAPS: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar("worker_caps", default=())


def worker_limit() -> int | None:
    """The cap on worker processes: ``FINCROWD_WORKERS`` (environment) and the innermost
    :func:`worker_cap`, whichever is lower; None when neither is set."""
    caps = list(_CAPS.get()[-1:])
    value = os.environ.get(WORKERS_VARIABLE, "").strip()
    if value:
        from fincrowd_ltr.data.schema import DataError

        if not value.isdigit() or int(value) < 1:
            raise DataError(
                f"{WORKERS_VARIABLE}={value!r}: give a whole number of worker processes, at "
                "least 1 (1: none is started)",
                WORKERS_VARIABLE,
            )
        caps.append(int(value))
    return min(caps) if caps else None


def worker_count(asked: int | None = None) -> int:
    """How many worker processes a parallel step starts: ``asked`` (default
    :func:`available_cores`) within :func:`worker_limit`; at 1 the step runs in this process."""
    count = available_cores() if asked is None else asked
    limit = worker_limit()
    return max(1, count if limit is None else min(count, limit))


@contextlib.contextmanager
def worker_cap(workers: int | None) -> Iterator[None]:
    """At most ``workers`` worker processes for every parallel step run inside (the residual
    fits, forked feature workers, the synthetic questions written beside the banks): 1 starts
    none. ``None`` changes nothing."""
    if workers is None:
        yield
        return
    if workers < 1:
        raise ValueError(f"workers must be at least 1; got {workers}")
    token = _CAPS.set((*_CAPS.get(), workers))
    try:
        yield
    finally:
        _CAPS.reset(token)


def fork_safe() -> bool:
    """Whether worker processes may be forked: on Linux (macOS has ``fork`` but system
    libraries it loads, Accelerate among them, are not fork-safe; Python spawns there)."""
    return sys.platform.startswith("linux")


def _may_fork() -> bool:
    """Whether this process may have forked children: where forking is safe, and not in a
    daemonic process (a pool's or a cluster's worker)."""
    return fork_safe() and not multiprocessing.current_process().daemon


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel a pool's pending tasks and end its workers at once (leaving the pool's block would
    otherwise wait for every queued task)."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public handle before 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.kill()  # not terminate(): Lightning turns SIGTERM into a flag inside a fit


def _exit_now(signum, frame) -> None:
    os._exit(128 + signum)


def worker_init() -> None:
    """What a worker process sets first: it ends on SIGTERM (a handler, not the default, so that
    Lightning's own handler during a fit chains to it; a forked worker inherits the command
    line's, which raise), leaves Ctrl-C to its parent (which stops the pool), and runs PyTorch
    on one thread (as DataLoader workers: OpenMP is safe after a fork only so)."""
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


_FORKED_SHARED: list = []
_FORK_LOCK = threading.Lock()  # one fork_map at a time per process (its children inherit it held)
MIN_FORK_ITEMS = 2


def _forked_call(job: tuple) -> Any:
    fn, item = job
    return fn(item, _FORKED_SHARED[0])


def fork_map(fn: Callable, items: list, shared: Any = None, workers: int | None = None) -> list:
    """``[fn(item, shared) for item in items]`` in forked worker processes, one per core
    (``workers``; default :func:`worker_count`), results in item order: for the local
    engine's long single-threaded steps. ``shared`` is inherited by the fork, never pickled
    (what a worker adds to its copy, e.g. a cache, stays there); ``fn`` and the items are
    pickled. In this process where forking is unsafe (:func:`fork_safe`), with one core, fewer
    than ``MIN_FORK_ITEMS`` items, in a daemonic process (a pool's or a cluster's worker, which
    may not have children) or while another ``fork_map`` of this process runs (another thread's,
    or the parent's in a worker). ``fn`` must give the same result in any process."""
    workers = min(worker_count(workers), len(items))
    if (
        workers <= 1
        or len(items) < MIN_FORK_ITEMS
        or not _may_fork()
        or not _FORK_LOCK.acquire(blocking=False)
    ):
        return [fn(item, shared) for item in items]
    _FORKED_SHARED[:] = [shared]
    gc.freeze()  # the collector would touch (and so copy) every inherited object in each worker
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=worker_init
    )
    try:
        out = list(pool.map(_forked_call, [(fn, item) for item in items]))
    except BaseException:  # interrupted or a task failed: stop the rest now
        stop_pool(pool)
        raise
    finally:
        _FORKED_SHARED.clear()
        gc.unfreeze()
        _FORK_LOCK.release()
    pool.shutdown()
    return out


class Forked:
    """``fn()`` running in a forked child from now on, beside this process's own work (or, where
    :func:`fork_map` would run in place or under a distributed engine, in this process when
    :meth:`result` is first asked): for a long single-threaded step whose inputs are ready early
    and whose result is needed late. The child inherits everything (nothing is pickled but the
    result) and ends with this process, with this object, or by :meth:`cancel`. ``finish``,
    when given, turns the child's value into the result here (e.g. to put back what the child
    need not send)."""

    def __init__(self, fn: Callable[[], Any], finish: Callable[[Any], Any] | None = None) -> None:
        self._fn: Callable[[], Any] | None = fn
        self._finish = finish
        self._done: tuple[bool, Any] | None = None
        self._child = self._conn = None
        if (
            worker_count() <= 1
            or not _may_fork()
            or current().distributed  # a cluster client's threads live in this process
        ):
            return
        context = multiprocessing.get_context("fork")
        conn, sender = context.Pipe(duplex=False)
        child = context.Process(target=_forked_run, args=(fn, sender), daemon=True)
        gc.freeze()  # the child's collector would otherwise touch (and so copy) every object
        try:
            child.start()
        except OSError:  # no fork to be had (memory, process limits): run in place instead
            conn.close()
            return
        finally:
            gc.unfreeze()
            sender.close()
        self._child, self._conn, self._fn = child, conn, None
        # dropped unread (an error on the way): ended then, by this process only (a process
        # forked from it later inherits this finalizer, not the child)
        weakref.finalize(self, _end, child, conn, os.getpid())

    def result(self) -> Any:
        """``fn()``'s value, waiting for the child; its exception is raised here, with the
        child's traceback as its cause."""
        if self._done is None:
            done = self._receive() if self._child is not None else _outcome(self._fn)
            self._fn = None
            if done[0] and self._finish is not None:
                done = _outcome(lambda: self._finish(done[1]))
            self._done = done
        ok, value = self._done
        if not ok:
            raise value
        return value

    def cancel(self) -> None:
        """End the child now (its result is no longer wanted)."""
        if self._child is not None and self._done is None:
            _end(self._child, self._conn)
            self._done = (False, RuntimeError("the forked call was cancelled"))

    def _receive(self) -> tuple[bool, Any]:
        try:
            ok, value, trace = self._conn.recv()
            if trace:  # pickling an error drops its traceback: the child's is sent as text
                value.__cause__ = RemoteTraceback(f'\n"""\n{trace}"""')
            done = (ok, value)
        except EOFError:  # the child died without a word: killed, or out of memory
            self._child.join()
            done = (False, RuntimeError(f"a forked call died (exit code {self._child.exitcode})"))
        except Exception as error:  # noqa: BLE001 - what the child sent does not unpickle here
            done = (False, RuntimeError(f"a forked call's result could not be read: {error!r}"))
        _end(self._child, self._conn)
        return done


class RemoteTraceback(Exception):
    """The traceback of an error raised in a worker process (an error's ``__cause__``)."""

    def __str__(self) -> str:
        return self.args[0]


def _end(child, conn, parent: int | None = None) -> None:
    if parent is not None and parent != os.getpid():
        return
    if child.is_alive():
        child.kill()
    child.join()
    conn.close()


def _outcome(fn: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, fn()
    except Exception as error:  # noqa: BLE001 - handed to the caller as it is
        return False, error


def _forked_run(fn: Callable[[], Any], sender) -> None:
    worker_init()
    ok, value = _outcome(fn)
    trace = "" if ok else "".join(traceback.format_exception(value))
    try:
        sender.send((ok, value, trace))
    except Exception as error:  # noqa: BLE001 - an exception or a value that does not pickle
        what = "value" if ok else "error"
        lost = RuntimeError(f"a forked call's {what} could not be sent back: {error!r}")
        sender.send((False, lost, trace))
    sender.close()


def split_evenly(items: list, parts: int) -> list[list]:
    """``items`` cut into ``parts`` contiguous runs of near-equal length (none empty, but the
    one run of no items)."""
    parts = max(1, min(parts, len(items)))
    bounds = [round(i * len(items) / parts) for i in range(parts + 1)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def make_engine(
    name: str = "local", address: str | None = None, workers: int = 2, device: str = "auto"
) -> Engine:
    """An engine by name: ``local`` or ``dask`` (a local cluster of ``workers`` processes, or
    the scheduler at ``address``); models run on ``device`` (``auto``, ``cpu`` or ``cuda``)."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose from {DEVICES}")
    if name == "local":
        return LocalEngine(device)
    if name == "dask":
        return DaskEngine(address, workers, device)
    raise ValueError(f"unknown engine {name!r}; choose from {ENGINES}")


def map_chunked(
    fn: Callable,
    items: list,
    chunk_size: int,
    shared: Any = None,
    what: str = "",
    progress: bool = False,
) -> list:
    """``fn(chunk, shared)`` (one result per item of the chunk) over ``items`` cut into chunks of
    ``chunk_size`` on the current engine, results flattened in item order; in this process (or
    with one chunk) ``fn`` sees all the items at once."""
    engine = current()
    if not engine.distributed or len(items) <= chunk_size:
        return fn(items, shared)
    chunks = [items[i : i + chunk_size] for i in range(0, len(items), chunk_size)]
    return [out for part in engine.map(fn, chunks, shared, what, progress) for out in part]


_CURRENT: list[Engine] = [LocalEngine()]


def current() -> Engine:
    """The engine the heavy steps use now."""
    return _CURRENT[-1]


@contextlib.contextmanager
def using(engine: Engine) -> Iterator[Engine]:
    """Run the heavy steps inside the block on ``engine``."""
    _CURRENT.append(engine)
    try:
        yield engine
    finally:
        _CURRENT.pop()
