"""The FinanceBench banks the benchmarks time, loaded through the bank cache (built if missing)."""

from __future__ import annotations

from pathlib import Path

from fincrowd_ltr.data import load_dataset
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.retrieval.banks import CandidateBank
from fincrowd_ltr.retrieval.build import BankSpec, build_banks
from fincrowd_ltr.synthesis import page_table_questions


def financebench_banks(
    data_root: str | None, cache_dir: str, limit: int, ranker: str = "dense"
) -> tuple[Dataset, list[CandidateBank]]:
    """The first ``limit`` retrieved FinanceBench banks (BM25 first stage) with ``ranker``'s
    scores."""
    data = load_dataset("financebench", data_root, "all")
    pairs = page_table_questions(data)  # the static rankers' page table, as the API reads it
    bankset = build_banks(
        data, "all", [ranker], BankSpec(), Path(cache_dir), progress=False, static_pairs=pairs
    )
    return data, list(bankset.banks.values())[:limit]
