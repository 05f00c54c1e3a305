"""Settings objects: one default per setting, shared by Python and the command line; keyword
shortcuts; deprecated names warn."""

import dataclasses

import pytest

from fincrowd_ltr import defaults
from fincrowd_ltr.cli import build_parser
from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.settings import (
    CalibrationSettings,
    FitSettings,
    SyntheticSettings,
    TrainingSettings,
    from_arguments,
)


def test_keyword_shortcuts_land_in_their_group_and_unknown_names_fail():
    s = FitSettings().replace(folds=4, regression_cap=0.02, cache_dir=None, bank_size=50)
    assert s.training.folds == 4 and s.calibration.regression_cap == 0.02
    assert s.data.cache_dir is None and s.banks.bank_size == 50
    assert FitSettings().replace(synthetic=300).synthetic == SyntheticSettings(n=300)
    stand_in = FitSettings(synthetic=SyntheticSettings(n=10, ranker="fused-static", seed=3))
    # a count alone keeps the other synthetic settings (it once rebuilt them from defaults)
    assert stand_in.replace(synthetic=300).synthetic == SyntheticSettings(
        n=300, ranker="fused-static", seed=3
    )
    assert stand_in.replace(synthetic=300, seed=1).synthetic.seed == 1
    assert FitSettings().replace(extra_training=["tatqa"]).training.extra_training == ("tatqa",)
    with pytest.raises(TypeError, match="regresion_cap"):
        FitSettings().replace(regresion_cap=0.02)


@pytest.mark.parametrize(
    "shortcut, said",
    [
        ({"monotone": "no"}, r"TrainingSettings.monotone must be bool; got 'no'"),  # truthy
        ({"folds": "5"}, r"TrainingSettings.folds must be int; got '5'"),
        ({"folds": 2.5}, r"TrainingSettings.folds must be int; got 2.5"),
        ({"bank_size": "100"}, r"BankSettings.bank_size must be int"),
        ({"regression_cap": "0.03"}, r"CalibrationSettings.regression_cap must be float"),
        ({"folds": 0}, r"folds must be >= 1"),
        ({"test_fold": 7}, r"test_fold must be one of the folds 0..4 or None"),
        ({"objective": "lambdamart"}, r"objective must be one of"),
        ({"bank_size": 0}, r"bank_size must be >= 1"),
        ({"train_mode": "retrived"}, r"train_mode must be one of"),
        ({"gate": 1}, r"CalibrationSettings.gate must be bool"),
        ({"synthetic": True}, r"synthetic must be a count of questions"),
        ({"synthetic": "400"}, r"synthetic must be a count of questions"),
    ],
)
def test_a_settings_field_of_the_wrong_type_or_value_is_named_at_once(shortcut, said):
    """The ninth walk: wrong types ran (``monotone="no"`` trained monotone) or failed deep
    inside a fit with Python's own words; bad values failed only when read, after fitting."""
    with pytest.raises(DataError, match=said):
        FitSettings().replace(**shortcut)


def test_the_command_line_defaults_are_the_settings_defaults():
    args = build_parser().parse_args(["fit"])
    parsed = from_arguments(args)
    assert parsed.training == TrainingSettings()
    assert parsed.calibration == CalibrationSettings()
    assert parsed.synthetic == SyntheticSettings()
    assert parsed.banks.bank_size == defaults.DEFAULT_BANK_SIZE
    assert parsed.calibration.regression_cap == defaults.DEFAULT_REGRESSION_CAP
    # every calibration default is also the `calibrate` command's
    cal = build_parser().parse_args(["calibrate", "--checkpoint", "x", "--domain", "d"])
    assert cal.regression_cap == CalibrationSettings().regression_cap
    assert cal.min_calibration == CalibrationSettings().min_calibration
    assert cal.folds == TrainingSettings().folds and cal.seed == TrainingSettings().seed
    assert cal.bank_size == defaults.DEFAULT_BANK_SIZE and cal.gate_method == "ltt"


