"""``diagnose``: is crowding the problem? Matched-pool stress test, crowded failures, top-k mix."""

from __future__ import annotations

import dataclasses
import numbers
import sys
from pathlib import Path

from fincrowd_ltr.api.corpus import data_settings, load_dataset, read_run
from fincrowd_ltr.data.schema import DataError, Dataset
from fincrowd_ltr.diagnostics.diagnose import diagnose as _diagnose
from fincrowd_ltr.diagnostics.stress import StressConfig
from fincrowd_ltr.evaluation.reports import DiagnosisReport
from fincrowd_ltr.settings import DataSettings, require_used

# what diagnose takes (its named keywords too, for a misspelt one's hint)
_DIAGNOSE_USES = (
    "pool_sizes", "similarity", "caliper", "bins", "split", "data_root", "cache_dir", "out_dir",
    "pool_depth", "run", "first_stage",
)  # fmt: skip


def diagnose(
    dataset: str | Dataset,
    ranker: str = "dense",
    config: StressConfig | None = None,
    *,
    out_dir: str | Path | None = None,
    pool_depth: int = 100,
    run=None,
    first_stage: str = "auto",
    data: DataSettings | None = None,
    **shortcuts,
) -> DiagnosisReport:
    """The diagnosis report of ``ranker`` (``run`` with ``run=`` for your own ranker).
    ``config`` (:class:`~fincrowd_ltr.diagnostics.stress.StressConfig`, or the shortcuts
    ``pool_sizes``, ``similarity``, ``caliper``) sets the matched pools: ``similarity`` is the
    ranker whose score is the matching covariate (``dense`` embeds every bank passage with MiniLM
    the first time; ``bm25`` is free). The pools are drawn from the ``first_stage``'s
    gold-injected top ``pool_depth``: on FinanceBench the default (filing-aware, with the
    static scorer) brings the named company's pages of the asked period's filings and of other
    periods, so compatible and incompatible distractors both exist. ``data`` (or ``split``,
    ``data_root``, ``cache_dir``) says where the data and caches are."""
    where = data_settings(data, shortcuts)
    require_used(shortcuts, _DIAGNOSE_USES, "diagnose")
    if not (isinstance(pool_depth, numbers.Integral) and pool_depth >= 1):
        raise DataError(f"pool_depth (--pool-depth) must be >= 1; got {pool_depth!r}", "pool_depth")
    renamed = {"pool_sizes": "sizes", "similarity": "similarity_ranker"}
    fields = {renamed.get(k, k): v for k, v in shortcuts.items()}
    sizes = fields.get("sizes")
    if sizes is not None and not isinstance(sizes, str | numbers.Number):
        fields["sizes"] = tuple(sizes)  # any iterable of counts; a lone number is refused
    config = dataclasses.replace(config or StressConfig(), **fields)
    similarity, split, cache_dir = config.similarity_ranker, where.split, where.cache_dir
    corpus = load_dataset(dataset, where.data_root, split)
    if similarity == "dense":
        print(
            "diagnose: matching on dense (MiniLM) similarity: bank passages not embedded yet "
            "are embedded first (pass similarity='bm25' / --similarity bm25 to skip)",
            file=sys.stderr,
        )
    report = _diagnose(
        corpus,
        split,
        ranker,
        Path(cache_dir) if cache_dir is not None else None,
        Path(out_dir) if out_dir is not None else None,
        pool_depth,
        config,
        read_run(run, corpus),
        first_stage,
    )
    return DiagnosisReport(report)
