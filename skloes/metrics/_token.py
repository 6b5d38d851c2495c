"""Token-level layer metrics: prompt entropy and curvature, per prompt then averaged.

The per-prompt computations work on one prompt's token matrix at a time, so
the same code serves plain arrays and the streaming path: a
:class:`TokenMetricPooling` given to ``HiddenStatesTransformer(pooling=...)``
computes them inside the batch loop, one forward pass per text, without ever
holding the data set's tokens.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from skloes.core._geometry import gram_spectrum, matrix_entropy, rank_mask
from skloes.core._torch import torch
from skloes.metrics._base import (
    NORMALIZATIONS,
    add_subsample_doc,
    as_prompts,
    check_alpha,
    check_option,
    normalizer,
    per_layer,
    prep,
    subsample_index,
)
from skloes.utils._validation import check_count

__all__ = ["TokenMetricPooling", "curvature", "prompt_entropy", "prompt_vectors"]

TOKEN_METRICS = ("prompt_entropy", "curvature")


# --------------------------------------------------------------------------
# A batch of prompts (numpy), the one implementation of both metrics.
# Z is (B, T, D) float64 with prompt b's n[b] tokens first, in order, and
# zeros after them. NaN means "prompt too short for this metric".
# --------------------------------------------------------------------------
def _prep_batch(Z, n):
    """``prep`` of every prompt of a padded batch (padding rows stay 0)."""
    valid = (np.arange(Z.shape[1])[None, :] < n[:, None])[..., None]
    mean = Z.sum(axis=1) / np.maximum(n, 1)[:, None]
    Zc = (Z - mean[:, None, :]) * valid
    norms = np.linalg.norm(Zc, axis=2, keepdims=True)
    return np.divide(Zc, norms, out=np.zeros_like(Zc), where=norms >= 1e-12)


def _prompt_entropy_batch(Z, n, alpha, normalization, preprocess, clamp_gram):
    # The T×T Gram of each prompt: padding rows add exact-zero directions, and
    # its nonzero spectrum is that of ZZᵀ (N <= D) or ZᵀZ (N > D) alike.
    Z = _prep_batch(Z, n) if preprocess else Z
    G = Z @ Z.transpose(0, 2, 1)
    if clamp_gram:
        G = np.maximum(G, 0.0)
    spectra = np.linalg.eigvalsh(G)
    out = np.full(Z.shape[0], np.nan)
    d = Z.shape[2]
    for b in np.flatnonzero(n >= 2):
        lam = spectra[b]
        if clamp_gram and n[b] > d:
            # the authors clamp the D×D Gram ZᵀZ when N > D, whose clamped
            # spectrum is not the clamped N×N one's
            lam = gram_spectrum(Z[b, : n[b]], clamp_gram=True)
        lam[~rank_mask(lam, max(n[b], d))] = 0.0
        h = matrix_entropy(lam, alpha)
        out[b] = h / normalizer("prompt_entropy", normalization, int(n[b]), d)
    return out


def _angles(a, b):
    """Angle between the unit (or zero) rows ``a`` and ``b``, in [0, π].

    ``2·atan2(‖a − b‖, ‖a + b‖)`` equals ``arccos(a·b)`` for unit vectors but
    stays exact near 0 and π, where arccos of a rounded ``1 - 1e-16`` would
    give 1e-8.
    """
    return 2.0 * np.arctan2(
        np.linalg.norm(a - b, axis=-1), np.linalg.norm(a + b, axis=-1)
    )


def _unit_rows(v, Z):
    """Rows of ``v`` scaled to unit norm, and the mask of those of zero length
    (up to 1e-12 of the largest token norm of their prompt in ``Z``)."""
    norms = np.linalg.norm(v, axis=2)
    zero = norms <= 1e-12 * np.linalg.norm(Z, axis=2).max(axis=1, keepdims=True)
    u = np.divide(v, norms[..., None], out=np.zeros_like(v), where=~zero[..., None])
    return u, zero


def _curvature_batch(Z, n, preprocess, absolute, definition="paper"):
    Z = _prep_batch(Z, n) if preprocess else Z
    # "paper": the angle between successive steps z_{k+1} - z_k (Skean et al.,
    # 2025, eq. of the curvature); "authors_code": the angle between successive
    # tokens themselves (their metric code, step 1).
    steps = definition == "paper"
    u, zero = _unit_rows(np.diff(Z, axis=1) if steps else Z, Z)
    theta = _angles(u[:, 1:], u[:, :-1])
    # a zero-length step (two equal tokens) or a zero token has no direction
    theta[zero[:, 1:] | zero[:, :-1]] = 0.0
    if absolute:  # arccos(|c|)
        theta = np.minimum(theta, np.pi - theta)
    minimum = 3 if steps else 2
    counted = np.arange(theta.shape[1])[None, :] < (n - minimum + 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (theta * counted).sum(axis=1) / counted.sum(axis=1)
    out[n < minimum] = np.nan
    return out


def _pad(prompts):
    """Stack prompts of shape (N_i, D) into a zero-padded (B, T, D) batch."""
    n = np.array([Z.shape[0] for Z in prompts])
    out = np.zeros((len(prompts), max(n.max(), 1), prompts[0].shape[1]))
    for b, Z in enumerate(prompts):
        out[b, : n[b]] = Z
    return out, n


def _layer_values(metric, prompts, params, chunk=64):
    """Per-prompt values of ``metric`` for one layer's list of (N_i, D) arrays."""
    out = []
    with threadpool_limits(limits=1, user_api="blas"):  # tiny matrices
        for start in range(0, len(prompts), chunk):
            Z, n = _pad(prompts[start : start + chunk])
            if metric == "prompt_entropy":
                out.append(_prompt_entropy_batch(Z, n, *params))
            else:
                out.append(_curvature_batch(Z, n, *params))
    return np.concatenate(out)


