"""FinDeCrowd-Stress: matched compatible and incompatible pools around the same gold evidence.

For each covered query, the frozen candidate list is its gold-injected first-stage bank (BM25
order, fixed before any evaluated ranker scores it) minus the supporting passages. Each
distractor is *incompatible* (at least one explicit field conflict with the query) or
*compatible* (none). Incompatible distractors, in list order, are matched to compatible ones on
observed difficulty (``matching``); the first 10, 30 and 60 pairs give nested pools. The same
ranker then scores gold + incompatible and gold + compatible pools of equal size; the difference
in Recall@10 / nDCG@10 is the displacement that conflicts add beyond semantic competition.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from fincrowd_ltr.data.ranking import rank_order
from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.diagnostics.matching import (
    COVARIATES,
    DEFAULT_BINS,
    DEFAULT_CALIPER,
    match_cem,
    match_nearest,
    standardise_within,
    standardised_mean_differences,
)
from fincrowd_ltr.features.bank_features import BankFeaturizer
from fincrowd_ltr.fields.compatibility import Compatibility, compare_field, conflicts
from fincrowd_ltr.metrics import bootstrap_ci, first_relevant_rank, per_query
from fincrowd_ltr.retrieval.banks import CandidateBank
from fincrowd_ltr.retrieval.fusion import reciprocal_rank_fusion

POOL_SIZES = (10, 30, 60)
TYPED_FIELDS = ("period", "segment", "metric", "entity", "unit", "table_scope")
HYBRID_PARTS = ("bm25", "dense")  # what ``make_rankers`` fuses for ``hybrid``
NUMBER = re.compile(r"\d")


@dataclass
class StressConfig:
    """Pool sizes, the similarity model used as a matching covariate, and matching settings."""

    sizes: tuple[int, ...] = POOL_SIZES
    similarity_ranker: str = "dense"
    caliper: float = DEFAULT_CALIPER
    bins: int = DEFAULT_BINS

    def __post_init__(self) -> None:
        import numbers

        from fincrowd_ltr.data.schema import DataError
        from fincrowd_ltr.retrieval.rankers import RANKERS

        def count(n) -> bool:
            return isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0

        sizes = self.sizes
        if isinstance(sizes, str) or not isinstance(sizes, tuple) or not sizes:
            raise DataError(
                f"pool sizes must be a list of counts > 0, e.g. (10, 30); got {sizes!r}"
            )
        if not all(count(n) for n in sizes):
            raise DataError(f"pool sizes must be counts > 0; got {sizes!r}")
        if len(set(sizes)) < len(sizes):  # each is a pool: a repeat counted its questions twice
            raise DataError(f"pool sizes must differ; got {sizes!r}")
        if self.similarity_ranker not in (*RANKERS, "run"):
            raise DataError(
                f"similarity must be one of {(*RANKERS, 'run')}; got {self.similarity_ranker!r}"
            )
        caliper = self.caliper
        if isinstance(caliper, bool) or not isinstance(caliper, numbers.Real) or not caliper > 0:
            raise DataError(f"caliper must be a number > 0; got {caliper!r}")
        if not count(self.bins):
            raise DataError(f"bins must be a count >= 1; got {self.bins!r}")


@dataclass
class QueryCandidates:
    """One query's frozen distractor list with conflicts and covariates (rows in list order)."""

    qid: str
    gold: list[str]
    pids: list[str]
    conflicts: list[tuple[str, ...]]
    covariates: np.ndarray  # raw, (n, len(COVARIATES))
    gold_free_company: np.ndarray  # same_company judged from the query text, not the gold


def pool_scores(bank: CandidateBank, ranker: str, pids: list[str]) -> np.ndarray:
    """The ranker's scores for a subset of the bank. Per-candidate rankers are read from the
    bank; the hybrid is re-fused over the pool (rank fusion depends on who competes)."""
    index = {p: i for i, p in enumerate(bank.pids)}
    rows = [index[p] for p in pids]
    if ranker == "hybrid":
        return reciprocal_rank_fusion([bank.scores[part][rows] for part in HYBRID_PARTS])
    return bank.scores[ranker][rows]


