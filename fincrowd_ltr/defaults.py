"""Every default that more than one layer or command uses, named once (no imports: the command
line reads these before it loads anything heavy)."""

from pathlib import Path

# synthetic questions ask about table rows whose label the extractor maps to a metric ("known"),
# or about every row with a specific label ("any"; the default since the rule of 2026-12-04)
LINE_ITEMS = ("known", "any")
DEFAULT_LINE_ITEMS = "any"
DEFAULT_CACHE = Path(".cache")  # index, embedding, bank and feature cache
DEFAULT_BANK_SIZE = 100  # candidates per bank
BANK_MODES = ("retrieved", "injected")  # what the first stage found / gold injected
QUESTION_READERS = ("minilm", "static")  # who reads a question for the static scorer
# training banks as deployed (what the first stage found); "injected" was the default before
# the rule of 2026-12-04 (docs/results.md, "Training banks as deployed")
DEFAULT_TRAIN_MODE = "retrieved"
DEFAULT_REGRESSION_CAP = 0.03  # largest share of orderable questions the gate may make worse
DEFAULT_DELTA = 0.1  # the gate's cap holds with probability >= 1 - delta over the calibration draw
GATE_METHODS = ("ltt", "crc", "empirical")  # how the cap is kept (fincrowd_ltr.model.calibration)
MIN_CALIBRATION_QUERIES = 10  # fewest labelled calibration questions accepted
CROSS_ENCODER_NEGATIVES = 7  # hard negatives beside each gold passage in a cross-encoder group
# the residual settings cross-validation selects among (per fold, on validation), the package
# default first (it wins ties): alpha bounds how far a candidate can move, weight decay keeps rare
# binary features from taking large weights. `fit_correction` and `fincrowd fit` both select on
# it unless told otherwise (grid=None / --no-select: the first setting alone)
SELECTION_GRID: tuple[dict, ...] = tuple(
    {"alpha": alpha, "weight_decay": decay}
    for alpha in (1.0, 0.5, 2.0, 4.0)
    for decay in (0.0, 1e-3, 1e-2)
)
# a residual setting ``{AVERAGED: [setting, ...]}`` deploys the average of its parts' residuals
# (``--synthetic-mixing average``: every mixing weight's, each at its own epoch count)
AVERAGED = "averaged"
# the setting keys that pick a fit's synthetic banks (their weight, their draw), not its model
MIXING_KEYS = ("synthetic_weight", "synthetic_draw")
# the cheap ranker that scores synthetic banks when the training ranker embeds with MiniLM
# (thousands of synthetic banks; the residual reads each bank's standardised base scores)
STAND_IN = {"dense": "static", "hybrid": "hybrid-static", "fused": "fused-static-whole"}
# ``--first-stage auto``: the first stage chosen on training folds for each dataset (how and why:
# ``fincrowd_ltr/retrieval/first_stage.py``); other corpora get the fallback
AUTO_FIRST_STAGE = {"financebench": "bm25+query+entity+filing+static=0.25", "tatqa": "bm25"}
AUTO_FALLBACK = "bm25"
# the command line's default for Hugging Face tokenizers' thread pool: off (residual fits run in
# forked workers), on only while a corpus is tokenised in bulk (retrieval.static.bulk_tokenizing)
TOKENIZERS_BULK_ONLY = ("FINCROWD_TOKENIZERS_PARALLELISM", "bulk")
# held-out questions below which a figure says little (fit and evaluate say so)
SMALL_HELD_OUT = 10
