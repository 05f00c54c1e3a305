"""The workflows a user calls from Python; the ``fincrowd`` command line is a shell over them."""

from fincrowd_ltr.api.cascade import cascade
from fincrowd_ltr.api.corpus import build_banks, load_dataset
from fincrowd_ltr.api.cross_encoder import train_cross_encoder
from fincrowd_ltr.api.diagnose import diagnose
from fincrowd_ltr.api.evaluate import calibrate_domain, evaluate
from fincrowd_ltr.api.first_stage import first_stage_ablation
from fincrowd_ltr.api.fit import CrossValReport, fit_correction
from fincrowd_ltr.api.nested import nested_cross_validation
from fincrowd_ltr.api.pack import pack
from fincrowd_ltr.api.synthetic import synthesize, write_beir
from fincrowd_ltr.settings import FitSettings, SyntheticSettings

__all__ = [
    "CrossValReport",
    "FitSettings",
    "SyntheticSettings",
    "build_banks",
    "calibrate_domain",
    "cascade",
    "diagnose",
    "evaluate",
    "first_stage_ablation",
    "fit_correction",
    "load_dataset",
    "nested_cross_validation",
    "pack",
    "synthesize",
    "train_cross_encoder",
    "write_beir",
]
