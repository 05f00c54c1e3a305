"""Label-free training questions written from a corpus's own statement rows and sentences."""

from fincrowd_ltr.synthesis.questions import (
    NEGATIVE_TYPES,
    TEMPLATES,
    Synthesis,
    SyntheticQuestion,
    named_share_of,
    synthesize,
)
from fincrowd_ltr.synthesis.tables import PageTable, StatementRow, read_table

__all__ = [
    "NEGATIVE_TYPES",
    "TEMPLATES",
    "PageTable",
    "StatementRow",
    "Synthesis",
    "SyntheticQuestion",
    "named_share_of",
    "read_table",
    "synthesize",
]
