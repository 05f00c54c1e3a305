"""Per-candidate bank features for the residual correction."""

from fincrowd_ltr.features.bank_features import FEATURE_NAMES, BankFeaturizer

__all__ = ["FEATURE_NAMES", "BankFeaturizer"]
