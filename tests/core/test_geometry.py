"""The shared geometric quantities against analytic values."""

from __future__ import annotations

import numpy as np
import pytest

from skloes.core._geometry import (
    all_triplets,
    cka,
    class_centroids,
    gram_spectrum,
    isotropy_erank,
    isotropy_inv_cv,
    matrix_entropy,
    overlap_redundancy,
    sample_distinct_triplets,
    spectrum_effective_rank,
    thin_svd,
    triangle_areas,
)


def test_thin_svd_matches_numpy_in_both_gram_forms():
    rng = np.random.RandomState(0)
    for shape in [(12, 30), (40, 6)]:
        X = rng.normal(size=shape) + 5.0
        U, s, V = thin_svd(X, return_v=True)
        Xc = X - X.mean(0)
        np.testing.assert_allclose(U * s @ V.T, Xc, atol=1e-9)
        np.testing.assert_allclose(U.T @ U, np.eye(len(s)), atol=1e-9)
        ref = np.linalg.svd(Xc, compute_uv=False)
        np.testing.assert_allclose(s, ref[: len(s)], rtol=1e-9)
        assert len(s) == min(shape[0] - 1, shape[1])  # centring removes one rank


def test_erank_isotropy_gaussian_rank_one_and_scale():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(20000, 10))
    assert isotropy_erank(thin_svd(X)[1], *X.shape) >= 0.99
    r1 = rng.normal(size=(50, 1)) @ rng.normal(size=(1, 30))
    assert isotropy_erank(thin_svd(r1)[1], 50, 30) == pytest.approx(1 / 30, abs=1e-9)
    Y = rng.normal(size=(40, 8)) * np.arange(1, 9)
    a = isotropy_erank(thin_svd(Y)[1], 40, 8)
    b = isotropy_erank(thin_svd(1e3 * Y)[1], 40, 8)
    assert a == pytest.approx(b, rel=1e-12) and 0 < a < 1


def test_reference_isotropy_gaussian_and_rank_one():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(20000, 10))
    assert isotropy_inv_cv(thin_svd(X)[1], *X.shape) >= 10
    d = 30
    u = rng.normal(size=(200, 1))
    r1 = u / u.std() @ (np.eye(1, d))  # unit-scale rank 1
    value = isotropy_inv_cv(thin_svd(r1)[1], 200, d)
    assert value == pytest.approx(1 / np.sqrt(d - 1), rel=0.01)


def test_cka_is_one_for_scaled_rotations_and_bounded():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(50, 6))
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    assert cka(X, 2.5 * X @ Q) == pytest.approx(1.0, abs=1e-12)
    value = cka(X, rng.normal(size=(50, 4)))
    assert 0 <= value < 0.5


def test_overlap_redundancy_of_a_layer_with_itself():
    rng = np.random.RandomState(0)
    for shape in [(10, 30), (30, 4)]:
        X = rng.normal(size=shape)
        expected = np.linalg.norm(X.T @ X) / np.linalg.norm(X) ** 2
        assert overlap_redundancy(X, X) == pytest.approx(expected, rel=1e-12)
        assert 0 <= overlap_redundancy(X, rng.normal(size=shape)) <= 1


def test_triangle_area_equilateral_collinear_repeated_translated():
    s = 3.0
    tri = np.array([[0.0, 0.0, 0.0], [s, 0.0, 0.0], [s / 2, s * np.sqrt(3) / 2, 0.0]])
    area = triangle_areas(tri, [[0, 1, 2]])[0]
    assert area == pytest.approx(np.sqrt(3) / 4 * s**2, rel=1e-12)
    assert triangle_areas(tri + 7.0, [[0, 1, 2]])[0] == pytest.approx(area, rel=1e-12)
    line = np.array([[0.0, 0], [1, 1], [3, 3]])
    assert triangle_areas(line, [[0, 1, 2]])[0] == pytest.approx(0, abs=1e-12)
    assert triangle_areas(tri, [[0, 0, 2]])[0] == 0


def test_triplet_sets():
    assert len(all_triplets(5)) == 10
    assert len(all_triplets(2)) == 0
    rng = np.random.RandomState(0)
    t = sample_distinct_triplets(40, 200, rng)
    assert len(t) == 200 and len({tuple(r) for r in t}) == 200
    assert np.all(t[:, 0] < t[:, 1]) and np.all(t[:, 1] < t[:, 2])


def test_class_centroids():
    X = np.array([[0.0, 1], [2, 3], [4, 5]])
    np.testing.assert_allclose(
        class_centroids(X, np.array([1, 0, 1]), 2), [[2, 3], [2, 3]]
    )


def test_entropy_and_effective_rank_analytic_values():
    assert matrix_entropy(np.ones(16)) == pytest.approx(np.log(16))
    assert matrix_entropy([5.0, 0, 0]) == 0
    assert matrix_entropy(np.zeros(4)) == 0
    for alpha in (0.5, 1, 2, 3):
        assert matrix_entropy(np.r_[np.ones(6), np.zeros(3)], alpha) == pytest.approx(
            np.log(6)
        )
    Z = np.linalg.qr(np.random.RandomState(0).normal(size=(10, 10)))[0][:6]
    s = np.sqrt(np.clip(gram_spectrum(Z), 0, None))
    assert spectrum_effective_rank(s) == pytest.approx(6)
    assert spectrum_effective_rank(s, power=2) == pytest.approx(6)
