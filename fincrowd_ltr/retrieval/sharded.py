"""BM25 over corpora larger than memory: shards on disk, memory-mapped, global statistics.

A corpus in ``corpus.jsonl`` files (the BEIR records :func:`fincrowd_ltr.data.beir.passage_of`
reads) is cut into shards of about ``shard_bytes`` at line boundaries. Each shard is tokenised
on its own (one engine task per shard: a Dask worker reads its byte range from storage, nothing
but the path travels in the task) into term-major postings: ``indptr``, ``docs``, ``tf``, and the
pages' token counts, written as ``.npy`` files beside the pages' ids, metadata and byte offsets.
A merge then sums document frequencies and lengths over the shards into one vocabulary.

Scores use the global statistics (Lucene BM25 as ``bm25s`` computes it: idf
``log(1 + (N - df + 0.5) / (df + 0.5))`` over the whole corpus, the corpus-wide mean length), so a
page scores the same as in one :class:`~fincrowd_ltr.retrieval.bm25.BM25Index` over all pages,
whichever shard holds it; ``search`` takes each shard's top ``k`` and merges them, ties by
corpus order. The index pickles as its folder: workers open the shards themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import bm25s
import numpy as np

from fincrowd_ltr.data.beir import passage_of
from fincrowd_ltr.data.folders import swap_in_folder
from fincrowd_ltr.data.jsonl import parse_line, require_file
from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.data.store import FINGERPRINT_FILE, PAGES_FILE, PageStore, write_pages
from fincrowd_ltr.retrieval.bm25 import BM25Config, BM25Index, _stemmer, top_k

FORMAT = "fincrowd-sharded-bm25"
VERSION = 1
SHARD_BYTES = 64 * 2**20  # ~18,000 FinanceBench pages a shard: ~1 GB to tokenise one
_BLOCK = 16 * 2**20


@dataclass(frozen=True)
class ShardTask:
    """One shard's pages: the bytes ``[start, stop)`` of a JSONL file, from line ``line``."""

    path: str
    start: int
    stop: int
    line: int
    name: str
    file_size: int = 0  # the file's size and time when planned: a page store checks them
    file_mtime_ns: int = 0


def plan_shards(paths: list[Path], shard_bytes: int = SHARD_BYTES) -> list[ShardTask]:
    """Cut the corpus files into shards of about ``shard_bytes``, each ending at a line end."""
    if shard_bytes <= 0:
        raise DataError("shard size must be positive")
    tasks: list[ShardTask] = []
    for path in paths:
        path = require_file(Path(path), "corpus file").resolve()
        if path.suffix == ".gz":
            raise DataError(f"{path}: a sharded index reads plain JSONL (seekable): gunzip it")
        stat = path.stat()
        size, start, line = stat.st_size, 0, 1
        with open(path, "rb") as fh:
            while start < size:
                fh.seek(min(start + shard_bytes, size))
                if fh.tell() < size:
                    fh.readline()  # to the end of the line the cut falls in
                stop = fh.tell()
                fh.seek(start)
                lines = _count_lines(fh, stop - start)
                name = f"shard-{len(tasks):05d}"
                tasks.append(ShardTask(str(path), start, stop, line, name, size, stat.st_mtime_ns))
                start, line = stop, line + lines
    return tasks


def _count_lines(fh, length: int) -> int:
    lines = 0
    while length > 0:
        block = fh.read(min(_BLOCK, length))
        if not block:
            raise DataError(f"{fh.name}: the file got shorter while it was being indexed")
        lines, length = lines + block.count(b"\n"), length - len(block)
    return lines


def _read_shard(task: ShardTask) -> tuple[list[Passage], list[int]]:
    """The shard's passages and each one's byte offset in its file."""
    passages, offsets = [], []
    path = Path(task.path)
    with open(path, "rb") as fh:
        fh.seek(task.start)
        position, lineno = task.start, task.line
        while position < task.stop:
            raw = fh.readline()
            if not raw:
                raise DataError(
                    f"{path}: ends at byte {position}, before {task.stop}: the file changed "
                    "while it was being indexed"
                )
            row = parse_line(raw, path, lineno)
            if row is not None:
                passages.append(passage_of(row, path, lineno))
                offsets.append(position)
            position, lineno = position + len(raw), lineno + 1
    return passages, offsets


