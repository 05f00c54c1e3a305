"""Every default that more than one layer or command uses, named once (no imports: the command
line reads these before it loads anything heavy)."""

from pathlib import Path

DEFAULT_CACHE = Path(".cache")  # index, embedding, bank and feature cache
DEFAULT_BANK_SIZE = 100  # candidates per bank
BANK_MODES = ("retrieved", "injected")  # what the first stage found / gold injected
DEFAULT_REGRESSION_CAP = 0.03  # largest share of calibration questions the gate may make worse
MIN_CALIBRATION_QUERIES = 10  # fewest labelled calibration questions accepted
