"""Serving the correction: the reranking API (and, later, export and HTTP)."""
