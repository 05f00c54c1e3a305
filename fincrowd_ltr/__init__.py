"""fincrowd_ltr: constraint-aware learning-to-rank for financial retrieval-augmented generation.

The public API (imported lazily, so ``import fincrowd_ltr`` and ``fincrowd --help`` are instant)::

    import fincrowd_ltr as fc
    model, report = fc.fit_correction("financebench", "dense")      # cross-validate and fit
    model.save_pretrained("checkpoints/mine")
    model = fc.GatedCorrection.from_pretrained("checkpoints/mine")
    result = model.rerank(question, candidates, base_scores, domain="financebench")

Layers, each importing only from those before it: ``data``/``metrics``/``defaults`` ->
``settings`` -> ``engine`` -> ``fields`` ->
``retrieval`` -> ``features`` -> ``model``/``packing``/``synthesis`` ->
``training``/``diagnostics`` -> ``evaluation``/``crossencoder`` -> ``serving`` -> ``api`` ->
``cli`` (``tests/api/test_layers.py``).
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

_EXPORTS = {
    "load_dataset": "fincrowd_ltr.api.corpus",
    "build_banks": "fincrowd_ltr.api.corpus",
    "load_encoder": "fincrowd_ltr.api.corpus",
    "index_corpus": "fincrowd_ltr.api.corpus",
    "ShardedBM25": "fincrowd_ltr.retrieval.sharded",
    "PageStore": "fincrowd_ltr.data.store",
    "StaticModel": "fincrowd_ltr.retrieval.static",
    "distill_static": "fincrowd_ltr.retrieval.static",
    "fit_correction": "fincrowd_ltr.api.fit",
    "CrossValReport": "fincrowd_ltr.api.fit",
    "calibrate_domain": "fincrowd_ltr.api.evaluate",
    "evaluate": "fincrowd_ltr.api.evaluate",
    "diagnose": "fincrowd_ltr.api.diagnose",
    "pack": "fincrowd_ltr.api.pack",
    "cascade": "fincrowd_ltr.api.cascade",
    "first_stage_ablation": "fincrowd_ltr.api.first_stage",
    "nested_cross_validation": "fincrowd_ltr.api.nested",
    "train_cross_encoder": "fincrowd_ltr.api.cross_encoder",
    "synthesize": "fincrowd_ltr.api.synthetic",
    "write_beir": "fincrowd_ltr.api.synthetic",
    "SyntheticSettings": "fincrowd_ltr.settings",
    "FitSettings": "fincrowd_ltr.settings",
    "DataSettings": "fincrowd_ltr.settings",
    "EvaluationSettings": "fincrowd_ltr.settings",
    "CrossEncoderSettings": "fincrowd_ltr.settings",
    "BankSpec": "fincrowd_ltr.retrieval.build",
    "GatedCorrection": "fincrowd_ltr.model.correction",
    "Candidate": "fincrowd_ltr.model.requests",
    "RerankResult": "fincrowd_ltr.model.requests",
    "TrainingSummary": "fincrowd_ltr.model.summary",
    "Dataset": "fincrowd_ltr.data.schema",
    "Passage": "fincrowd_ltr.data.schema",
    "Query": "fincrowd_ltr.data.schema",
    "DataError": "fincrowd_ltr.data.schema",
    "BankSet": "fincrowd_ltr.retrieval.banks",
    "CandidateBank": "fincrowd_ltr.retrieval.banks",
    "FoldPlan": "fincrowd_ltr.data.splits",
    "Report": "fincrowd_ltr.evaluation.results",
    "SystemResult": "fincrowd_ltr.evaluation.results",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fincrowd_ltr' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*(g for g in globals() if g.startswith("__")), *_EXPORTS])


__all__ = sorted(_EXPORTS)