def index_shard(task: ShardTask, folder: str, config: BM25Config | None = None) -> dict:
    """Tokenise one shard and write its postings, ids, metadata and offsets under
    ``folder/task.name``; returns its page and token counts."""
    config = config or BM25Config()
    passages, offsets = _read_shard(task)
    tokens = bm25s.tokenize(
        [p.text for p in passages],
        stopwords=config.stopwords,
        stemmer=_stemmer(config.stemmer),
        show_progress=False,
        return_ids=True,
    )
    pages = len(passages)
    lengths = np.fromiter((len(ids) for ids in tokens.ids), dtype=np.int64, count=pages)
    flat = np.fromiter((t for ids in tokens.ids for t in ids), np.int64, int(lengths.sum()))
    docs = np.repeat(np.arange(pages, dtype=np.int64), lengths)
    keys, tf = np.unique(flat * max(pages, 1) + docs, return_counts=True)  # term-major, by doc
    terms = keys // max(pages, 1)
    vocabulary = sorted(tokens.vocab, key=tokens.vocab.__getitem__)
    out = Path(folder) / task.name
    out.mkdir(exist_ok=True)  # not its parent: a cancelled build's folder is not made again
    indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=len(vocabulary)), out=indptr[1:])
    np.save(out / "indptr.npy", indptr)
    np.save(out / "docs.npy", (keys % max(pages, 1)).astype(np.int32))
    np.save(out / "tf.npy", tf.astype(np.float32))
    np.save(out / "lengths.npy", lengths.astype(np.int32))
    (out / "terms.json").write_text(json.dumps(vocabulary))
    write_pages(out, task.path, passages, offsets, (task.file_size, task.file_mtime_ns))
    return {"name": task.name, "pages": pages, "tokens": int(lengths.sum())}


def build_sharded_index(
    paths: list[Path],
    folder: Path,
    config: BM25Config | None = None,
    shard_bytes: int = SHARD_BYTES,
    progress: bool = True,
) -> ShardedBM25:
    """Index ``corpus.jsonl`` files into ``folder`` (shards on the current engine's workers,
    then one merge here) and open the index."""
    from fincrowd_ltr.engine import current

    config = config or BM25Config()
    tasks = plan_shards(paths, shard_bytes)
    if not tasks:
        raise DataError(f"no pages to index in {', '.join(map(str, paths))}")
    folder = Path(folder).resolve()  # a symlink's target is replaced, not the link

    def write(tmp: Path) -> None:
        built = current().map(_index_task, tasks, (str(tmp), config), "indexing shards", progress)
        _merge(tmp, [t.name for t in tasks], built, config)

    swap_in_folder(  # a failed build leaves the earlier index as it was
        folder,
        write,
        owns=_index_owns(folder),
        what="an index's",
        advice="index into an empty or new folder, or an earlier index's, so that nothing is lost",
    )
    return ShardedBM25(folder)


def _index_owns(folder: Path):
    """Whether a name in ``folder`` is an earlier index's: its shards as its ``index.json`` lists
    them, its merge files, its pages' recorded fingerprint, or one a reader was writing aside."""
    index = folder / "index.json"
    try:
        shards = set(json.loads(index.read_text())["shards"]) if index.is_file() else set()
    except (ValueError, KeyError, TypeError):
        shards = set()
    names = shards | {"index.json", "df.npy", "vocabulary.json", FINGERPRINT_FILE}
    return lambda name: name in names or name.startswith(f".{FINGERPRINT_FILE}.")


def _index_task(task: ShardTask, shared: tuple[str, BM25Config]) -> dict:
    return index_shard(task, *shared)


