"""First-stage retrieval, base rankers and candidate banks."""

from fincrowd_ltr.retrieval.banks import BankSet, CandidateBank, retrieve_candidates, score_banks
from fincrowd_ltr.retrieval.bm25 import BM25Config, BM25Index

__all__ = [
    "BM25Config",
    "BM25Index",
    "BankSet",
    "CandidateBank",
    "retrieve_candidates",
    "score_banks",
]
