"""The greedy path: selection properties, the frozen original, the layer forms."""

from __future__ import annotations

import numpy as np
import pytest
from _support.loes import (
    VARIANT_NAMES,
    noise,
    oracle,
    oracle_config,
    planted,
    residual_stream,
    to_flat,
)

from skloes import LOESSelector
from skloes.selection._loes._config import LOESConfig
from skloes.selection._loes._path import PreparedPath


# --------------------------------------------------------------------------
# Selection properties (7-13)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_permuting_samples_leaves_selection_unchanged(variant):
    stack, y = planted(seed=9)
    perm = np.random.RandomState(0).permutation(stack.shape[1])
    kw = dict(variant=variant, max_samples=None, random_state=0)
    a = LOESSelector(**kw).fit(stack, y)
    b = LOESSelector(**kw).fit(stack[:, perm], y[perm])
    assert a.selection_order_.tolist() == b.selection_order_.tolist()
    for key in a.scores_:
        np.testing.assert_allclose(
            a.scores_[key].astype(float),
            b.scores_[key].astype(float),
            atol=1e-8,
            rtol=0,
        )


def test_robust_selection_is_invariant_to_layer_rescaling():
    stack, y = planted(seed=10)
    a = LOESSelector(random_state=0).fit(stack, y)
    for layer, c in [
        (a.selection_order_[1], 1e-4),
        (a.selection_order_[0], 1e4),
        (0, 3.0),
    ]:
        scaled = stack.copy()
        scaled[layer] *= c
        b = LOESSelector(random_state=0).fit(scaled, y)
        assert b.selection_order_.tolist() == a.selection_order_.tolist()


@pytest.mark.parametrize("variant", VARIANT_NAMES)
@pytest.mark.parametrize("gamma", [0.0, 0.5, 5.0])
@pytest.mark.parametrize("c", [1.0, -2.5])
def test_duplicate_layer_is_never_selected_twice(variant, gamma, c):
    stack, y = planted(seed=11)
    first = (
        LOESSelector(variant=variant, n_layers_to_select=1, random_state=0)
        .fit(stack, y)
        .selection_order_[0]
    )
    dup = np.concatenate([stack, c * stack[first][None]], axis=0)
    sel = LOESSelector(
        variant=variant, redundancy_weight=gamma, n_layers_to_select=6, random_state=0
    ).fit(dup, y)
    chosen = set(sel.selection_order_.tolist())
    assert not {first, dup.shape[0] - 1} <= chosen
    assert not sel.scores_["eligible"][1:, [first, dup.shape[0] - 1]].all()


def test_duplicate_without_guard_gets_maximal_redundancy():
    stack, y = planted(seed=12)
    kw = dict(
        isotropy_weight=0.0, redundancy_weight=0.0, volume_weight=0.0, random_state=0
    )
    first = LOESSelector(n_layers_to_select=1, **kw).fit(stack, y).selection_order_[0]
    dup = np.concatenate([stack, 3.0 * stack[first][None]], axis=0)
    sel = LOESSelector(
        exclude_duplicates=False, n_layers_to_select=2, objective="residual", **kw
    ).fit(dup, y)
    assert sel.selection_order_[0] == first  # ties go to the smaller index
    red = sel.scores_["redundancy"][1]
    assert red[6] == pytest.approx(1.0, abs=1e-12)
    assert red[6] == np.nanmax(red)
    assert sel.scores_["eligible"][1, 6]


@pytest.mark.parametrize("variant", VARIANT_NAMES)
@pytest.mark.parametrize("update", ["stagewise", "refit"])
def test_paths_are_nested(variant, update):
    stack, y = planted(n=150, n_layers=8, seed=13)
    kw = dict(variant=variant, update=update, random_state=0)
    full = LOESSelector(n_layers_to_select=6, **kw).fit(stack, y)
    for k in (1, 3, 5):
        short = LOESSelector(n_layers_to_select=k, **kw).fit(stack, y)
        assert short.selection_order_.tolist() == full.selection_order_[:k].tolist()
        # exact: the first k steps are the same arithmetic on the same arrays
        np.testing.assert_array_equal(short.scores_["score"], full.scores_["score"][:k])


def test_planted_layers_are_picked_first():
    stack, y = planted(n=400, n_layers=7, informative=(5, 2), seed=14)
    sel = LOESSelector(
        isotropy_weight=0.0, redundancy_weight=0.0, volume_weight=0.0, random_state=0
    ).fit(stack, y)
    assert set(sel.selection_order_[:2].tolist()) == {2, 5}


