"""Which files of a dataset folder a split names."""

from __future__ import annotations

from pathlib import Path

from fincrowd_ltr.data.schema import DataError


def split_files(
    root: Path,
    split: str,
    prefix: str,
    suffix: str,
    what: str,
    exclude: frozenset[str] = frozenset(),
) -> list[Path]:
    """Files for ``split``: ``all`` = every ``{prefix}*{suffix}`` in ``root`` (minus ``exclude``);
    a path ending in ``suffix`` = that file; otherwise ``{prefix}{split}{suffix}``.

    Raises:
        DataError: for ``all`` when no file matches (naming the folder and pattern).
    """
    if split == "all":
        pattern = f"{prefix}*{suffix}"
        files = sorted(p for p in root.glob(pattern) if p.name not in exclude)
        if not files:
            raise DataError(f"no {what} file ({pattern}) in {root}")
        return files
    candidate = Path(split)
    if candidate.suffix == suffix:
        return [candidate if candidate.is_absolute() else root / candidate]
    return [root / f"{prefix}{split}{suffix}"]
