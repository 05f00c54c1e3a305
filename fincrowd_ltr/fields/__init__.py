"""Typed financial fields: extraction, compatibility and the hand-labelled audit."""

from fincrowd_ltr.fields.compatibility import Compatibility, compatibility, conflicts
from fincrowd_ltr.fields.extractor import (
    FIELD_NAMES,
    FieldExtractor,
    FinancialFields,
    extract_passages,
)

__all__ = [
    "FIELD_NAMES",
    "Compatibility",
    "FieldExtractor",
    "FinancialFields",
    "compatibility",
    "conflicts",
    "extract_passages",
]
