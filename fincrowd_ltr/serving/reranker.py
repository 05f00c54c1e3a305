"""``FinCrowdReranker``: the name serving code has always used for
:class:`~fincrowd_ltr.model.correction.GatedCorrection` (the same class)."""

from fincrowd_ltr.model.checkpoint import MANIFEST, file_digest
from fincrowd_ltr.model.correction import (
    METADATA_FIELDS,
    Candidate,
    GatedCorrection,
    RerankResult,
)

FinCrowdReranker = GatedCorrection

__all__ = [
    "MANIFEST",
    "METADATA_FIELDS",
    "Candidate",
    "FinCrowdReranker",
    "GatedCorrection",
    "RerankResult",
    "file_digest",
]
