"""Crowding diagnostics: matched-pool stress test, crowded failures, top-k composition."""