def _numeric_density(text: str) -> float:
    tokens = text.split()
    return sum(1 for t in tokens if NUMBER.search(t)) / len(tokens) if tokens else 0.0


def query_candidates(
    dataset: Dataset, bank: CandidateBank, featurizer: BankFeaturizer, similarity: str
) -> QueryCandidates:
    """The frozen distractor list of one bank with conflicts and matching covariates."""
    qrels = dataset.qrels.get(bank.qid, {})
    supporting = {p for p, g in qrels.items() if g > 0}
    supporting |= set((dataset.gold_equivalents or {}).get(bank.qid, {}))
    gold = [p for p in bank.pids if qrels.get(p, 0) > 0]
    order = rank_order(bank.first_stage)
    pids = [bank.pids[i] for i in order if bank.pids[i] not in supporting]
    q_fields = featurizer.query_fields(dataset.queries[bank.qid].text)
    gold_entities = set().union(*(featurizer.passage_fields(p).entity for p in gold))
    index = {p: i for i, p in enumerate(bank.pids)}
    sim = (
        bank.scores[similarity]
        if similarity != "hybrid"
        else pool_scores(bank, "hybrid", bank.pids)
    )
    rows, found, gold_free = [], [], []
    for pid in pids:
        fields = featurizer.passage_fields(pid)
        text = dataset.passages[pid].text
        found.append(conflicts(q_fields, fields))
        rows.append(
            [
                sim[index[pid]],
                bank.first_stage[index[pid]],
                float(bool(fields.entity & gold_entities)),
                float(bool(fields.is_table)),
                math.log1p(len(text.split())),
                _numeric_density(text),
            ]
        )
        gold_free.append(
            float(compare_field("entity", q_fields.entity, fields.entity) is Compatibility.MATCH)
        )
    covariates = np.array(rows, dtype=np.float64).reshape(len(pids), len(COVARIATES))
    return QueryCandidates(bank.qid, gold, pids, found, covariates, np.array(gold_free))


def _pairs(
    cands: QueryCandidates, treated: list[int], method: str, config: StressConfig, gold_free: bool
) -> tuple[list[tuple[int, int]], np.ndarray]:
    covariates = cands.covariates.copy()
    if gold_free:
        covariates[:, COVARIATES.index("same_company")] = cands.gold_free_company
    z = standardise_within(covariates) if len(covariates) else covariates
    controls = [i for i, c in enumerate(cands.conflicts) if not c]
    limit = max(config.sizes)
    if method == "cem":
        return match_cem(treated, controls, covariates, limit, config.bins), z
    return match_nearest(treated, controls, z, limit, config.caliper), z


def _pool_outcome(
    dataset: Dataset, bank: CandidateBank, ranker: str, gold: list[str], distractors: list[str]
) -> dict:
    # distractors first: a tie with a distractor goes against the gold
    pids = distractors + gold
    scores = pool_scores(bank, ranker, pids)
    ranking = [pids[i] for i in rank_order(scores)]
    qrels = dataset.qrels[bank.qid]
    row = per_query(ranking, qrels)
    return {
        "recall@10": row["recall@10"],
        "ndcg@10": row["ndcg@10"],
        "gold_rank": first_relevant_rank(ranking, qrels),
        "distractors": distractors,
    }


def _summarise(
    dataset: Dataset, outcomes: list[dict], balance: list[tuple[np.ndarray, np.ndarray]], n_all: int
) -> dict:
    qids = [o["qid"] for o in outcomes]
    groups = [dataset.queries[q].group for q in qids]
    out: dict = {"n_queries": len(qids), "n_dropped": n_all - len(qids)}
    for name in ("recall@10", "ndcg@10"):
        inc = np.array([o["incompatible"][name] for o in outcomes])
        comp = np.array([o["compatible"][name] for o in outcomes])
        out[name] = {
            "incompatible": float(inc.mean()) if len(inc) else float("nan"),
            "incompatible_ci95": list(bootstrap_ci(inc, groups=groups)),
            "compatible": float(comp.mean()) if len(comp) else float("nan"),
            "compatible_ci95": list(bootstrap_ci(comp, groups=groups)),
            "delta": float((inc - comp).mean()) if len(inc) else float("nan"),
            "delta_ci95": list(bootstrap_ci(inc - comp, groups=groups)),
        }
    shift = np.array(
        [o["incompatible"]["gold_rank"] - o["compatible"]["gold_rank"] for o in outcomes],
        dtype=np.float64,
    )
    out["gold_rank_shift"] = float(shift.mean()) if len(shift) else float("nan")
    out["gold_rank_shift_ci95"] = list(bootstrap_ci(shift, groups=groups))
    if balance:
        treated = np.concatenate([t for t, _ in balance])
        controls = np.concatenate([c for _, c in balance])
        smd = standardised_mean_differences(treated, controls)
        out["balance_smd"] = dict(zip(COVARIATES, smd, strict=True))
    return out


