"""``GatedCorrection``: the one object that turns a question, its candidates, their base scores and
a domain into an order.

It owns the residual, the identity gate, the per-domain gate calibrations, the field extractor (its
company vocabulary) and a typed training summary. Serving (:meth:`rerank`), evaluation
(:meth:`rerank_banks`), cross-validation and calibration (:meth:`score_examples`,
:meth:`calibrate`) and the torch-free ONNX runtime all decide through :meth:`decide`:

- ``domain=None``: the always-on correction (the gate is not consulted);
- a calibrated domain: the gate decides; closed means exactly the base order;
- an uncalibrated domain: an error, unless ``fallback="identity"`` (keep the base order).

Extractor vocabulary, everywhere: the checkpoint's company vocabulary plus the candidates' own
metadata companies (a question naming a company that only the candidates' metadata knows still
gets that entity).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fincrowd_ltr.data.metadata import METADATA_FIELDS, unread_keys
from fincrowd_ltr.data.ranking import rank_order
from fincrowd_ltr.data.schema import SYNTHETIC_SUFFIX, DataError, Dataset, Passage
from fincrowd_ltr.features.bank_features import FEATURE_NAMES, FEATURE_VERSIONS, BankFeaturizer
from fincrowd_ltr.features.corpus import CorpusFeaturizers
from fincrowd_ltr.features.examples import BankExample, make_examples
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.extractor import FIELD_NAMES, FinancialFields
from fincrowd_ltr.model import checkpoint as io
from fincrowd_ltr.model.calibration import GateCalibration
from fincrowd_ltr.model.gate_features import gate_features_from_scores
from fincrowd_ltr.model.requests import (
    Candidate,
    RequestCache,
    RerankResult,
    parse_candidate,
)
from fincrowd_ltr.model.shift import (
    SHIFT_Z,
    SHIFT_Z_ONE_BANK,
    DistributionShiftWarning,
    bank_warnings,
    feature_warnings,
    scorer_warnings,
)
from fincrowd_ltr.model.summary import TrainingSummary, seen_questions

ALWAYS_ON = None  # domain=None: apply the residual without consulting the gate
FALLBACKS = ("error", "identity")
_REQUIRED_FIELDS = ("query", "candidates", "base_scores")  # a rerank_batch request's
_REQUEST_FIELDS = (*_REQUIRED_FIELDS, "domain", "fallback")
# each field's conflict column, in FIELD_NAMES' order
_CONFLICT_COLUMNS = [FEATURE_NAMES.index(f"{f}_conflict") for f in FIELD_NAMES]


@dataclass
class Decision:
    """What the correction did with one bank (arrays aligned to the input candidates)."""

    order: np.ndarray  # candidate indices, the returned order
    scores: np.ndarray  # the scores the order follows: corrected, or normalised base if closed
    corrected: np.ndarray
    normalised_base: np.ndarray
    base_order: np.ndarray
    corrected_order: np.ndarray
    applied: bool
    mode: str  # "always-on", "gated" or "identity"
    domain: str | None = None
    probability: float | None = None
    threshold: float | None = None
    gate_features: np.ndarray | None = None
    standardised: np.ndarray | None = None  # the residual's standardised features
    guarantee: dict | None = None  # the domain calibration's promise (gated mode)

    @property
    def gate(self) -> dict:
        """The decision as served: probability, threshold, applied, domain, mode and the
        domain calibration's guarantee (method, cap, delta, risk bound, calibration size)."""
        threshold = self.threshold
        return {
            "probability": self.probability,
            "threshold": threshold if threshold is not None and math.isfinite(threshold) else None,
            "applied": self.applied,
            "domain": self.domain,
            "mode": self.mode,
            "guarantee": self.guarantee,
        }


@dataclass
class BankResult:
    """A bank's candidates and what the correction decided for them."""

    qid: str
    pids: list[str]
    decision: Decision

    @property
    def ranking(self) -> list[str]:
        return [self.pids[i] for i in self.decision.order]

    @property
    def base_ranking(self) -> list[str]:
        return [self.pids[i] for i in self.decision.base_order]

    @property
    def corrected_ranking(self) -> list[str]:
        return [self.pids[i] for i in self.decision.corrected_order]


