"""Tests of LOESSelector and LOESSelectorCV: the authors' method and its properties."""

from __future__ import annotations

import pickle
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import skloes.selection._loes as selection
import skloes.selection._loes_cv as _loes_cv
from skloes import LOESSelector, LOESSelectorCV
from skloes.core._geometry import thin_svd
from skloes.selection._loes_path import VARIANTS
from skloes.selection._loes_span import _residual_factors, _span_basis

VARIANT_NAMES = sorted(VARIANTS)


@pytest.fixture(autouse=True)
def _single_blas_thread():
    # On a busy 2-core machine, multi-threaded OpenBLAS eigh of a 200x200 Gram
    # can take ~1 s instead of ~5 ms (threads spin-wait); one thread is stable.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
def _planted(n=240, n_layers=6, dim=12, n_classes=4, seed=0, informative=(2, 4)):
    """Noise layers; the class bits live in two layers, in orthogonal directions."""
    rng = np.random.RandomState(seed)
    stack = rng.normal(size=(n_layers, n, dim))
    a, b = informative
    y = 2 * (stack[a, :, 0] > 0) + (stack[b, :, 1] > 0)
    return stack, y


def _noise(n=64, n_layers=6, dim=128, seed=0, n_classes=4):
    rng = np.random.RandomState(seed)
    return rng.normal(size=(n_layers, n, dim)), rng.randint(0, n_classes, size=n)


def _flat(stack):
    return stack.transpose(1, 0, 2).reshape(stack.shape[1], -1)


# --------------------------------------------------------------------------
# An independent, straightforward implementation of the reference variant
# --------------------------------------------------------------------------
def _hand_reference(stack, y, K, triplets, alpha=1.0, gamma=0.5, eta=0.1):
    """Explicit (Σd)×(Σd) solves, eigvalsh isotropy, loops over centroids."""
    lam, eps, eps_o = 1e-3, 1e-6, 1e-6
    L, n, d = stack.shape
    classes, codes = np.unique(y, return_inverse=True)
    C = classes.size
    Y = np.eye(C)[codes]
    Xc = [X - X.mean(axis=0) for X in stack]

    def iso(X):
        mu = np.linalg.eigvalsh(X.T @ X / n + eps * np.eye(d))
        mu = np.maximum(mu, eps)
        return mu.mean() / (mu.std() + eps)

    def ridge(A, T):
        a, t = A.mean(axis=0), T.mean(axis=0)
        W = np.linalg.solve(
            (A - a).T @ (A - a) + lam * np.eye(A.shape[1]), (A - a).T @ (T - t)
        )
        F = t + (A - a) @ W
        return F, np.sum((T - F) ** 2) / T.size

    def overlap(A, B):
        return np.linalg.norm(A.T @ B) / (np.linalg.norm(A) * np.linalg.norm(B))

    def cka(A, B):
        A, B = A - A.mean(0), B - B.mean(0)
        return np.linalg.norm(A.T @ B) ** 2 / (
            np.linalg.norm(A.T @ A) * np.linalg.norm(B.T @ B)
        )

    def tri(A):
        cent = [A[codes == c].mean(axis=0) for c in range(C)]
        areas = []
        for a, b, c in triplets:
            u, v = cent[a] - cent[b], cent[a] - cent[c]
            areas.append(0.5 * np.sqrt(max(0.0, (u @ u) * (v @ v) - (u @ v) ** 2)))
        return float(np.mean(areas))

    Y_hat = np.tile(Y.mean(axis=0), (n, 1))
    R, S, tables = Y - Y_hat, [], []
    for k in range(K):
        if k:
            XS = np.hstack([Xc[j] for j in S])
            P = XS @ np.linalg.solve(XS.T @ XS + eps_o * np.eye(XS.shape[1]), XS.T)
        table = {
            key: np.full(L, np.nan)
            for key in ("score", "loss", "isotropy", "redundancy", "triangle")
        }
        fits = {}
        for l in range(L):
            if l in S or (k and max(cka(stack[l], stack[j]) for j in S) >= 1 - 1e-10):
                continue
            Xt = Xc[l] if k == 0 else Xc[l] - P @ Xc[l]
            fits[l], loss = ridge(Xt, R)
            red = max(overlap(stack[l], stack[j]) for j in S) if k else 0.0
            t = tri(Xt) if k and C >= 3 else 0.0
            i = iso(Xc[l])
            table["loss"][l], table["isotropy"][l] = loss, i
            table["redundancy"][l], table["triangle"][l] = red, t
            table["score"][l] = loss + alpha * (1 - i) + gamma * red - eta * t
        best = int(np.nanargmin(table["score"]))
        Y_hat = Y_hat + fits[best]
        R = Y - Y_hat
        S.append(best)
        tables.append(table)
    return S, tables


