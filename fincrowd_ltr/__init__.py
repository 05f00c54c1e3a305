"""fincrowd_ltr: constraint-aware learning-to-rank for financial retrieval-augmented generation.

The package follows the data flow: ``data`` (schema and loaders) -> ``fields`` (typed financial
field extraction and compatibility) -> ``retrieval`` (first stage, base rankers, candidate banks)
-> ``evaluation`` (metrics, bootstrap intervals, reports) -> ``cli``.
"""

__version__ = "0.1.0"