def checked_base_scores(base_scores, n: int) -> np.ndarray:
    """``base_scores`` (a list, tuple, NumPy array or tensor of numbers) as ``n`` finite floats,
    or a ``DataError`` naming the first bad one: a string (``"4"``), ``None``, a boolean, NaN or
    an infinity is refused, not converted."""
    refused = DataError("base_scores must be a list of numbers, one per candidate", "base_scores")
    if isinstance(base_scores, str | bytes | dict | set | frozenset):
        raise refused
    if hasattr(base_scores, "__array__") and not isinstance(base_scores, np.ndarray):
        if hasattr(base_scores, "detach"):  # a tensor: its values, not its graph
            base_scores = base_scores.detach().cpu()
        try:  # a tensor, a pandas Series
            base_scores = np.asarray(base_scores)
        except (TypeError, ValueError):
            raise refused from None
    if isinstance(base_scores, np.ndarray):
        if base_scores.ndim != 1:
            raise refused
        values = base_scores.tolist()  # Python numbers; booleans and strings checked below
    else:
        try:
            values = list(base_scores)
        except TypeError:
            raise refused from None
    if len(values) != n:
        raise DataError(f"base_scores has {len(values)} values for {n} candidates", "base_scores")
    found = np.empty(n, dtype=np.float64)
    for i, v in enumerate(values):
        field = f"base_scores[{i}]"
        try:
            if isinstance(v, str | bytes | bool | np.bool_):
                raise TypeError
            found[i] = float(v)
        except (TypeError, ValueError, OverflowError):
            shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
            raise DataError(f"{field} is {type(v).__name__} {shown}, not a number", field) from None
        if not math.isfinite(found[i]):
            raise DataError(f"{field} is not finite ({v})", field)
    return found