def test_reference_reproduces_hand_computed_scores():
    rng = np.random.RandomState(7)
    n, d = 40, 5
    y = rng.randint(0, 4, size=n)
    stack = np.stack(
        [
            rng.normal(size=(n, d)) * 3.0 + 1.5,
            rng.normal(size=(n, d)) @ rng.normal(size=(d, d))
            + np.eye(4)[y] @ rng.normal(size=(4, d)),
            0.2 * rng.normal(size=(n, d))
            - 4.0
            + 0.5 * np.eye(4)[y] @ rng.normal(size=(4, d)),
        ]
    )
    sel = LOESSelector(
        n_layers_to_select=3, variant="reference", max_samples=None, random_state=0
    ).fit(stack, y)
    order, tables = _hand_reference(stack, y, 3, sel.triplets_)
    assert sel.selection_order_.tolist() == order
    for k, table in enumerate(tables):
        for key, expected in table.items():
            got = sel.scores_[key][k]
            np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
            ok = ~np.isnan(expected)
            np.testing.assert_allclose(
                got[ok],
                expected[ok],
                rtol=1e-10,
                atol=1e-12,
                err_msg=f"{key} at step {k}",
            )
    assert sel.scores_["triangle"][1:][~np.isnan(sel.scores_["triangle"][1:])].max() > 0
    # reference triplets: min(200, 3C) = 12 draws over {0..3}³, repeats allowed
    assert sel.triplets_.shape == (12, 3)


def test_robust_step_one_scores_equal_explicit_residual_computation():
    from skloes.core._geometry import class_centroids, triangle_areas
    from skloes.core._ridge import ridge_fit

    stack, y = _planted(n=90, n_layers=4, dim=10, seed=40, informative=(1, 3))
    sel = LOESSelector(
        n_layers_to_select=2, max_samples=None, objective="residual", random_state=0
    )
    sel.fit(stack, y)
    n = stack.shape[1]
    prep = [(X - X.mean(0)) / np.sqrt(np.sum((X - X.mean(0)) ** 2) / n) for X in stack]
    first = sel.selection_order_[0]
    U, s = thin_svd(prep[first])
    cfg = {"orthogonalization": "basis", "orth_energy": 0.99, "orth_max_rank": 0.5}
    Q, _ = _span_basis([SimpleNamespace(U=U, s=s, dim=10)], n, cfg)
    Y = np.eye(4)[y]
    R = Y - Y.mean(0) - sel.step_fits_[0]
    denom = np.sum((Y - Y.mean(0)) ** 2)
    for l in range(4):
        if l == first:
            continue
        Xt = prep[l] - Q @ (Q.T @ prep[l])
        loo = ridge_fit(Xt, R, alpha="gcv", loss="loo", loo_denominator=denom)
        assert sel.scores_["loss"][1, l] == pytest.approx(loo.loss, rel=1e-8)
        assert sel.scores_["ridge_alpha"][1, l] == pytest.approx(loo.alpha, rel=1e-8)
        energy = np.sum(Xt**2) / n
        cent = class_centroids(Xt, y, 4)
        tri = triangle_areas(cent, sel.triplets_).mean() / energy
        assert sel.scores_["triangle"][1, l] == pytest.approx(tri, rel=1e-8)
        assert sel.scores_["retained"][1, l] == pytest.approx(energy, rel=1e-8)


def test_robust_fused_scores_equal_explicit_fused_ridge():
    """objective="fused": the loss is the LOO loss of one GCV ridge of Y on the
    concatenated leading components of the selected layers and the candidate,
    each layer standardised per feature, then to unit total variance."""
    from skloes.core._ridge import ridge_fit

    stack, y = _planted(n=90, n_layers=4, dim=10, seed=40, informative=(1, 3))
    rank = 6
    sel = LOESSelector(
        n_layers_to_select=3, max_samples=None, fused_rank=rank, random_state=0
    ).fit(stack, y)
    n = stack.shape[1]
    top = []
    for X in stack:
        Xc = (X - X.mean(0)) / X.std(0)
        Xc = Xc / np.sqrt(np.sum(Xc**2) / n)
        U, s = thin_svd(Xc)
        top.append(U[:, :rank] * s[:rank])
    Y = np.eye(4)[y]
    denom = np.sum((Y - Y.mean(0)) ** 2)
    fit = np.tile(Y.mean(0), (n, 1))
    for k, chosen in enumerate(sel.selection_order_):
        before = sel.selection_order_[:k].tolist()
        for l in set(range(4)) - set(before):
            A = np.hstack([top[j] for j in sorted([*before, l])])
            ref = ridge_fit(A, Y, alpha="gcv", loss="loo", loo_denominator=denom)
            assert sel.scores_["loss"][k, l] == pytest.approx(ref.loss, rel=1e-8)
            assert sel.scores_["ridge_alpha"][k, l] == pytest.approx(
                ref.alpha, rel=1e-8
            )
            if l == chosen:
                ref_fit = ref.fitted
        fit = fit + sel.step_fits_[k]  # Ŷ is the fused fit of the selection
        np.testing.assert_allclose(fit, ref_fit, atol=1e-10)
    assert sel.components_["objective"] == "fused"
    assert sel.components_["redundancy_weight"] == 0.0
    assert sel.components_["isotropy_weight"] == 0.0
    ok = sel.scores_["eligible"]  # binary-free 4 classes: the triangle is in
    np.testing.assert_allclose(
        sel.scores_["score"][ok],
        (sel.scores_["loss"] - 0.1 * sel.scores_["triangle"])[ok],
    )


