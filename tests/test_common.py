"""scikit-learn's estimator checks on every public estimator of skloes.

:func:`public_estimators` finds every estimator class that a public home of
skloes exports (the ``__all__`` of each subpackage in ``skloes._SUBPACKAGES``).
Each must be listed below: an estimator of numeric tables runs all of
scikit-learn's checks on each of its instances (every expected failure has a
reason); an estimator of raw inputs (texts) runs the API checks, and the
checks that feed it a numeric table must fail with a clear ``TypeError``.
:func:`test_every_public_estimator_is_checked` fails for an estimator that is
listed nowhere, so a new one cannot skip the checks.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

import skloes
from skloes.heads import (
    GeoRegClassifier,
    GeoRegFineTuner,
    ScalarMixClassifier,
    ScalarMixRegressor,
)
from skloes.probe import (
    LayerEnsembleClassifier,
    LayerEnsembleRegressor,
    LayerProbeClassifier,
    LayerProbeRegressor,
    LayerTextEncoder,
    SelectedLayerConcatenation,
)
from skloes.report import LayerReport
from skloes.scale import StreamingLogisticRegression, StreamingRidgeClassifier
from skloes.selection import LastKSelector, LOESSelector, LOESSelectorCV

pytest.importorskip("torch")
from skloes.extraction import HiddenStatesTransformer  # noqa: E402


def public_estimators():
    """Every estimator class exported by a public home of skloes."""
    found = set()
    for name in skloes._SUBPACKAGES:
        module = importlib.import_module(f"skloes.{name}")
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
                found.add(obj)
    return found


# --------------------------------------------------------------------------
# Estimators of numeric tables: every check, on cheap instances
# --------------------------------------------------------------------------
# A default instance must be valid on any input the checks feed (plain
# feature tables, each column its own block): budgets default to "auto".
NUMERIC_INSTANCES = [
    *[getattr(skloes.selection, name)() for name in skloes.selection.__all__],
    *[
        cls()
        for cls in (
            LayerReport,
            ScalarMixClassifier,
            ScalarMixRegressor,
            GeoRegClassifier,
            LayerEnsembleClassifier,
            LayerEnsembleRegressor,
            StreamingRidgeClassifier,
            StreamingLogisticRegression,
        )
    ],
    LayerEnsembleClassifier(combine="stack", cv=3, random_state=0),
    LayerEnsembleRegressor(combine="stack", cv=3, random_state=0),
    StreamingRidgeClassifier(batch_size=7),  # many batches on the checks' data
    StreamingLogisticRegression(C=0.01, batch_size=7),
    LOESSelector(n_layers_to_select=1),
    LOESSelector(n_layers_to_select=2, variant="reference"),
    LOESSelectorCV(max_layers_to_select=2, cv=3),
    LOESSelectorCV(selector=LOESSelector(variant="reference"), cv=3),
    ScalarMixClassifier(max_epochs=1, batch_size=64),
    ScalarMixRegressor(max_epochs=1, batch_size=64),
    GeoRegClassifier(proj_dim=4, max_epochs=2, lr=1e-2, batch_size=64, random_state=0),
]

_TORCH_PROBE = (
    "a torch probe behind a LayerNorm (one epoch, or the default 15) does not "
    "reach the score threshold on 2-feature blobs; learning is tested in "
    "tests/heads"
)


def _expected_failed_checks(estimator):
    if isinstance(estimator, (ScalarMixClassifier, ScalarMixRegressor)):
        return {
            "check_classifiers_train": _TORCH_PROBE,
            "check_regressors_train": _TORCH_PROBE,
        }
    return {}


@parametrize_with_checks(
    NUMERIC_INSTANCES, expected_failed_checks=_expected_failed_checks
)
def test_numeric_estimator_passes_the_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # degenerate-layer notices
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


# --------------------------------------------------------------------------
# Estimators of raw inputs (texts): the API checks, and a clear TypeError
# --------------------------------------------------------------------------
API_CHECKS = [
    "check_estimator_cloneable",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_estimators_unfitted",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_mixin_order",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
]
# Checks that fit a 2-D float array: the input of these estimators is raw
# text, so fit raises a clear TypeError; the behaviour each check guards (fit
# returns self, idempotence, order and subset invariance, no parameter
# overwritten) is tested by hand next to each estimator's tests.
NUMERIC_CHECKS = [
    "check_fit_score_takes_y",
    "check_estimators_overwrite_params",
    "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self",
    "check_readonly_memmap_input",
    "check_fit_idempotent",
    "check_methods_sample_order_invariance",
    "check_methods_subset_invariance",
]
TEXT_ESTIMATORS = {
    HiddenStatesTransformer: lambda model: HiddenStatesTransformer(model),
    LayerProbeClassifier: lambda model: LayerProbeClassifier(model),
    LayerProbeRegressor: lambda model: LayerProbeRegressor(model),
    GeoRegFineTuner: lambda model: GeoRegFineTuner(model, max_epochs=1),
    LayerTextEncoder: lambda model: LayerTextEncoder(model),
}
# Beyond the common API checks, per estimator.
EXTRA_API_CHECKS = {
    HiddenStatesTransformer: ["check_n_features_in_after_fitting"],
    LayerTextEncoder: [
        "check_n_features_in_after_fitting",
        "check_transformers_unfitted",
        "check_transformer_n_iter",
    ],
}


def _text_cases(checks):
    return [
        pytest.param(cls, check, id=f"{cls.__name__}-{check}")
        for cls in TEXT_ESTIMATORS
        for check in checks(cls)
    ]


@pytest.mark.parametrize(
    "cls, check", _text_cases(lambda cls: API_CHECKS + EXTRA_API_CHECKS.get(cls, []))
)
def test_text_estimator_passes_the_api_checks(deep_tiny, cls, check):
    getattr(estimator_checks, check)(cls.__name__, TEXT_ESTIMATORS[cls](deep_tiny))


@pytest.mark.parametrize("cls, check", _text_cases(lambda cls: NUMERIC_CHECKS))
def test_text_estimator_refuses_numeric_tables_clearly(deep_tiny, cls, check):
    with pytest.raises(TypeError, match=r"`X` must hold (strings|raw inputs)"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            getattr(estimator_checks, check)(
                cls.__name__, TEXT_ESTIMATORS[cls](deep_tiny)
            )


# SelectedLayerConcatenation takes a fitted selector and layer stacks (3-D): the
# API checks apply; the checks that fit it on 2-D float tables do not (a plain
# table is not a stack of the selector's layers), and its transform is tested
# against the selector's in tests/probe.
@pytest.mark.parametrize("check", API_CHECKS)
def test_selected_layer_concatenation_passes_the_api_checks(check):
    stack = np.random.RandomState(0).normal(size=(4, 20, 3))
    selector = LastKSelector(n_layers_to_select=2).fit(stack)
    getattr(estimator_checks, check)(
        "SelectedLayerConcatenation", SelectedLayerConcatenation(selector)
    )


def test_every_public_estimator_is_checked():
    checked = {type(est) for est in NUMERIC_INSTANCES}
    checked |= set(TEXT_ESTIMATORS) | {SelectedLayerConcatenation}
    missing = sorted(cls.__name__ for cls in public_estimators() - checked)
    assert not missing, f"public estimators without estimator checks: {missing}"
    assert public_estimators() >= checked  # every listed class is public
