"""Find a dataset under a data root and load it by name."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from fincrowd_ltr.data.beir import load_beir
from fincrowd_ltr.data.financebench import load_financebench
from fincrowd_ltr.data.finqa import load_finqa
from fincrowd_ltr.data.schema import DataError, Dataset, Passage
from fincrowd_ltr.data.tatqa import load_tatqa

DEFAULT_DATA_ROOT = Path("../shared/data")

# name -> (sub-folder of the data root, loader(folder, split))
DATASETS: dict[str, tuple[str, Callable[[Path, str], Dataset]]] = {
    "financebench": ("financebench", load_financebench),
    "tatqa": ("tatqa", load_tatqa),
    "finqa": ("finqa_subset", load_finqa),
}


def resolve_data_root(data_root: str | Path | None = None) -> Path:
    """The data root: the argument, else ``$FINCROWD_DATA``, else ``../shared/data``.

    Raises:
        DataError: if the chosen folder does not exist (the message names it).
    """
    chosen = data_root or os.environ.get("FINCROWD_DATA") or DEFAULT_DATA_ROOT
    root = Path(chosen).expanduser()
    if not root.is_dir():
        raise DataError(
            f"data root {root.resolve()} does not exist; pass --data-root or set FINCROWD_DATA"
        )
    return root


def beir_folder(name: str, data_root: str | Path | None = None) -> Path | None:
    """The folder a ``beir`` / ``beir:SUBDIR`` dataset is read from (an absolute ``SUBDIR``
    without reading the data root); ``None`` for another dataset."""
    if name != "beir" and not name.startswith("beir:"):
        return None
    sub = name.partition(":")[2]
    if sub and Path(sub).expanduser().is_absolute():
        return Path(sub).expanduser()
    root = resolve_data_root(data_root)
    return root / sub if sub else root


def load_dataset(
    name: str,
    data_root: str | Path | None = None,
    split: str = "all",
    allow_unknown_qrels: bool = False,
    pages: Mapping[str, Passage] | None = None,
) -> Dataset:
    """Load dataset ``name`` from the data root.

    Args:
        name: ``financebench``, ``tatqa``, ``finqa``; ``beir`` (the data root itself is a BEIR
            folder); or ``beir:SUBDIR`` (a BEIR folder below the data root, e.g.
            ``beir:financerag_public/FinQABench``, or an absolute path,
            read without a data root).
        data_root: Folder holding the datasets (see :func:`resolve_data_root`).
        split: ``all`` or a split name/file understood by the dataset's loader.
        allow_unknown_qrels: BEIR folders: count judgements of unknown passages (the question is
            then not covered) instead of failing.
        pages: BEIR folders: the corpus when it is not ``corpus.jsonl`` (a sharded index's
            :class:`~fincrowd_ltr.data.store.PageStore`, what ``fincrowd_ltr.load_dataset``'s
            ``index`` opens): the folder's questions and judgements over those pages.
    """
    folder = beir_folder(name, data_root)
    if pages is not None and folder is None:
        raise DataError(
            f"an index (index=, --index) serves a BEIR folder's questions over its pages "
            f"(dataset beir or beir:DIR); {name!r} loads its own pages",
            "index",
        )
    if folder is not None:
        return load_beir(folder, name, allow_unknown_qrels, split, pages)
    root = resolve_data_root(data_root)
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; choose from {sorted(DATASETS)} or beir[:DIR]")
    sub, loader = DATASETS[name]
    folder = root / sub
    if not folder.is_dir():
        # The data root may itself be the dataset's folder (a user's own copy).
        folder = root
    return loader(folder, split)