def _merge(folder: Path, names: list[str], built: list[dict], config: BM25Config) -> None:
    """One vocabulary over the shards, global document frequencies and each shard's map from
    global term ids to its own rows."""
    seen: dict[str, str] = {}
    for name in names:  # one id, one page (load_beir refuses a repeated id too)
        pages = json.loads((folder / name / PAGES_FILE).read_text())
        for pid in pages["pids"]:
            if seen.setdefault(pid, name) != name:
                raise DataError(f"{pages['path']}: duplicate passage id {pid!r} (an earlier shard)")
        if len(set(pages["pids"])) != len(pages["pids"]):
            raise DataError(f"{pages['path']}: a passage id appears twice in it")
    if not seen:
        raise DataError("no pages to index: the corpus files hold no records")
    vocabulary: dict[str, int] = {}
    df: list[int] = []
    local_ids = []
    for name in names:
        terms = json.loads((folder / name / "terms.json").read_text())
        counts = np.diff(np.load(folder / name / "indptr.npy"))
        ids = np.empty(len(terms), dtype=np.int64)
        for i, (term, count) in enumerate(zip(terms, counts, strict=True)):
            gid = vocabulary.setdefault(term, len(vocabulary))
            if gid == len(df):
                df.append(0)
            df[gid] += int(count)
            ids[i] = gid
        local_ids.append(ids)
    for name, ids in zip(names, local_ids, strict=True):
        rows = np.full(len(vocabulary), -1, dtype=np.int32)
        rows[ids] = np.arange(len(ids), dtype=np.int32)
        np.save(folder / name / "rows.npy", rows)
    np.save(folder / "df.npy", np.array(df, dtype=np.int64))
    (folder / "vocabulary.json").write_text(json.dumps(list(vocabulary)))
    stats = {
        "format": FORMAT,
        "version": VERSION,
        "config": asdict(config),
        "shards": names,
        "pages": sum(b["pages"] for b in built),
        "tokens": sum(b["tokens"] for b in built),
    }
    (folder / "index.json").write_text(json.dumps(stats, indent=1))


class _Shard:
    """One shard's postings, memory-mapped."""

    def __init__(self, folder: Path) -> None:
        def load(name: str) -> np.ndarray:
            return np.load(folder / f"{name}.npy", mmap_mode="r")

        self.indptr, self.docs, self.tf = load("indptr"), load("docs"), load("tf")
        self.rows, self.lengths = load("rows"), load("lengths")
        self.pages = len(self.lengths)


class ShardedBM25:
    """A sharded BM25 index on disk with the interface of
    :class:`~fincrowd_ltr.retrieval.bm25.BM25Index` (``pids``, ``position``, ``scores``,
    ``search``, ``score_ids``), so first stages and banks run over it unchanged.

    Args:
        folder: What :func:`build_sharded_index` wrote.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).resolve()  # workers may start elsewhere
        path = require_file(self.folder / "index.json", "sharded index")
        try:
            stats = json.loads(path.read_text())
        except ValueError as err:
            raise DataError(f"{path}: damaged ({err}); index the corpus again") from None
        if stats.get("format") != FORMAT or stats.get("version") != VERSION:
            raise DataError(f"{path}: not a {FORMAT} index of version {VERSION}")
        self.config = BM25Config(**stats["config"])
        self.names: list[str] = stats["shards"]
        self.pages, self.tokens = int(stats["pages"]), int(stats["tokens"])
        self._open()

    def _open(self) -> None:
        try:  # a truncated or missing file fails in numpy or json without its path
            self._read()
        except (OSError, ValueError) as err:  # json's decode error is a ValueError
            raise DataError(
                f"{self.folder}: a file of the index is damaged or missing ({err}); index the "
                "corpus again"
            ) from None

    def _read(self) -> None:
        self.shards = [_Shard(self.folder / name) for name in self.names]
        self.starts = np.cumsum([0] + [s.pages for s in self.shards])
        df = np.load(self.folder / "df.npy")
        n, avgdl = self.pages, self.tokens / max(self.pages, 1)
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
        self.avgdl = avgdl
        self.vocabulary = {
            t: i for i, t in enumerate(json.loads((self.folder / "vocabulary.json").read_text()))
        }
        self._stemmer = _stemmer(self.config.stemmer)
        self._pids: list[str] | None = None
        self._position: dict[str, int] | None = None

    def __getstate__(self) -> dict:
        return {"folder": str(self.folder)}  # workers open the shards from storage

    def __setstate__(self, state: dict) -> None:
        self.__init__(Path(state["folder"]))

    def __len__(self) -> int:
        return self.pages

    @property
    def pids(self) -> list[str]:
        """Every page id in corpus order (read from the shards once)."""
        if self._pids is None:
            self._pids = [
                pid
                for name in self.names
                for pid in json.loads((self.folder / name / PAGES_FILE).read_text())["pids"]
            ]
        return self._pids

    @property
    def position(self) -> dict[str, int]:
        if self._position is None:
            self._position = {pid: i for i, pid in enumerate(self.pids)}
        return self._position

    def page_store(self) -> PageStore:
        """The indexed pages by id (metadata in memory, texts read from the corpus files)."""
        return PageStore(self.folder, self.names)

    def term_ids(self, query: str) -> list[int]:
        """The query's tokens as global term ids, in order, repeats kept, unknown ones left out
        (as ``bm25s`` scores a query)."""
        tokens = bm25s.tokenize(
            [query],
            stopwords=self.config.stopwords,
            stemmer=self._stemmer,
            show_progress=False,
            return_ids=False,
        )[0]
        return [self.vocabulary[t] for t in tokens if t in self.vocabulary]

    def shard_scores(self, shard: int, terms: list[int]) -> np.ndarray:
        """BM25 scores (float32) of one shard's pages for the global term ids ``terms``."""
        s = self.shards[shard]
        k1, b = self.config.k1, self.config.b
        scores = np.zeros(s.pages, dtype=np.float32)
        for term in terms:
            row = int(s.rows[term])
            if row < 0:
                continue
            start, stop = int(s.indptr[row]), int(s.indptr[row + 1])
            docs, tf = np.asarray(s.docs[start:stop]), np.asarray(s.tf[start:stop])
            norm = k1 * ((1 - b) + b * np.asarray(s.lengths[docs], dtype=np.float64) / self.avgdl)
            scores[docs] += (self.idf[term] * (tf / (norm + tf))).astype(np.float32)
        return scores

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every page (corpus order) for one query, float64."""
        terms = self.term_ids(query)
        return np.concatenate(
            [self.shard_scores(i, terms) for i in range(len(self.shards))]
        ).astype(np.float64)

    def search(self, query: str, k: int) -> tuple[list[str], np.ndarray]:
        """Top-``k`` page ids and scores: each shard's top ``k`` merged; ties by corpus order."""
        terms = self.term_ids(query)
        rows, values = [], []
        for i in range(len(self.shards)):
            scores = self.shard_scores(i, terms)
            best = top_k(scores, k)
            rows.append(best + self.starts[i])
            values.append(scores[best].astype(np.float64))
        rows_all, values_all = np.concatenate(rows), np.concatenate(values)
        order = np.lexsort((rows_all, -values_all))[:k]
        pids = self.pids
        return [pids[int(r)] for r in rows_all[order]], values_all[order]

    def score_ids(self, query: str, pids: list[str]) -> np.ndarray:
        """BM25 scores of the given pages for one query."""
        unknown = [p for p in pids if p not in self.position]
        if unknown:
            raise DataError(f"page {unknown[0]!r} is not in the index at {self.folder}")
        return self.scores(query)[[self.position[p] for p in pids]]


