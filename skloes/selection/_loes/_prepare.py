"""The calibration rows and the candidate layers of a LOES fit, prepared once.

:class:`PreparedLayers` draws the calibration rows, encodes the targets, finds
the degenerate layers and holds each candidate in the form its steps read
(:func:`layer_form`): its thin SVD ``U diag(s)`` (``"svd"``), its factor rows
``F`` with ``F Fᵀ = U diag(s²) Uᵀ`` (``"factor_rows"``, the reference ridge
projection), or only its Gram spectrum until it joins the selection
(``"light"``, the fused objective when nothing weighted reads the factors).
It also caches what the steps share: the layers' cross products and class
centroids.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh, lapack

from skloes.core._geometry import (
    class_centroids,
    draw_triplets,
    eigh_descending,
    isotropy_erank,
    isotropy_inv_cv,
    rank_mask,
    thin_svd,
)
from skloes.selection._base import (
    calibration_rows,
    candidate_layers,
    input_epsilon,
    layer_spread,
)

#: How a candidate layer is held, see :func:`layer_form`.
LAYER_FORMS = ("svd", "factor_rows", "light")


def layer_form(cfg):
    """How the candidate layers of a fit are held.

    ``"factor_rows"`` for the reference ridge projection (the residual
    objective with ``orthogonalization="ridge"``), ``"light"`` for the fused
    objective with targets and no redundancy weight (no candidate is
    decomposed unless it is selected), else ``"svd"``.
    """
    if cfg.objective == "residual" and cfg.orthogonalization == "ridge":
        return "factor_rows"
    if cfg.fused and cfg.redundancy_weight == 0:
        return "light"
    return "svd"


def factor_rows(Xp):
    """Factor rows of the prepared rows ``Xp`` (``n × d``): ``(F, H, s, turn)``.

    ``F Fᵀ = U diag(s²) Uᵀ`` on the components the rank rule keeps: the
    prepared rows themselves when none is dropped, the rows turned off the
    dropped directions by Householder reflectors otherwise (``n > d``), and
    ``U diag(s)`` when ``n <= d``. Then ``F = U diag(s) R`` for an orthogonal
    ``R``, and every quantity the path reads is invariant under such a turn.
    ``H = FᵀF``, ``s`` the kept singular values (descending) and ``turn(v)``
    the coordinates in ``F``'s columns of a ``d``-vector ``v`` projected on the
    kept directions (``Vᵀv`` up to ``R``).
    """
    n, d = Xp.shape
    if n <= d:  # the n × n Gram form: the thin SVD itself
        U, s = thin_svd(Xp, center=False)
        return U * s, np.diag(s**2), s, lambda v: (U.T @ (Xp @ v)) / s
    gram = Xp.T @ Xp
    w = np.linalg.eigvalsh(gram)[::-1]
    keep = rank_mask(w, max(n, d))
    s, drop = np.sqrt(w[keep]), d - int(keep.sum())
    if not drop:
        return Xp, gram, s, lambda v: np.asarray(v, dtype=np.float64)
    # the dropped directions (smallest eigenvalues), then reflectors that map
    # them onto the first ``drop`` axes: F = (Xp H)[:, drop:]
    V_drop = eigh(gram, subset_by_index=[0, drop - 1], driver="evr")[1]
    qr, tau = lapack.dgeqrf(V_drop)[:2]

    def right(M):  # M H (H the d × d product of the reflectors)
        return lapack.dormqr("R", "N", qr, tau, M, lwork=max(64 * M.shape[0], d))[0]

    def left(M):  # Hᵀ M
        return lapack.dormqr("L", "T", qr, tau, M, lwork=max(64 * M.shape[1], d))[0]

    F = np.ascontiguousarray(right(np.array(Xp, order="F"))[:, drop:])
    H = left(right(np.array(gram, order="F")))[drop:, drop:]
    return F, (H + H.T) / 2, s, lambda v: left(np.asarray(v, float)[:, None])[drop:, 0]


class _Layer:
    """One candidate: prepared factors, isotropy and (optionally) its rows.

    ``form`` is one of :data:`LAYER_FORMS`. With ``share`` (the fused
    objective) the Gram ``X_cᵀX_c`` is computed once for the thin SVD and the
    fused components (kept in ``gram`` until :meth:`PreparedLayers.release`).
    A light layer takes its isotropy from the eigenvalues of the centred Gram
    (``X_cᵀX_c``, or ``X_cX_cᵀ`` when ``n <= d``), and ``U``/``s`` are
    computed only by :meth:`factors` (a layer that joins the selected span),
    from the prepared rows ``Xp`` kept with ``keep_rows``.
    """

    def __init__(self, X, mean, scale, cfg, form, share=False, keep_rows=False):
        Xp = X - mean
        unit = cfg.scaling == "unit_variance"
        if unit:
            Xp = Xp / scale
        n, self.dim = X.shape
        iso = isotropy_erank if cfg.isotropy == "erank" else isotropy_inv_cv
        self.gram = None
        if form == "factor_rows":
            self.F, self.H, self.s, turn = factor_rows(Xp)
            self._finish(X, mean, scale, cfg, iso, lambda: turn(mean))
            return
        if form == "light" or (share and n > self.dim):
            Xc = X - mean
            self.gram = Xc.T @ Xc if n > self.dim else Xc @ Xc.T
        if form == "light":
            w = np.linalg.eigvalsh(self.gram)[::-1] / (scale**2 if unit else 1.0)
            keep = rank_mask(w, max(n, self.dim))
            self.spectrum = np.sqrt(w[keep])
            self.energy = float(np.sum(w[keep]))
            self.iso = float(iso(self.spectrum, n, self.dim))
            if keep_rows:
                self.Xp = Xp
            return
        gram = None if self.gram is None else self.gram / (scale**2 if unit else 1.0)
        self.U, self.s = thin_svd(Xp, center=False, gram=gram)
        self._finish(
            X, mean, scale, cfg, iso, lambda: (self.U.T @ (Xp @ mean)) / self.s
        )

    def _finish(self, X, mean, scale, cfg, iso, mean_coords):
        """Spectrum, energy, isotropy and the overlap's raw-data moments."""
        self.spectrum = self.s
        self.energy = float(np.sum(self.s**2))
        self.iso = float(iso(self.s, *X.shape))
        if cfg.redundancy == "overlap":  # raw-data moments for the overlap
            self.mean, self.raw_norm2 = mean, float(np.sum(X**2))
            self.factor = scale if cfg.scaling == "unit_variance" else 1.0
            self.p = mean_coords() if self.s.size else self.s

    def factors(self):
        """The thin SVD ``(U, s)`` of a light layer, on first use."""
        if not hasattr(self, "U"):
            self.U, self.s = thin_svd(self.Xp, center=False)
        return self.U, self.s