class GatedCorrection:
    """The residual correction, its identity gate and per-domain calibrations.

    Args:
        residual: The trained ``ResidualScorer`` (None with a ``runtime`` that needs none).
        gate: The ``IdentityGate`` (None: always-on correction only).
        domains: Gate calibration per domain.
        companies: The extractor's company vocabulary (default: the shipped one).
        summary: What it was trained on.
        runtime: The numerics (default: PyTorch over ``residual`` and ``gate``).
        features: The per-corpus featurizers to use (shared by whoever scores many models on
            one corpus, e.g. a cross-validation); default: the model's own.

    Example:
        >>> model = GatedCorrection.from_pretrained("checkpoints/default")  # doctest: +SKIP
        >>> model.rerank("FY2019 capex of 3M?", candidates, scores, domain="financebench")
    """

    def __init__(
        self,
        residual=None,
        gate=None,
        domains: dict[str, GateCalibration] | None = None,
        companies: dict[str, list[str]] | None = None,
        summary: TrainingSummary | None = None,
        runtime=None,
        source: Path | None = None,
        segments: dict[str, list[str]] | None = None,
        features: CorpusFeaturizers | None = None,
        feature_versions: dict[str, int] | None = FEATURE_VERSIONS,
    ) -> None:
        if runtime is None and residual is not None:
            from fincrowd_ltr.model.runtime import TorchRuntime

            runtime = TorchRuntime(residual, gate)
        self.residual = residual
        self.gate = gate
        self.runtime = runtime
        self.has_gate = gate is not None or getattr(runtime, "_gate", None) is not None
        self.domains = dict(domains or {})
        self.extractor = FieldExtractor(companies, segments)
        self.summary = summary or TrainingSummary()
        self.source = source
        self.features = features if features is not None else CorpusFeaturizers()
        # the versions of the feature code it was fitted with (None: saved before they were
        # recorded); saving writes them back, so a re-save never hides a mismatch
        self.feature_versions = None if feature_versions is None else dict(feature_versions)
        self._requests = RequestCache(self.extractor)

    # --- identity -------------------------------------------------------------------------
    @property
    def base_ranker(self) -> str:
        return self.summary.base_ranker

    @property
    def config(self) -> dict:
        """The ``config.json`` content this model saves (for readers and ``/health``)."""
        gate = None
        if self.gate is not None:
            gate = {
                "feature_mean": self.gate.feature_mean.tolist(),
                "feature_std": self.gate.feature_std.tolist(),
            }
        elif self.has_gate:
            gate = {}
        r = self.residual
        return io.make_config(
            r.alpha if r is not None else None,
            r.gamma if r is not None else None,
            r.feature_mean.tolist() if r is not None else [],
            r.feature_std.tolist() if r is not None else [],
            self.base_ranker,
            self.summary.to_dict(),
            self.extractor.companies,
            gate,
            self.domains,
            self.extractor.segment_names,
            self.feature_versions,
        )

    # --- the decision ---------------------------------------------------------------------
    def rule(self, domain: str | None, fallback: str = "error") -> GateCalibration | str:
        """The rule for a domain: ``"always-on"`` (domain None), ``"identity"`` (uncalibrated
        with the identity fallback) or the domain's calibration; an uncalibrated domain is an
        error otherwise. Raises before any work is done."""
        if fallback not in FALLBACKS:
            raise DataError(f"fallback must be one of {FALLBACKS}; got {fallback!r}", "fallback")
        if domain is ALWAYS_ON:
            return "always-on"
        if not self.has_gate:
            if fallback == "identity":
                return "identity"
            raise DataError(
                f"this checkpoint has no identity gate ({io.NO_GATE}): use no domain (the "
                "always-on correction) or the identity fallback (your order: fallback="
                "'identity', --domain-fallback identity)",
                "domain",
            )
        if domain in self.domains:
            if domain.endswith(SYNTHETIC_SUFFIX):
                warnings.warn(synthetic_domain_note(domain), SyntheticDomainWarning, stacklevel=3)
            return self.domains[domain]
        if fallback == "identity":
            return "identity"
        return io.domain_calibration(self.domains, domain)

    def decide(
        self,
        features: np.ndarray,
        base: np.ndarray,
        query_fields: FinancialFields,
        domain: str | None = ALWAYS_ON,
        fallback: str = "error",
        calibration: GateCalibration | str | None = None,
    ) -> Decision:
        """Correct one bank and decide (see the module docstring); every path ends here."""
        if self.runtime is None:
            raise DataError("this correction has no trained residual to apply")
        calibration = calibration or self.rule(domain, fallback)
        base = np.asarray(base, dtype=np.float64)
        corrected, normalised, standardised = self.runtime.residual(features, base)
        base_order, corrected_order = rank_order(base), rank_order(corrected)
        probability = threshold = gf = guarantee = None
        if calibration == "always-on":
            applied, mode = True, "always-on"
        elif calibration == "identity":
            applied, mode = False, "identity"
        else:
            gf = gate_features_from_scores(
                features, base, query_fields.observed(), corrected, normalised, standardised
            )
            probability = float(calibration.probability(np.array([self.runtime.gate_logit(gf)]))[0])
            threshold = calibration.threshold
            applied, mode = bool(probability >= threshold), "gated"
            guarantee = calibration.guarantee()
        return Decision(
            order=corrected_order if applied else base_order,
            scores=corrected if applied else normalised,
            corrected=corrected,
            normalised_base=normalised,
            base_order=base_order,
            corrected_order=corrected_order,
            applied=applied,
            mode=mode,
            domain=domain,
            probability=probability,
            threshold=threshold,
            gate_features=gf,
            standardised=standardised,
            guarantee=guarantee,
        )

    # --- serving ----------------------------------------------------------------------------
    def rerank(
        self,
        query: str,
        candidates: list[Candidate | dict],
        base_scores,
        domain: str | None = ALWAYS_ON,
        fallback: str = "error",
    ) -> RerankResult:
        """Reorder ``candidates`` given ``base_scores`` from any ranker (higher is better).

        ``domain=None`` applies the always-on correction; a calibrated domain lets the gate
        decide (closed: exactly your order); an uncalibrated domain raises unless ``fallback``
        is ``"identity"``. Bad input raises ``DataError`` naming the field, before any cache
        changes. Metadata keys nothing reads (``"fiscal_year"``, ``"Period"``) are named by an
        ``UnreadMetadataWarning`` (once per key set and calling line; the HTTP service
        refuses them).
        """
        if not isinstance(query, str) or not query.strip():
            raise DataError("query must be a non-empty string", "query")
        if not candidates:
            raise DataError("candidates is empty: nothing to rerank", "candidates")
        items = [parse_candidate(c, i) for i, c in enumerate(candidates)]
        ids = [c.id for c in items]
        if len(set(ids)) != len(ids):
            first = {}
            i = next(i for i, c in enumerate(ids) if first.setdefault(c, i) != i)
            raise DataError(
                f"candidates[{i}].id: {ids[i]!r} repeats candidates[{first[ids[i]]}]'s id; "
                "candidate ids must be unique",
                f"candidates[{i}].id",
            )
        base = checked_base_scores(base_scores, len(items))
        calibration = self.rule(domain, fallback)  # fail before touching any cache
        keys = [self._requests.key(c) for c in items]
        featurizer = self._requests.featurizer
        x = featurizer.features(query, keys)
        q_fields = featurizer.query_fields(query, keys)
        d = self.decide(x, base, q_fields, domain, fallback, calibration)
        shift = self.shift_warnings(None, len(items), d.standardised, SHIFT_Z_ONE_BANK)
        _warn_unread_metadata(items)
        conflicts = (x[:, _CONFLICT_COLUMNS] > 0).tolist()
        corrections = (d.corrected - d.normalised_base).tolist()
        explanation = {
            "query_constraints": {k: v for k, v in q_fields.as_dict().items() if v},
            "kept_original_order": not d.applied,
            "candidates": {
                c.id: {
                    "fields": self._requests.fields(key),
                    "conflicts": [f for f, hit in zip(FIELD_NAMES, row, strict=True) if hit],
                    "base_score": score,
                    "correction": correction,
                }
                for c, key, row, score, correction in zip(
                    items, keys, conflicts, base.tolist(), corrections, strict=True
                )
            },
        }
        return RerankResult(
            [ids[i] for i in d.order],
            d.scores[d.order].tolist(),
            d.gate,
            explanation,
            shift,
        )

    def shift_warnings(
        self,
        first_stage: str | None,
        size: int | None,
        standardised: np.ndarray | None = None,
        threshold: float = SHIFT_Z,
        scorer: str | None = None,
    ) -> list[str]:
        """How these banks differ from the training banks (first stage, size, the static
        scorer's version ``scorer`` of the banks' base scores, feature statistics:
        :mod:`fincrowd_ltr.model.shift`); each is also a ``DistributionShiftWarning``."""
        s = self.summary
        found = bank_warnings(
            s.first_stage if s.query_ids else None, s.bank_size, first_stage, size
        )
        found += scorer_warnings(self.base_ranker, s.base_scorer, scorer)
        if standardised is not None:
            found += feature_warnings(standardised, threshold)
        for message in found:
            warnings.warn(message, DistributionShiftWarning, stacklevel=3)
        return found

    def rerank_batch(self, requests: list[dict]) -> list[RerankResult]:
        """Many questions: each request is ``{"query", "candidates", "base_scores", "domain"?,
        "fallback"?}``; errors name the request, and a field not among these is refused (a
        misspelt ``domain`` would otherwise serve the always-on correction)."""
        out = []
        for i, r in enumerate(requests):
            if not isinstance(r, dict):
                raise DataError(
                    f"requests[{i}] must be a dict; got {type(r).__name__}", f"requests[{i}]"
                )
            unknown = sorted(set(r) - set(_REQUEST_FIELDS))
            if unknown:
                raise DataError(
                    f"requests[{i}]: unknown field(s) {unknown}; a request takes "
                    f"{', '.join(_REQUEST_FIELDS)}",
                    f"requests[{i}].{unknown[0]}",
                )
            missing = [k for k in _REQUIRED_FIELDS if k not in r]
            if missing:
                raise DataError(
                    f"requests[{i}]: missing field(s) {missing}", f"requests[{i}].{missing[0]}"
                )
            try:
                out.append(
                    self.rerank(
                        r["query"],
                        r["candidates"],
                        r["base_scores"],
                        r.get("domain"),
                        r.get("fallback", "error"),
                    )
                )
            except DataError as err:
                where = f"requests[{i}]" + (f".{err.field}" if err.field else "")
                raise DataError(f"requests[{i}]: {err}", where) from None
        return out

    def add_segment_names(self, passages: Iterable[Passage]) -> dict[str, list[str]]:
        """Learn the segment names ``passages`` (your filings) write, for serving: ``rerank``
        then reads them for those companies, and ``save_pretrained`` keeps them. Returns the
        names that were new, by company."""
        before = self.extractor
        self.extractor = before.with_segment_names(before.harvest_segments(passages))
        self._requests = RequestCache(self.extractor)
        return {
            k: new
            for k, v in self.extractor.segment_names.items()
            if (new := sorted(set(v) - set(before.segment_names.get(k, ()))))
        }

    # --- banks (evaluation, calibration, training) -------------------------------------------
    def featurizer(self, passages: dict[str, Passage]) -> BankFeaturizer:
        """The bank featurizer of a corpus, with this model's extractor (kept per corpus) and the
        segment names the corpus's own filings write, beside the checkpoint's."""
        return self.features.featurizer(self.extractor, passages)

    def examples(
        self, dataset: Dataset, bankset, ranker: str | None = None, qids=None, cache=None
    ) -> list[BankExample]:
        """Feature matrices of ``bankset``'s banks with ``ranker``'s base scores."""
        ranker = ranker or self.base_ranker
        if ranker not in bankset.rankers:
            raise DataError(
                f"the banks have no scores of ranker {ranker!r} (they have "
                f"{', '.join(bankset.rankers) or 'none'})"
            )
        return make_examples(
            dataset, bankset, ranker, self.featurizer(dataset.passages), qids, cache
        )

    def score_examples(
        self,
        dataset: Dataset,
        examples: list[BankExample],
        domain: str | None = ALWAYS_ON,
        fallback: str = "error",
    ) -> dict[str, BankResult]:
        """Decide every bank (features already computed, with this model's extractor)."""
        calibration = self.rule(domain, fallback)
        featurizer = self.featurizer(dataset.passages)
        out = {}
        for e in examples:
            q_fields = featurizer.query_fields(dataset.queries[e.qid].text, e.pids)
            d = self.decide(e.features, e.base, q_fields, domain, fallback, calibration)
            out[e.qid] = BankResult(e.qid, e.pids, d)
        return out

    def rerank_banks(
        self,
        dataset: Dataset,
        bankset,
        ranker: str | None = None,
        qids: list[str] | None = None,
        domain: str | None = ALWAYS_ON,
        fallback: str = "error",
        cache: Path | None = None,
    ) -> dict[str, BankResult]:
        """Rerank many saved banks at once (evaluation); ``ranker`` defaults to the base ranker
        the correction was fitted for."""
        self.rule(domain, fallback)
        examples = self.examples(dataset, bankset, ranker, qids, cache)
        return self.score_examples(dataset, examples, domain, fallback)

    def with_domain(self, domain: str, calibration: GateCalibration) -> GatedCorrection:
        """A model like this one with ``domain`` calibrated (this one is left unchanged; the
        residual, gate and caches are shared). Calibrations come from
        :func:`fincrowd_ltr.training.calibration.fit_calibration`."""
        if not self.has_gate:
            raise DataError(f"this checkpoint has no identity gate to calibrate ({io.NO_GATE})")
        if not isinstance(domain, str) or not domain:
            raise DataError("a domain is a non-empty name")
        other = copy.copy(self)
        other.domains = {**self.domains, domain: calibration}
        return other

    def with_base_ranker(self, ranker: str, first_stage: str | None = None) -> GatedCorrection:
        """A model like this one that corrects ``ranker``'s order instead (e.g. ``"run"``, your
        own ranker, for a checkpoint trained on BM25 banks of synthetic questions), on banks of
        ``first_stage`` when given (``"run"``: your run's own top N). The residual reads base
        scores standardised per bank, so it applies to any base; whether it helps yours is for
        a gate calibration with that base to find out: the domains calibrated for the old base
        are dropped, and the training base and stage stay on record (``summary.extra``:
        ``trained_base_ranker``, ``trained_first_stage``). The same ranker and stage: this
        model, unchanged."""
        if not isinstance(ranker, str) or not ranker:
            raise DataError("a base ranker is a non-empty name", "base_ranker")
        stage = first_stage or self.summary.first_stage
        if ranker == self.base_ranker and stage == self.summary.first_stage:
            return self
        from fincrowd_ltr.retrieval.rankers import STATIC_RANKERS, scorer_recipe

        other = copy.copy(self)
        extra = self.summary.extra
        recipe = self.summary.base_scorer
        if ranker != self.base_ranker and ranker not in STATIC_RANKERS:
            recipe = None  # a fixed model
        elif ranker != self.base_ranker and self.base_ranker not in STATIC_RANKERS:
            recipe = scorer_recipe(ranker, self.summary.static_questions)
        # from one static ranker to another: the scorer its training recorded (or its lack)
        other.summary = dataclasses.replace(
            self.summary,
            base_ranker=ranker,
            first_stage=stage,
            base_scorer=recipe,
            extra={
                **extra,
                "trained_base_ranker": extra.get("trained_base_ranker", self.base_ranker),
                "trained_first_stage": extra.get("trained_first_stage", self.summary.first_stage),
            },
        )
        other.domains = {}
        return other

    def seen(
        self, dataset: Dataset, calibration_of: str | None = None, every_domain: bool = False
    ) -> set[str]:
        """Questions of ``dataset`` this correction trained or validated on (and, with
        ``calibration_of``, that calibrated that domain; with ``every_domain``, that calibrated
        any domain): :func:`~fincrowd_ltr.model.summary.seen_questions`."""
        return seen_questions(
            self.summary, self._calibrations(calibration_of, every_domain), dataset
        )

    def seen_by_role(self, dataset: Dataset) -> dict[str, set[str]]:
        """The questions of ``dataset`` this model has seen, by role: ``"training"`` (trained or
        validated on) and one ``"calibration:<domain>"`` per calibrated domain."""
        roles = {"training": seen_questions(self.summary, [], dataset)}
        for name, calibration in sorted(self.domains.items()):
            roles[f"calibration:{name}"] = seen_questions(None, [calibration], dataset)
        return roles

    def _calibrations(self, calibration_of: str | None, every_domain: bool) -> list:
        if every_domain:
            return list(self.domains.values())
        return [self.domains[calibration_of]] if calibration_of in self.domains else []

    def __repr__(self) -> str:
        gate = "no gate" if not self.has_gate else f"domains {sorted(self.domains)}"
        where = f" from {self.source}" if self.source else ""
        return f"GatedCorrection(base {self.base_ranker!r}, {gate}{where})"

    # --- files ------------------------------------------------------------------------------
    def save_pretrained(self, directory: str | Path, onnx: bool = False) -> Path:
        """Write config, weights (and with ``onnx`` the ONNX graphs) and a SHA-256 manifest of
        every file into a fresh folder swapped in for ``directory``: no file of an earlier model
        survives there. The ONNX graphs of a model loaded with them are re-exported."""
        if self.residual is None:
            raise DataError("a model loaded for the ONNX runtime cannot be saved; copy its folder")
        with_onnx = onnx or (
            self.source is not None and (Path(self.source) / io.RESIDUAL_ONNX).is_file()
        )
        return io.replace_folder(Path(directory), lambda tmp: self._write(tmp, with_onnx))

    def _write(self, directory: Path, onnx: bool) -> None:
        from safetensors.torch import save_file

        tensors = {k: v.detach().contiguous() for k, v in self.residual.state_dict().items()}
        save_file(tensors, str(directory / io.WEIGHTS))
        if self.gate is not None:
            gate_tensors = {k: v.detach().contiguous() for k, v in self.gate.state_dict().items()}
            save_file(gate_tensors, str(directory / io.GATE_WEIGHTS))
        io.write_json_atomic(directory / io.CONFIG, self.config)
        if onnx:
            from fincrowd_ltr.model.onnx_export import export_onnx

            export_onnx(self.residual, self.gate, directory)

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        base_ranker: str | None = None,
        runtime: str = "torch",
        trust_unverified: bool = False,
    ) -> GatedCorrection:
        """Load a checkpoint; with ``base_ranker``, refuse one fitted for another ranker.
        ``runtime="onnx"`` uses ``residual.onnx``/``gate.onnx`` and imports no torch. Every file
        is checked against the manifest first; a folder without a manifest, or with a file it
        does not list, is refused unless ``trust_unverified`` (a hand-made folder)."""
        directory = Path(directory)
        io.check_manifest(directory, trust_unverified)
        config = io.read_config(directory)
        io.check_ranker(config, base_ranker, directory)
        summary = TrainingSummary.from_dict(
            {**config.get("training", {}), "base_ranker": config["base_ranker"]}
        )
        companies = (config.get("extractor") or {}).get("companies")
        segments = (config.get("extractor") or {}).get("segments")
        domains = io.domains_of(config, directory)
        versions = config.get("feature_versions")
        if runtime == "onnx":
            from fincrowd_ltr.model.runtime import OnnxRuntime

            numerics = OnnxRuntime(directory, config.get("gate") is not None)
            return cls(
                None, None, domains, companies, summary, numerics, directory, segments,
                feature_versions=versions,
            )  # fmt: skip
        if runtime != "torch":
            raise DataError(f"runtime must be 'torch' or 'onnx'; got {runtime!r}")
        from fincrowd_ltr.model.runtime import load_torch

        scorer, gate = load_torch(directory, config)
        return cls(
            scorer, gate, domains, companies, summary, source=directory, segments=segments,
            feature_versions=versions,
        )  # fmt: skip