def test_planted_informative_layer_is_selected_first_with_defaults():
    rng = np.random.RandomState(15)
    y = rng.randint(0, 3, size=300)
    stack = rng.normal(size=(9, 300, 16))
    stack[6, :, :3] += 1.5 * np.eye(3)[y]
    for variant in VARIANT_NAMES:
        sel = LOESSelector(variant=variant, n_layers_to_select=2, random_state=0)
        if variant == "reference":  # isotropy dominates: α=1 is not label-driven
            sel.set_params(isotropy_weight=0.0)
        assert sel.fit(stack, y).selection_order_[0] == 6


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_stagewise_residual_is_centred_and_sums_the_recorded_fits(variant):
    stack, y = planted(seed=16)
    sel = LOESSelector(variant=variant, max_samples=150, random_state=0).fit(stack, y)
    Y = (y[sel.calibration_indices_][:, None] == sel.classes_[None, :]).astype(float)
    Y_hat = np.tile(Y.mean(axis=0), (Y.shape[0], 1))
    for fit in sel.step_fits_:
        Y_hat = Y_hat + fit
        assert np.abs((Y - Y_hat).mean(axis=0)).max() < 1e-12
    np.testing.assert_allclose(sel.residual_, Y - Y_hat, atol=1e-12)


def test_label_free_ignores_y_and_scores_only_isotropy_and_redundancy():
    stack, y = planted(seed=17)
    a = LOESSelector(random_state=0).fit(stack)
    b = LOESSelector(task="label_free", random_state=0).fit(stack, y)
    c = LOESSelector(task="label_free", random_state=0).fit(stack, y[::-1])
    assert a.task_ == "label_free"
    assert (
        a.selection_order_.tolist()
        == b.selection_order_.tolist()
        == c.selection_order_.tolist()
    )
    assert a.selection_order_[0] == np.nanargmax(a.isotropy_)
    s = a.scores_
    ok = ~np.isnan(s["score"])
    np.testing.assert_array_equal(s["loss"][ok], 0.0)
    np.testing.assert_array_equal(s["triangle"][ok], 0.0)
    np.testing.assert_allclose(
        s["score"][ok], (0.1 * (1 - s["isotropy"]) + 0.5 * s["redundancy"])[ok]
    )
    assert a.step_fits_ is None
    flat = LOESSelector(layer_dim=12, random_state=0).fit(to_flat(stack))
    assert flat.selection_order_.tolist() == a.selection_order_.tolist()


def test_equal_random_state_gives_identical_results():
    stack, y = noise(n=500, n_layers=5, dim=10, n_classes=40, seed=18)
    for variant in VARIANT_NAMES:
        kw = dict(variant=variant, max_samples=0.5, random_state=3)
        a, b = LOESSelector(**kw).fit(stack, y), LOESSelector(**kw).fit(stack, y)
        assert a.selection_order_.tolist() == b.selection_order_.tolist()
        np.testing.assert_array_equal(a.calibration_indices_, b.calibration_indices_)
        np.testing.assert_array_equal(a.triplets_, b.triplets_)
        c = LOESSelector(**{**kw, "random_state": 4}).fit(stack, y)
        assert not np.array_equal(a.calibration_indices_, c.calibration_indices_)


def test_calibration_subsample_is_stratified_and_sized():
    stack, y = planted(n=300, seed=19)
    sel = LOESSelector(max_samples=100, random_state=0).fit(stack, y)
    idx = sel.calibration_indices_
    assert idx.size == 100 and np.all(np.diff(idx) > 0)
    full = np.bincount(y) / y.size
    np.testing.assert_allclose(np.bincount(y[idx]) / 100, full, atol=0.02)
    assert LOESSelector(max_samples=0.25).fit(stack, y).calibration_indices_.size == 75
    big = LOESSelector(max_samples=10_000).fit(stack, y)  # larger than n: all rows
    assert big.calibration_indices_.size == 300


