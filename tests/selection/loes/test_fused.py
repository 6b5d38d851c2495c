"""The fused step (objective="fused", the robust default) against an explicit ridge."""

from __future__ import annotations

import numpy as np
import pytest
from _support.loes import (
    planted,
)
from sklearn.linear_model import LogisticRegression

from skloes import LOESSelector
from skloes.core._geometry import thin_svd


def test_robust_fused_scores_equal_explicit_fused_ridge():
    """objective="fused": the loss is the LOO loss of one GCV ridge of Y on the
    concatenated leading components of the selected layers and the candidate,
    each layer standardised per feature, then to unit total variance."""
    from skloes.core._ridge import ridge_fit

    stack, y = planted(n=90, n_layers=4, dim=10, seed=40, informative=(1, 3))
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
