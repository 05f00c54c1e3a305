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
from fincrowd_ltr.synthesis.teaching import (
    TEACHING_QUESTIONS,
    page_table_questions,
    taught,
    writes_teaching_questions,
)

__all__ = [
    "NEGATIVE_TYPES",
    "TEACHING_QUESTIONS",
    "TEMPLATES",
    "PageTable",
    "StatementRow",
    "Synthesis",
    "SyntheticQuestion",
    "named_share_of",
    "page_table_questions",
    "read_table",
    "synthesize",
    "taught",
    "writes_teaching_questions",
]