def test_relative_loss_normalisation_divides_by_the_residual_loss():
    stack, y = planted(seed=20)
    kw = dict(
        isotropy_weight=0.0, redundancy_weight=0.0, volume_weight=0.0, random_state=0
    )
    a = LOESSelector(**kw).fit(stack, y)
    b = LOESSelector(loss_normalization="relative", **kw).fit(stack, y)
    # same picks (a common positive factor per step), loss rescaled at k >= 1
    assert a.selection_order_.tolist() == b.selection_order_.tolist()
    np.testing.assert_allclose(a.scores_["loss"][0], b.scores_["loss"][0])
    ratio = b.scores_["loss"][1:] / a.scores_["loss"][1:]
    for row in ratio:
        row = row[~np.isnan(row)]
        assert np.ptp(row) < 1e-9 and row[0] > 1.0


def test_include_embedding_false_never_offers_layer_0():
    stack, y = planted(seed=21)
    stack[0] = 5 * np.random.RandomState(0).normal(size=stack[0].shape)
    sel = LOESSelector(include_embedding=False, n_layers_to_select=5, random_state=0)
    sel.fit(stack, y)
    assert 0 not in sel.selection_order_
    assert np.isnan(sel.scores_["score"][:, 0]).all() and np.isnan(sel.isotropy_[0])


# --------------------------------------------------------------------------
# The optimised path against a frozen copy of the original (_support/loes_oracle.py)
# --------------------------------------------------------------------------
# The robust variant as it was (before its step scored the fused selection) is
# ``objective="residual"``; the oracle is that original arithmetic.
_ORIGINAL = {"reference": {}, "robust": {"objective": "residual"}}
_ORACLE_CASES = [
    *[
        ("cls", dict(variant=v, update=u, loss_normalization=norm, **_ORIGINAL[v]), 5)
        for v in VARIANT_NAMES
        for u in ("stagewise", "refit")
        for norm in ("none", "relative")
    ],
    *[
        (kind, dict(variant=v, **_ORIGINAL[v]), 4)
        for v in VARIANT_NAMES
        for kind in ("wide", "regression", "label_free", "binary")
    ],
]


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("kind, params, K", _ORACLE_CASES)
def test_path_equals_the_frozen_original(kind, params, K, form=None):
    stack, y = residual_stream(seed=len(kind))
    task = "classification"
    if kind == "wide":  # fewer rows than dimensions: the n×n Gram route
        # Not seed 1: there a robust step's residual Gram had a round-off
        # eigenvalue at the rank rule's cut-off, kept or dropped by the BLAS
        # kernel (AVX2 vs AVX-512), which moved one GCV λ by 3.4 % (its grid
        # scales with the mean kept eigenvalue) and a score by 6e-6. Seed 3
        # keeps its margin on every OpenBLAS core type (OPENBLAS_CORETYPE).
        stack, y = residual_stream(n=60, n_layers=5, dim=80, n_classes=4, seed=3)
    elif kind == "regression":
        task = "regression"
        y = stack[3, :, :2] + np.random.RandomState(2).normal(size=(200, 2))
    elif kind == "label_free":
        task, y = "label_free", None
    elif kind == "binary":
        y = y % 2
    cfg = LOESConfig.resolve(LOESSelector(**params).get_params(), task)
    path = PreparedPath(stack, y, cfg, 0, "t", form=form)
    got = path.run(K)
    want = oracle()._loes_path(stack, y, K, oracle_config(cfg), 0, "t")
    assert got.selection_order.tolist() == want["selection_order_"].tolist()
    # float64 throughout: 1e-8 is far above its rounding (differences of
    # 1e-15 to 4e-11 here on any CPU); a discrete choice gone another way
    # (a rank, a GCV λ) is not, and fails
    for key, value in want["scores_"].items():
        np.testing.assert_allclose(
            got.scores[key], value, rtol=0, atol=1e-8, err_msg=key
        )
    for mine, theirs in (
        (got.step_fits, want["step_fits_"]),
        (got.residual, want["residual_"]),
    ):
        if theirs is None:
            assert mine is None
        else:
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-8)


@pytest.mark.parametrize("form", ["eigen", "singular vectors"])
def test_reference_projection_forms_equal_the_frozen_original(form, monkeypatch):
    """The reference ridge projection without its Cholesky certificate (the
    eigen forms of the factor rows) and without factor rows (the layers'
    singular vectors) gives the original's selections and scores too."""
    from skloes.selection._loes import _span

    layer_form = None
    if form == "eigen":  # a failed certificate sends every step to the eigen forms
        monkeypatch.setattr(_span, "_certified", lambda *args: False)
    else:
        layer_form = "svd"
    for kind, params, K in _ORACLE_CASES:
        if params["variant"] == "reference":
            test_path_equals_the_frozen_original(kind, params, K, form=layer_form)


