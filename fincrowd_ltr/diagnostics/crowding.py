"""Crowded failures in ordinary (non-injected) retrieval.

A top-10 miss is *crowded* when relevant evidence is ranked 11-100, a candidate with an explicit
field conflict outranks it, and deleting the conflicting candidates (never relevant ones) moves
it into the top 10. Every query gets one status:

- ``hit``: relevant evidence in the top 10;
- ``absent``: no relevant evidence in the ranked bank (the first stage missed it);
- ``orderable``: evidence ranked 11-100 but not crowded (``reason`` says which rule failed);
- ``crowded``: as defined above.
"""

from __future__ import annotations

from collections import Counter

from fincrowd_ltr.fields.extractor import FIELD_NAMES

TOP_K = 10
DEPTH = 100


def label_failure(
    ranking: list[str],
    relevant: set[str],
    conflicts: dict[str, tuple[str, ...]],
    k: int = TOP_K,
    depth: int = DEPTH,
) -> dict:
    """Label one query's ranking. ``conflicts[pid]`` names the fields on which a candidate
    explicitly conflicts with the query (empty or missing: none)."""
    ranking = ranking[:depth]
    rank = next((i + 1 for i, p in enumerate(ranking) if p in relevant), None)
    if rank is None:
        return {"status": "absent", "rank": None}
    if rank <= k:
        return {"status": "hit", "rank": rank}
    above = [p for p in ranking[: rank - 1] if conflicts.get(p) and p not in relevant]
    if not above:
        return {"status": "orderable", "rank": rank, "reason": "no conflicting candidate above"}
    kept = [p for p in ranking if p in relevant or not conflicts.get(p)]
    new_rank = next(i + 1 for i, p in enumerate(kept) if p in relevant)
    fields = Counter(f for p in above for f in conflicts[p])
    out = {
        "rank": rank,
        "rank_without_conflicts": new_rank,
        "conflicting_above": len(above),
        "conflict_fields": dict(fields),
    }
    if new_rank > k:
        return {**out, "status": "orderable", "reason": "deleting conflicts is not enough"}
    # fields whose conflicts alone, deleted, are enough
    sufficient = []
    for name in FIELD_NAMES:
        kept_f = [p for p in ranking if p in relevant or name not in conflicts.get(p, ())]
        if next(i + 1 for i, p in enumerate(kept_f) if p in relevant) <= k:
            sufficient.append(name)
    primary = max(fields, key=lambda f: (fields[f], -FIELD_NAMES.index(f)))
    return {**out, "status": "crowded", "primary_field": primary, "sufficient_fields": sufficient}


def summarise_failures(labels: dict[str, dict]) -> dict:
    """Shares of top-10 failures, orderable failures (evidence at 11-100), crowded failures and
    failures without evidence in the bank, with crowded counts per conflict field."""
    n = len(labels)
    status = Counter(lab["status"] for lab in labels.values())
    failures = n - status["hit"]
    orderable = status["orderable"] + status["crowded"]
    crowded = [lab for lab in labels.values() if lab["status"] == "crowded"]
    return {
        "n_queries": n,
        "top10_failures": failures,
        "orderable_failures": orderable,
        "crowded_failures": status["crowded"],
        "absent_failures": status["absent"],
        "share_failures": failures / n if n else float("nan"),
        "share_orderable_of_failures": orderable / failures if failures else float("nan"),
        "share_crowded_of_orderable": status["crowded"] / orderable if orderable else float("nan"),
        "share_absent_of_failures": status["absent"] / failures if failures else float("nan"),
        "crowded_by_primary_field": dict(Counter(lab["primary_field"] for lab in crowded)),
        "crowded_by_sufficient_field": dict(
            Counter(f for lab in crowded for f in lab["sufficient_fields"])
        ),
        "crowded_with_field_above": dict(
            Counter(f for lab in crowded for f in lab["conflict_fields"])
        ),
    }


def crowded_labels(dataset, examples) -> dict[str, dict]:
    """Crowding labels of the base order of (retrieved) banks given as
    :class:`~fincrowd_ltr.features.BankExample` (conflicts read from their features)."""
    from fincrowd_ltr.data.ranking import rank_order
    from fincrowd_ltr.features.bank_features import FEATURE_NAMES

    columns = {name: FEATURE_NAMES.index(f"{name}_conflict") for name in FIELD_NAMES}
    out = {}
    for e in examples:
        if not dataset.covered(e.qid):
            continue
        conflicts = {
            pid: tuple(name for name, col in columns.items() if e.features[i, col] > 0)
            for i, pid in enumerate(e.pids)
        }
        relevant = {p for p, g in dataset.qrels[e.qid].items() if g > 0}
        ranking = [e.pids[i] for i in rank_order(e.base)]
        out[e.qid] = label_failure(ranking, relevant, conflicts, depth=len(ranking))
    return out


def repair_counts(dataset, labels: dict[str, dict], system: dict[str, list[str]]) -> dict:
    """Crowded failures of the base order whose evidence ``system`` puts in the top 10."""
    crowded = [q for q, lab in labels.items() if lab["status"] == "crowded" and q in system]
    repaired = sum(any(dataset.qrels[q].get(p, 0) > 0 for p in system[q][:TOP_K]) for q in crowded)
    return {
        "crowded_repaired": repaired,
        "crowded_failures": len(crowded),
        "repair_rate": repaired / len(crowded) if crowded else float("nan"),
    }