def _mean_over_prompts(owner, values, minimum):
    values = np.asarray(values, dtype=np.float64)  # (n_prompts, n_layers)
    valid = ~np.isnan(values[:, 0])
    if not valid.any():
        raise ValueError(
            f"{owner}: every prompt has fewer than {minimum} tokens; nothing to "
            "average."
        )
    return values[valid].mean(axis=0)


def _pick(owner, tokens, max_prompts, random_state):
    """Subsample the prompts first, then validate only those kept."""
    check_count(max_prompts, owner, "max_prompts", allow_none=True)
    if isinstance(tokens, np.ndarray) and tokens.ndim in (3, 4):
        tokens = list(tokens)
    if hasattr(tokens, "__len__") and not isinstance(tokens, str) and len(tokens):
        index = subsample_index(len(tokens), max_prompts, random_state)
        tokens = [tokens[i] for i in index]
    return as_prompts(owner, tokens)


# --------------------------------------------------------------------------
# Public functions on plain arrays
# --------------------------------------------------------------------------
def prompt_vectors(tokens, *, preprocess=True):
    """Prompt vectors: the token mean of ``prep(Z_i)`` for every prompt.

    ``prep`` centres the tokens and L2-normalises each row; the mean is
    neither re-normalised nor centred. Use the result as the pooled ``P`` of
    :func:`dataset_entropy` and friends.

    Parameters
    ----------
    tokens : sequence of array-like
        One array per prompt, of shape (n_tokens, dim) or
        (n_layers, n_tokens, dim).
    preprocess : bool, default=True
        If False, the plain token mean.

    Returns
    -------
    P : ndarray of shape (n_prompts, dim) or (n_layers, n_prompts, dim)
        One prompt vector per prompt (and layer).

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import prompt_vectors
    >>> prompt_vectors([np.ones((3, 2)), np.eye(2)], preprocess=False).tolist()
    [[1.0, 1.0], [0.5, 0.5]]
    """
    prompts, single = as_prompts("prompt_vectors", tokens)
    P = np.stack(
        [
            np.stack([(prep(Z) if preprocess else Z).mean(axis=0) for Z in layers])
            for layers in prompts
        ],
        axis=1,
    )
    return P[0] if single else P