def _balance_before(before: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Standardised mean differences of the covariates, incompatible against compatible
    distractors, over every eligible query before matching."""
    if not before:
        return {}
    treated = np.concatenate([t for t, _ in before])
    control = np.concatenate([c for _, c in before])
    smd = standardised_mean_differences(treated, control)
    return dict(zip(COVARIATES, smd, strict=True))


def run_stress(
    dataset: Dataset,
    banks: dict[str, CandidateBank],
    ranker: str,
    featurizer: BankFeaturizer,
    config: StressConfig | None = None,
) -> dict:
    """The matched-pool stress test of ``ranker`` over gold-injected ``banks``.

    Returns per variant (``primary`` nearest-neighbour matching, ``cem``, ``gold_free`` and one
    ``typed:<field>`` per single-field intervention) and pool size: metrics in both conditions,
    the paired delta (incompatible minus compatible) with a cluster-bootstrap interval, the mean
    shift of the highest-ranked gold, covariate balance, and matched / dropped query counts.
    """
    config = config or StressConfig()
    qids = [q for q in banks if dataset.covered(q)]
    variants: dict[str, tuple[str, bool, str | None]] = {
        "primary": ("nearest", False, None),
        "cem": ("cem", False, None),
        "gold_free": ("nearest", True, None),
    }
    variants.update({f"typed:{f}": ("nearest", False, f) for f in TYPED_FIELDS})
    outcomes = {v: {s: [] for s in config.sizes} for v in variants}
    balance = {v: {s: [] for s in config.sizes} for v in variants}
    before: list[tuple[np.ndarray, np.ndarray]] = []
    eligible = 0
    for qid in qids:
        bank = banks[qid]
        cands = query_candidates(dataset, bank, featurizer, config.similarity_ranker)
        if not cands.gold or not cands.pids:
            continue
        eligible += 1
        z_all = standardise_within(cands.covariates)
        inc = [i for i, c in enumerate(cands.conflicts) if c]
        comp = [i for i, c in enumerate(cands.conflicts) if not c]
        before.append((z_all[inc], z_all[comp]))
        for name, (method, gold_free, target) in variants.items():
            treated = inc if target is None else [i for i in inc if cands.conflicts[i] == (target,)]
            pairs, z = _pairs(cands, treated, method, config, gold_free)
            for size in config.sizes:
                if len(pairs) < size:
                    continue
                chosen = pairs[:size]
                row = {"qid": qid}
                for label, side in (("incompatible", 0), ("compatible", 1)):
                    distractors = [cands.pids[p[side]] for p in chosen]
                    row[label] = _pool_outcome(dataset, bank, ranker, cands.gold, distractors)
                outcomes[name][size].append(row)
                balance[name][size].append((z[[p[0] for p in chosen]], z[[p[1] for p in chosen]]))
    report: dict = {
        "ranker": ranker,
        "similarity_ranker": config.similarity_ranker,
        "caliper": config.caliper,
        "cem_bins": config.bins,
        "n_eligible": eligible,
        "covariates": list(COVARIATES),
        "balance_before_matching": _balance_before(before),
        "variants": {},
    }
    for name in variants:
        report["variants"][name] = {
            str(size): _summarise(dataset, outcomes[name][size], balance[name][size], eligible)
            for size in config.sizes
        }
    report["per_query"] = {
        str(size): {o["qid"]: o for o in outcomes["primary"][size]} for size in config.sizes
    }
    return report
