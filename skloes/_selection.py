"""LOES layer selection: ``LOESSelector`` and ``LOESSelectorCV`` (spec §2).

The greedy path scores every candidate layer by a ridge fit of the current
residual on the layer orthogonalised against the selected ones, plus an
isotropy prior, a redundancy penalty and a class-triangle bonus. Each layer is
decomposed once; a step costs one decomposition of the selected span and one
``m``-dimensional update per candidate (§2.8).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings
from math import floor
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv, train_test_split
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_array, check_is_fitted

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
from skloes.utils._param_validation import (
    Interval,
    RealNotInt,
    StrOptions,
    _fit_context,
)
from skloes.utils._validation import (
    FLOAT_DTYPES,
    layer_feature_names,
    validate_layers,
)

#: Component values of each variant (spec §2.2); ``alpha`` is the score weight.
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

_LOES_CONSTRAINTS = {
    "variant": [StrOptions({"reference", "robust"})],
    "alpha": [Interval(Real, 0, None, closed="left"), None],
    "gamma": [Interval(Real, 0, None, closed="left")],
    "eta": [Interval(Real, 0, None, closed="left")],
    "ridge_alpha": [Interval(Real, 0, None, closed="neither"), StrOptions({"gcv"}),
                    None],
    "scaling": [StrOptions({"none", "unit_variance"}), None],
    "loss": [StrOptions({"train", "loo"}), None],
    "orthogonalization": [StrOptions({"ridge", "basis"}), None],
    "isotropy": [StrOptions({"inv_cv", "erank"}), None],
    "redundancy": [StrOptions({"overlap", "cka"}), None],
    "triplets": [StrOptions({"sampled", "auto"}),
                 Interval(Integral, 1, None, closed="left"), None],
    "update": [StrOptions({"stagewise", "refit"})],
    "loss_normalization": [StrOptions({"none", "relative"})],
    "include_embedding": ["boolean"],
    "exclude_duplicates": ["boolean"],
    "fusion_scaling": [StrOptions({"layer"}), None],
    "orth_energy": [Interval(Real, 0, 1, closed="right")],
    "orth_max_rank": [Interval(Real, 0, 1, closed="right")],
    "max_samples": [Interval(Integral, 1, None, closed="left"),
                    Interval(RealNotInt, 0, 1, closed="right"), None],
    "layer_dim": [Interval(Integral, 1, None, closed="left"), None],
    "task": [StrOptions({"auto", "classification", "regression", "label_free"})],
    "random_state": ["random_state"],
}


# --------------------------------------------------------------------------
# Targets and calibration rows (§2.1)
# --------------------------------------------------------------------------
def _resolve_task(name, y, task):
    """Return ``(task, classes, y_array)``; ``y`` is None for label_free."""
    if task == "label_free":
        return "label_free", None, None
    if y is None:
        if task == "auto":
            return "label_free", None, None
        raise ValueError(f"{name}: `y` is required for task={task!r}; got None.")
    y = check_array(y, ensure_2d=False, dtype=None, input_name="y",
                    ensure_all_finite=False)
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError(f"{name}: `y` must be finite; got NaN or infinity in y.")
    if task == "auto":
        kind = type_of_target(y, input_name="y")
        if kind in ("binary", "multiclass"):
            task = "classification"
        elif kind in ("continuous", "continuous-multioutput"):
            task = "regression"
        else:
            raise ValueError(
                f"{name}: `y` must hold class labels or continuous targets; got "
                f"type_of_target(y)={kind!r} (Unknown label type)."
            )
    if task == "regression":
        try:
            return task, None, np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: `y` must be numeric for task='regression'; "
                             f"got dtype {y.dtype}.") from None
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"{name}: `y` must be one column of class labels for "
                         f"task='classification'; got shape {y.shape}.")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"{name}: `y` must contain at least two classes; got 1 "
                         f"class ({classes[0]!r}).")
    return task, classes, y


def _calibration_rows(max_samples, n, codes, rng):
    """Sorted calibration indices: stratified for classification (§2.1)."""
    if max_samples is None:
        count = n
    elif isinstance(max_samples, Integral):
        count = min(int(max_samples), n)
    else:
        count = min(n, floor(max_samples * n))
    if count >= n:
        return np.arange(n)
    if codes is not None:
        try:
            rows, _ = train_test_split(np.arange(n), train_size=count,
                                       stratify=codes, random_state=rng)
            return np.sort(rows)
        except ValueError:
            pass
    return np.sort(rng.choice(n, size=count, replace=False))


def _draw_triplets(rule, n_classes, rng):
    """The triangle triplets, drawn once per fit (§2.2, §2.4, §2.5)."""
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
    """Orthogonaliser of the selected span: ``(Q, shrink)`` (§2.4, §2.5).

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
        self.degenerate = np.flatnonzero(var <= 1e-12 * var.max())
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
        """Greedy selection of up to ``n_select`` layers (§2.6)."""
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
        """Mean centroid-triangle area of X̃ (§2.4, §2.5)."""
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
        """Stagewise or refit update of ``Ŷ`` (§2.6); returns the contribution."""
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


