"""``FinCrowdReranker``: the gated correction as a library call beside any base ranker.

Give it a question, candidates (text plus optional filing metadata) and your ranker's scores; it
returns the candidates in corrected order (or exactly your order where the gate stays closed), the
final scores, and an explanation: the question's extracted constraints, each candidate's fields and
conflicts, and the gate's probability, threshold and decision.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from fincrowd_ltr.data.schema import DataError, Passage
from fincrowd_ltr.features import FEATURE_NAMES, BankFeaturizer
from fincrowd_ltr.features.gate_features import gate_features
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.extractor import FIELD_NAMES
from fincrowd_ltr.model.checkpoint import (
    CONFIG,
    GATE_WEIGHTS,
    WEIGHTS,
    domain_calibration,
    load_gate,
    load_residual,
    save_residual,
)
from fincrowd_ltr.model.gate import GateCalibration, IdentityGate
from fincrowd_ltr.model.residual import ResidualScorer, normalise_base

MANIFEST = "manifest.json"
METADATA_FIELDS = ("company", "period", "doc_type", "document", "position", "is_table")
CACHE_LIMIT = 200_000  # passages whose fields and term counts are kept between requests
_CONFLICT_COLUMNS = [(f, FEATURE_NAMES.index(f"{f}_conflict")) for f in FIELD_NAMES]


@dataclass
class Candidate:
    """A candidate passage: id, text and optional metadata (company, period, doc_type, ...)."""

    id: str
    text: str
    metadata: dict = field(default_factory=dict)


@dataclass
class RerankResult:
    """Ordered ids, their final scores, the gate's decision and the explanation."""

    ranking: list[str]
    scores: list[float]
    gate: dict
    explanation: dict


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _check_manifest(directory: Path) -> None:
    path = directory / MANIFEST
    if not path.is_file():
        return  # a training checkpoint; exports always carry a manifest
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: malformed JSON ({err.msg})") from None
    for name, digest in manifest.get("sha256", {}).items():
        if not (directory / name).is_file():
            raise DataError(f"{directory / name}: listed in {MANIFEST} but missing")
        if file_digest(directory / name) != digest:
            raise DataError(f"{directory / name}: SHA-256 differs from {MANIFEST} (corrupted?)")


def _candidate(c: Candidate | dict, index: int) -> Candidate:
    if isinstance(c, dict):
        missing = [k for k in ("id", "text") if k not in c]
        if missing:
            raise DataError(f"candidates[{index}]: missing field(s) {missing}")
        c = Candidate(str(c["id"]), c["text"], dict(c.get("metadata") or {}))
    if not isinstance(c.text, str):
        raise DataError(f"candidates[{index}].text must be a string")
    for key in METADATA_FIELDS:
        value = c.metadata.get(key)
        if value is not None and not isinstance(value, str | int | float | bool):
            raise DataError(f"candidates[{index}].metadata.{key} must be a string or number")
    return c


