"""Equality up to floating-point rounding, one rule for every test.

Two float results are bitwise equal only when the same inputs go through the
same kernels in the same shapes (a cache hit, a pickle round trip, the same
call twice). Anything else (another batch composition or padding, another
batch size, torch against numpy or ONNX Runtime, a value frozen on another
machine) reorders the sums: which order, and which kernel, depend on the
CPU's vector width (AVX2 and AVX-512 split a dot product differently). Only
a bound derived from the unit roundoff and the number of terms is
CPU-independent.

The bound is the classical one for a sum (or dot product) of ``n`` terms
computed in any order (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., eq. 3.4)::

    |computed - exact| <= gamma_n * sum_i |x_i|,   gamma_n = n*u / (1 - n*u)

with ``u`` the unit roundoff (2**-24 for float32, 2**-53 for float64). Two
orders each within it differ by at most twice that, so
:func:`assert_equal_up_to_rounding` allows ``2 * gamma_n * scale`` at every
element. ``scale`` stands for ``sum_i |x_i|``; its default, ``max|expected|``,
fits results about the size of their terms' magnitudes (a mean, a
layer-normed state, a score). Where terms cancel, the test passes their
magnitude (the pooling test: the tokens'; a head: :func:`head_scale`).

For a state through a whole network (:func:`forward_terms`) ``n`` is a
first-order estimate, not a proof: each block's longest inner product, times
the blocks the state went through (per-block errors add to first order;
LayerNorm keeps the magnitude near 1). For the tiny test BERT this allows
some 1e-5, and a real mistake (another text's state, another layer, padding
leaking in at 1e-3) is far outside it.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "assert_equal_up_to_rounding",
    "assert_same_states",
    "equal_up_to_rounding",
    "forward_terms",
    "head_scale",
    "rounding_tolerance",
    "TINY_BERT_TERMS",
]


def forward_terms(width, blocks):
    """``n`` for a state through ``blocks`` blocks whose longest inner product
    has ``width`` terms (the MLP's intermediate width)."""
    return int(width) * int(blocks)


# skloes.models._testing.make_tiny_model: intermediate width 2 * 8, and the
# deepest returned state is after the embeddings and 2 blocks.
TINY_BERT_TERMS = forward_terms(16, 3)


def head_scale(coef, features, *, feature_scale=1.0, probabilities=False):
    """``scale`` for the outputs of a linear head on ``features`` whose
    rounding is bounded relative to ``max|features|`` (states in another
    batch): a change of at most ``d`` in every feature moves an output by at
    most ``max_i sum_j |coef_ij / feature_scale_j| * d``, and a probability by
    half that (the sigmoid's slope is at most 1/4; a softmax's Jacobian has
    infinity-norm at most 1/2). The head's own float64 rounding is negligible.
    """
    weights = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    weights = weights / np.asarray(feature_scale, dtype=np.float64)
    factor = np.abs(weights).sum(axis=1).max() * (0.5 if probabilities else 1.0)
    return float(factor * np.abs(np.asarray(features, dtype=np.float64)).max())


def rounding_tolerance(expected, *, terms, dtype=np.float32, scale=None):
    """The largest difference allowed: ``2 * gamma_terms * scale``."""
    u = np.finfo(dtype).eps / 2
    n_u = int(terms) * u
    if not 0 < n_u < 0.5:
        raise ValueError(f"terms={terms} is out of range for {np.dtype(dtype)}")
    if scale is None:
        finite = np.abs(np.asarray(expected, dtype=np.float64))
        finite = finite[np.isfinite(finite)]
        scale = float(finite.max()) if finite.size else 0.0
    return 2 * n_u / (1 - n_u) * float(scale)


def equal_up_to_rounding(actual, expected, *, terms, dtype=np.float32, scale=None):
    """Whether ``actual`` equals ``expected`` within :func:`rounding_tolerance`
    (same shape, non-finite values at the same places and equal)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        return False
    tol = rounding_tolerance(expected, terms=terms, dtype=dtype, scale=scale)
    return bool(np.allclose(actual, expected, rtol=0, atol=tol, equal_nan=True))


def assert_equal_up_to_rounding(
    actual, expected, *, terms, dtype=np.float32, scale=None, err_msg=""
):
    """Assert ``actual`` equals ``expected`` up to the rounding of sums of
    ``terms`` terms in ``dtype`` (see the module docstring)."""
    tol = rounding_tolerance(expected, terms=terms, dtype=dtype, scale=scale)
    note = f"equal up to {np.dtype(dtype)} rounding of {terms} terms (atol={tol:.3g})"
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64),
        np.asarray(expected, dtype=np.float64),
        rtol=0,
        atol=tol,
        err_msg=f"{err_msg} {note}".strip(),
    )


def assert_same_states(actual, expected, *, terms=TINY_BERT_TERMS, axis=-2):
    """The states of the same inputs computed in another batch (``axis``: the
    inputs' axis): equal up to rounding, and the bound is far below the
    difference between two inputs' states, so a state served for the wrong
    input would fail."""
    assert_equal_up_to_rounding(actual, expected, terms=terms)
    rows = np.moveaxis(np.asarray(expected), axis, 0)
    if len(np.unique(rows.reshape(len(rows), -1), axis=0)) > 1:
        other = np.roll(expected, 1, axis=axis)
        assert not equal_up_to_rounding(other, expected, terms=terms), (
            "the rounding bound does not tell these inputs' states apart"
        )