def _fuse(stack, layers, mean=None, scale=None, dtype=None):
    """Concatenate layers in index order, optionally scaled per layer."""
    blocks = []
    for l in layers:
        block = stack[l]
        if mean is not None:
            block = (np.asarray(block, dtype=np.float64) - mean[l]) / scale[l]
        blocks.append(block)
    out = np.concatenate(blocks, axis=1)
    return out if dtype is None else out.astype(dtype, copy=False)


# --------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------
_PARAMS_DOC = """
    variant : {"robust", "reference"}, default="robust"
        ``"reference"`` reproduces the authors' implementation; ``"robust"``
        fixes its documented degeneracies (spec §2.5). Every component below
        defaults to None, meaning the variant's value.

    alpha : float or None, default=None
        Weight of the isotropy term (reference: 1.0, robust: 0.1).

    gamma : float, default=0.5
        Weight of the redundancy term.

    eta : float, default=0.1
        Weight of the class-triangle term.

    ridge_alpha : float or "gcv", default=None
        Ridge penalty: absolute (reference: 1e-3) or chosen by GCV (robust).

    scaling : {"none", "unit_variance"}, default=None
        Layer preparation: centred only (reference) or also divided by the
        root total variance (robust).

    loss : {"train", "loo"}, default=None
        Fit loss: in-sample MSE (reference) or normalised leave-one-out
        (robust).

    orthogonalization : {"ridge", "basis"}, default=None
        Ridge projection with ε_o = 1e-6 (reference) or rank-limited basis
        (robust).

    isotropy : {"inv_cv", "erank"}, default=None
        Inverse coefficient of variation of the covariance spectrum
        (reference) or bounded effective rank (robust).

    redundancy : {"overlap", "cka"}, default=None
        Normalised overlap on raw features (reference) or linear CKA (robust).

    triplets : {"sampled", "auto"}, int or None, default=None
        Triangle triplets: ``min(200, 3C)`` sampled with repeats (reference),
        or all distinct-class triplets when C <= 30, else 200 (robust). An int
        is that many triplets drawn by the variant's rule.

    update : {"stagewise", "refit"}, default="stagewise"
        Residual update; ``"refit"`` reproduces the authors' experiment
        scripts.

    loss_normalization : {"none", "relative"}, default="none"
        ``"relative"`` divides the loss at steps k >= 1 by the loss of the
        current residual (an open question of the spec, §2.10).

    include_embedding : bool, default=True
        Whether layer 0 (the embedding output) is a candidate.

    max_samples : int, float or None, default=2000
        Calibration rows: a count, a fraction of n, or None for all.

    exclude_duplicates : bool, default=True
        Never select a layer whose CKA with a selected one is >= 1 - 1e-10.

    fusion_scaling : {"layer"} or None, default=None
        ``"layer"`` centres each fused block and divides it by its root total
        variance (calibration statistics).

    orth_energy : float, default=0.99
        Energy fraction kept by the robust basis.

    orth_max_rank : float, default=0.5
        Rank cap of the robust basis, as a fraction of the calibration rows.

    layer_dim : int or None, default=None
        Block width of a flat table ``(n_samples, n_layers * layer_dim)``;
        None makes every column its own layer. Ignored for a stack.

    task : {"auto", "classification", "regression", "label_free"}, \
default="auto"
        Resolved from ``y`` with ``"auto"`` (``y=None`` gives label-free).

    random_state : int, RandomState instance or None, default=None
        Seeds the calibration subsample and the triangle triplets."""

