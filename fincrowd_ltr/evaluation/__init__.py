"""Metrics, bootstrap intervals and evaluation reports."""