@add_subsample_doc
def prompt_entropy(
    tokens,
    *,
    alpha=1.0,
    normalization="maxEntropy",
    preprocess=True,
    clamp_gram=False,
    max_prompts=1000,
    random_state=None,
):
    """Mean matrix α-entropy of each prompt's tokens (lower = more compression).

    For every prompt with at least 2 tokens, ``S_α(prep(Z_i))`` is normalised
    with ``N = N_i`` tokens and ``D`` dimensions; the values are averaged over
    prompts.

    Parameters
    ----------
    tokens : sequence of array-like
        One array per prompt (its non-padding tokens in order), of shape
        (n_tokens, dim) or (n_layers, n_tokens, dim).
    alpha : float, default=1.0
        Rényi order.
    normalization : {"maxEntropy", "logN", "logD", "logNlogD", "raw"}, \
            default="maxEntropy"
        Divisor of each prompt's entropy.
    preprocess : bool, default=True
        Centre the tokens and L2-normalise the rows first.
    clamp_gram : bool, default=False
        As the authors' code does: clamp every entry of the Gram (``N×N``, or
        ``D×D`` when ``N > D``) at 0 before the spectrum.
    {PROMPTS}

    Returns
    -------
    entropy : float or ndarray of shape (n_layers,)
        A float for one-layer prompts, one value per layer otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import prompt_entropy
    >>> Z = np.eye(4, 8)  # four orthogonal tokens
    >>> round(prompt_entropy([Z], preprocess=False), 12)
    1.0
    """
    owner = "prompt_entropy"
    alpha = check_alpha(owner, alpha)
    check_option(owner, "normalization", normalization, NORMALIZATIONS)
    prompts, single = _pick(owner, tokens, max_prompts, random_state)
    params = (alpha, normalization, preprocess, bool(clamp_gram))
    values = np.stack(
        [
            _layer_values("prompt_entropy", [p[layer] for p in prompts], params)
            for layer in range(prompts[0].shape[0])
        ],
        axis=1,
    )
    return per_layer(_mean_over_prompts(owner, values, 2), single)


CURVATURE_DEFINITIONS = ("paper", "authors_code")


@add_subsample_doc
def curvature(
    tokens,
    *,
    definition="paper",
    preprocess=True,
    absolute=False,
    normalization="raw",
    max_prompts=1000,
    random_state=None,
):
    """Mean angle along each prompt's token path, per prompt then averaged.

    Two definitions (Skean et al., 2025), chosen with ``definition``:

    - ``"paper"`` (default), the paper's text: the angle between successive
      *steps*. With ``v_k = z_{k+1} - z_k``,
      ``θ_k = arccos(v_{k+1}·v_k/(‖v_{k+1}‖‖v_k‖))`` is averaged over a prompt
      (``N_i - 2`` angles), then over the prompts with at least 3 tokens.
      Range [0, π]: 0 for a straight path, π for a path that goes back and
      forth.
    - ``"authors_code"``, the authors' metric code: the angle between
      successive *tokens*, ``θ_k = arccos(z_k·z_{k+1}/(‖z_k‖‖z_{k+1}‖))``
      (step 1), averaged over a prompt (``N_i - 1`` angles), then over the
      prompts with at least 2 tokens. On the default ``prep(Z_i)`` (centred,
      unit rows) it equals their ``arccos(z_k·z_{k+1})``.

    A step or token of zero length (up to 1e-12 of the prompt's largest token
    norm) has no direction and gives the angle 0. Angles are computed as
    ``2·atan2(‖a − b‖, ‖a + b‖)`` of the unit vectors, which equals the
    arccos but stays exact near 0 and π.

    Read more in the :ref:`User Guide <metrics>`.

    Parameters
    ----------
    tokens : sequence of array-like
        One array per prompt, of shape (n_tokens, dim) or
        (n_layers, n_tokens, dim).
    definition : {"paper", "authors_code"}, default="paper"
        Angle between successive steps (the paper's text) or between
        successive tokens (the authors' code), as above.

        .. versionadded:: 0.3
    preprocess : bool, default=True
        Use ``prep(Z_i)`` (centred, rows L2-normalised) rather than raw tokens.
    absolute : bool, default=False
        Use ``|cos|``, range [0, π/2]. Neither the paper nor the authors'
        code does this (it was described as the authors' quirk before 0.3,
        wrongly).
    normalization : {"raw", "logD"}, default="raw"
        ``"logD"`` divides by ``log D``.
    {PROMPTS}

    Returns
    -------
    curvature : float or ndarray of shape (n_layers,)
        Mean angle in radians (or divided by ``log D``), per layer.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.metrics import curvature
    >>> line = np.outer(np.arange(5.0), [1.0, 2.0])
    >>> curvature([line], preprocess=False)
    0.0
    >>> zigzag = np.array([[0.0, 0], [1, 1], [0, 0], [1, 1]])
    >>> bool(np.isclose(curvature([zigzag], preprocess=False), np.pi))
    True
    >>> turns = np.array([[1.0, 0], [0, 1], [-1, 0]])  # quarter turns
    >>> bool(np.isclose(curvature([turns], definition="authors_code",
    ...                           preprocess=False), np.pi / 2))
    True
    """
    owner = "curvature"
    check_option(owner, "definition", definition, CURVATURE_DEFINITIONS)
    check_option(owner, "normalization", normalization, ("raw", "logD"))
    prompts, single = _pick(owner, tokens, max_prompts, random_state)
    params = (preprocess, bool(absolute), definition)
    values = np.stack(
        [
            _layer_values("curvature", [p[layer] for p in prompts], params)
            for layer in range(prompts[0].shape[0])
        ],
        axis=1,
    )
    mean = _mean_over_prompts(owner, values, 3 if definition == "paper" else 2)
    if normalization == "logD":
        mean = mean / normalizer(owner, "logD", 2, prompts[0].shape[2])
    return per_layer(mean, single)


