"""The serving names of :class:`~fincrowd_ltr.model.correction.GatedCorrection`.

``FinCrowdReranker`` is the name serving code used before 0.2.0; it still resolves to
``GatedCorrection`` with a ``DeprecationWarning``.
"""

import warnings

from fincrowd_ltr.model.checkpoint import MANIFEST, file_digest
from fincrowd_ltr.model.correction import GatedCorrection
from fincrowd_ltr.model.requests import METADATA_FIELDS, Candidate, RerankResult

__all__ = [
    "MANIFEST",
    "METADATA_FIELDS",
    "Candidate",
    "GatedCorrection",
    "RerankResult",
    "file_digest",
]


def __getattr__(name: str):
    if name == "FinCrowdReranker":
        warnings.warn(
            "FinCrowdReranker is deprecated: use fincrowd_ltr.GatedCorrection (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return GatedCorrection
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
