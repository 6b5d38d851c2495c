"""Tests for ScalarMix, the learned softmax mix of the layers."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from skloes.heads import ScalarMixClassifier, ScalarMixRegressor


# --------------------------------------------------------------------------
# ScalarMix
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mix_data():
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1, 2], 40)
    H = rng.normal(size=(3, 120, 8))
    H[2] += 2 * np.eye(8)[y]
    return H, y


@pytest.mark.torch
def test_scalar_mix_weights_the_informative_layer(mix_data):
    pytest.importorskip("torch")
    H, y = mix_data
    params = dict(
        lr=1e-2,
        lr_mix=5e-2,
        batch_size=16,
        max_epochs=15,
        validation_fraction=0,
        random_state=0,
    )
    clf = ScalarMixClassifier(**params).fit(H, y)
    assert clf.layer_weights_.argmax() == 2
    assert clf.layer_weights_.sum() == pytest.approx(1.0, abs=1e-6)
    assert clf.scale_ != 1.0 and clf.score(H, y) > 0.8
    assert clf.transform(H).shape == (120, 8)
    again = ScalarMixClassifier(**params).fit(H, y)
    np.testing.assert_array_equal(again.predict_proba(H), clf.predict_proba(H))
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.predict_proba(H), clf.predict_proba(H))


@pytest.mark.torch
def test_scalar_mix_adapters_fix_the_scale_and_skip_the_embedding(mix_data):
    pytest.importorskip("torch")
    H, y = mix_data
    clf = ScalarMixClassifier(
        adapters=True,
        proj_dim=8,
        include_embedding=False,
        batch_size=32,
        max_epochs=3,
        random_state=0,
    ).fit(H, y)
    assert clf.scale_ == 1.0
    assert clf.layer_weights_[0] == 0.0
    assert clf.layer_weights_[1:].sum() == pytest.approx(1.0, abs=1e-6)
    assert clf.transform(H).shape == (120, 8)
    assert clf.get_support().tolist() == [False, True, True]


@pytest.mark.torch
def test_scalar_mix_regressor_and_errors(mix_data):
    pytest.importorskip("torch")
    H, _ = mix_data
    y = 3 * H[1, :, 0] + 1
    reg = ScalarMixRegressor(
        lr=1e-2, lr_mix=5e-2, batch_size=16, max_epochs=20, random_state=0
    ).fit(H, y)
    assert reg.layer_weights_.argmax() == 1 and reg.score(H, y) > 0.5
    with pytest.raises(ValueError, match="requires y"):
        ScalarMixRegressor().fit(H, None)
    with pytest.raises(ValueError, match="at least two classes"):
        ScalarMixClassifier().fit(H, np.zeros(120))


def test_scalar_mix_is_deterministic_where_it_runs_on_the_cpu(monkeypatch):
    """ "auto" on a machine without an accelerator runs on the CPU: the estimator
    checks that need bit-identical refits must run, not be skipped."""
    torch = pytest.importorskip("torch")
    from sklearn.utils import get_tags

    from skloes.heads import ScalarMixClassifier

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert not get_tags(ScalarMixClassifier()).non_deterministic
    assert not get_tags(ScalarMixClassifier(device="cpu")).non_deterministic
    assert get_tags(ScalarMixClassifier(device="cuda")).non_deterministic
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert get_tags(ScalarMixClassifier()).non_deterministic