_ATTRS_DOC = """
    selection_order_ : ndarray of shape (n_selected_,)
        Layers in the order they were picked (Hugging Face indices: 0 is the
        embedding output).

    selected_layers_ : ndarray of shape (n_selected_,)
        The same layers, ascending.

    support_ : ndarray of shape (n_layers_in_,)
        Boolean mask of the selected layers.

    scores_ : dict of ndarray of shape (n_selected_, n_layers_in_)
        Row k is step k: ``score``, ``loss``, ``isotropy``, ``redundancy``,
        ``triangle``, ``ridge_alpha``, ``retained`` (fraction of the prepared
        layer's energy left after orthogonalisation) and the boolean
        ``eligible``. NaN marks a layer not evaluated at that step. See
        :meth:`scores_frame`.

    isotropy_ : ndarray of shape (n_layers_in_,)
        Isotropy of each candidate layer (NaN for non-candidates).

    n_selected_ : int
        Number of layers selected (fewer than asked only after a warning).

    calibration_indices_ : ndarray
        Sorted rows used for the selection.

    classes_ : ndarray or None
        Class labels for classification, else None.

    task_ : str
        The resolved task.

    variant_ : str
        The variant.

    components_ : dict
        The resolved component values and score weights.

    degenerate_layers_ : ndarray
        Layers excluded as degenerate.

    layer_mean_ : ndarray of shape (n_layers_in_, dim_in_)
        Layer means on the calibration rows.

    layer_scale_ : ndarray of shape (n_layers_in_,)
        Root total variances on the calibration rows.

    triplets_ : ndarray of shape (n_triplets, 3) or None
        Class-code triplets of the triangle term.

    step_fits_ : ndarray of shape (n_selected_, n_calibration, q) or None
        Fitted contribution added to the target fit at each step.

    residual_ : ndarray of shape (n_calibration, q) or None
        The residual ``Y - Ŷ`` after the last step.

    n_layers_in_ : int
        Number of layers seen in fit.

    dim_in_ : int
        Width of each layer.

    layer_dim_ : int
        Block width (flat input only).

    n_features_in_ : int
        Number of columns (flat input only).

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names, when a flat DataFrame with string names is given."""


def _doc(cls):
    cls.__doc__ = cls.__doc__.replace("{PARAMS}", _PARAMS_DOC.strip("\n")).replace(
        "{ATTRS}", _ATTRS_DOC.strip("\n"))
    return cls


class _BaseLOES(TransformerMixin, BaseEstimator):
    """Transform, support and score-table methods shared by both selectors."""

    def _path_config(self, X, y):
        kw = dict(layer_dim=self.layer_dim, dtype=FLOAT_DTYPES)
        if y is None:  # validate_layers(flat, y=None) would return X alone
            stack, y_checked = validate_layers(self, X, **kw), None
        else:
            stack, y_checked = validate_layers(self, X, y, **kw)
        name = type(self).__name__
        task, classes, y_arr = _resolve_task(name, y_checked, self.task)
        return stack, y_arr, _resolve_config(self, task)

    def _set_path(self, attrs, n_select, cfg):
        for key, value in attrs.items():
            setattr(self, key, value)
        order = attrs["selection_order_"][:n_select]
        self.selection_order_ = order
        self.scores_ = {k: v[: order.size] for k, v in attrs["scores_"].items()}
        if attrs["step_fits_"] is not None:
            fits = attrs["step_fits_"][: order.size]
            self.step_fits_ = fits
            self.residual_ = attrs["residual_"] + attrs["step_fits_"][
                order.size:].sum(axis=0)
        self.n_selected_ = int(order.size)
        self.selected_layers_ = np.sort(order)
        self.support_ = np.zeros(self.n_layers_in_, dtype=bool)
        self.support_[order] = True
        self.task_, self.variant_ = cfg["task"], self.variant
        self.components_ = {k: cfg[k] for k in (*COMPONENTS, "gamma", "eta")}
        return self

    def transform(self, X):
        """Concatenate the selected layers in index order.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            A layer stack or a flat table with the layout seen in fit.

        Returns
        -------
        X_fused : ndarray of shape (n_samples, n_selected_ * dim)
            The fused embedding (columns ``layer{l}_{j}``).
        """
        check_is_fitted(self)
        stack = validate_layers(self, X, layer_dim=self.layer_dim, reset=False,
                                dtype=FLOAT_DTYPES)
        if self.fusion_scaling == "layer":
            return _fuse(stack, self.selected_layers_, self.layer_mean_,
                         self.layer_scale_, dtype=stack.dtype)
        return _fuse(stack, self.selected_layers_)

    def get_support(self, indices=False):
        """Mask or indices of the selected layers.

        Parameters
        ----------
        indices : bool, default=False
            Return layer indices instead of a boolean mask over layers.

        Returns
        -------
        support : ndarray
            Boolean mask of shape (n_layers_in_,) or the selected indices.
        """
        check_is_fitted(self)
        return np.flatnonzero(self.support_) if indices else self.support_.copy()

    def get_feature_names_out(self, input_features=None):
        """Names ``layer{l}_{j}`` of the fused columns.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Ignored; the names derive from the layer indices.

        Returns
        -------
        feature_names_out : ndarray of str objects
            One name per output column.
        """
        check_is_fitted(self)
        return layer_feature_names(self.selected_layers_, self.dim_in_)

    def scores_frame(self):
        """The per-step score table as a long pandas DataFrame.

        Returns
        -------
        frame : pandas.DataFrame
            One row per (step, layer) with the columns ``step``, ``layer``,
            the score terms of ``scores_``, ``eligible`` and ``selected``
            (the layer picked at that step).
        """
        check_is_fitted(self)
        import pandas as pd

        steps, L = self.n_selected_, self.n_layers_in_
        data = {"step": np.repeat(np.arange(steps), L),
                "layer": np.tile(np.arange(L), steps)}
        for key, value in self.scores_.items():
            data[key] = value.ravel()
        picked = np.zeros((steps, L), dtype=bool)
        picked[np.arange(steps), self.selection_order_] = True
        data["selected"] = picked.ravel()
        return pd.DataFrame(data)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


