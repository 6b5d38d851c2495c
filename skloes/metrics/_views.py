"""Augmentation-invariance metrics on views: InfoNCE, LiDAR and DiME."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.linalg import eigh
from scipy.special import logsumexp
from sklearn.utils import check_random_state

from skloes.core._geometry import matrix_entropy
from skloes.metrics._base import (
    add_subsample_doc,
    as_layers,
    check_option,
    normalizer,
    per_layer,
    subsample_index,
)
from skloes.utils._validation import check_count

__all__ = ["dime", "infonce", "lidar", "smooth_rank"]


def _pair(owner, A, B, max_prompts, random_state):
    A, single = as_layers(owner, A, param="A", min_samples=2)
    B, _ = as_layers(owner, B, param="B", min_samples=2)
    if A.shape != B.shape:
        raise ValueError(
            f"{owner}: the views `A` and `B` must have the same shape (one row per "
            f"prompt, in the same order); got {A.shape} and {B.shape}."
        )
    check_count(max_prompts, owner, "max_prompts", minimum=2, allow_none=True)
    index = subsample_index(A.shape[1], max_prompts, random_state)
    return A[:, index], B[:, index], single


INFONCE_DEFINITIONS = ("paper", "authors_code")


@add_subsample_doc
def infonce(
    A,
    B,
    *,
    definition="paper",
    temperature=0.1,
    normalize=True,
    max_prompts=1000,
    random_state=None,
    chunk_size=1024,
):
    """InfoNCE of two augmented views, per layer (higher = more invariant).

    Two definitions (Skean et al., 2025), chosen with ``definition``:

    - ``"paper"`` (default), the InfoNCE loss of the paper's text (Oord et
      al., 2018) in one direction: each row of ``A`` against every row of
      ``B``, ``L = -(1/M) Σ_i log softmax_j(A_i·B_j/τ)_i``. Its
      uninformative value (all rows alike) is ``log M``.
    - ``"authors_code"``, the authors' metric code: the two-view SimCLR
      (NT-Xent) loss over all ``2M`` rows of ``Z = [A; B]``. Each row's
      positive is the same prompt's row in the other view, and its
      denominator every other row of both views (itself left out):
      ``L = -(1/2M) Σ_r log(exp(s_{r,p(r)}) / Σ_{j≠r} exp(s_{rj}))`` with
      ``s = Z·Zᵀ/τ``. Its uninformative value is ``log(2M - 1)``.

    Both use raw dot products (no extra normalisation of the rows) and are
    computed in row chunks with log-sum-exp, so large dot products never
    overflow.

    Read more in the :ref:`User Guide <metrics>`.

    Parameters
    ----------
    A, B : array-like of shape (n_prompts, dim) or (n_layers, n_prompts, dim)
        Prompt vectors of two augmented views, row ``i`` of both from prompt
        ``i``.
    definition : {"paper", "authors_code"}, default="paper"
        One-direction InfoNCE (the paper's text) or the two-view SimCLR loss
        over all ``2M`` rows (the authors' code), as above.

        .. versionadded:: 0.3
    temperature : float, default=0.1
        Softmax temperature ``τ``.
    normalize : bool, default=True
        Return ``1 - L/L_0``, with ``L_0`` the uninformative value above (1
        for perfectly matched views, 0 when nothing tells the prompts apart);
        False returns the raw loss ``L`` (what the authors' code reports).
    {PROMPTS}
    chunk_size : int, default=1024
        Rows per block of logits.

    Returns
    -------
    score : float or ndarray of shape (n_layers,)
        ``1 - L/L_0`` (or ``L``), per layer.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import infonce
    >>> A = np.eye(8)
    >>> infonce(A, A) > 0.99
    True
    >>> infonce(np.ones((8, 3)), np.ones((8, 3)))
    0.0
    >>> infonce(A, A, definition="authors_code") > 0.99
    True
    """
    owner = "infonce"
    check_option(owner, "definition", definition, INFONCE_DEFINITIONS)
    if not isinstance(temperature, Real) or not temperature > 0:
        raise ValueError(f"{owner}: `temperature` must be > 0; got {temperature!r}.")
    chunk_size = check_count(chunk_size, owner, "chunk_size")
    A, B, single = _pair(owner, A, B, max_prompts, random_state)
    M = A.shape[1]
    values = []
    for a, b in zip(A, B, strict=True):
        if definition == "paper":
            excess, n_rows = _infonce_excess(a, b, temperature, chunk_size), M
        else:
            Z = np.concatenate([a, b])
            excess = _nt_xent_excess(Z, M, temperature, chunk_size)
            n_rows = 2 * M - 1
        # excess is the loss over its uninformative value log(n_rows)
        values.append(
            -excess / np.log(n_rows) if normalize else np.log(n_rows) + excess
        )
    return per_layer(values, single)


def _infonce_excess(a, b, temperature, chunk_size):
    """Mean over rows of ``a`` of ``logsumexp_j(a_i·b_j/τ) - a_i·b_i/τ - log M``."""
    M = a.shape[0]
    excess = 0.0
    for start in range(0, M, chunk_size):
        logits = a[start : start + chunk_size] @ b.T / temperature
        rows = np.arange(logits.shape[0])
        diag = logits[rows, rows + start]
        lse = logsumexp(logits - diag[:, None], axis=1)
        excess += float((lse - np.log(M)).sum())
    return excess / M


def _nt_xent_excess(Z, M, temperature, chunk_size):
    """Mean over the 2M rows of Z of ``logsumexp_{j≠r}(s_rj) - s_{r,p(r)} -
    log(2M - 1)``, with ``s = Z·Zᵀ/τ`` and ``p(r) = r ± M``."""
    n = Z.shape[0]
    excess = 0.0
    for start in range(0, n, chunk_size):
        logits = Z[start : start + chunk_size] @ Z.T / temperature
        rows = np.arange(logits.shape[0])
        logits[rows, rows + start] = -np.inf  # a row is not its own negative
        positive = logits[rows, (rows + start + M) % n]
        lse = logsumexp(logits - positive[:, None], axis=1)
        excess += float((lse - np.log(n - 1)).sum())
    return excess / n


def _lidar_spectra(owner, views, max_prompts, random_state):
    V = np.asarray(views, dtype=np.float64) if not isinstance(views, list) else None
    if V is None:
        if not views:
            raise ValueError(f"{owner}: `views` is empty; pass at least 2 views.")
        V = np.stack([np.asarray(v, dtype=np.float64) for v in views])
    if V.ndim not in (3, 4):
        raise ValueError(
            f"{owner}: `views` must have shape (n_views, n_prompts, dim) or (n_views, "
            f"n_layers, n_prompts, dim); got {V.ndim} dimension(s)."
        )
    single = V.ndim == 3
    V = V[:, None] if single else V
    Q, _, M, D = V.shape
    if Q < 2 or M < 2:
        raise ValueError(
            f"{owner}: `views` needs at least 2 views and 2 prompts; got {Q} view(s) "
            f"of {M} prompt(s)."
        )
    if not np.all(np.isfinite(V)):
        raise ValueError(f"{owner}: `views` contains NaN or infinity.")
    check_count(max_prompts, owner, "max_prompts", minimum=2, allow_none=True)
    V = V[:, :, subsample_index(M, max_prompts, random_state)]
    M = V.shape[2]
    spectra = []
    for layer in range(V.shape[1]):
        Z = V[:, layer].transpose(1, 0, 2)  # (M, Q, D)
        mu_i = Z.mean(axis=1)
        dev_b = mu_i - mu_i.mean(axis=0)
        dev_w = (Z - mu_i[:, None]).reshape(-1, D)
        sigma_b = dev_b.T @ dev_b / M
        sigma_w = dev_w.T @ dev_w / (M * Q) + 1e-4 * np.eye(D)
        spectra.append(eigh(sigma_b, sigma_w, eigvals_only=True))
    return spectra, single, M, D


@add_subsample_doc
def lidar(views, *, normalization="maxEntropy", max_prompts=1000, random_state=None):
    """LiDAR: entropy of the linear-discriminant spectrum of augmented views.

    Prompts are the classes and their views the samples: with the prompt
    means ``μ_i``, ``Σ_b`` the covariance of the means and ``Σ_w`` the
    within-prompt covariance plus ``1e-4·I``, the eigenvalues of
    ``Σ_w^{-½} Σ_b Σ_w^{-½}`` give ``H_1``, normalised with ``N = M`` prompts
    and ``D`` dimensions.

    Parameters
    ----------
    views : array-like of shape (n_views, n_prompts, dim) or \
            (n_views, n_layers, n_prompts, dim)
        Prompt vectors of ``n_views`` augmented views (16 by convention).
    normalization : {"maxEntropy", "logN", "logD", "logNlogD", "raw"}, \
            default="maxEntropy"
        Divisor of the entropy; under ``"maxEntropy"`` LiDAR lies in [0, 1].
    {PROMPTS}

    Returns
    -------
    lidar : float or ndarray of shape (n_layers,)
        The normalised entropy, per layer.

    See Also
    --------
    smooth_rank : ``exp`` of the same entropy.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import lidar
    >>> rng = np.random.RandomState(0)
    >>> centres = rng.normal(size=(50, 4))
    >>> views = centres + 0.01 * rng.normal(size=(16, 50, 4))
    >>> 0.9 < lidar(views) <= 1.0
    True
    """
    owner = "lidar"
    spectra, single, M, D = _lidar_spectra(owner, views, max_prompts, random_state)
    divisor = normalizer(owner, normalization, M, D)
    return per_layer([matrix_entropy(lam) / divisor for lam in spectra], single)


@add_subsample_doc
def smooth_rank(views, *, max_prompts=1000, random_state=None):
    """Smooth rank ``exp(H_1)`` of the LiDAR spectrum (Thilak et al., 2024).

    Parameters
    ----------
    views : array-like of shape (n_views, n_prompts, dim) or \
            (n_views, n_layers, n_prompts, dim)
        Prompt vectors of augmented views.
    {PROMPTS}

    Returns
    -------
    rank : float or ndarray of shape (n_layers,)
        Between 1 and ``min(M - 1, D)``, per layer.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import smooth_rank
    >>> rng = np.random.RandomState(0)
    >>> views = rng.normal(size=(50, 3)) + 0.01 * rng.normal(size=(16, 50, 3))
    >>> 2.5 < smooth_rank(views) <= 3.0
    True
    """
    spectra, single, _, _ = _lidar_spectra(
        "smooth_rank", views, max_prompts, random_state
    )
    return per_layer([np.exp(matrix_entropy(lam)) for lam in spectra], single)


DIME_DEFINITIONS = ("paper", "authors_code")


def dime(
    A,
    B,
    *,
    definition="paper",
    n_permutations=10,
    normalization="maxEntropy",
    max_prompts=1000,
    random_state=None,
):
    """DiME: how much more two views agree than random pairings of prompts.

    With ``K_A = AAᵀ`` and ``K_B = BBᵀ`` (M×M), DiME is the mean over random
    permutations ``P_t`` of ``H_1(K_A ∘ P_t K_B P_tᵀ)`` minus
    ``H_1(K_A ∘ K_B)``, divided by ``min(log M, log D)`` under
    ``"maxEntropy"``. Positive when matched views share structure.

    ``definition="authors_code"`` follows the authors' metric code, which
    takes the smaller Gram: the same for ``M <= D``, but for ``M > D`` the
    D×D matrices ``K_A = AᵀA`` and ``K_B = BᵀB``, whose permutations then
    shuffle features rather than prompts.

    Read more in the :ref:`User Guide <metrics>`.

    Parameters
    ----------
    A, B : array-like of shape (n_prompts, dim) or (n_layers, n_prompts, dim)
        Prompt vectors of two augmented views.
    definition : {"paper", "authors_code"}, default="paper"
        Prompt-by-prompt Grams always (the paper's text), or the smaller Gram
        as the authors' code takes it, as above.

        .. versionadded:: 0.3
    n_permutations : int, default=10
        Number of random permutations.
    normalization : {"maxEntropy", "logN", "logD", "logNlogD", "raw"}, \
            default="maxEntropy"
        Divisor of the entropy difference.
    max_prompts : int or None, default=1000
        At most this many prompts, drawn uniformly from ``random_state``.
    random_state : int, RandomState instance or None, default=None
        Seeds the subsample and the permutations.

    Returns
    -------
    dime : float or ndarray of shape (n_layers,)
        The normalised entropy gap, per layer.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import dime
    >>> A = np.random.RandomState(0).normal(size=(100, 8))
    >>> dime(A, A, random_state=0) > 0
    True
    """
    owner = "dime"
    check_option(owner, "definition", definition, DIME_DEFINITIONS)
    n_permutations = check_count(n_permutations, owner, "n_permutations")
    rng = check_random_state(random_state)
    A, B, single = _pair(owner, A, B, max_prompts, rng)
    M, D = A.shape[1], A.shape[2]
    divisor = normalizer(owner, normalization, M, D)
    features = definition == "authors_code" and M > D
    perms = [rng.permutation(D if features else M) for _ in range(n_permutations)]
    values = []
    for a, b in zip(A, B, strict=True):
        KA, KB = (a.T @ a, b.T @ b) if features else (a @ a.T, b @ b.T)
        h = matrix_entropy(np.linalg.eigvalsh(KA * KB))
        h_perm = [matrix_entropy(np.linalg.eigvalsh(KA * KB[p][:, p])) for p in perms]
        values.append((np.mean(h_perm) - h) / divisor)
    return per_layer(values, single)
