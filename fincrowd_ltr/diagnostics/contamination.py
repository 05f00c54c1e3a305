"""What the top-k is made of: off-period and off-company shares, and repeated boilerplate.

The pruning notes' diagnostics: the share of the top-k whose period (or company) conflicts with
the one the question asks, against the same share in the whole bank (pruning that concentrates
conflicts makes the top-k worse than the pool); and near-duplicate passages from another filing
of the same company (the same disclosure repeated year after year), with how often such a twin
of the gold outranks the gold itself.
"""

from __future__ import annotations

import re

import numpy as np

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.features.bank_features import BankFeaturizer
from fincrowd_ltr.features.lexical import cosine_similarities
from fincrowd_ltr.fields.compatibility import Compatibility, compare_field
from fincrowd_ltr.metrics import bootstrap_ci
from fincrowd_ltr.retrieval.banks import CandidateBank

TOP_KS = (4, 8, 10, 16)
NEAR_DUPLICATE = 0.9  # TF-IDF cosine within the bank
SPACE = re.compile(r"\s+")


def off_target_shares(
    dataset: Dataset,
    banks: dict[str, CandidateBank],
    ranker: str,
    featurizer: BankFeaturizer,
    ks: tuple[int, ...] = TOP_KS,
) -> dict:
    """Per field (``period``, ``entity``): mean share of the top-k that conflicts with the
    query's value, and the share in the whole bank, over queries that state the field."""
    out = {}
    for name in ("period", "entity"):
        top = {k: [] for k in ks}
        whole, groups = [], []
        for qid, bank in banks.items():
            wanted = getattr(featurizer.query_fields(dataset.queries[qid].text), name)
            if not wanted:
                continue
            off = np.array(
                [
                    compare_field(name, wanted, getattr(featurizer.passage_fields(p), name))
                    is Compatibility.CONFLICT
                    for p in bank.ranking(ranker)
                ],
                dtype=np.float64,
            )
            whole.append(off.mean())
            groups.append(dataset.queries[qid].group)
            for k in ks:
                top[k].append(off[:k].mean())
        out[name] = {
            "n_queries": len(whole),
            "bank": float(np.mean(whole)) if whole else float("nan"),
            "top_k": {str(k): float(np.mean(v)) if v else float("nan") for k, v in top.items()},
            "top_k_ci95": {
                str(k): list(bootstrap_ci(np.array(v), groups=groups)) for k, v in top.items()
            },
        }
    return out


def _twins(dataset: Dataset, pids: list[str], sims: np.ndarray) -> list[set[int]]:
    """For each candidate, the candidates from another filing of the same company whose text is
    identical (after whitespace and case folding) or near-identical."""
    passages = [dataset.passages[p] for p in pids]
    folded = [SPACE.sub(" ", p.text).strip().lower() for p in passages]
    out: list[set[int]] = [set() for _ in pids]
    for i, a in enumerate(passages):
        if a.company is None or a.document is None:
            continue
        for j in range(i + 1, len(passages)):
            b = passages[j]
            if b.company != a.company or b.document in (None, a.document):
                continue
            if folded[i] == folded[j] or sims[i, j] >= NEAR_DUPLICATE:
                out[i].add(j)
                out[j].add(i)
    return out


def near_duplicates(
    dataset: Dataset, banks: dict[str, CandidateBank], ranker: str, featurizer: BankFeaturizer
) -> dict:
    """Share of bank candidates with a (near-)duplicate from another filing of the same company,
    and the share of queries whose gold is outranked by such a twin of itself."""
    shares, outranked, with_gold = [], 0, 0
    for qid, bank in banks.items():
        docs, _ = featurizer.bank_terms(bank.pids)
        twins = _twins(dataset, bank.pids, cosine_similarities(docs))
        shares.append(np.mean([bool(t) for t in twins]))
        qrels = dataset.qrels.get(qid, {})
        gold = [i for i, p in enumerate(bank.pids) if qrels.get(p, 0) > 0]
        if not gold:
            continue
        with_gold += 1
        rank = {i: r for r, i in enumerate(bank.order(ranker))}
        best = min(rank[i] for i in gold)
        gold_twins = set().union(*(twins[i] for i in gold)) - set(gold)
        outranked += any(rank[j] < best for j in gold_twins)
    return {
        "n_banks": len(shares),
        "share_with_twin": float(np.mean(shares)) if shares else float("nan"),
        "n_queries_with_gold": with_gold,
        "gold_outranked_by_own_twin": outranked,
        "share_gold_outranked_by_own_twin": outranked / with_gold if with_gold else float("nan"),
        "near_duplicate_cosine": NEAR_DUPLICATE,
    }