def test_calibrate_domain_takes_settings_shortcuts_and_its_old_keywords(tmp_path):
    import inspect

    from fincrowd_ltr.api import calibrate_domain
    from fincrowd_ltr.data.schema import DataError

    named = [p for p in inspect.signature(calibrate_domain).parameters.values()
             if p.kind is not inspect.Parameter.VAR_KEYWORD]  # fmt: skip
    assert len(named) <= 10
    with pytest.raises(TypeError, match=r"regresion_cap.*did you mean 'regression_cap'"):
        calibrate_domain(tmp_path, "d", "financebench", regresion_cap=0.02)
    import fincrowd_ltr as fc  # the ninth walk: evaluate listed only the bank settings

    with pytest.raises(TypeError, match=r"\['domian'\] \(did you mean 'domain'\?\).*fallback"):
        fc.evaluate("financebench", "bm25", domian="mine")
    # 0.2.0's size= and method= still mean bank_size and gate_method (then: no checkpoint here)
    with pytest.raises(DataError, match="no residual checkpoint"):
        calibrate_domain(tmp_path, "d", "financebench", size=50, method="crc", folds=3)
    with pytest.raises(DataError, match="no residual checkpoint"):
        calibrate_domain(tmp_path, "d", "financebench", FitSettings().replace(delta=0.2))


def test_command_line_values_reach_the_settings():
    args = build_parser().parse_args(
        ["fit-residual", "--folds", "4", "--monotone", "--no-gate", "--extra-training",
         "tatqa,finqa", "--synthetic", "200", "--synthetic-weights", "0,1",
         "--bank-size", "60", "--test-fold", "1", "--synthetic-named-share", "0.5",
         "--static-questions", "static", "--synthetic-mixing", "average", "--synthetic-draws",
         "2"]
    )  # fmt: skip
    s = from_arguments(args)
    assert s.banks.static_questions == "static"
    evaluated = build_parser().parse_args(["evaluate", "--static-questions", "static"])
    assert evaluated.static_questions == "static"
    assert build_parser().parse_args(["evaluate"]).static_questions is None  # the checkpoint's
    assert s.training.folds == 4 and s.training.monotone and s.training.test_fold == 1
    assert s.training.extra_training == ("tatqa", "finqa")
    assert s.calibration.gate is False and s.banks.bank_size == 60
    assert s.synthetic == SyntheticSettings(
        n=200, select_weights=(0.0, 1.0), named_share=0.5, mixing="average", draws=2
    )
    assert s.synthetic.grid(({},))[2:] == tuple(
        {"synthetic_weight": 1.0, "synthetic_draw": k} for k in (0, 1)
    )


def test_synthetic_banks_are_scored_by_a_static_stand_in_for_minilm_rankers():
    assert SyntheticSettings(n=10).resolved("fused").ranker == "fused-static-whole"
    assert SyntheticSettings(n=10).resolved("dense").ranker == "static"
    assert SyntheticSettings(n=10).resolved("bm25").ranker == "bm25"
    assert SyntheticSettings(n=10, ranker="fused").resolved("fused").ranker == "fused"


def test_settings_are_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainingSettings().folds = 3
    with pytest.raises(ValueError, match="scope"):
        SyntheticSettings(scope="everything")
    with pytest.raises(ValueError, match="gate_calibration"):
        CalibrationSettings(gate_calibration="all")
    with pytest.raises(ValueError, match="nothing to train on"):
        SyntheticSettings(n=10, labelled=False, select_weights=(0.0, 1.0))
    with pytest.raises(ValueError, match="named_share"):
        SyntheticSettings(named_share=-0.1)
    with pytest.raises(ValueError, match="mixing must be one of"):
        SyntheticSettings(mixing="mean")
    with pytest.raises(ValueError, match="give two or more; got \\[0.3\\]"):
        SyntheticSettings(n=10, select_weights=(0.3,), mixing="average")
    with pytest.raises(ValueError, match="more than 1 averages their residuals"):
        SyntheticSettings(n=10, draws=3)
    with pytest.raises(ValueError, match="draws must be >= 1"):
        SyntheticSettings(n=10, draws=0)


def test_draws_cross_the_mixing_weights_and_a_weight_0_part_stands_for_every_draw():
    one = SyntheticSettings(n=10, select_weights=(0.0, 1.0, 1.0))  # one draw: as before
    assert one.grid(({},)) == ({"synthetic_weight": 0.0}, {"synthetic_weight": 1.0})
    with pytest.raises(ValueError, match="give two or more"):  # three copies of one fit
        SyntheticSettings(n=10, select_weights=(0.0,), mixing="average", draws=3)
    drawn = SyntheticSettings(n=10, select_weights=(0.0, 0.3), mixing="average", draws=2)
    assert drawn.total == 20
    assert drawn.grid(({"alpha": 1.0},)) == (
        {"alpha": 1.0, "synthetic_weight": 0.0},
        {"alpha": 1.0, "synthetic_weight": 0.0},
        {"alpha": 1.0, "synthetic_weight": 0.3, "synthetic_draw": 0},
        {"alpha": 1.0, "synthetic_weight": 0.3, "synthetic_draw": 1},
    )
    # synthetic questions only: the draws alone are averaged
    alone = SyntheticSettings(n=10, labelled=False, mixing="average", draws=2)
    assert alone.grid(({},)) == ({"synthetic_draw": 0}, {"synthetic_draw": 1})


