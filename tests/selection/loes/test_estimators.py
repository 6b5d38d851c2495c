"""LOESSelector's interface: transform, flat tables, pickle, dtypes, bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from _support.loes import (
    VARIANT_NAMES,
    noise,
    planted,
    to_flat,
)
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline

from skloes import LOESSelector, LOESSelectorCV


# --------------------------------------------------------------------------
# Interface: transform, flat tables, pandas, pickle, dtypes
# --------------------------------------------------------------------------
def test_transform_concatenates_selected_layers_in_index_order():
    stack, y = planted(seed=22)
    sel = LOESSelector(n_layers_to_select=3, random_state=0).fit(stack, y)
    out = sel.transform(stack)
    np.testing.assert_array_equal(
        out, np.hstack([stack[l] for l in sorted(sel.selection_order_)])
    )
    assert sel.get_support(indices=True).tolist() == sorted(sel.selection_order_)
    assert sel.get_support().dtype == bool and sel.get_support().size == 6
    names = sel.get_feature_names_out()
    l0 = sel.selected_layers_[0]
    assert names[0] == f"layer{l0}_0" and names.size == out.shape[1]
    scaled = sel.set_params(fusion_scaling="layer").transform(stack)
    block = scaled[:, :12]
    np.testing.assert_allclose(np.sum(block**2) / block.shape[0], 1.0, rtol=1e-10)


def test_flat_table_matches_stack_and_sets_pandas_output():
    pd = pytest.importorskip("pandas")
    stack, y = planted(seed=23)
    a = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    flat = to_flat(stack)
    b = LOESSelector(n_layers_to_select=2, layer_dim=12, random_state=0).fit(flat, y)
    assert a.selection_order_.tolist() == b.selection_order_.tolist()
    assert (b.layer_dim_, b.n_features_in_, b.n_layers_in_) == (12, 72, 6)
    np.testing.assert_array_equal(a.transform(stack), b.transform(flat))
    out = b.set_output(transform="pandas").transform(flat)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(b.get_feature_names_out())
    frame = b.scores_frame()
    assert len(frame) == 2 * 6 and frame["selected"].sum() == 2
    assert set(frame.columns) >= {
        "step",
        "layer",
        "score",
        "loss",
        "isotropy",
        "redundancy",
        "triangle",
        "ridge_alpha",
        "eligible",
    }


def test_float16_and_float32_inputs_compute_in_float64():
    stack, y = planted(seed=24)
    a = LOESSelector(random_state=0).fit(stack.astype(np.float32), y)
    b = LOESSelector(random_state=0).fit(stack.astype(np.float16), y)
    c = LOESSelector(random_state=0).fit(stack.astype(np.float16).astype(np.float64), y)
    assert a.scores_["score"].dtype == np.float64
    np.testing.assert_array_equal(b.scores_["score"], c.scores_["score"])
    assert b.transform(stack.astype(np.float16)).dtype == np.float16


def test_string_and_integer_labels_give_the_same_selection():
    stack, y = planted(seed=25)
    a = LOESSelector(random_state=0).fit(stack, y)
    b = LOESSelector(random_state=0).fit(stack, np.array(["c0", "c1", "c2", "c3"])[y])
    assert a.selection_order_.tolist() == b.selection_order_.tolist()
    assert b.classes_.tolist() == ["c0", "c1", "c2", "c3"]


def test_regression_and_multioutput_targets():
    stack, _ = planted(seed=26)
    t = stack[3, :, 0] * 2 + 0.1 * np.random.RandomState(0).normal(size=240)
    kw = dict(isotropy_weight=0.0, redundancy_weight=0.0, n_layers_to_select=2)
    sel = LOESSelector(**kw).fit(stack, t)
    assert sel.task_ == "regression" and sel.selection_order_[0] == 3
    assert np.nansum(np.abs(sel.scores_["triangle"])) == 0
    multi = np.c_[t, stack[1, :, 2]]
    sel = LOESSelector(**kw).fit(stack, multi)
    assert set(sel.selection_order_.tolist()) == {1, 3}


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_pickle_round_trip_gives_identical_outputs(variant):
    stack, y = planted(seed=27)
    sel = LOESSelector(variant=variant, random_state=0).fit(stack, y)
    back = pickle.loads(pickle.dumps(sel))
    np.testing.assert_array_equal(back.transform(stack), sel.transform(stack))
    np.testing.assert_array_equal(back.scores_["score"], sel.scores_["score"])
    refit = clone(sel).fit(stack, y)
    assert refit.selection_order_.tolist() == sel.selection_order_.tolist()


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------
def test_non_finite_input_is_rejected():
    stack, y = planted(seed=28)
    bad = stack.copy()
    bad[1, 3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        LOESSelector().fit(bad, y)
    bad[1, 3, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        LOESSelector().fit(bad, y)
    t = stack[0, :, 0].copy()
    t[5] = np.nan
    with pytest.raises(ValueError, match="`y` must be finite"):
        LOESSelector().fit(stack, t)


def test_constant_layer_is_excluded_with_a_warning():
    stack, y = planted(seed=29)
    stack[3] = 1.0
    with pytest.warns(UserWarning, match="degenerate"):
        sel = LOESSelector(n_layers_to_select=5, random_state=0).fit(stack, y)
    assert sel.degenerate_layers_.tolist() == [3]
    assert 3 not in sel.selection_order_
    assert np.isnan(sel.scores_["score"][:, 3]).all()
    with pytest.warns(UserWarning):
        with pytest.raises(ValueError, match="n_layers_to_select"):
            LOESSelector(n_layers_to_select=6).fit(stack, y)


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_fewer_samples_than_dimensions_works(variant):
    stack, y = noise(n=30, n_layers=5, dim=200, seed=30, n_classes=3)
    sel = LOESSelector(variant=variant, random_state=0).fit(stack, y)
    assert sel.n_selected_ == 4
    for key, value in sel.scores_.items():
        if key == "redundancy" and variant == "robust":
            value = value[:1]  # not computed at k >= 1: no weight in the fused score
        if key != "eligible":
            assert np.isfinite(value[sel.scores_["eligible"][: len(value)]]).all(), key


def test_budget_errors():
    stack, y = planted(seed=31)
    with pytest.raises(ValueError, match="n_layers_to_select"):
        LOESSelector(n_layers_to_select=7).fit(stack, y)
    with pytest.raises(ValueError, match="n_layers_to_select"):
        LOESSelector(n_layers_to_select=0).fit(stack, y)
    with pytest.raises(ValueError, match="n_layers_to_select"):
        LOESSelector(n_layers_to_select=6, include_embedding=False).fit(stack, y)


def test_label_errors_and_two_classes():
    stack, y = planted(seed=32)
    with pytest.raises(ValueError, match="two classes"):
        LOESSelector().fit(stack, np.zeros(240, dtype=int))
    two = LOESSelector(random_state=0).fit(stack, y % 2)
    assert two.n_selected_ == 4 and np.nansum(two.scores_["triangle"]) == 0
    with pytest.raises(ValueError, match="samples"):
        LOESSelector().fit(stack, y[:100])
    with pytest.raises(ValueError, match="samples on axis 1"):
        LOESSelector().fit(stack.transpose(1, 0, 2), y)
    with pytest.raises(ValueError, match="`y` is required"):
        LOESSelector(task="classification").fit(stack)
    with pytest.raises(ValueError, match="zero-variance"):
        LOESSelector(task="regression").fit(stack, np.ones(240))
    with pytest.raises(ValueError, match="type_of_target"):
        LOESSelector().fit(stack, np.c_[y, y])


def test_array_rank_and_layout_errors():
    stack, y = planted(seed=33)
    with pytest.raises(ValueError, match="1 dimension"):
        LOESSelector().fit(stack[0, :, 0], y)
    with pytest.raises(ValueError, match="4 dimension"):
        LOESSelector().fit(stack[None], y)
    with pytest.raises(ValueError, match="layer_dim"):
        LOESSelector(layer_dim=5).fit(to_flat(stack), y)
    sel = LOESSelector(n_layers_to_select=2).fit(stack, y)
    with pytest.raises(ValueError, match="layers of width"):
        sel.transform(stack[:5])
    with pytest.raises(ValueError, match="max_samples"):
        LOESSelector(max_samples=0.005).fit(stack, y)


# --------------------------------------------------------------------------
# Integration: real MiniLM features of real Rotten Tomatoes texts
# --------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.torch
def test_minilm_rotten_tomatoes_grid_search_end_to_end(
    minilm_path, rotten_tomatoes_small, tmp_path
):
    from skloes import HiddenStatesTransformer

    texts, labels = rotten_tomatoes_small
    texts, labels = list(texts), np.asarray(labels)
    hst = HiddenStatesTransformer(
        minilm_path, output="flat", max_length=64, cache=str(tmp_path), device="cpu"
    )
    pipe = Pipeline(
        [
            ("hst", hst),
            (
                "loes",
                LOESSelector(layer_dim=384, fusion_scaling="layer", random_state=0),
            ),
            ("clf", LogisticRegression(max_iter=300)),
        ]
    )
    grid = GridSearchCV(
        pipe,
        {"loes__n_layers_to_select": [1, 3], "loes__variant": ["robust", "reference"]},
        cv=StratifiedKFold(3, shuffle=True, random_state=0),
    )
    grid.fit(texts, labels)
    assert grid.best_score_ > 0.6  # sentiment is linearly decodable from MiniLM
    loes = grid.best_estimator_["loes"]
    assert loes.n_layers_in_ == 7 and loes.dim_in_ == 384
    assert loes.task_ == "classification"
    assert set(loes.selected_layers_.tolist()) <= set(range(7))
    # the cached features feed LOESSelectorCV on the same flat table
    flat = hst.fit(texts).transform(texts)
    cv = LOESSelectorCV(
        selector=LOESSelector(layer_dim=384, random_state=0),
        max_layers_to_select=4,
        cv=3,
    ).fit(flat, labels)
    assert 1 <= cv.n_layers_to_select_ <= 4
    assert np.all(cv.cv_results_["mean_test_score"] > 0.55)
    scores = cv.scores_frame()
    assert np.isfinite(scores.loc[scores.eligible, "score"]).all()