# --------------------------------------------------------------------------
# Streaming path: a token-level "pooling" for HiddenStatesTransformer
# --------------------------------------------------------------------------
class TokenMetricPooling:
    """A pooling callable that returns the pooled vector and per-prompt metrics.

    Given to ``HiddenStatesTransformer(pooling=TokenMetricPooling(...))``, it
    is applied to every layer inside the batch loop: for a batch ``hidden``
    (B, T, D) with mask (B, T) it returns a (B, D + 2·n_metrics) tensor, the
    ordinary pooled vector followed, for each metric, by the prompt's value
    and a 0/1 flag that says whether the prompt was long enough (2 tokens for
    ``prompt_entropy``, 3 for ``curvature``, 2 under its
    ``definition="authors_code"``). Token states are never kept
    beyond the batch. :meth:`split` turns the extracted stack into the pooled
    stack and one value per layer for each metric.

    Parameters
    ----------
    metrics : tuple of str, default=("prompt_entropy", "curvature")
        Token-level metrics to compute.
    pooling : {"mean", "first", "cls", "last", "max"}, default="mean"
        Pooling of the returned vector.
    alpha : float, default=1.0
        Rényi order of ``prompt_entropy``.
    normalization : str, default="maxEntropy"
        Normalisation of ``prompt_entropy``.
    preprocess : bool, default=True
        Centre and L2-normalise each prompt's tokens first.
    clamp_gram : bool, default=False
        Quirk flag of ``prompt_entropy``.
    absolute : bool, default=False
        ``absolute`` of ``curvature``.
    definition : {"paper", "authors_code"}, default="paper"
        ``definition`` of ``curvature``.

        .. versionadded:: 0.3
    chunk_size : int, default=8
        Prompts processed together inside a batch (bounds the float64 copies
        of token states).

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> from skloes.metrics import TokenMetricPooling
    >>> f = TokenMetricPooling()
    >>> out = f(torch.randn(2, 5, 4), torch.ones(2, 5))  # doctest: +SKIP
    >>> tuple(out.shape)  # doctest: +SKIP
    (2, 8)
    """

    def __init__(
        self,
        *,
        metrics=TOKEN_METRICS,
        pooling="mean",
        alpha=1.0,
        normalization="maxEntropy",
        preprocess=True,
        clamp_gram=False,
        absolute=False,
        definition="paper",
        chunk_size=8,
    ):
        owner = type(self).__name__
        metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
        if not metrics:
            raise ValueError(f"{owner}: `metrics` must name at least one metric.")
        for name in metrics:
            check_option(owner, "metrics", name, TOKEN_METRICS)
        check_option(owner, "normalization", normalization, NORMALIZATIONS)
        self.metrics = metrics
        self.pooling = pooling
        self.alpha = check_alpha(owner, alpha)
        self.normalization = normalization
        self.preprocess = preprocess
        self.clamp_gram = clamp_gram
        self.absolute = absolute
        self.definition = check_option(
            owner, "definition", definition, CURVATURE_DEFINITIONS
        )
        self.chunk_size = check_count(chunk_size, owner, "chunk_size")

    def values(self, hidden, mask):
        """Per-prompt metric values of a batch of token states.

        Parameters
        ----------
        hidden : ndarray of shape (n_prompts, n_tokens, dim)
            Token states of a padded batch.
        mask : ndarray of shape (n_prompts, n_tokens)
            1 for real tokens, 0 for padding (left or right).

        Returns
        -------
        values : ndarray of shape (n_prompts, n_metrics)
            One column per metric, NaN where a prompt is too short for it.
        """
        keep = np.asarray(mask).astype(bool)
        out = np.empty((keep.shape[0], len(self.metrics)))
        with threadpool_limits(limits=1, user_api="blas"):  # tiny matrices
            # a few prompts at a time: float64 copies stay small
            for start in range(0, keep.shape[0], self.chunk_size):
                rows = slice(start, start + self.chunk_size)
                out[rows] = self._chunk_values(hidden[rows], keep[rows])
        return out

    def _chunk_values(self, hidden, keep):
        # real tokens first, in order; padding zeroed
        order = np.argsort(~keep, axis=1, kind="stable")
        Z = np.take_along_axis(
            np.asarray(hidden, dtype=np.float64), order[..., None], axis=1
        )
        n = keep.sum(axis=1)
        Z *= (np.arange(Z.shape[1])[None, :] < n[:, None])[..., None]
        out = np.empty((Z.shape[0], len(self.metrics)))
        for j, name in enumerate(self.metrics):
            if name == "prompt_entropy":
                out[:, j] = _prompt_entropy_batch(
                    Z,
                    n,
                    self.alpha,
                    self.normalization,
                    self.preprocess,
                    bool(self.clamp_gram),
                )
            else:
                out[:, j] = _curvature_batch(
                    Z, n, self.preprocess, bool(self.absolute), self.definition
                )
        return out

    def __call__(self, hidden, mask):
        from skloes.core._pooling import pool

        pooled = pool(hidden, mask, self.pooling)
        vals = self.values(
            hidden.detach().to("cpu", torch.float32).numpy(),
            mask.detach().to("cpu").numpy(),
        )
        ok = ~np.isnan(vals)
        extra = np.zeros((vals.shape[0], 2 * vals.shape[1]))
        extra[:, 0::2] = np.where(ok, vals, 0.0)
        extra[:, 1::2] = ok
        extra = torch.as_tensor(extra, dtype=pooled.dtype, device=pooled.device)
        return torch.cat([pooled, extra], dim=1)

    def split(self, stack, *, max_prompts=1000, random_state=None):
        """Split an extracted stack into the pooled stack and the metrics.

        Parameters
        ----------
        stack : ndarray of shape (n_layers, n_samples, dim + 2 * n_metrics)
            What ``HiddenStatesTransformer`` returned with this pooling.
        max_prompts : int or None, default=1000
            Average over at most this many prompts, drawn uniformly.
        random_state : int, RandomState instance or None, default=None
            Seeds the prompt subsample.

        Returns
        -------
        pooled : ndarray of shape (n_layers, n_samples, dim)
            The ordinary pooled stack.
        metrics : dict of str to ndarray of shape (n_layers,)
            Each metric averaged over the prompts long enough for it.
        """
        stack = np.asarray(stack)
        k = 2 * len(self.metrics)
        pooled, extra = stack[..., :-k], stack[..., -k:].astype(np.float64)
        index = subsample_index(stack.shape[1], max_prompts, random_state)
        extra = extra[:, index]
        out = {}
        for j, name in enumerate(self.metrics):
            vals, ok = extra[..., 2 * j], extra[..., 2 * j + 1] > 0.5
            count = ok.sum(axis=1)
            if not count.all():
                raise ValueError(
                    f"{type(self).__name__}: no prompt is long enough for {name}."
                )
            out[name] = (vals * ok).sum(axis=1) / count
        return pooled, out