@_doc
class LOESSelector(_BaseLOES):
    """Layer-wise Optimal Embedding Selection (LOES).

    Greedily selects ``n_layers_to_select`` layers of a model's hidden-state
    stack: at each step every remaining layer is orthogonalised against the
    span of the selected ones and scored by

        score = loss + alpha·(1 - isotropy) + gamma·redundancy - eta·triangle

    where the loss is a ridge fit of the current target residual (spec §2).
    ``transform`` concatenates the selected layers in index order.

    Parameters
    ----------
    n_layers_to_select : int, default=4
        Budget K. Paths are nested: every K-selection is a prefix of a longer
        one.

{PARAMS}

    Attributes
    ----------
{ATTRS}

    See Also
    --------
    LOESSelectorCV : Chooses the budget by cross-validation.

    Notes
    -----
    Computation is float64 whatever the input dtype. Each candidate is
    decomposed once; each step decomposes the selected span in its smaller
    Gram form and updates every candidate in ``O(n·m²)`` (§2.8).

    Examples
    --------
    >>> import numpy as np
    >>> from skloes import LOESSelector
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 3, size=120)
    >>> stack = rng.normal(size=(5, 120, 8))
    >>> stack[3, :, :3] += 3 * np.eye(3)[y]
    >>> sel = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    >>> int(sel.selection_order_[0])
    3
    >>> sel.transform(stack).shape
    (120, 16)
    """

    _parameter_constraints = {
        "n_layers_to_select": [Interval(Integral, 1, None, closed="left")],
        **_LOES_CONSTRAINTS,
    }

    def __init__(self, *, n_layers_to_select=4, variant="robust", alpha=None,
                 gamma=0.5, eta=0.1, ridge_alpha=None, scaling=None, loss=None,
                 orthogonalization=None, isotropy=None, redundancy=None,
                 triplets=None, update="stagewise", loss_normalization="none",
                 include_embedding=True, max_samples=2000, exclude_duplicates=True,
                 fusion_scaling=None, orth_energy=0.99, orth_max_rank=0.5,
                 layer_dim=None, task="auto", random_state=None):
        self.n_layers_to_select = n_layers_to_select
        self.variant = variant
        self.alpha = alpha
        self.gamma = gamma
        self.eta = eta
        self.ridge_alpha = ridge_alpha
        self.scaling = scaling
        self.loss = loss
        self.orthogonalization = orthogonalization
        self.isotropy = isotropy
        self.redundancy = redundancy
        self.triplets = triplets
        self.update = update
        self.loss_normalization = loss_normalization
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.exclude_duplicates = exclude_duplicates
        self.fusion_scaling = fusion_scaling
        self.orth_energy = orth_energy
        self.orth_max_rank = orth_max_rank
        self.layer_dim = layer_dim
        self.task = task
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Select layers on the calibration rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            A layer stack or a flat table of ``layer_dim``-wide blocks.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs), \
default=None
            Class labels or continuous targets; None selects label-free.

        Returns
        -------
        self : object
            The fitted selector.
        """
        stack, y_arr, cfg = self._path_config(X, y)
        attrs = _loes_path(stack, y_arr, self.n_layers_to_select, cfg,
                           self.random_state, type(self).__name__)
        return self._set_path(attrs, self.n_layers_to_select, cfg)


def _default_estimator(task):
    """The §3 ridge probe of ``skloes.baselines`` for the task."""
    from skloes.baselines import RidgeProbeClassifier, RidgeProbeRegressor

    return RidgeProbeClassifier() if task == "classification" else RidgeProbeRegressor()


def _fold_path(selector, stack, y):
    """The selection order of ``selector`` on one fold (budget clipped)."""
    stack, y_arr, cfg = selector._path_config(stack, y)
    attrs = _loes_path(stack, y_arr, selector.n_layers_to_select, cfg,
                       selector.random_state, type(selector).__name__, clip=True)
    return attrs["selection_order_"]


def _score_fold(selector, stack, y, train, test, k_max, estimator, scorer):
    """One fold of LOESSelectorCV: one path, then every budget 1..k_max."""
    sub = stack[:, train]
    order = _fold_path(selector, sub, y[train])
    mean = scale = None
    if selector.fusion_scaling == "layer":
        mean = np.stack([sub[l].mean(axis=0, dtype=np.float64) for l in range(
            stack.shape[0])])
        scale = np.array([np.sqrt(np.sum((sub[l] - mean[l]) ** 2) / train.size)
                          for l in range(stack.shape[0])])
    scores = np.full(k_max, np.nan)
    for k in range(1, order.size + 1):
        layers = np.sort(order[:k])
        X_tr = _fuse(sub, layers, mean, scale)
        X_te = _fuse(stack[:, test], layers, mean, scale)
        est = clone(estimator).fit(X_tr, y[train])
        scores[k - 1] = scorer(est, X_te, y[test])
    return scores, order


@_doc
class LOESSelectorCV(_BaseLOES):
    """LOES with the budget chosen by cross-validation (spec §2.9).

    Because LOES paths are nested, one selection path per fold scores every
    budget ``1..max_layers_to_select`` (as ``RFECV`` does): a fold fits one
    ``LOESSelector`` on its training rows, then fits ``estimator`` on the
    fused layers of each prefix of the path and scores it on the held-out
    rows. The final selection is one full-data path truncated to the best
    budget, so the fitted object behaves as a fitted :class:`LOESSelector`.
    Total cost: ``n_splits + 1`` paths.

    Parameters
    ----------
    estimator : estimator instance or None, default=None
        Scored on the fused layers; None uses the ridge probe of
        :mod:`skloes.baselines` (``RidgeProbeClassifier`` or
        ``RidgeProbeRegressor``).

    max_layers_to_select : int, default=10
        Largest budget tried, clipped to the number of candidate layers.

    cv : int, cross-validation generator or iterable, default=5
        Passed to :func:`~sklearn.model_selection.check_cv` (stratified for
        classification).

    scoring : str, callable or None, default=None
        Passed to :func:`~sklearn.metrics.check_scoring`; None uses the
        estimator's ``score`` (accuracy or R²).

    n_jobs : int or None, default=None
        Folds run in parallel with joblib.

