"""``diagnose``: is crowding the problem? Matched-pool stress test, crowded failures, top-k mix."""

from __future__ import annotations

import sys
from pathlib import Path

from fincrowd_ltr.api.corpus import DEFAULT_CACHE, load_dataset, read_run
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.diagnostics.diagnose import diagnose as _diagnose
from fincrowd_ltr.diagnostics.stress import StressConfig


def diagnose(
    dataset: str | Dataset,
    ranker: str = "dense",
    *,
    out_dir: str | Path | None = None,
    pool_depth: int = 100,
    pool_sizes: tuple[int, ...] = (10, 30, 60),
    similarity: str = "dense",
    caliper: float = 1.0,
    run=None,
    first_stage: str = "auto",
    split: str = "all",
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE,
) -> dict:
    """The diagnosis report of ``ranker`` (``run`` with ``run=`` for your own ranker).
    ``similarity`` is the ranker whose score is the matching covariate (``dense`` embeds every
    bank passage with MiniLM the first time; ``bm25`` is free). The pools are drawn from the
    ``first_stage``'s gold-injected top ``pool_depth``: on FinanceBench the default (filing-aware)
    brings the named company's pages of the asked period's filings and of other periods, so
    compatible and incompatible distractors both exist."""
    data = load_dataset(dataset, data_root, split)
    if similarity == "dense":
        print(
            "diagnose: matching on dense (MiniLM) similarity: bank passages not embedded yet "
            "are embedded first (pass similarity='bm25' / --similarity bm25 to skip)",
            file=sys.stderr,
        )
    config = StressConfig(sizes=tuple(pool_sizes), similarity_ranker=similarity, caliper=caliper)
    return _diagnose(
        data,
        split,
        ranker,
        Path(cache_dir) if cache_dir is not None else None,
        Path(out_dir) if out_dir is not None else None,
        pool_depth,
        config,
        read_run(run, data),
        first_stage,
    )
