"""Dataset schema and loaders (FinanceBench, TAT-QA, FinQA, BEIR-style corpora, TREC runs)."""

from fincrowd_ltr.data.registry import DATASETS, load_dataset
from fincrowd_ltr.data.schema import Dataset, Passage, Query

__all__ = ["DATASETS", "Dataset", "Passage", "Query", "load_dataset"]