def open_index(index: str | Path | ShardedBM25) -> ShardedBM25:
    """A sharded index, opened from its folder when given one."""
    if isinstance(index, ShardedBM25):
        return index
    if not isinstance(index, (str, Path)):
        raise DataError(
            f"index must be a sharded index or its folder; got {type(index).__name__}", "index"
        )
    folder = Path(index).expanduser()
    if not (folder / "index.json").is_file():
        raise DataError(
            f"{folder}: not a sharded index (no index.json): build one with `fincrowd index "
            "--corpus FILE --out DIR` or index_corpus",
            "index",
        )
    return ShardedBM25(folder)


def corpus_index(
    passages: Mapping[str, Passage],
    config: BM25Config | None = None,
    cache_dir: Path | None = None,
    progress: bool = True,
) -> BM25Index | ShardedBM25:
    """The BM25 index of ``passages``: for pages read from a sharded index (a
    :class:`~fincrowd_ltr.data.store.PageStore`), that index, so that a corpus larger than
    memory is never indexed in memory; else one built in memory (cached under ``cache_dir``).
    ``config``: the BM25 settings asked for; ``None``: any (a page store's index as it was
    built; in memory, the defaults).

    Raises:
        DataError: when the sharded index was built with other BM25 settings than ``config``.
    """
    if not isinstance(passages, PageStore):
        return BM25Index.build(passages, config or BM25Config(), cache_dir, progress)
    index = ShardedBM25(passages.folder)
    if config is not None and index.config != config:
        raise DataError(
            f"{passages.folder}: the pages' index was built with BM25 settings {index.config}, "
            f"these banks ask for {config}: give the index's stemmer (`--stemmer` of `banks`, "
            "`evaluate` and `first-stage`; the other commands read BM25 without one), or index "
            "the corpus again with the stemmer asked for (`fincrowd index --stemmer`)",
            "stemmer",
        )
    return index