{PARAMS}

    Attributes
    ----------
    n_layers_to_select_ : int
        The smallest budget with the best mean score.

    cv_results_ : dict of ndarray
        ``n_layers``, ``mean_test_score``, ``std_test_score``,
        ``split{i}_test_score`` and ``split{i}_selection_order`` (the fold's
        path, padded with -1 if it stopped early; the scores of budgets a fold
        did not reach are NaN).

{ATTRS}

    See Also
    --------
    LOESSelector : The selector with a fixed budget.

    Notes
    -----
    With ``fusion_scaling="layer"``, each fold scales the fused blocks with
    its own training rows, exactly as a ``Pipeline([LOESSelector(...),
    estimator])`` in ``GridSearchCV`` does when the calibration rows cover the
    training rows.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skloes import LOESSelectorCV
    >>> rng = np.random.RandomState(0)
    >>> y = rng.randint(0, 2, size=100)
    >>> stack = rng.normal(size=(4, 100, 6))
    >>> stack[1, :, 0] += 3 * y
    >>> cv = LOESSelectorCV(LogisticRegression(), max_layers_to_select=3,
    ...                     cv=3, random_state=0).fit(stack, y)
    >>> cv.cv_results_["mean_test_score"].shape
    (3,)
    >>> int(cv.selection_order_[0])
    1
    """

    _parameter_constraints = {
        "estimator": "no_validation",
        "max_layers_to_select": [Interval(Integral, 1, None, closed="left")],
        "cv": ["cv_object"],
        "scoring": [str, callable, None],
        "n_jobs": [Integral, None],
        **_LOES_CONSTRAINTS,
    }

    def __init__(self, estimator=None, *, max_layers_to_select=10, cv=5,
                 scoring=None, n_jobs=None, variant="robust", alpha=None,
                 gamma=0.5, eta=0.1, ridge_alpha=None, scaling=None, loss=None,
                 orthogonalization=None, isotropy=None, redundancy=None,
                 triplets=None, update="stagewise", loss_normalization="none",
                 include_embedding=True, max_samples=2000, exclude_duplicates=True,
                 fusion_scaling=None, orth_energy=0.99, orth_max_rank=0.5,
                 layer_dim=None, task="auto", random_state=None):
        self.estimator = estimator
        self.max_layers_to_select = max_layers_to_select
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.variant = variant
        self.alpha = alpha
        self.gamma = gamma
        self.eta = eta
        self.ridge_alpha = ridge_alpha
        self.scaling = scaling
        self.loss = loss
        self.orthogonalization = orthogonalization
        self.isotropy = isotropy
        self.redundancy = redundancy
        self.triplets = triplets
        self.update = update
        self.loss_normalization = loss_normalization
        self.include_embedding = include_embedding
        self.max_samples = max_samples
        self.exclude_duplicates = exclude_duplicates
        self.fusion_scaling = fusion_scaling
        self.orth_energy = orth_energy
        self.orth_max_rank = orth_max_rank
        self.layer_dim = layer_dim
        self.task = task
        self.random_state = random_state

    def _selector(self, n_select, task):
        params = {k: getattr(self, k) for k in LOESSelector._parameter_constraints
                  if k not in ("n_layers_to_select", "layer_dim", "task")}
        return LOESSelector(n_layers_to_select=n_select, task=task, **params)

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Score every budget by cross-validation, then select on all rows.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_layers * dim)
            A layer stack or a flat table of ``layer_dim``-wide blocks.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Class labels or continuous targets (required).

        Returns
        -------
        self : object
            The fitted selector.
        """
        name = type(self).__name__
        if y is None:
            raise ValueError(f"{name}: `y` is required; got None.")
        stack, y_arr, cfg = self._path_config(X, y)
        if cfg["task"] == "label_free":
            raise ValueError(f"{name}: `task` must not be 'label_free'; "
                             "cross-validation needs targets.")
        classification = cfg["task"] == "classification"
        y_fit = y_arr if classification or y_arr.shape[1] > 1 else y_arr.ravel()
        first = 0 if self.include_embedding else 1
        k_max = min(self.max_layers_to_select, stack.shape[0] - first)
        estimator = (_default_estimator(cfg["task"]) if self.estimator is None
                     else self.estimator)
        scorer = check_scoring(estimator, scoring=self.scoring)
        cv = check_cv(self.cv, y_fit, classifier=classification)
        seed = self.random_state  # one seed for every fold and the final path
        if isinstance(seed, np.random.RandomState):
            seed = int(seed.randint(np.iinfo(np.int32).max))
        selector = self._selector(k_max, cfg["task"]).set_params(random_state=seed)
        splits = list(cv.split(np.zeros((stack.shape[1], 1)), y_fit))
        out = Parallel(n_jobs=self.n_jobs)(
            delayed(_score_fold)(clone(selector), stack, y_fit, tr, te, k_max,
                                 estimator, scorer) for tr, te in splits)
        scores = np.array([s for s, _ in out])
        mean = scores.mean(axis=0)  # NaN where a fold stopped early
        self.cv_results_ = {
            "n_layers": np.arange(1, k_max + 1),
            "mean_test_score": mean,
            "std_test_score": scores.std(axis=0),
        }
        for i, (s, order) in enumerate(out):
            self.cv_results_[f"split{i}_test_score"] = s
            padded = np.full(k_max, -1, dtype=np.intp)
            padded[: order.size] = order
            self.cv_results_[f"split{i}_selection_order"] = padded
        best = np.where(np.isnan(mean), -np.inf, mean)
        self.n_layers_to_select_ = int(np.argmax(best)) + 1  # first max: smallest K
        attrs = _loes_path(stack, y_arr, k_max, cfg, seed, name, clip=True)
        return self._set_path(attrs, self.n_layers_to_select_, cfg)