def save_residual(
    directory: Path,
    scorer,
    ranker: str,
    summary: dict,
    gate=None,
    domains: dict[str, GateCalibration] | None = None,
    companies: dict[str, list[str]] | None = None,
    segments: dict[str, list[str]] | None = None,
) -> None:
    """Write a residual (and its gate with per-domain calibrations) to ``directory``."""
    model = GatedCorrection(
        scorer,
        gate,
        domains,
        companies,
        TrainingSummary.from_dict({**summary, "base_ranker": ranker}),
        segments=segments,
    )
    model.save_pretrained(directory)


class SyntheticDomainWarning(UserWarning):
    """A gate domain calibrated on synthetic questions (a fit on a folder that ``fincrowd
    synthesize`` wrote), used to gate questions."""


def synthetic_domain_note(domain: str) -> str:
    """What a gate calibrated on synthetic questions is good for."""
    return (
        f"the gate's domain {domain!r} is calibrated on synthetic questions, not on yours: it "
        "opens where the templates' questions gain, which says little about your questions "
        "(it may harm them); calibrate a domain of your own on labelled questions of your "
        "corpus (`fincrowd calibrate --domain NAME`, fc.calibrate_domain) and gate with it, or "
        "pass no domain (the always-on correction)"
    )


class UnreadMetadataWarning(UserWarning):
    """A candidate's metadata holds keys that nothing reads (a misspelt key loses its field)."""


def _warn_unread_metadata(items: list[Candidate]) -> None:
    """Warn (``UnreadMetadataWarning``) when candidates' metadata holds keys nothing reads. The
    message names the keys alone, sorted, so Python shows it once per key set and calling line
    (a source's ``"source"`` or ``"page"`` keys on every request are not repeated)."""
    unread = {k for c in items for k in c.metadata if k not in METADATA_FIELDS}
    if unread:
        message = "rerank: candidate " + unread_keys(dict.fromkeys(sorted(unread, key=str)))
        warnings.warn(message, UnreadMetadataWarning, stacklevel=3)
