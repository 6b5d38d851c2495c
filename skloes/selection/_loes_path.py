"""The LOES selection path: preparation, scoring and updates.

Pure numpy on the calibration rows. Each candidate layer is decomposed once
(``thin_svd``); a step decomposes the selected span in its smaller Gram form and
scores every candidate in the layer's ``m``-dimensional space. The
estimators of :mod:`skloes.selection._loes` call :func:`_loes_path`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from math import floor
from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state

from skloes._geometry import (
    EPS64,
    all_triplets,
    cka_from_svd,
    class_centroids,
    isotropy_erank,
    isotropy_inv_cv,
    overlap_redundancy,
    sample_distinct_triplets,
    thin_svd,
    triangle_areas,
)
from skloes._ridge import ridge_svd, ridge_train_loss
from skloes.selection._base import calibration_rows as _calibration_rows
from skloes.selection._base import degenerate_layers

#: Component values of each variant (see the user guide, :ref:`loes_variants`);
#: ``alpha`` is the isotropy weight.
VARIANTS = {
    "reference": {
        "scaling": "none", "ridge_alpha": 1e-3, "loss": "train",
        "orthogonalization": "ridge", "isotropy": "inv_cv",
        "redundancy": "overlap", "triplets": "sampled", "alpha": 1.0,
    },
    "robust": {
        "scaling": "unit_variance", "ridge_alpha": "gcv", "loss": "loo",
        "orthogonalization": "basis", "isotropy": "erank",
        "redundancy": "cka", "triplets": "auto", "alpha": 0.1,
    },
}
COMPONENTS = ("scaling", "ridge_alpha", "loss", "orthogonalization", "isotropy",
              "redundancy", "triplets", "alpha")
SCORE_KEYS = ("score", "loss", "isotropy", "redundancy", "triangle", "ridge_alpha",
              "retained")
ORTH_RIDGE_EPS = 1e-6      # ε_o of the reference projection
DUPLICATE_CKA = 1 - 1e-10  # the duplicate guard's threshold
EXHAUSTED = 1e-10          # ‖X̃‖²/‖X‖² below which a candidate is exhausted

def _draw_triplets(rule, n_classes, rng):
    """The triangle triplets, drawn once per fit (``triplets`` parameter)."""
    kind, count = rule
    if kind == "sampled":  # uniform over {0..C-1}³, repeats allowed
        count = min(200, 3 * n_classes) if count is None else count
        return rng.randint(0, n_classes, size=(count, 3)).astype(np.intp)
    if count is None and n_classes <= 30:
        return all_triplets(n_classes)
    return sample_distinct_triplets(n_classes, 200 if count is None else count, rng)


# --------------------------------------------------------------------------
# The selection path
# --------------------------------------------------------------------------
class _Layer:
    """One candidate: prepared factors, isotropy and (optionally) raw rows."""

    def __init__(self, X, mean, scale, cfg):
        Xp = X - mean
        if cfg["scaling"] == "unit_variance":
            Xp = Xp / scale
        self.U, self.s = thin_svd(Xp, center=False)
        self.dim = X.shape[1]
        self.energy = float(np.sum(self.s**2))
        n = X.shape[0]
        iso = isotropy_erank if cfg["isotropy"] == "erank" else isotropy_inv_cv
        self.iso = float(iso(self.s, n, self.dim))
        self.raw = X if cfg["redundancy"] == "overlap" else None


def _span_basis(layers, n, cfg):
    """Orthogonaliser of the selected span: ``(Q, shrink)``.

    ``shrink`` is None for the rank-limited basis (X̃ = (I - QQᵀ)X) and
    ``σ²/(σ²+ε_o)`` for the reference ridge projection. The decomposition is
    taken of ``B = [U_j diag(s_j)]`` in its smaller Gram (``n×n`` or
    ``Σm×Σm``), which has the same left singular vectors as ``X_S``.
    """
    B = np.hstack([layer.U * layer.s for layer in layers])
    U, sig = thin_svd(B, center=False)
    sig2 = sig**2
    sum_d = sum(layer.dim for layer in layers)
    rank = int(np.sum(sig2 > sig2[0] * max(n, sum_d) * EPS64)) if sig2.size else 0
    U, sig2 = U[:, :rank], sig2[:rank]
    if cfg["orthogonalization"] == "ridge":
        return U, sig2 / (sig2 + ORTH_RIDGE_EPS)
    r_energy = int(np.searchsorted(np.cumsum(sig2), cfg["orth_energy"] * sig2.sum()
                                   * (1 - 1e-12))) + 1 if rank else 0
    r = min(r_energy, floor(cfg["orth_max_rank"] * n), rank)
    return U[:, :r], None


def _residual_factors(U, s, basis):
    """``M = (U - QÃ) diag(s)`` with X̃ = M Vᵀ for a layer ``U diag(s) Vᵀ``."""
    Q, shrink = basis
    A = Q.T @ U
    if shrink is not None:
        A = shrink[:, None] * A
    return (U - Q @ A) * s


class _Residual:
    """A candidate orthogonalised against the span: X̃ = (U - QÃ) diag(s) Vᵀ.

    Its Gram ``MᵀM = diag(s)(I - AᵀÃ - ÃᵀA + ÃᵀÃ)diag(s)`` (``A = QᵀU``) is
    formed in the layer's ``m``-dimensional space, so the spectrum, the
    ridge coordinates ``Zᵀ = (U_Mᵀ T)ᵀ`` and the class centroids never need the
    ``n×m`` matrix ``M``; it is built only for the LOO loss or a fitted update.
    """

    def __init__(self, layer, basis, n):
        Q, shrink = basis
        self.layer, self.Q = layer, Q
        A = Q.T @ layer.U
        self.At = A if shrink is None else shrink[:, None] * A
        cross = A.T @ self.At
        inner = np.eye(A.shape[1]) - cross - cross.T + self.At.T @ self.At
        G = layer.s[:, None] * inner * layer.s[None, :]
        w, W = np.linalg.eigh((G + G.T) / 2)
        w, W = w[::-1], W[:, ::-1]
        keep = (w > max(w[0], 0.0) * max(n, w.size) * EPS64) & (w > 0) if w.size \
            else w > 0
        self.sigma, self.W = np.sqrt(w[keep]), W[:, keep]
        self.energy = max(float(np.trace(G)), 0.0)

    def coords(self, UtT, QtT):
        """``U_Mᵀ T`` from ``UᵀT`` and ``QᵀT``."""
        return (self.W / self.sigma).T @ (self.layer.s[:, None]
                                          * (UtT - self.At.T @ QtT))

    def left(self):
        """``U_M = M W / σ`` (n × m′)."""
        M = (self.layer.U - self.Q @ self.At) * self.layer.s
        return M @ (self.W / self.sigma)

    def centroids(self, cent_U, cent_Q):
        """Class centroids of the rows of ``M`` (V coordinates)."""
        return (cent_U - cent_Q @ self.At) * self.layer.s


class _Path:
    """State of one greedy LOES run on the calibration rows."""

    def __init__(self, stack, y, cfg, rng, name):
        self.cfg, self.name = cfg, name
        n_layers, n_all, dim = stack.shape
        task = cfg["task"]
        classes = None
        if task == "classification":
            classes, codes_all = np.unique(y, return_inverse=True)
        rows = _calibration_rows(cfg["max_samples"], n_all,
                                 codes_all if classes is not None else None, rng)
        n = rows.size
        if n < 3:
            raise ValueError(f"{name}: `max_samples` must leave at least 3 "
                             f"calibration rows; got {n}.")
        self.rows, self.n, self.classes = rows, n, classes
        self._targets(y, codes_all if classes is not None else None)
        self._prepare(stack, rows)
        self.triplets = None
        if task == "classification" and self.n_present >= 3:
            self.triplets = _draw_triplets(cfg["triplet_rule"], self.n_present, rng)

    def _targets(self, y, codes_all):
        task, rows = self.cfg["task"], self.rows
        self.Y = None
        if task == "classification":
            present, self.codes = np.unique(codes_all[rows], return_inverse=True)
            self.n_present = present.size
            self.Y = np.eye(self.classes.size)[codes_all[rows]]
        elif task == "regression":
            Y = y[rows]
            std = Y.std(axis=0)
            if np.any(std <= 1e-12 * np.maximum(np.abs(Y).max(axis=0), 1.0)):
                raise ValueError(f"{self.name}: `y` must not have a constant "
                                 "(zero-variance) column on the calibration rows.")
            if self.cfg["variant"] == "robust":
                Y = (Y - Y.mean(axis=0)) / std
            self.Y = Y
        if self.Y is not None:
            self.denom = float(np.sum((self.Y - self.Y.mean(axis=0)) ** 2))

    def _prepare(self, stack, rows):
        n_layers = stack.shape[0]
        means, var, raws = [], np.empty(n_layers), []
        for l in range(n_layers):
            X = np.asarray(stack[l][rows], dtype=np.float64)
            means.append(X.mean(axis=0))
            var[l] = float(np.sum((X - means[-1]) ** 2)) / self.n
            raws.append(X)
        self.layer_mean = np.vstack(means)
        self.layer_scale = np.sqrt(var)
        self.degenerate = degenerate_layers(var)
        first = 0 if self.cfg["include_embedding"] else 1
        self.candidates = [l for l in range(first, n_layers)
                           if l not in set(self.degenerate.tolist())]
        if self.degenerate.size:
            warnings.warn(
                f"{self.name}: layers {self.degenerate.tolist()} are degenerate "
                "(total variance <= 1e-12 of the largest) and are excluded.",
                UserWarning, stacklevel=4,
            )
        self.layers = {l: _Layer(raws[l], self.layer_mean[l], self.layer_scale[l],
                                 self.cfg) for l in self.candidates}
        self._red, self._cka = {}, {}

    def cka(self, a, b):
        key = (min(a, b), max(a, b))
        if key not in self._cka:
            la, lb = self.layers[a], self.layers[b]
            self._cka[key] = cka_from_svd(la.U, la.s, lb.U, lb.s)
        return self._cka[key]

    def redundancy(self, a, b):
        if self.cfg["redundancy"] == "cka":
            return self.cka(a, b)
        key = (min(a, b), max(a, b))
        if key not in self._red:
            self._red[key] = overlap_redundancy(self.layers[a].raw,
                                                self.layers[b].raw)
        return self._red[key]

    def ridge(self, U, s, T):
        cfg = self.cfg
        return ridge_svd(U, s, T, alpha=cfg["ridge_alpha"], loss=cfg["loss"],
                         loo_denominator=self.denom)

    def run(self, n_select):
        """Greedy selection of up to ``n_select`` layers."""
        cfg, n, L = self.cfg, self.n, len(self.layer_scale)
        label_free = cfg["task"] == "label_free"
        if not label_free:
            self.Y_hat = np.tile(self.Y.mean(axis=0), (n, 1))
            R = self.Y - self.Y_hat
        order, rows, fits = [], [], []
        for k in range(n_select):
            ctx = None if label_free else self._context(k, order, R)
            table = {key: np.full(L, np.nan) for key in SCORE_KEYS}
            eligible = np.zeros(L, dtype=bool)
            sols = {}
            for l in self.candidates:
                if l in order or (cfg["exclude_duplicates"] and k and max(
                        self.cka(l, j) for j in order) >= DUPLICATE_CKA):
                    continue
                eligible[l] = True
                sols[l] = self._score(l, k, order, ctx, table)
            if not eligible.any():
                warnings.warn(f"{self.name}: no eligible candidate left after "
                              f"{k} step(s); stopping early.", UserWarning,
                              stacklevel=3)
                break
            score = np.where(eligible, table["score"], np.inf)
            best = int(np.argmin(score))  # ties -> smallest index
            table["eligible"] = eligible
            rows.append(table)
            if not label_free:
                fits.append(self._update(best, k, sols[best], ctx))
                R = self.Y - self.Y_hat
            order.append(best)
        self.residual = None if label_free else R
        return order, rows, fits

    def _context(self, k, order, R):
        """Per-step quantities shared by every candidate."""
        cfg, n = self.cfg, self.n
        Rc = R - R.mean(axis=0)
        ctx = {"R": R, "tc2": float(np.sum(Rc**2)), "scale": 1.0, "basis": None}
        if not k:
            return ctx
        Q, shrink = ctx["basis"] = _span_basis([self.layers[j] for j in order], n,
                                               cfg)
        ctx["QtR"] = Q.T @ R
        if self.triplets is not None and cfg["eta"] != 0:
            ctx["cent_Q"] = class_centroids(Q, self.codes, self.n_present)
        if cfg["loss_normalization"] == "relative":
            null = ridge_svd(np.zeros((n, 0)), np.zeros(0), R, loss=cfg["loss"],
                             loo_denominator=self.denom)
            ctx["scale"] = 1.0 / max(null.loss, 1e-300)
        return ctx

    def _score(self, l, k, order, ctx, table):
        cfg, layer = self.cfg, self.layers[l]
        retained, res, sol, tri = 1.0, None, None, 0.0
        if ctx is None:
            table["loss"][l] = 0.0
        elif not k:
            sol = self.ridge(layer.U, layer.s, ctx["R"])
            table["loss"][l], table["ridge_alpha"][l] = sol.loss, sol.alpha
        else:
            res = _Residual(layer, ctx["basis"], self.n)
            retained = res.energy / layer.energy
            if retained < EXHAUSTED and cfg["ridge_alpha"] == "gcv":
                res.sigma, res.W = res.sigma[:0], res.W[:, :0]  # rounding noise only
            if cfg["loss"] == "train":
                Z = res.coords(layer.U.T @ ctx["R"], ctx["QtR"])
                lam, loss = ridge_train_loss(res.sigma, Z, ctx["tc2"], self.n,
                                             alpha=cfg["ridge_alpha"])
                sol = (res, lam)
            else:
                sol = self.ridge(res.left(), res.sigma, ctx["R"])
                lam, loss = sol.alpha, sol.loss
            table["loss"][l], table["ridge_alpha"][l] = loss * ctx["scale"], lam
            if "cent_Q" in ctx:
                tri = self._triangle(l, res, ctx["cent_Q"], retained)
        red = max(self.redundancy(l, j) for j in order) if k else 0.0
        table["isotropy"][l] = layer.iso
        table["redundancy"][l] = red
        table["triangle"][l] = tri
        table["retained"][l] = retained
        table["score"][l] = (table["loss"][l] + cfg["alpha"] * (1 - layer.iso)
                             + cfg["gamma"] * red - cfg["eta"] * tri)
        return sol

    def _triangle(self, l, res, cent_Q, retained):
        """Mean centroid-triangle area of X̃."""
        rescale = self.cfg["scaling"] == "unit_variance"
        if rescale and retained < EXHAUSTED:
            return 0.0  # exhausted candidate
        layer = self.layers[l]
        if not hasattr(layer, "cent_U"):
            layer.cent_U = class_centroids(layer.U, self.codes, self.n_present)
        areas = triangle_areas(res.centroids(layer.cent_U, cent_Q), self.triplets)
        tri = float(areas.mean()) if areas.size else 0.0
        return tri / (res.energy / self.n) if rescale else tri

    def _update(self, best, k, sol, ctx):
        """Stagewise or refit update of ``Ŷ``; returns the contribution."""
        if self.cfg["update"] == "refit" and k:
            layer = self.layers[best]
            fit = self.ridge(layer.U, layer.s, self.Y).fitted
        elif isinstance(sol, tuple):  # spectral-only scoring: build the fit now
            res, lam = sol
            U = res.left() if res.sigma.size else np.zeros((self.n, 0))
            fit = ridge_svd(U, res.sigma, ctx["R"], alpha=lam if lam > 0 else 1.0,
                            loss="train").fitted
        else:
            fit = sol.fitted
        self.Y_hat = self.Y_hat + fit
        return fit


def _loes_path(stack, y, n_select, cfg, random_state, name, clip=False):
    """Fit one LOES path; returns the fitted attributes as a dict.

    With ``clip``, a budget above the number of candidates is lowered to it
    (LOESSelectorCV's ``max_layers_to_select``) instead of raising.
    """
    rng = check_random_state(random_state)
    path = _Path(stack, y, cfg, rng, name)
    if clip:
        n_select = min(n_select, len(path.candidates))
    if n_select > len(path.candidates) or n_select < 1:
        raise ValueError(
            f"{name}: `n_layers_to_select` must be at most the number of candidate "
            f"layers; got {n_select} for {len(path.candidates)} candidate layer(s) "
            f"of {stack.shape[0]} ({stack.shape[0] * stack.shape[2]} feature(s))."
        )
    order, rows, fits = path.run(n_select)
    L = stack.shape[0]
    iso = np.full(L, np.nan)
    for l, layer in path.layers.items():
        iso[l] = layer.iso
    scores = {key: np.array([r[key] for r in rows]).reshape(len(rows), L)
              for key in (*SCORE_KEYS, "eligible")}
    return {
        "selection_order_": np.asarray(order, dtype=np.intp),
        "scores_": scores,
        "isotropy_": iso,
        "calibration_indices_": path.rows,
        "classes_": path.classes,
        "degenerate_layers_": path.degenerate,
        "layer_mean_": path.layer_mean,
        "layer_scale_": path.layer_scale,
        "candidates_": np.asarray(path.candidates, dtype=np.intp),
        "triplets_": path.triplets,
        "step_fits_": None if not fits else np.stack(fits),
        "residual_": path.residual,
    }


def _resolve_config(est, task):
    """The variant's components with the explicit overrides of ``est``."""
    defaults = VARIANTS[est.variant]
    cfg = {c: defaults[c] if getattr(est, c) is None else getattr(est, c)
           for c in COMPONENTS}
    t = cfg["triplets"]
    cfg["triplet_rule"] = ((defaults["triplets"], int(t)) if isinstance(t, Integral)
                           else (t, None))
    for p in ("variant", "gamma", "eta", "update", "loss_normalization",
              "include_embedding", "exclude_duplicates", "orth_energy",
              "orth_max_rank", "max_samples"):
        cfg[p] = getattr(est, p)
    cfg["task"] = task
    return cfg
