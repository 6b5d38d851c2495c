"""Mask-aware pooling: every mode against a numpy reference, padding never leaks."""

from __future__ import annotations

import numpy as np
import pytest
from _support.rounding import assert_equal_up_to_rounding

torch = pytest.importorskip("torch")

from skloes.core._pooling import pool, pool_layers  # noqa: E402


def _reference(hidden, mask, pooling):
    out = []
    for h, m in zip(hidden, mask.astype(bool), strict=True):
        real = h[m]
        out.append(
            {
                "mean": real.mean(0),
                "first": real[0],
                "last": real[-1],
                "max": real.max(0),
            }[pooling]
        )
    return np.stack(out)


def _padded(side):
    rng = np.random.RandomState(0)
    hidden = rng.randn(3, 5, 4).astype(np.float32)
    lengths = [5, 3, 1]
    mask = np.zeros((3, 5), dtype=np.int64)
    for i, n in enumerate(lengths):
        if side == "right":
            mask[i, :n] = 1
        else:
            mask[i, 5 - n :] = 1
    # Padding positions hold huge values: any leak shows up in every mode.
    hidden[mask == 0] = 1e6
    return hidden, mask


@pytest.mark.cpu_sensitive
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("pooling", ["mean", "first", "last", "max"])
def test_pool_matches_numpy_reference_under_padding(pooling, side):
    hidden, mask = _padded(side)
    got = pool(torch.from_numpy(hidden), torch.from_numpy(mask), pooling).numpy()
    # torch's sum against numpy's: a mean of at most 5 terms, rounded apart
    assert_equal_up_to_rounding(
        got,
        _reference(hidden, mask, pooling),
        terms=5,
        scale=np.abs(hidden[mask == 1]).max(),
    )
    assert np.abs(got).max() < 1e5


def test_cls_is_an_alias_of_first():
    hidden, mask = _padded("left")
    h, m = torch.from_numpy(hidden), torch.from_numpy(mask)
    assert torch.equal(pool(h, m, "cls"), pool(h, m, "first"))


def test_pool_rejects_all_zero_mask_and_unknown_mode():
    hidden = torch.ones(2, 3, 4)
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match="no unmasked token"):
        pool(hidden, mask, "mean")
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        pool(hidden, torch.ones(2, 3), "median")


def test_pool_layers_stacks_named_pooling_per_layer():
    hidden, mask = _padded("right")
    states = [torch.from_numpy(hidden), torch.from_numpy(2 * hidden)]
    m = torch.from_numpy(mask)
    out = pool_layers(states, [1, 0], m, "mean")
    assert out.shape == (2, 3, 4)
    assert torch.allclose(out[0], 2 * pool(states[0], m, "mean"))
    assert torch.allclose(out[1], pool(states[0], m, "mean"))


def test_pool_layers_callable_gets_states_and_mask():
    hidden, mask = _padded("right")
    states = [torch.from_numpy(hidden)]
    m = torch.from_numpy(mask)

    def count_and_norm(h, mask):
        return torch.stack([mask.sum(1).to(h.dtype), h[:, 0].norm(dim=1)], dim=1)

    out = pool_layers(states, [0], m, count_and_norm)
    assert out.shape == (1, 3, 2)
    np.testing.assert_array_equal(out[0, :, 0].numpy(), [5, 3, 1])


@pytest.mark.parametrize(
    "bad",
    [
        lambda h, m: h.mean(1)[0],
        lambda h, m: h.mean(1)[:1],
        lambda h, m: h[:, :, :0].sum(1),
    ],
)
def test_pool_layers_callable_with_wrong_shape_is_a_clear_error(bad):
    hidden, mask = _padded("right")
    with pytest.raises(ValueError, match="callable `pooling` must return"):
        pool_layers([torch.from_numpy(hidden)], [0], torch.from_numpy(mask), bad)