def _trunk_stack(seed=0, n=400, d=16):
    """Six layers sharing a dominant 'trunk'; the label is a + b > 0, with a
    in layer 3 and b in layer 4 only; layer 0 is unrelated noise (CKA ≈ 0)."""
    rng = np.random.RandomState(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    y = (a + b > 0).astype(int)
    trunk = 3.0 * rng.normal(size=(n, d))
    stack = trunk + rng.normal(size=(6, n, d))
    stack[3, :, 0] += 2 * a
    stack[4, :, 1] += 2 * b
    stack[0] = 3.0 * rng.normal(size=(n, d))
    return stack, y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_objective_adds_the_complementary_layer_not_the_unusable_one(seed):
    """The decoder failure in miniature: the old robust step (residual on the
    orthogonalised layer + 0.5 CKA redundancy) takes the unrelated layer 0
    after the first informative layer; the fused default takes the other
    informative layer, and a probe on its pair is more accurate."""
    from sklearn.linear_model import LogisticRegression

    stack, y = _trunk_stack(seed)
    test_stack, y_test = _trunk_stack(seed + 100)
    new = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    old = LOESSelector(n_layers_to_select=2, objective="residual", random_state=0).fit(
        stack, y
    )
    assert set(new.selection_order_.tolist()) == {3, 4}
    assert old.selection_order_[1] == 0
    scores = []
    for sel in (new, old):
        clf = LogisticRegression(max_iter=1000).fit(sel.transform(stack), y)
        scores.append(clf.score(sel.transform(test_stack), y_test))
    assert scores[0] > scores[1] + 0.1


# --------------------------------------------------------------------------
# Orthogonalisation and the degeneracy fix (properties 2, 3)
# --------------------------------------------------------------------------
def _factors(X, cfg_scaling="none"):
    Xc = X - X.mean(axis=0)
    U, s, V = thin_svd(Xc, return_v=True)
    return SimpleNamespace(U=U, s=s, V=V, dim=X.shape[1]), Xc


def test_reference_orthogonalisation_equals_explicit_ridge_projection():
    stack, _ = _noise(n=50, n_layers=4, dim=8, seed=1)
    stack[1] *= 30.0
    facts = [_factors(X) for X in stack]
    cfg = {"orthogonalization": "ridge"}
    basis = _span_basis([facts[0][0], facts[1][0]], 50, cfg)
    XS = np.hstack([facts[0][1], facts[1][1]])
    P = XS @ np.linalg.solve(XS.T @ XS + 1e-6 * np.eye(XS.shape[1]), XS.T)
    for l in (2, 3):
        f, Xc = facts[l]
        Xt = _residual_factors(f.U, f.s, basis) @ f.V.T
        expected = Xc - P @ Xc
        assert np.linalg.norm(Xt - expected) <= 1e-6 * np.linalg.norm(expected)


def test_robust_basis_is_orthogonal_and_centred():
    stack, _ = _noise(n=60, n_layers=4, dim=20, seed=2)
    facts = [_factors(X / np.sqrt(np.sum((X - X.mean(0)) ** 2) / 60)) for X in stack]
    cfg = {"orthogonalization": "basis", "orth_energy": 0.99, "orth_max_rank": 0.5}
    Q, shrink = _span_basis([facts[0][0], facts[1][0]], 60, cfg)
    assert shrink is None and 0 < Q.shape[1] <= 30
    for l in (2, 3):
        f, Xc = facts[l]
        Xt = _residual_factors(f.U, f.s, (Q, None)) @ f.V.T
        assert np.linalg.norm(Q.T @ Xt) <= 1e-8 * np.linalg.norm(Xc)
        assert np.abs(Xt.mean(axis=0)).max() <= 1e-10 * np.abs(Xc).max()


def test_degeneracy_reference_collapses_robust_keeps_signal():
    stack, y = _noise(n=64, n_layers=6, dim=128, seed=3)
    ref = LOESSelector(variant="reference", random_state=0).fit(stack, y)
    rob = LOESSelector(variant="robust", random_state=0).fit(stack, y)
    for k in range(1, 4):
        r_ref = ref.scores_["retained"][k]
        r_rob = rob.scores_["retained"][k]
        assert np.nanmax(r_ref) <= 1e-6  # ‖X̃‖ <= 1e-3 ‖X_c‖
        assert np.nanmin(r_rob) >= 0.3
        loss = rob.scores_["loss"][k][~np.isnan(rob.scores_["loss"][k])]
        assert np.ptp(loss) > 1e-6


# --------------------------------------------------------------------------
# Score terms as recorded (properties 4, 5, 6)
# --------------------------------------------------------------------------
def test_robust_isotropy_is_scale_invariant_and_bounded():
    stack, y = _planted(seed=4)
    a = LOESSelector(random_state=0).fit(stack, y)
    scaled = stack * np.array([1.0, 1e3, 1e-3, 7.0, 1.0, 0.01])[:, None, None]
    b = LOESSelector(random_state=0).fit(scaled, y)
    np.testing.assert_allclose(a.isotropy_, b.isotropy_, rtol=1e-9)
    assert np.all((a.isotropy_ > 0) & (a.isotropy_ <= 1))


def test_auto_triplets_enumerate_all_when_few_classes():
    stack, y = _noise(n=120, n_layers=3, dim=6, n_classes=6, seed=5)
    sel = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    assert sel.triplets_.shape == (20, 3)  # C(6, 3)
    assert len({tuple(t) for t in sel.triplets_}) == 20
    two = LOESSelector(n_layers_to_select=2).fit(stack, y % 2)
    assert two.triplets_ is None
    assert np.nansum(np.abs(two.scores_["triangle"])) == 0.0


def test_many_classes_draw_200_distinct_triplets():
    stack, y = _noise(n=400, n_layers=3, dim=6, n_classes=40, seed=6)
    sel = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    assert sel.triplets_.shape == (200, 3)
    assert len({tuple(t) for t in sel.triplets_}) == 200
    assert np.all(sel.triplets_[:, 0] < sel.triplets_[:, 1])


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_redundancy_lies_in_unit_interval(variant):
    stack, y = _planted(seed=8)
    red = (
        LOESSelector(variant=variant, random_state=0)
        .fit(stack, y)
        .scores_["redundancy"]
    )
    red = red[~np.isnan(red)]
    assert np.all((red >= 0) & (red <= 1))


# --------------------------------------------------------------------------
# Selection properties (7-13)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_permuting_samples_leaves_selection_unchanged(variant):
    stack, y = _planted(seed=9)
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
    stack, y = _planted(seed=10)
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
    stack, y = _planted(seed=11)
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
    stack, y = _planted(seed=12)
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
    stack, y = _planted(n=150, n_layers=8, seed=13)
    kw = dict(variant=variant, update=update, random_state=0)
    full = LOESSelector(n_layers_to_select=6, **kw).fit(stack, y)
    for k in (1, 3, 5):
        short = LOESSelector(n_layers_to_select=k, **kw).fit(stack, y)
        assert short.selection_order_.tolist() == full.selection_order_[:k].tolist()
        np.testing.assert_array_equal(short.scores_["score"], full.scores_["score"][:k])


def test_planted_layers_are_picked_first():
    stack, y = _planted(n=400, n_layers=7, informative=(5, 2), seed=14)
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
    stack, y = _planted(seed=16)
    sel = LOESSelector(variant=variant, max_samples=150, random_state=0).fit(stack, y)
    Y = (y[sel.calibration_indices_][:, None] == sel.classes_[None, :]).astype(float)
    Y_hat = np.tile(Y.mean(axis=0), (Y.shape[0], 1))
    for fit in sel.step_fits_:
        Y_hat = Y_hat + fit
        assert np.abs((Y - Y_hat).mean(axis=0)).max() < 1e-12
    np.testing.assert_allclose(sel.residual_, Y - Y_hat, atol=1e-12)


def test_label_free_ignores_y_and_scores_only_isotropy_and_redundancy():
    stack, y = _planted(seed=17)
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
    flat = LOESSelector(layer_dim=12, random_state=0).fit(_flat(stack))
    assert flat.selection_order_.tolist() == a.selection_order_.tolist()


def test_equal_random_state_gives_identical_results():
    stack, y = _noise(n=500, n_layers=5, dim=10, n_classes=40, seed=18)
    for variant in VARIANT_NAMES:
        kw = dict(variant=variant, max_samples=0.5, random_state=3)
        a, b = LOESSelector(**kw).fit(stack, y), LOESSelector(**kw).fit(stack, y)
        assert a.selection_order_.tolist() == b.selection_order_.tolist()
        np.testing.assert_array_equal(a.calibration_indices_, b.calibration_indices_)
        np.testing.assert_array_equal(a.triplets_, b.triplets_)
        c = LOESSelector(**{**kw, "random_state": 4}).fit(stack, y)
        assert not np.array_equal(a.calibration_indices_, c.calibration_indices_)


def test_calibration_subsample_is_stratified_and_sized():
    stack, y = _planted(n=300, seed=19)
    sel = LOESSelector(max_samples=100, random_state=0).fit(stack, y)
    idx = sel.calibration_indices_
    assert idx.size == 100 and np.all(np.diff(idx) > 0)
    full = np.bincount(y) / y.size
    np.testing.assert_allclose(np.bincount(y[idx]) / 100, full, atol=0.02)
    assert LOESSelector(max_samples=0.25).fit(stack, y).calibration_indices_.size == 75
    big = LOESSelector(max_samples=10_000).fit(stack, y)  # larger than n: all rows
    assert big.calibration_indices_.size == 300


def test_relative_loss_normalisation_divides_by_the_residual_loss():
    stack, y = _planted(seed=20)
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
    stack, y = _planted(seed=21)
    stack[0] = 5 * np.random.RandomState(0).normal(size=stack[0].shape)
    sel = LOESSelector(include_embedding=False, n_layers_to_select=5, random_state=0)
    sel.fit(stack, y)
    assert 0 not in sel.selection_order_
    assert np.isnan(sel.scores_["score"][:, 0]).all() and np.isnan(sel.isotropy_[0])


# --------------------------------------------------------------------------
# Interface: transform, flat tables, pandas, pickle, dtypes
# --------------------------------------------------------------------------
def test_transform_concatenates_selected_layers_in_index_order():
    stack, y = _planted(seed=22)
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
    stack, y = _planted(seed=23)
    a = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    flat = _flat(stack)
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
    stack, y = _planted(seed=24)
    a = LOESSelector(random_state=0).fit(stack.astype(np.float32), y)
    b = LOESSelector(random_state=0).fit(stack.astype(np.float16), y)
    c = LOESSelector(random_state=0).fit(stack.astype(np.float16).astype(np.float64), y)
    assert a.scores_["score"].dtype == np.float64
    np.testing.assert_array_equal(b.scores_["score"], c.scores_["score"])
    assert b.transform(stack.astype(np.float16)).dtype == np.float16


def test_string_and_integer_labels_give_the_same_selection():
    stack, y = _planted(seed=25)
    a = LOESSelector(random_state=0).fit(stack, y)
    b = LOESSelector(random_state=0).fit(stack, np.array(["c0", "c1", "c2", "c3"])[y])
    assert a.selection_order_.tolist() == b.selection_order_.tolist()
    assert b.classes_.tolist() == ["c0", "c1", "c2", "c3"]


def test_regression_and_multioutput_targets():
    stack, _ = _planted(seed=26)
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
    stack, y = _planted(seed=27)
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
    stack, y = _planted(seed=28)
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
    stack, y = _planted(seed=29)
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
    stack, y = _noise(n=30, n_layers=5, dim=200, seed=30, n_classes=3)
    sel = LOESSelector(variant=variant, random_state=0).fit(stack, y)
    assert sel.n_selected_ == 4
    for key, value in sel.scores_.items():
        if key == "redundancy" and variant == "robust":
            value = value[:1]  # not computed at k >= 1: no weight in the fused score
        if key != "eligible":
            assert np.isfinite(value[sel.scores_["eligible"][: len(value)]]).all(), key


def test_budget_errors():
    stack, y = _planted(seed=31)
    with pytest.raises(ValueError, match="n_layers_to_select"):
        LOESSelector(n_layers_to_select=7).fit(stack, y)
    with pytest.raises(ValueError, match="n_layers_to_select"):
        LOESSelector(n_layers_to_select=0).fit(stack, y)
    with pytest.raises(ValueError, match="n_layers_to_select"):
        LOESSelector(n_layers_to_select=6, include_embedding=False).fit(stack, y)


def test_label_errors_and_two_classes():
    stack, y = _planted(seed=32)
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
    stack, y = _planted(seed=33)
    with pytest.raises(ValueError, match="1 dimension"):
        LOESSelector().fit(stack[0, :, 0], y)
    with pytest.raises(ValueError, match="4 dimension"):
        LOESSelector().fit(stack[None], y)
    with pytest.raises(ValueError, match="layer_dim"):
        LOESSelector(layer_dim=5).fit(_flat(stack), y)
    sel = LOESSelector(n_layers_to_select=2).fit(stack, y)
    with pytest.raises(ValueError, match="layers of width"):
        sel.transform(stack[:5])
    with pytest.raises(ValueError, match="max_samples"):
        LOESSelector(max_samples=0.005).fit(stack, y)


# --------------------------------------------------------------------------
# scikit-learn estimator checks on flat tables
# --------------------------------------------------------------------------
def _expected_failed_checks(estimator):
    return {}  # every check passes on flat tables


@parametrize_with_checks(
    [
        LOESSelector(n_layers_to_select=1),
        LOESSelector(n_layers_to_select=2, variant="reference"),
        LOESSelectorCV(max_layers_to_select=2, cv=3),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # degenerate-layer notices
        check(estimator)


# --------------------------------------------------------------------------
# LOESSelectorCV
# --------------------------------------------------------------------------
def _count_paths(monkeypatch):
    calls = []
    real = selection._loes_path

    def counting(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(selection, "_loes_path", counting)
    monkeypatch.setattr(_loes_cv, "_loes_path", counting)  # the folds' paths
    return calls


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_cv_matches_grid_search_with_far_fewer_paths(monkeypatch, variant):
    stack, y = _planted(n=180, n_layers=6, dim=8, seed=34)
    flat = _flat(stack)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    kw = dict(
        variant=variant,
        max_samples=None,
        fusion_scaling="layer",
        layer_dim=8,
        random_state=0,
    )
    est = LogisticRegression(max_iter=500)
    calls = _count_paths(monkeypatch)
    cv = LOESSelectorCV(
        est, max_layers_to_select=5, cv=folds, budget_rule="best", **kw
    ).fit(flat, y)
    cv_calls = len(calls)
    calls.clear()
    grid = GridSearchCV(
        Pipeline([("loes", LOESSelector(**kw)), ("clf", est)]),
        {"loes__n_layers_to_select": [1, 2, 3, 4, 5]},
        cv=folds,
    ).fit(flat, y)
    assert cv_calls == 3 + 1
    assert len(calls) == 5 * 3 + 1
    np.testing.assert_allclose(
        cv.cv_results_["mean_test_score"],
        grid.cv_results_["mean_test_score"],
        atol=1e-12,
    )
    assert cv.n_layers_to_select_ == grid.best_params_["loes__n_layers_to_select"]
    assert (
        cv.selection_order_.tolist()
        == grid.best_estimator_["loes"].selection_order_.tolist()
    )


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("fusion_scaling", [None, "layer"])
@pytest.mark.parametrize("probe_layer_dim", [None, 40])
def test_cv_scores_the_ridge_probe_from_grams_as_grid_search_fits_it(
    monkeypatch, task, fusion_scaling, probe_layer_dim
):
    """The probe is never fitted per prefix, and the scores are the search's.

    40-wide layers on 100 fit rows: prefixes of 1-2 layers take the feature
    route, longer ones the Gram route.
    """
    from skloes.selection import RidgeProbeClassifier, RidgeProbeRegressor
    from skloes.selection._ridge_probe import _RidgeProbe

    stack, y = _planted(n=150, n_layers=6, dim=40, seed=38)
    stack[3] *= 20.0  # layers on different scales
    if task == "regression":
        y = (
            stack[2, :, 0]
            - stack[4, :, 1]
            + 0.3 * stack[1, :, 2]
            + np.random.RandomState(0).normal(size=150)
        )
        probe = RidgeProbeRegressor(layer_dim=probe_layer_dim)
        folds = [
            (np.setdiff1d(np.arange(150), t), t)
            for t in np.array_split(np.arange(150), 3)
        ]
    else:
        probe = RidgeProbeClassifier(layer_dim=probe_layer_dim)
        folds = StratifiedKFold(3, shuffle=True, random_state=0)
    flat = _flat(stack)
    kw = dict(
        max_samples=None, fusion_scaling=fusion_scaling, layer_dim=40, random_state=0
    )
    fits = []
    real_fit = _RidgeProbe._fit_scaled
    monkeypatch.setattr(
        _RidgeProbe,
        "_fit_scaled",
        lambda self, *a: fits.append(1) or real_fit(self, *a),
    )
    cv = LOESSelectorCV(
        probe, max_layers_to_select=5, cv=folds, budget_rule="best", **kw
    ).fit(flat, y)
    assert not fits
    grid = GridSearchCV(
        Pipeline([("loes", LOESSelector(**kw)), ("probe", probe)]),
        {"loes__n_layers_to_select": [1, 2, 3, 4, 5]},
        cv=folds,
    ).fit(flat, y)
    np.testing.assert_allclose(
        cv.cv_results_["mean_test_score"],
        grid.cv_results_["mean_test_score"],
        atol=1e-9,
    )
    assert cv.n_layers_to_select_ == grid.best_params_["loes__n_layers_to_select"]


def test_cv_final_selection_is_a_prefix_of_the_full_path():
    stack, y = _planted(n=180, seed=35)
    cv = LOESSelectorCV(
        max_layers_to_select=5, cv=3, max_samples=None, random_state=0
    ).fit(stack, y)
    full = LOESSelector(n_layers_to_select=5, max_samples=None, random_state=0).fit(
        stack, y
    )
    k = cv.n_layers_to_select_
    assert cv.selection_order_.tolist() == full.selection_order_[:k].tolist()
    assert cv.transform(stack).shape == (180, k * 12)
    res = cv.cv_results_
    assert res["n_layers"].tolist() == [1, 2, 3, 4, 5]
    assert {"split0_test_score", "split2_selection_order", "std_test_score"} <= set(res)
    assert 2 <= k  # the label needs both informative layers


def test_cv_parallel_folds_equal_sequential():
    stack, y = _planted(n=150, seed=36)
    kw = dict(max_layers_to_select=3, cv=3, random_state=0)
    a = LOESSelectorCV(n_jobs=1, **kw).fit(stack, y)
    with parallel_config(backend="threading"):  # process start-up is slow on CI
        b = LOESSelectorCV(n_jobs=2, **kw).fit(stack, y)
    np.testing.assert_array_equal(
        a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"]
    )


def test_cv_requires_targets_and_supports_regression():
    stack, _ = _planted(seed=37)
    with pytest.raises(ValueError, match="`y` is required"):
        LOESSelectorCV().fit(stack, None)
    t = stack[4, :, 0] + 0.1 * np.random.RandomState(0).normal(size=240)
    cv = LOESSelectorCV(max_layers_to_select=3, cv=3, random_state=0).fit(stack, t)
    assert cv.task_ == "regression" and 4 in cv.selection_order_
    assert np.all(cv.cv_results_["mean_test_score"] > 0.5)  # R² of the ridge probe


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
        max_layers_to_select=4, cv=3, layer_dim=384, random_state=0
    ).fit(flat, labels)
    assert 1 <= cv.n_layers_to_select_ <= 4
    assert np.all(cv.cv_results_["mean_test_score"] > 0.55)
    scores = cv.scores_frame()
    assert np.isfinite(scores.loc[scores.eligible, "score"]).all()


def test_cv_budget_is_clipped_to_the_candidates():
    stack, y = _planted(n=150, seed=38)
    stack[5] = 2.0  # degenerate: excluded, so 5 candidates remain
    with pytest.warns(UserWarning, match="degenerate"):
        cv = LOESSelectorCV(max_layers_to_select=10, cv=3, random_state=0).fit(stack, y)
    assert cv.cv_results_["n_layers"].tolist() == [1, 2, 3, 4, 5, 6]
    assert np.isnan(cv.cv_results_["mean_test_score"][5])
    assert cv.n_layers_to_select_ <= 5 and 5 not in cv.selection_order_


# --------------------------------------------------------------------------
# The optimised path against a frozen copy of the original (tests/_loes_oracle.py)
# --------------------------------------------------------------------------
def _oracle():
    import importlib.util
    import sys
    from pathlib import Path

    if "_loes_oracle" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "_loes_oracle", Path(__file__).with_name("_loes_oracle.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["_loes_oracle"] = module
        spec.loader.exec_module(module)
    return sys.modules["_loes_oracle"]


def _residual_stream(n=200, n_layers=6, dim=30, n_classes=3, seed=0):
    """Correlated, anisotropic layers as a residual stream makes them."""
    rng = np.random.RandomState(seed)
    y = rng.randint(0, n_classes, n)
    X = rng.normal(size=(n, dim)) * np.logspace(0, -2, dim)
    layers = [X]
    for l in range(1, n_layers):
        mix = rng.normal(size=(dim, dim)) / np.sqrt(dim) * np.logspace(0, -1.5, dim)
        X = X + 0.4 * rng.normal(size=(n, dim)) @ mix
        X[:, 0] += 0.5 * (y == l % n_classes)
        layers.append(X.copy())
    return np.stack(layers), y


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


@pytest.mark.parametrize("kind, params, K", _ORACLE_CASES)
def test_path_equals_the_frozen_original(kind, params, K):
    from skloes.selection._loes_path import _loes_path, _resolve_config

    stack, y = _residual_stream(seed=len(kind))
    task = "classification"
    if kind == "wide":  # fewer rows than dimensions: the n×n Gram route
        stack, y = _residual_stream(n=60, n_layers=5, dim=80, n_classes=4, seed=1)
    elif kind == "regression":
        task = "regression"
        y = stack[3, :, :2] + np.random.RandomState(2).normal(size=(200, 2))
    elif kind == "label_free":
        task, y = "label_free", None
    elif kind == "binary":
        y = y % 2
    cfg = _resolve_config(LOESSelector(**params), task)
    old = dict(cfg)
    for new_key, old_key in (
        ("isotropy_weight", "alpha"),
        ("redundancy_weight", "gamma"),
        ("volume_weight", "eta"),
    ):
        old[old_key] = old.pop(new_key)
    got = _loes_path(stack, y, K, cfg, 0, "t")
    want = _oracle()._loes_path(stack, y, K, old, 0, "t")
    assert got.selection_order.tolist() == want["selection_order_"].tolist()
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
    from skloes.selection import _loes_path, _loes_ridge

    if form == "eigen":
        monkeypatch.setattr(_loes_ridge, "_certified", lambda *args: False)
    else:
        monkeypatch.setattr(_loes_path, "_FACTOR_ROWS", False)
    for kind, params, K in _ORACLE_CASES:
        if params["variant"] == "reference":
            test_path_equals_the_frozen_original(kind, params, K)


# --------------------------------------------------------------------------
# One path for every budget: ``memory``
# --------------------------------------------------------------------------
def test_memory_reuses_and_extends_the_cached_path(tmp_path):
    from skloes.selection import _loes_path

    stack, y = _planted(n=150, seed=41)
    plain = {
        k: LOESSelector(n_layers_to_select=k, random_state=0).fit(stack, y)
        for k in (1, 3, 5)
    }
    counts = _loes_path.COUNTS
    before = dict(counts)
    for k in (3, 1, 5, 5, 2):  # a hit, a slice, an extension, a hit, a slice
        sel = LOESSelector(
            n_layers_to_select=k, random_state=0, memory=str(tmp_path)
        ).fit(stack, y)
        ref = plain.get(k) or plain[5]
        assert sel.selection_order_.tolist() == ref.selection_order_[:k].tolist()
        for key, value in sel.scores_.items():
            np.testing.assert_array_equal(value, ref.scores_[key][:k])
        if k in plain:  # a slice restores the residual by adding fits back
            np.testing.assert_allclose(
                sel.residual_, plain[k].residual_, rtol=0, atol=1e-12
            )
    assert counts["prepare"] - before["prepare"] == 1  # the extension loads it
    # 3 steps, then 3 -> 6 (an extension at least doubles), each step once
    assert counts["steps"] - before["steps"] == 6


def test_memory_grid_search_equals_no_memory(tmp_path):
    from joblib import Memory

    from skloes.selection import _loes_path

    stack, y = _planted(n=150, seed=42)
    flat = _flat(stack)
    grid = {"loes__n_layers_to_select": [1, 2, 3]}
    results = []
    for memory in (None, Memory(tmp_path, verbose=0)):
        pipe = Pipeline(
            [
                ("loes", LOESSelector(layer_dim=12, random_state=0, memory=memory)),
                ("clf", LogisticRegression(max_iter=300)),
            ]
        )
        before = _loes_path.COUNTS["prepare"]
        search = GridSearchCV(pipe, grid, cv=3).fit(flat, y)
        results.append(
            (
                search.cv_results_["mean_test_score"],
                _loes_path.COUNTS["prepare"] - before,
            )
        )
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1] == 3 * 3 + 1 and results[1][1] == 3 + 1


def test_memory_search_on_parallel_workers_equals_sequential(tmp_path):
    stack, y = _planted(n=90, seed=44)
    flat = _flat(stack)
    grid = {"loes__n_layers_to_select": [1, 3, 2]}
    scores = []
    for n_jobs, folder in ((1, tmp_path / "a"), (2, tmp_path / "b")):
        pipe = Pipeline(
            [
                (
                    "loes",
                    LOESSelector(layer_dim=12, random_state=0, memory=str(folder)),
                ),
                ("clf", LogisticRegression(max_iter=300)),
            ]
        )
        with parallel_config(backend="threading"):
            search = GridSearchCV(pipe, grid, cv=2, n_jobs=n_jobs).fit(flat, y)
        scores.append(search.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(scores[0], scores[1])


def test_auto_budget_is_four_or_every_candidate():
    stack, y = _planted(n=120, n_layers=6, seed=43)
    assert LOESSelector(random_state=0).fit(stack, y).n_selected_ == 4
    assert LOESSelector(random_state=0).fit(stack[:3], y).n_selected_ == 3
    flat = _flat(stack[:2])
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


def test_default_light_path_gives_the_full_paths_selections_and_scores(monkeypatch):
    """The default fit without layer factors (Gram-spectrum isotropy, exact
    duplicate guard on the rows) equals the full path to 1e-10, and keeps the
    selections the full path gave before the light path was added."""
    from skloes.selection import _loes_path

    for S, y, kw, expected in _light_stacks():
        light = LOESSelector(n_layers_to_select=3, random_state=0, **kw).fit(S, y)
        monkeypatch.setattr(_loes_path, "_LIGHT", False)
        full = LOESSelector(n_layers_to_select=3, random_state=0, **kw).fit(S, y)
        monkeypatch.setattr(_loes_path, "_LIGHT", True)
        assert light.selection_order_.tolist() == full.selection_order_.tolist()
        if expected is not None:
            assert full.selection_order_.tolist() == expected
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
                light.scores_[key],
                full.scores_[key],
                rtol=1e-10,
                atol=1e-12,
                err_msg=key,
            )


def test_default_fit_runs_no_full_layer_decomposition(monkeypatch):
    """With nothing weighted that reads the factors, the default fit calls no
    ``thin_svd``; the residual objective decomposes every candidate once."""
    from skloes.selection import _loes_path

    calls = []
    real = _loes_path.thin_svd
    monkeypatch.setattr(
        _loes_path, "thin_svd", lambda *a, **k: calls.append(1) or real(*a, **k)
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
