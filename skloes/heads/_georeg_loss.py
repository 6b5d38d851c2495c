"""GeoRegLoss: the geometry-preserving regulariser (a torch module).

Imports torch at its top (with the install hint when torch is missing); the
estimators import it inside ``fit``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.core._geometry import (
    class_centroids_torch,
    sample_distinct_triplets,
    spectral_imbalance_torch,
    triangle_areas_torch,
)
from skloes.core._torch import torch
from skloes.heads._options import GEO_VARIANTS

F = torch.nn.functional
nn = torch.nn


def _check_batch(z, y):
    """One clear error naming ``z`` or ``y`` before the loss's linear algebra."""
    if z.ndim != 2 or z.shape[0] == 0:
        raise ValueError(
            "GeoRegLoss: `z` must be a non-empty (batch_size, dim) tensor; got "
            f"shape {tuple(z.shape)}."
        )
    if y is not None and tuple(y.shape) != (z.shape[0],):
        raise ValueError(
            f"GeoRegLoss: `y` must hold one label per row of `z` ({z.shape[0]}); "
            f"got shape {tuple(y.shape)}."
        )
    if not bool(torch.isfinite(z).all()):
        raise ValueError(
            "GeoRegLoss: `z` has NaN or inf values (a diverged or unscaled "
            "embedding); the spectral term needs finite inputs."
        )


def _check_finite_loss(loss, z):
    if not bool(torch.isfinite(loss)):
        raise ValueError(
            f"GeoRegLoss: the loss overflows {z.dtype} for this `z` (largest "
            f"|z| = {float(z.abs().max()):.3g}); rescale the embedding."
        )


def _numpy_rng(generator):
    """A numpy Generator seeded by one draw from a torch generator."""
    seed = torch.randint(0, 2**62, (1,), generator=generator).item()
    return np.random.default_rng(seed)


