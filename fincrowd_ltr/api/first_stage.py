"""``first_stage_ablation``: every first-stage variant on group folds and the training-fold
choice."""

from __future__ import annotations

from pathlib import Path

from fincrowd_ltr.api.corpus import DEFAULT_CACHE, load_dataset
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.evaluation.first_stage import ablation, retrieve_runs
from fincrowd_ltr.evaluation.reports import AblationReport
from fincrowd_ltr.retrieval.bm25 import BM25Config
from fincrowd_ltr.retrieval.first_stage import FIRST_STAGES, parse_first_stage
from fincrowd_ltr.retrieval.sharded import corpus_index


def first_stage_ablation(
    dataset: str | Dataset,
    variants: str | list[str] = "all",
    *,
    depth: int = 100,
    folds: int = 5,
    seed: int = 0,
    stemmer: str | None = None,
    split: str = "all",
    data_root: str | Path | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE,
) -> AblationReport:
    """The ablation report (per variant: R@100, R@10, nDCG@10 with intervals; the choice)."""
    data = load_dataset(dataset, data_root, split)
    data.require_covered("measure")
    if isinstance(variants, str):
        variants = list(FIRST_STAGES) if variants == "all" else variants.split(",")
    for name in variants:
        parse_first_stage(name)
    index = corpus_index(data.passages, BM25Config(stemmer=stemmer), cache_dir)
    runs = retrieve_runs(data, index, variants, depth, cache_dir=cache_dir)
    return AblationReport(ablation(data, runs, folds, seed))