def test_auto_budget_is_four_or_every_candidate():
    stack, y = planted(n=120, n_layers=6, seed=43)
    assert LOESSelector(random_state=0).fit(stack, y).n_selected_ == 4
    assert LOESSelector(random_state=0).fit(stack[:3], y).n_selected_ == 3
    flat = to_flat(stack[:2])
    assert LOESSelector(layer_dim=12).fit(flat, y).n_selected_ == 2


def _light_stacks():
    """Stacks for the light (factor-free) default path: a binary task with a
    rescaled duplicate layer, 3 classes without the triangle, n < d, and a
    regression; with the selections the full path gave before the light path
    existed."""
    rng = np.random.RandomState(0)
    n, L, d = 120, 6, 10
    base = rng.normal(size=(n, d))
    y2 = (base[:, 0] > 0).astype(int)
    S = rng.normal(size=(L, n, d))
    S[2] += base
    S[4] = S[2] * 3.0  # an exact duplicate of layer 2 (CKA 1)
    yield S, y2, {}, [2, 5, 0]
    S3 = rng.normal(size=(L, n, d))
    y3 = rng.randint(0, 3, n)
    S3[3, :, 0] += y3
    yield S3, y3, {"volume_weight": 0.0}, [3, 1, 5]
    yield S3, y3, {}, [3, 1, 5]  # the triangle: rows against the span
    r4 = np.random.RandomState(5)
    S4 = r4.normal(size=(5, 40, 60))
    y4 = r4.randint(0, 4, 40)
    S4[2, :, :4] += 2 * np.eye(4)[y4]
    yield S4, y4, {}, [2, 4, 0]  # the triangle with n < d
    Sw = rng.normal(size=(5, 40, 60))
    yw = rng.randint(0, 2, 40)
    Sw[1, :, :3] += yw[:, None]
    yield Sw, yw, {}, [0, 1, 2]
    Sr = rng.normal(size=(5, 80, 8))
    yield Sr, Sr[3, :, 0] + 0.1 * rng.normal(size=80), {}, [3, 0, 4]


def _light_and_full(S, y, **kw):
    """The default path (light layers) and the path of decomposed layers."""
    sel = LOESSelector(n_layers_to_select=3, random_state=0, **kw)
    stack, y_arr, cfg = sel._path_config(S, y, sel.get_params(), 3)
    return [
        PreparedPath(stack, y_arr, cfg, 0, "t", form=form).run(3)
        for form in (None, "svd")
    ]


def test_default_light_path_gives_the_full_paths_selections_and_scores():
    """The default fit without layer factors (Gram-spectrum isotropy, exact
    duplicate guard on the rows) equals the full path to 1e-10, and keeps the
    selections the full path gave before the light path was added."""
    for S, y, kw, expected in _light_stacks():
        light, full = _light_and_full(S, y, **kw)
        fitted = LOESSelector(n_layers_to_select=3, random_state=0, **kw).fit(S, y)
        assert fitted.selection_order_.tolist() == light.selection_order.tolist()
        assert light.selection_order.tolist() == full.selection_order.tolist()
        if expected is not None:
            assert full.selection_order.tolist() == expected
        for key in (
            "score",
            "loss",
            "isotropy",
            "ridge_alpha",
            "eligible",
            "triangle",
            "retained",
        ):
            np.testing.assert_allclose(
                light.scores[key],
                full.scores[key],
                rtol=1e-10,
                atol=1e-12,
                err_msg=key,
            )


def test_default_fit_runs_no_full_layer_decomposition(monkeypatch):
    """With nothing weighted that reads the factors, the default fit calls no
    ``thin_svd``; the residual objective decomposes every candidate once."""
    from skloes.selection._loes import _prepare

    calls = []
    real = _prepare.thin_svd
    monkeypatch.setattr(
        _prepare, "thin_svd", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    S, y, _, _ = next(_light_stacks())
    LOESSelector(n_layers_to_select=3, random_state=0).fit(S, y)
    assert calls == []
    LOESSelector(n_layers_to_select=3, objective="residual", random_state=0).fit(S, y)
    assert len(calls) >= S.shape[0]
    calls.clear()  # the triangle decomposes only the layers it selects
    S3, y3, _, _ = list(_light_stacks())[2]
    LOESSelector(n_layers_to_select=3, random_state=0).fit(S3, y3)
    assert len(calls) == 2