class PreparedLayers:
    """The calibration rows, targets and candidate layers of one fit.

    Parameters
    ----------
    stack : ndarray of shape (n_layers, n_samples, dim)
        The layer stack (any float dtype; the calibration rows are copied to
        float64).
    y : ndarray or None
        Class labels (classification), ``(n, q)`` targets (regression), or
        None (label-free).
    cfg : LOESConfig
        The fit's configuration.
    rng : numpy.random.RandomState
        Draws the calibration rows, then the triangle triplets.
    owner : str
        Estimator name for the messages.
    form : str or None, default=None
        One of :data:`LAYER_FORMS`; None is :func:`layer_form` of ``cfg``
        (another form gives the same selections and scores to rounding, which
        the tests check).
    """

    def __init__(self, stack, y, cfg, rng, owner, form=None):
        self.cfg, self.owner = cfg, owner
        self.form = layer_form(cfg) if form is None else form
        n_all = stack.shape[1]
        classes = codes_all = None
        if cfg.task == "classification":
            classes, codes_all = np.unique(y, return_inverse=True)
        rows = calibration_rows(cfg.max_samples, n_all, codes_all, rng)
        if n_all < 3:
            raise ValueError(
                f"{owner}: needs at least 3 samples to select layers; got {n_all}."
            )
        if rows.size < 3:
            raise ValueError(
                f"{owner}: `max_samples` must leave at least 3 calibration rows; "
                f"got {rows.size}."
            )
        self.rows, self.n, self.classes = rows, rows.size, classes
        self._targets(y, codes_all)
        self.triplets = None
        if cfg.task == "classification" and self.n_present >= 3:
            self.triplets = draw_triplets(cfg.triplet_rule, self.n_present, rng)
        self._prepare(stack)

    @property
    def triangle(self):
        """Whether steps score the triangle (3+ classes present, a weight)."""
        return self.triplets is not None and self.cfg.volume_weight != 0

    def _targets(self, y, codes_all):
        task, rows = self.cfg.task, self.rows
        self.Y = None
        if task == "classification":
            present, self.codes = np.unique(codes_all[rows], return_inverse=True)
            self.n_present = present.size
            self.Y = np.eye(self.classes.size)[codes_all[rows]]
        elif task == "regression":
            Y = y[rows]
            std = Y.std(axis=0)
            if np.any(std <= 1e-12 * np.maximum(np.abs(Y).max(axis=0), 1.0)):
                raise ValueError(
                    f"{self.owner}: `y` must not have a constant (zero-variance) "
                    "column on the calibration rows."
                )
            if self.cfg.variant == "robust":
                Y = (Y - Y.mean(axis=0)) / std
            self.Y = Y
        if self.Y is not None:
            self.denom = float(np.sum((self.Y - self.Y.mean(axis=0)) ** 2))

    def _prepare(self, stack):
        n_layers, eps = stack.shape[0], input_epsilon(stack.dtype)
        means, scale, raws = [], np.empty(n_layers), []
        degenerate = np.zeros(n_layers, dtype=bool)
        for l in range(n_layers):
            X = np.asarray(stack[l][self.rows], dtype=np.float64)
            mean, scale[l], degenerate[l] = layer_spread(X, eps, self.owner, l)
            means.append(mean)
            raws.append(X)
        self.layer_mean = np.vstack(means)
        self.layer_scale = scale
        candidates, self.degenerate = candidate_layers(
            degenerate, self.cfg.include_embedding, self.owner, stacklevel=7
        )
        if self.cfg.grid is not None:  # the candidate grid (_grid)
            candidates = candidates[np.isin(candidates, self.cfg.grid)]
        self.candidates = candidates.tolist()
        share = self.cfg.fused and self.form != "factor_rows"
        keep_rows = self.form == "light" and self.triangle
        self.layers = {
            l: _Layer(
                raws[l], means[l], scale[l], self.cfg, self.form, share, keep_rows
            )
            for l in self.candidates
        }
        self.raws = raws  # until release(): the objective and the terms read them
        self._cross = {}

    def release(self):
        """Drop what only the preparation reads (a cached path stays small)."""
        self.raws = None
        for layer in self.layers.values():
            layer.gram = None

    def cross(self, a, b):
        """``U_aᵀU_b`` (``F_aᵀF_b`` in factor-row form), computed once per pair."""
        if (a, b) in self._cross:
            return self._cross[(a, b)]
        if (b, a) in self._cross:
            return self._cross[(b, a)].T
        la, lb = self.layers[a], self.layers[b]
        if self.form == "factor_rows":
            self._cross[(a, b)] = la.H if a == b else la.F.T @ lb.F
        else:
            self._cross[(a, b)] = la.U.T @ lb.U
        return self._cross[(a, b)]

    def centroids(self, l):
        """Class centroids of the rows of ``U_l`` (``F_l``), computed once."""
        layer = self.layers[l]
        if not hasattr(layer, "cent_U"):
            rows = layer.F if self.form == "factor_rows" else layer.U
            layer.cent_U = class_centroids(rows, self.codes, self.n_present)
        return layer.cent_U

    def moments(self, a, b):
        """``s_a U_aᵀU_b s_b`` (``F_aᵀF_b``): the centred cross-moments of a pair."""
        if self.form == "factor_rows":
            return self.cross(a, b)
        la, lb = self.layers[a], self.layers[b]
        return (la.s[:, None] * self.cross(a, b)) * lb.s[None, :]

    def coords(self, l, T):
        """``U_lᵀT`` (``F_lᵀT``): a sample-space ``T`` in the layer's columns."""
        layer = self.layers[l]
        return (layer.F if self.form == "factor_rows" else layer.U).T @ T

    def svd_factors(self, l):
        """``(U, s)`` of layer ``l``; in factor-row form from ``eigh(H)``."""
        layer = self.layers[l]
        if self.form != "factor_rows":
            return layer.U, layer.s
        w, W = eigh_descending(layer.H)
        m = layer.s.size
        s = np.sqrt(np.maximum(w[:m], 0.0))
        return layer.F @ (W[:, :m] / s), s