class GeoRegLoss(nn.Module):
    """Geometry-preserving regulariser of a fused mini-batch embedding.

    ``L_geo = weight · (spectral + triangle)``. The spectral term penalises an
    unbalanced covariance spectrum of the batch embedding ``z`` (dimensional
    collapse); the triangle term rewards a large area of the triangles spanned
    by the class centroids of the batch (class collapse). Both terms are
    computed by :mod:`skloes.core._geometry`; this module only combines them.

    Parameters
    ----------
    weight : float, default=0.1
        Multiplier ``w`` of the regulariser; 0 disables it.
    variant : {"robust", "reference"}, default="robust"
        ``"reference"`` is the authors' form: the variance of the ``D'``
        covariance eigenvalues (plus ``1e-4`` jitter) minus the log area of
        one random centroid triangle of the raw embedding. ``"robust"`` is
        scale-invariant and variance-reduced: the normalised spectral
        imbalance ``V̂`` of the top ``min(B-1, D')`` eigenvalues plus the mean
        of ``-log(area + eps)`` over up to ``n_triplets`` centroid triangles of
        the L2-normalised rows.
    n_triplets : int, default=32
        Robust variant: every triplet of present classes is used when there
        are at most this many, otherwise this many distinct ones are drawn
        afresh at each call. The reference variant always uses one.
    eps : float, default=1e-6
        Added to the triangle areas inside the logarithm.

    See Also
    --------
    GeoRegClassifier : Head on layer features trained with cross-entropy + GeoReg.
    GeoRegFineTuner : The same head and the backbone, fine-tuned end to end.

    Notes
    -----
    The spectral term acts on any batch with at least 2 rows and 2 columns,
    binary tasks included (the robust form, which compares the top
    ``min(B - 1, D')`` eigenvalues, needs 3 rows). The triangle term
    needs at least 3 distinct classes in the batch and is 0 otherwise, and
    with ``y=None`` (regression) only the spectral term is used. See
    :func:`georeg_can_act` and the user guide (:ref:`georeg`). Gradients
    never flow through eigenvectors, so repeated eigenvalues, duplicated rows
    and rank-deficient batches are safe.
    Requires ``pip install skloes[torch]``.

    Examples
    --------
    >>> import torch  # doctest: +SKIP
    >>> from skloes import GeoRegLoss  # doctest: +SKIP
    >>> z = torch.randn(16, 8, requires_grad=True)  # doctest: +SKIP
    >>> y = torch.arange(16) % 4  # doctest: +SKIP
    >>> GeoRegLoss(weight=0.1)(z, y).backward()  # doctest: +SKIP
    """

    def __init__(self, weight=0.1, variant="robust", n_triplets=32, eps=1e-6):
        super().__init__()
        if variant not in GEO_VARIANTS:
            raise ValueError(
                f"GeoRegLoss: `variant` must be one of {GEO_VARIANTS}; got {variant!r}."
            )
        if not weight >= 0:
            raise ValueError(f"GeoRegLoss: `weight` must be >= 0; got {weight!r}.")
        if int(n_triplets) != n_triplets or n_triplets < 1:
            raise ValueError(
                f"GeoRegLoss: `n_triplets` must be a positive int; got {n_triplets!r}."
            )
        if not eps > 0:
            raise ValueError(f"GeoRegLoss: `eps` must be > 0; got {eps!r}.")
        self.weight = float(weight)
        self.variant = variant
        self.n_triplets = int(n_triplets)
        self.eps = float(eps)

    def extra_repr(self):
        return (
            f"weight={self.weight}, variant={self.variant!r}, "
            f"n_triplets={self.n_triplets}, eps={self.eps}"
        )

    def spectral_term(self, z):
        """Unweighted spectral term of ``z`` (B, D'); 0 when it cannot act.

        It is 0 when :func:`spectral_can_act` says so (fewer than 2 rows or
        columns; for the robust form, ``min(B - 1, D') < 2``).

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding.

        Returns
        -------
        term : torch.Tensor
            Scalar.
        """
        if not spectral_can_act(z.shape[0], z.shape[1], self.variant):
            return z.new_zeros(())
        return spectral_imbalance_torch(z, variant=self.variant)

    def triangle_term(self, z, y, generator=None):
        """Unweighted triangle term; 0 when fewer than 3 classes or rows.

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding.
        y : torch.Tensor of shape (batch_size,)
            Class labels (any integer coding).
        generator : torch.Generator or None, default=None
            Source of the random triplets (the global generator when None).

        Returns
        -------
        term : torch.Tensor
            Scalar.
        """
        classes, codes = torch.unique(y, return_inverse=True)
        n_classes = classes.numel()
        if z.shape[0] < 3 or n_classes < 3:
            return z.new_zeros(())
        robust = self.variant == "robust"
        n_draw = self.n_triplets if robust else 1
        triplets = sample_distinct_triplets(n_classes, n_draw, _numpy_rng(generator))
        triplets = torch.as_tensor(triplets, device=z.device)
        points = F.normalize(z, dim=1, eps=1e-12) if robust else z
        centroids = class_centroids_torch(points, codes.to(z.device), n_classes)
        floor = 1e-12 if robust else 1e-6
        areas = triangle_areas_torch(centroids, triplets, floor=floor)
        return -torch.log(areas + self.eps).mean()

    def terms(self, z, y=None, generator=None):
        """The two unweighted terms ``(spectral, triangle)``.

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding.
        y : torch.Tensor of shape (batch_size,) or None, default=None
            Class labels; None (regression) gives a zero triangle term.
        generator : torch.Generator or None, default=None
            Source of the random triplets.

        Returns
        -------
        spectral, triangle : torch.Tensor
            Scalars; the triangle term is 0 without labels or with fewer
            than 3 classes in the batch.
        """
        if y is None:
            return self.spectral_term(z), z.new_zeros(())
        return self.spectral_term(z), self.triangle_term(z, y, generator)

    def forward(self, z, y=None, generator=None):
        """Weighted GeoReg loss ``weight · (spectral + triangle)``.

        Parameters
        ----------
        z : torch.Tensor of shape (batch_size, dim)
            Batch embedding (before any LayerNorm of the probe).
        y : torch.Tensor of shape (batch_size,) or None, default=None
            Class labels; None uses the spectral term only (regression).
        generator : torch.Generator or None, default=None
            Source of the random triplets.

        Returns
        -------
        loss : torch.Tensor
            Scalar.
        """
        _check_batch(z, y)
        spectral, triangle = self.terms(z, y, generator)
        loss = self.weight * (spectral + triangle)
        _check_finite_loss(loss, z)
        return loss


def spectral_can_act(batch_size, embed_dim, variant="robust"):
    """Whether the spectral term can be non-zero on a batch of this shape.

    It needs at least 2 rows and 2 columns; the robust form compares the top
    ``min(B - 1, D')`` eigenvalues, so it needs ``min(B - 1, D') >= 2``.
    """
    if variant == "robust":
        return min(batch_size - 1, embed_dim) >= 2
    return batch_size >= 2 and embed_dim >= 2


def georeg_can_act(batch_size, embed_dim, n_classes=None, variant="robust"):
    """Whether GeoReg can be non-zero on a batch of this shape.

    Parameters
    ----------
    batch_size : int
        Rows of the largest batch.
    embed_dim : int
        Width ``D'`` of the fused embedding.
    n_classes : int or None, default=None
        Classes of the task; None for regression.
    variant : {"robust", "reference"}, default="robust"
        The GeoReg form.

    Returns
    -------
    can_act : bool
        True when the spectral term (see :func:`spectral_can_act`) or the
        triangle term (>= 3 rows and >= 3 classes) can act.
    """
    triangle = n_classes is not None and n_classes >= 3 and batch_size >= 3
    return spectral_can_act(batch_size, embed_dim, variant) or triangle
