"""Dataset-level (pooled) layer metrics: entropy, effective rank, isotropy, TwoNN."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from skloes.core._geometry import (
    all_triplets,
    cka_from_svd,
    class_centroids,
    gram_spectrum,
    isotropy_erank,
    isotropy_inv_cv,
    matrix_entropy,
    overlap_redundancy,
    rank_mask,
    sample_distinct_triplets,
    spectrum_effective_rank,
    thin_svd,
    triangle_areas,
)
from skloes.metrics._base import (
    add_subsample_doc,
    as_layers,
    check_alpha,
    check_option,
    normalizer,
    per_layer,
    subsample_index,
)
from skloes.utils._validation import check_count

__all__ = [
    "dataset_entropy",
    "effective_rank",
    "intrinsic_dim",
    "isotropy",
    "layer_similarity",
    "simplex_volume",
]


def _spectrum(P, clamp_gram=False):
    """Gram spectrum with round-off eigenvalues (the thin-SVD rank rule) set to 0.

    ``eigvalsh`` returns ~1e-16·λ_max instead of exact zeros; left in, they add
    a spurious ``-p log p`` to the entropy of a low-rank matrix.
    """
    lam = gram_spectrum(P, clamp_gram=clamp_gram)
    lam[~rank_mask(lam, max(P.shape))] = 0.0
    return lam


def _rows(owner, X, max_prompts, random_state, *, min_samples=2):
    stack, single = as_layers(owner, X, min_samples=min_samples)
    check_count(max_prompts, owner, "max_prompts", minimum=2, allow_none=True)
    index = subsample_index(stack.shape[1], max_prompts, random_state)
    return stack[:, index], single


@add_subsample_doc
def dataset_entropy(
    X,
    *,
    alpha=1.0,
    normalization="maxEntropy",
    clamp_gram=False,
    max_prompts=1000,
    random_state=None,
):
    """Matrix α-entropy of the pooled prompt matrix ``P``, per layer.

    ``S_α(P) = H_α(PPᵀ)`` if ``M <= D`` else ``H_α(PᵀP)`` (the same nonzero
    spectrum), divided by the ``normalization`` divisor with ``N = M`` rows and
    ``D`` columns. ``P`` is used as given (not centred); build it from token
    states with :func:`prompt_vectors`. Higher means the prompts spread over
    more directions.

    Parameters
    ----------
    X : array-like of shape (n_samples, dim) or (n_layers, n_samples, dim)
        One pooled matrix or a layer stack.
    alpha : float, default=1.0
        Rényi order (1 is the von Neumann/Shannon entropy).
    normalization : {"maxEntropy", "logN", "logD", "logNlogD", "raw"}, \
            default="maxEntropy"
        Divisor: ``min(log N, log D)``, ``log N``, ``log D``, ``log N·log D``
        or 1.
    clamp_gram : bool, default=False
        The authors' quirk: clamp every Gram entry at 0 before the spectrum.
    {ROWS}

    Returns
    -------
    entropy : float or ndarray of shape (n_layers,)
        A float for one matrix, one value per layer for a stack.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import dataset_entropy
    >>> round(dataset_entropy(np.eye(4, 6)), 12)
    1.0
    >>> dataset_entropy(np.ones((5, 3)))
    0.0
    """
    owner = "dataset_entropy"
    alpha = check_alpha(owner, alpha)
    stack, single = _rows(owner, X, max_prompts, random_state)
    divisor = normalizer(owner, normalization, stack.shape[1], stack.shape[2])
    values = [
        matrix_entropy(_spectrum(P, bool(clamp_gram)), alpha) / divisor for P in stack
    ]
    return per_layer(values, single)


@add_subsample_doc
def effective_rank(X, *, kind="sigma", max_prompts=1000, random_state=None):
    """Effective rank of the pooled prompt matrix ``P``, per layer.

    Parameters
    ----------
    X : array-like of shape (n_samples, dim) or (n_layers, n_samples, dim)
        One pooled matrix or a layer stack (not centred).
    kind : {"sigma", "sigma2"}, default="sigma"
        ``"sigma"``: Roy and Vetterli's ``exp(-Σ q log q)`` with ``q = σ/Σσ``
        over the nonzero singular values (``erank_sigma``); ``"sigma2"``:
        ``q = σ²/Σσ²``, i.e. ``exp`` of the raw :func:`dataset_entropy`
        (``erank_sigma2``).
    {ROWS}

    Returns
    -------
    erank : float or ndarray of shape (n_layers,)
        Between 1 and ``min(M, D)``.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import effective_rank
    >>> round(effective_rank(np.eye(3, 5)), 12)
    3.0
    >>> round(effective_rank(np.outer(np.arange(1, 6), [1.0, 2.0])), 12)
    1.0
    """
    owner = "effective_rank"
    check_option(owner, "kind", kind, ("sigma", "sigma2"))
    stack, single = _rows(owner, X, max_prompts, random_state)
    power = 1 if kind == "sigma" else 2
    values = []
    for P in stack:
        s = np.sqrt(_spectrum(P).clip(0.0))
        values.append(spectrum_effective_rank(s, power=power) if np.any(s > 0) else 0.0)
    return per_layer(values, single)


def isotropy(X, *, kind="erank"):
    """Isotropy of each layer's centred samples, as LOES scores it.

    Parameters
    ----------
    X : array-like of shape (n_samples, dim) or (n_layers, n_samples, dim)
        One matrix or a layer stack.
    kind : {"erank", "inv_cv"}, default="erank"
        ``"erank"``: the robust, bounded form ``exp(H(s²/Σs²))/min(n-1, d)``
        in (0, 1], scale-invariant. ``"inv_cv"``: the authors'
        ``mean(μ)/(std(μ)+1e-6)`` of the covariance eigenvalues (unbounded).

    Returns
    -------
    iso : float or ndarray of shape (n_layers,)
        One value per layer (a float for one matrix).

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import isotropy
    >>> X = np.random.RandomState(0).normal(size=(5000, 4))
    >>> isotropy(X) > 0.99
    True
    """
    owner = "isotropy"
    check_option(owner, "kind", kind, ("erank", "inv_cv"))
    stack, single = as_layers(owner, X, min_samples=2)
    _, n, d = stack.shape
    fn = isotropy_erank if kind == "erank" else isotropy_inv_cv
    return per_layer([fn(thin_svd(A)[1], n, d) for A in stack], single)


def layer_similarity(X, *, kind="cka"):
    """Pairwise redundancy between the layers of a stack, as LOES scores it.

    Parameters
    ----------
    X : array-like of shape (n_layers, n_samples, dim)
        A layer stack.
    kind : {"cka", "overlap"}, default="cka"
        ``"cka"``: linear CKA of the centred layers (1 iff one is a scaled
        rotation of the other). ``"overlap"``: the authors'
        ``‖AᵀB‖_F/(‖A‖_F‖B‖_F)`` on raw, uncentred layers.

    Returns
    -------
    similarity : ndarray of shape (n_layers, n_layers)
        Symmetric, in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import layer_similarity
    >>> A = np.random.RandomState(0).normal(size=(30, 4))
    >>> round(float(layer_similarity(np.stack([A, 2 * A]))[0, 1]), 12)
    1.0
    """
    owner = "layer_similarity"
    check_option(owner, "kind", kind, ("cka", "overlap"))
    stack, _ = as_layers(owner, X, min_samples=2)
    L = stack.shape[0]
    out = np.eye(L)
    svds = [thin_svd(A) for A in stack] if kind == "cka" else None
    for a in range(L):
        for b in range(a + 1, L):
            if kind == "cka":
                out[a, b] = cka_from_svd(*svds[a], *svds[b])
            else:
                out[a, b] = overlap_redundancy(stack[a], stack[b])
            out[b, a] = out[a, b]
    if kind == "overlap":
        np.fill_diagonal(out, [overlap_redundancy(A, A) for A in stack])
    return out


def simplex_volume(X, y, *, max_triplets=200, random_state=None):
    """Mean area of class-centroid triangles of each layer at unit variance.

    Each layer is centred and scaled to unit total variance, then the mean
    area ``½√(‖u‖²‖v‖² − (u·v)²)`` is taken over every distinct-class triplet
    (or ``max_triplets`` distinct ones drawn from ``random_state`` when there
    are more). Zero with fewer than 3 classes. Higher means better separated
    class centroids.

    Parameters
    ----------
    X : array-like of shape (n_samples, dim) or (n_layers, n_samples, dim)
        One matrix or a layer stack.
    y : array-like of shape (n_samples,)
        Class labels.
    max_triplets : int, default=200
        Cap on the number of triplets.
    random_state : int, RandomState instance or None, default=None
        Seeds the triplet draw when it is capped.

    Returns
    -------
    volume : float or ndarray of shape (n_layers,)
        Mean triangle area, per layer.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import simplex_volume
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 3 ** 0.5]])
    >>> round(simplex_volume(X, [0, 1, 2]) / simplex_volume(3 * X, [0, 1, 2]), 12)
    1.0
    """
    owner = "simplex_volume"
    stack, single = as_layers(owner, X, min_samples=2)
    max_triplets = check_count(max_triplets, owner, "max_triplets")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != stack.shape[1]:
        raise ValueError(
            f"{owner}: `y` must be 1-D with one label per sample ({stack.shape[1]}); "
            f"got shape {y.shape}."
        )
    classes, codes = np.unique(y, return_inverse=True)
    C = len(classes)
    if C < 3:
        return per_layer(np.zeros(stack.shape[0]), single)
    rng = check_random_state(random_state)
    triplets = (
        sample_distinct_triplets(C, max_triplets, rng) if C > 30 else (all_triplets(C))
    )
    values = []
    for A in stack:
        A = A - A.mean(axis=0)
        var = (A**2).sum() / A.shape[0]
        if var <= 0:
            values.append(0.0)
            continue
        centroids = class_centroids(A / np.sqrt(var), codes, C)
        values.append(float(triangle_areas(centroids, triplets).mean()))
    return per_layer(values, single)


@add_subsample_doc
def intrinsic_dim(X, *, normalization="raw", max_prompts=1000, random_state=None):
    """TwoNN intrinsic dimension (Facco et al., 2017) of the pooled matrix.

    The first- and second-neighbour distances come from a KD-tree; points with
    a zero first distance are dropped; the ratios ``μ = r2/r1`` are sorted and
    the smallest ``⌊0.9 M′⌋`` give ``d̂ = Σ x y / Σ x²`` with ``x = log μ_(i)``
    and ``y = -log(1 - i/M′)``.

    Parameters
    ----------
    X : array-like of shape (n_samples, dim) or (n_layers, n_samples, dim)
        One pooled matrix or a layer stack.
    normalization : {"raw", "logN"}, default="raw"
        ``"logN"`` divides ``d̂`` by ``log M``.
    {ROWS}

    Returns
    -------
    dim : float or ndarray of shape (n_layers,)
        ``d̂`` (or ``d̂/log M``), per layer.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import intrinsic_dim
    >>> X = np.random.RandomState(0).uniform(size=(2000, 2)) @ np.eye(2, 10)
    >>> 1.7 < intrinsic_dim(X, max_prompts=None) < 2.3
    True
    """
    from scipy.spatial import cKDTree

    owner = "intrinsic_dim"
    check_option(owner, "normalization", normalization, ("raw", "logN"))
    stack, single = _rows(owner, X, max_prompts, random_state, min_samples=3)
    values = []
    for layer, P in enumerate(stack):
        dist, _ = cKDTree(P).query(P, k=3)
        r1, r2 = dist[:, 1], dist[:, 2]
        keep = r1 > 0
        mu = np.sort(r2[keep] / r1[keep])
        m = mu.size
        n_fit = int(np.floor(0.9 * m))
        if n_fit < 1:
            where = "`X`" if single else f"layer {layer} of `X`"
            distinct = len(np.unique(P, axis=0))
            raise ValueError(
                f"{owner}: TwoNN leaves out every point that has a duplicate (its "
                "nearest neighbour is at distance 0) and needs at least 2 points "
                f"without one; {where} has {P.shape[0]} rows, {distinct} distinct, "
                f"and {m} without a duplicate. Pass its distinct rows "
                "(np.unique(X, axis=0)) or more samples."
            )
        x = np.log(mu[:n_fit])
        yv = -np.log(1.0 - np.arange(1, n_fit + 1) / m)
        denom = (x**2).sum()
        d_hat = float((x * yv).sum() / denom) if denom > 0 else 0.0
        values.append(d_hat / np.log(P.shape[0]) if normalization == "logN" else d_hat)
    return per_layer(values, single)