def test_the_old_reranker_name_still_works_with_a_warning():
    from fincrowd_ltr.model.correction import GatedCorrection
    from fincrowd_ltr.serving import reranker

    with pytest.warns(DeprecationWarning, match="GatedCorrection"):
        assert reranker.FinCrowdReranker is GatedCorrection


def test_build_banks_takes_a_bank_spec_data_settings_or_their_fields(tmp_path):
    import inspect

    from fincrowd_ltr.api import corpus
    from fincrowd_ltr.retrieval.build import BankSpec

    named = [p for p in inspect.signature(corpus.build_banks).parameters.values()
             if p.kind is not inspect.Parameter.VAR_KEYWORD]  # fmt: skip
    assert len(named) <= 10
    spec = corpus.bank_spec(size=20, stemmer="english", dense_pooling="mean", first_stage="bm25")
    assert spec.size == 20 and spec.bm25.stemmer == "english" and spec.first_stage == "bm25"
    assert spec.dense_policy.pooling == "mean" and spec.dense_policy.window_tokens == 254
    assert corpus.bank_spec().first_stage == "auto"  # the API's default first stage
    assert corpus.bank_spec(BankSpec(size=7), mode="injected") == BankSpec(size=7, mode="injected")
    with pytest.raises(TypeError, match="bank_sise"):
        corpus.bank_spec(bank_sise=3)


def test_cross_encoder_settings_are_the_commands_defaults_and_shortcuts():
    import inspect

    from fincrowd_ltr.api import train_cross_encoder
    from fincrowd_ltr.settings import CrossEncoderSettings

    args = build_parser().parse_args(["train-cross-encoder", "--epochs", "3", "--lr", "0.01"])
    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(CrossEncoderSettings)
              if f.name != "first_stage"}  # fmt: skip
    assert CrossEncoderSettings(**fields) == CrossEncoderSettings(epochs=3, lr=0.01)
    assert CrossEncoderSettings().steps() == {
        "max_epochs": 2, "batch_size": 4, "lr": 1e-3, "max_groups": 120
    }  # fmt: skip
    named = [p for p in inspect.signature(train_cross_encoder).parameters.values()
             if p.kind is not inspect.Parameter.VAR_KEYWORD]  # fmt: skip
    assert len(named) <= 10
    with pytest.raises(TypeError, match="epoch"):
        train_cross_encoder("financebench", epoch=3)
    # a twelfth walk: -1 epochs trained forever, 0 saved an untrained adapter, and the rest
    # failed inside torch with a traceback
    for bad, said in (
        ({"epochs": -1}, r"epochs \(--epochs\) must be >= 1"),
        ({"epochs": 0}, r"epochs \(--epochs\) must be >= 1"),
        ({"max_length": 0}, r"max_length \(--max-length\) must be >= 8"),
        ({"batch_size": 0}, r"batch_size \(--batch-size\)"),
        ({"max_groups": 0}, r"max_groups \(--max-groups\)"),
        ({"lr": -1.0}, r"lr \(--lr\) must be a positive"),
        ({"lr": float("nan")}, r"lr \(--lr\) must be a positive"),
        ({"folds": 1}, r"folds \(--folds\) must be >= 2"),
        ({"depth": 5}, r"depth \(--depth\) must be >= 8 \(a group is 1 \+ 7 candidates\)"),
    ):  # fmt: skip
        with pytest.raises(DataError, match=said):
            CrossEncoderSettings(**bad)
    with pytest.raises(DataError, match="nothing to train: give run_out"):
        train_cross_encoder("financebench")  # neither scores nor an adapter asked for
    # no option is read from its abbreviation (`--run` was read as `--run-out` and overwrote
    # the user's run file with the cross-encoder's scores)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train-cross-encoder", "--run", "mine.trec"])


def test_workflows_refuse_settings_they_do_not_use(tmp_path):
    from fincrowd_ltr.api import calibrate_domain, cascade

    with pytest.raises(TypeError, match="calibrate_domain does not use setting.*train_mode"):
        calibrate_domain(tmp_path, "d", "financebench", train_mode="retrieved")
    with pytest.raises(TypeError, match="not both"):
        calibrate_domain(tmp_path, "d", "financebench", size=50, bank_size=60)
    with pytest.raises(TypeError, match="cascade does not use setting.*bank_size"):
        cascade("financebench", "bm25", bank_size=50)