class FinCrowdReranker:
    """The residual correction, its identity gate and per-domain calibrations, ready to serve.

    Args:
        scorer: The trained residual.
        config: The checkpoint's ``config.json`` content.
        gate: The identity gate (None: always-on correction only).
        domains: Gate calibration per domain.
    """

    def __init__(
        self,
        scorer: ResidualScorer,
        config: dict,
        gate: IdentityGate | None = None,
        domains: dict[str, GateCalibration] | None = None,
    ) -> None:
        self.scorer = scorer.eval()
        self.config = config
        self.gate = gate.eval() if gate is not None else None
        self.domains = dict(domains or {})
        self.source = Path(config.get("source", "checkpoint"))
        companies = config.get("extractor", {}).get("companies")
        self.extractor = FieldExtractor(companies)
        self._passages: dict[str, Passage] = {}
        self._reset_cache()

    @property
    def base_ranker(self) -> str:
        return self.config["base_ranker"]

    @classmethod
    def from_pretrained(cls, directory: str | Path, base_ranker: str | None = None):
        """Load an exported (or training) checkpoint; with ``base_ranker``, refuse one fitted
        for another ranker. Every file is checked against the manifest before anything loads."""
        directory = Path(directory)
        _check_manifest(directory)
        scorer, config = load_residual(directory, ranker=base_ranker)
        config["source"] = str(directory)
        gate, domains = (None, {})
        if config.get("gate") is not None:
            gate, domains = load_gate(directory)
        return cls(scorer, config, gate, domains)

    def save_pretrained(self, directory: str | Path) -> None:
        """Write a self-contained directory: config, weights and a SHA-256 manifest."""
        directory = Path(directory)
        training = dict(self.config.get("training", {}))
        save_residual(
            directory,
            self.scorer,
            self.base_ranker,
            training,
            self.gate,
            self.domains,
            self.extractor.companies,
        )
        files = [CONFIG, WEIGHTS] + ([GATE_WEIGHTS] if self.gate is not None else [])
        manifest = {"sha256": {name: file_digest(directory / name) for name in files}}
        (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))

    def _passage_key(self, c: Candidate) -> str:
        """The cache key of a candidate's text and metadata (the same text with other metadata
        is another passage); new passages are added to the cache."""
        meta = tuple(c.metadata.get(k) for k in METADATA_FIELDS)
        identity = (c.text, meta)
        key = self._keys.get(identity)
        if key is not None:
            return key
        if len(self._passages) >= CACHE_LIMIT:  # bounded memory in a long-running server
            self._reset_cache()
        key = self._keys[identity] = f"p{len(self._keys)}"
        company, period, doc_type, document, position, is_table = meta
        self._passages[key] = Passage(
            key,
            c.text,
            company=company,
            document=document,
            period=None if period is None else str(period),
            doc_type=doc_type,
            position=position,
            is_table=is_table,
        )
        return key

    def _reset_cache(self) -> None:
        self._keys: dict[tuple, str] = {}
        self._passages.clear()
        self._field_dicts: dict[str, dict] = {}
        self._featurizer = BankFeaturizer(self.extractor, self._passages)

    def _fields_dict(self, key: str) -> dict:
        fields = self._field_dicts.get(key)
        if fields is None:
            as_dict = self._featurizer.passage_fields(key).as_dict()
            fields = self._field_dicts[key] = {k: v for k, v in as_dict.items() if v}
        return fields

    def rerank(
        self,
        query: str,
        candidates: list[Candidate | dict],
        base_scores: list[float] | np.ndarray,
        domain: str | None = None,
        fallback: str = "error",
    ) -> RerankResult:
        """Reorder ``candidates`` (with ``base_scores`` from any ranker, higher is better).

        ``domain`` names the gate calibration; an uncalibrated domain raises unless ``fallback``
        is ``"identity"`` (keep the base order). ``domain=None`` on a checkpoint without a gate
        applies the always-on correction."""
        if not isinstance(query, str) or not query.strip():
            raise DataError("query must be a non-empty string")
        if not candidates:
            raise DataError("candidates is empty: nothing to rerank")
        items = [_candidate(c, i) for i, c in enumerate(candidates)]
        ids = [c.id for c in items]
        if len(set(ids)) != len(ids):
            raise DataError("candidate ids must be unique")
        base = np.asarray(base_scores, dtype=np.float64)
        if base.shape != (len(items),):
            raise DataError(f"base_scores has {base.size} values for {len(items)} candidates")
        bad = np.flatnonzero(~np.isfinite(base))
        if len(bad):
            raise DataError(f"base_scores[{int(bad[0])}] is not finite ({base[bad[0]]})")
        calibration = self._calibration(domain, fallback)  # fail before touching any cache
        keys = [self._passage_key(c) for c in items]
        x = self._featurizer.features(query, keys)
        with torch.no_grad():
            final = self.scorer(torch.from_numpy(x), torch.from_numpy(base)).numpy()
            s_hat = normalise_base(torch.from_numpy(base)).numpy()
        gate = self._decide(x, base, query, domain, calibration)
        scores = final if gate["applied"] else s_hat
        order = np.argsort(-scores, kind="stable")
        q_fields = self._featurizer.query_fields(query)
        explanation = {
            "query_constraints": {k: v for k, v in q_fields.as_dict().items() if v},
            "kept_original_order": not gate["applied"],
            "candidates": {
                c.id: {
                    "fields": self._fields_dict(key),
                    "conflicts": [f for f, col in _CONFLICT_COLUMNS if x[i, col] > 0],
                    "base_score": float(base[i]),
                    "correction": float(final[i] - s_hat[i]),
                }
                for i, (c, key) in enumerate(zip(items, keys, strict=True))
            },
        }
        return RerankResult(
            [ids[i] for i in order], [float(scores[i]) for i in order], gate, explanation
        )

    def _calibration(self, domain: str | None, fallback: str) -> GateCalibration | None:
        """The domain's calibration; None means no gate decision (always on, or identity)."""
        if self.gate is None:
            if domain is not None:
                raise DataError("this checkpoint has no identity gate; pass domain=None")
            return None
        if domain in self.domains:
            return self.domains[domain]
        if fallback == "identity":
            return None
        if domain is None:
            known = ", ".join(sorted(self.domains)) or "none"
            raise DataError(f"name a gate domain (calibrated: {known})")
        return domain_calibration(self.domains, domain, self.source)  # raises, naming domains

    def _decide(
        self,
        x: np.ndarray,
        base: np.ndarray,
        query: str,
        domain: str | None,
        calibration: GateCalibration | None,
    ) -> dict:
        if calibration is None:  # no gate: always on; uncalibrated with identity fallback: off
            applied = self.gate is None
            return {"probability": None, "threshold": None, "applied": applied, "domain": domain}
        observed = self._featurizer.query_fields(query).observed()
        logit = float(self.gate.logits(gate_features(self.scorer, x, base, observed))[0])
        probability = float(calibration.probability(np.array([logit]))[0])
        threshold = calibration.threshold
        return {
            "probability": probability,
            "threshold": threshold if math.isfinite(threshold) else None,
            "applied": bool(probability >= threshold),
            "domain": domain,
        }

    def rerank_batch(self, requests: list[dict]) -> list[RerankResult]:
        """Many questions: each request is ``{"query", "candidates", "base_scores", "domain"?}``."""
        out = []
        for i, r in enumerate(requests):
            try:
                out.append(
                    self.rerank(r["query"], r["candidates"], r["base_scores"], r.get("domain"))
                )
            except KeyError as err:
                raise DataError(f"requests[{i}]: missing field {err}") from None
            except DataError as err:
                raise DataError(f"requests[{i}]: {err}") from None
        return out
