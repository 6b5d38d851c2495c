"""The public API: one home per family, renamed names that keep working, a
changelog that moves with the version."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

import skloes
from skloes import heads, selection
from skloes.metrics._registry import METRICS, label_free_metrics
from skloes.report import LayerReport
from skloes.selection import (
    ExhaustiveSubsetSelector,
    GreedyForwardSelector,
    LastKSelector,
    LOESSelector,
    LOESSelectorCV,
    MetricTopKSelector,
    RandomKSelector,
    RidgeProbeClassifier,
    RidgeProbeRegressor,
)

ROOT = Path(__file__).resolve().parents[1]


def _stack(seed=0, n=60, L=5, d=6):
    rng = np.random.RandomState(seed)
    y = np.arange(n) % 3
    H = rng.normal(size=(L, n, d))
    H[3] += 2.0 * np.eye(d)[y]
    return H, y


# ------------------------------------------------------------------ homes
def test_top_level_names_are_their_homes_objects():
    for name, home in skloes._SHORTCUTS.items():
        module = __import__(home, fromlist=[name])
        assert getattr(skloes, name) is getattr(module, name)
    for family in (
        "extraction",
        "selection",
        "heads",
        "metrics",
        "report",
        "datasets",
        "plotting",
        "probe",
    ):
        assert family in skloes.__all__


def test_each_public_class_has_one_home():
    homes = {}
    for family in ("extraction", "selection", "heads", "metrics", "report", "probe"):
        module = getattr(skloes, family)
        for name in module.__all__:
            homes.setdefault(name, []).append(family)
    assert all(len(where) == 1 for where in homes.values()), homes


def test_baselines_is_a_deprecated_alias_naming_the_new_home():
    import skloes.baselines as baselines

    with pytest.warns(
        FutureWarning, match="import LastKSelector from skloes.selection"
    ):
        assert baselines.LastKSelector is selection.LastKSelector
    with pytest.warns(FutureWarning, match="skloes.heads"):
        assert baselines.ScalarMixClassifier is heads.ScalarMixClassifier
    with pytest.raises(AttributeError):
        baselines.LOESSelector  # noqa: B018 - never was a baseline


# -------------------------------------------------------- renamed params
RENAMED = [
    (LastKSelector, "k", "n_layers_to_select", 2),
    (RandomKSelector, "k", "n_layers_to_select", 2),
    (MetricTopKSelector, "k", "n_layers_to_select", 2),
    (GreedyForwardSelector, "k", "n_layers_to_select", 2),
    (ExhaustiveSubsetSelector, "k", "n_layers_to_select", 2),
    (LOESSelector, "alpha", "isotropy_weight", 0.5),
    (LOESSelector, "gamma", "redundancy_weight", 0.2),
    (LOESSelector, "eta", "volume_weight", 0.0),
    (RidgeProbeClassifier, "alpha", "ridge_alpha", 3.0),
]


def _fitted_state(est):
    keep = (
        "selection_order_",
        "support_",
        "scores_",
        "coef_",
        "ridge_alpha_",
        "components_",
    )
    return {k: v for k, v in vars(est).items() if k in keep}


@pytest.mark.parametrize(
    ("cls", "old", "new", "value"),
    RENAMED,
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_a_former_name_warns_naming_the_new_one_and_acts_as_it(cls, old, new, value):
    H, y = _stack()
    X = H if cls is not RidgeProbeClassifier else H[3]
    extra = {"random_state": 0} if "random_state" in cls().get_params() else {}
    with pytest.warns(FutureWarning, match=rf"`{old}` was renamed `{new}`"):
        via_old = cls(**{old: value}, **extra).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        via_new = cls(**{new: value}, **extra).fit(X, y)
    assert via_old.get_params()[old] == value  # the user's parameters stay
    assert via_old.get_params()[new] == cls().get_params()[new]
    a, b = _fitted_state(via_old), _fitted_state(via_new)
    assert a.keys() == b.keys() and a
    for key in a:
        if isinstance(a[key], dict):
            assert a[key].keys() == b[key].keys()
            for k in a[key]:
                np.testing.assert_array_equal(a[key][k], b[key][k])
        else:
            np.testing.assert_array_equal(a[key], b[key])
    clone(via_old)  # the former name survives cloning (GridSearchCV)


def test_a_former_name_with_its_new_name_is_an_error():
    H, y = _stack()
    with pytest.raises(ValueError, match=r"set `n_layers_to_select` only; `k`"):
        LastKSelector(k=2, n_layers_to_select=3).fit(H, y)


def test_loes_cv_passes_the_resolved_weights_to_its_selector():
    H, y = _stack()
    with pytest.warns(FutureWarning, match="`alpha` was renamed"):
        cv = LOESSelectorCV(
            selector=LOESSelector(alpha=0.5, random_state=0),
            max_layers_to_select=2,
            cv=2,
        ).fit(H, y)
    assert cv.components_["isotropy_weight"] == 0.5


def test_ridge_probe_alpha_attribute_warns_and_reads_ridge_alpha():
    H, y = _stack()
    for cls, target in ((RidgeProbeClassifier, y), (RidgeProbeRegressor, H[3, :, 0])):
        probe = cls().fit(H[3], target)
        with pytest.warns(FutureWarning, match="`alpha_` was renamed `ridge_alpha_`"):
            assert probe.alpha_ == probe.ridge_alpha_
        assert not hasattr(cls(), "alpha_")


def test_report_progress_is_verbose():
    H, y = _stack()
    with pytest.warns(FutureWarning, match="`progress` was renamed `verbose`"):
        report = LayerReport(
            progress=False, cv=2, n_layers_to_select=2, baselines=()
        ).fit(H, y)
    assert report.get_params()["verbose"] == 0


def test_report_alpha_is_entropy_order_until_0_5():
    H, y = _stack()
    kw = dict(cv=2, n_layers_to_select=2, baselines=(), metrics=("dataset_entropy",))
    with pytest.warns(
        FutureWarning,
        match="`alpha` was renamed `entropy_order` in 0.3 and will be removed in 0.5",
    ):
        old = LayerReport(alpha=2.0, **kw).fit(H, y)
    new = LayerReport(entropy_order=2.0, **kw).fit(H, y)
    default = LayerReport(**kw).fit(H, y)
    entropy = new.metrics_["dataset_entropy"]
    np.testing.assert_array_equal(old.metrics_["dataset_entropy"], entropy)
    assert not np.allclose(default.metrics_["dataset_entropy"], entropy)
    assert old.get_params()["entropy_order"] == 1.0  # the parameters are unchanged
    with pytest.raises(ValueError, match="set `entropy_order` only"):
        LayerReport(alpha=2.0, entropy_order=3.0, **kw).fit(H, y)


def test_cli_k_is_n_layers_to_select_with_a_warning():
    from skloes.cli._args import build_parser
    from skloes.cli._main import _honour_renamed_options

    args = build_parser().parse_args(["probe", "--k", "3"])
    with pytest.warns(FutureWarning, match="`--k` was renamed `--n-layers-to-select`"):
        _honour_renamed_options(args)
    assert args.n_layers_to_select == 3
    args = build_parser().parse_args(["probe", "--n-layers-to-select", "2"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _honour_renamed_options(args)
    assert args.n_layers_to_select == 2


# ----------------------------------------------------------- one registry
def test_report_and_metric_top_k_read_one_metric_registry():
    from skloes.report._report_inputs import DATASET_METRICS

    assert set(DATASET_METRICS) == set(METRICS)
    top_k = MetricTopKSelector._parameter_constraints["metric"][0]
    assert set(top_k.options) == {*label_free_metrics(), "layer_scores"}
    assert "simplex_volume" not in label_free_metrics()


def test_metric_aliases_give_the_same_values():
    H, _ = _stack()
    a = MetricTopKSelector(metric="effective_rank", n_layers_to_select=2).fit(H)
    b = MetricTopKSelector(metric="erank_sigma", n_layers_to_select=2).fit(H)
    np.testing.assert_array_equal(a.metric_scores_, b.metric_scores_)


def test_metric_params_a_metric_does_not_take_are_an_error():
    H, _ = _stack()
    with pytest.raises(TypeError, match="no_such_option"):
        MetricTopKSelector(
            metric="isotropy", metric_params={"no_such_option": 1}, n_layers_to_select=2
        ).fit(H)


# -------------------------------------------------------------- changelog
def test_the_changelog_leads_with_this_version():
    text = (ROOT / "doc" / "whats_new.rst").read_text(encoding="utf-8")
    first = re.search(r"^Version (\S+) ", text, re.M)
    assert first and first.group(1) == skloes.__version__


def test_no_spec_section_signs_in_docs_or_tests():
    found = [
        str(p.relative_to(ROOT))
        for folder in ("doc", "tests")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in {".py", ".rst", ".md", ".txt"}
        and not {"_build", "auto_examples", "gen_modules"} & set(p.parts)
        and "\u00a7" in p.read_text(encoding="utf-8")
    ]
    assert not found, found
