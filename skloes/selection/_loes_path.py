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
from dataclasses import dataclass, replace
from numbers import Integral

import joblib
import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from sklearn.utils import check_random_state

from skloes.core._geometry import (
    class_centroids,
    draw_triplets,
    isotropy_erank,
    isotropy_inv_cv,
    rank_mask,
    thin_svd,
    triangle_areas,
)
from skloes.core._ridge import (
    LOO_FLOOR,
    ridge_svd,
    ridge_train_loss,
)
from skloes.selection._base import calibration_rows as _calibration_rows
from skloes.selection._base import (
    candidate_layers,
    input_epsilon,
    layer_spread,
    resolve_n_layers,
)
from skloes.selection._loes_fused import _FastFit, _FusedLoss, standardized_components
from skloes.selection._loes_ridge import _RidgeResidual, _RidgeSpan
from skloes.selection._loes_ridge import factor_rows as _factor_rows
from skloes.selection._loes_span import (
    _Residual,
    _RowResidual,
    _Span,
    _spectral_ridge,
)
from skloes.selection._memory import cached_call, memory_error

#: Component values of each variant (see the user guide, :ref:`loes_variants`)
#: and the isotropy weight. The robust variant scores
#: the fused selection (``objective="fused"``, :ref:`loes_fused`).
VARIANTS = {
    "reference": {
        "scaling": "none",
        "ridge_alpha": 1e-3,
        "loss": "train",
        "orthogonalization": "ridge",
        "isotropy": "inv_cv",
        "redundancy": "overlap",
        "triplets": "sampled",
        "isotropy_weight": 1.0,
        "objective": "residual",
    },
    "robust": {
        "scaling": "unit_variance",
        "ridge_alpha": "gcv",
        "loss": "loo",
        "orthogonalization": "basis",
        "isotropy": "erank",
        "redundancy": "cka",
        "triplets": "auto",
        "isotropy_weight": 0.1,
        "objective": "fused",
    },
}
COMPONENTS = (
    "scaling",
    "ridge_alpha",
    "loss",
    "orthogonalization",
    "isotropy",
    "redundancy",
    "triplets",
    "isotropy_weight",
    "objective",
)
SCORE_KEYS = (
    "score",
    "loss",
    "isotropy",
    "redundancy",
    "triangle",
    "ridge_alpha",
    "retained",
)
DUPLICATE_CKA = 1 - 1e-10  # the duplicate guard's threshold
EXHAUSTED = 1e-10  # ‖X̃‖²/‖X‖² below which a candidate is exhausted


# --------------------------------------------------------------------------
# The selection path
# --------------------------------------------------------------------------
class _Layer:
    """One candidate: prepared factors, isotropy and (optionally) raw rows.

    With ``share`` (the fused objective) the Gram ``X_cᵀX_c`` is computed
    once for the thin SVD and the fused components. With ``light`` (the
    fused objective with no weighted term that reads the layer's factors,
    see :func:`_light_path`) the thin SVD is skipped: the isotropy comes
    from the eigenvalues of the centred Gram ``gram`` (``X_cᵀX_c``, or
    ``X_cX_cᵀ`` when ``n <= d``), which the fused components reuse, and
    ``U``/``s`` are computed only by :meth:`factors` (a layer that joins the
    selected span). ``rows`` keeps the prepared rows ``Xp`` for that, and for
    a candidate's residual against the span (:class:`_RowResidual`). With
    ``factor_rows`` (the ridge projection, :mod:`skloes.selection._loes_ridge`)
    the layer is held as factor rows ``F`` and their Gram ``H`` instead of
    ``U`` (no ``n × d × m`` product).
    """

    def __init__(
        self,
        X,
        mean,
        scale,
        cfg,
        light=False,
        share=False,
        rows=False,
        factor_rows=False,
    ):
        Xp = X - mean
        unit = cfg["scaling"] == "unit_variance"
        if unit:
            Xp = Xp / scale
        n, self.dim = X.shape
        iso = isotropy_erank if cfg["isotropy"] == "erank" else isotropy_inv_cv
        self.gram = None
        if factor_rows:
            self.F, self.H, self.s, turn = _factor_rows(Xp)
            self._finish(X, Xp, mean, scale, cfg, iso, lambda: turn(mean))
            return
        if light or (share and n > self.dim):
            Xc = X - mean
            self.gram = Xc.T @ Xc if n > self.dim else Xc @ Xc.T
        if light:
            w = np.linalg.eigvalsh(self.gram)[::-1] / (scale**2 if unit else 1.0)
            keep = rank_mask(w, max(n, self.dim))
            self.spectrum = np.sqrt(w[keep])
            self.energy = float(np.sum(w[keep]))
            self.iso = float(iso(self.spectrum, n, self.dim))
            if rows:
                self.Xp = Xp
            return
        self.U, self.s = thin_svd(
            Xp,
            center=False,
            gram=None if self.gram is None else self.gram / (scale**2 if unit else 1.0),
        )
        self._finish(
            X, Xp, mean, scale, cfg, iso, lambda: (self.U.T @ (Xp @ mean)) / self.s
        )

    def _finish(self, X, Xp, mean, scale, cfg, iso, mean_coords):
        """Spectrum, energy, isotropy and the overlap's raw-data moments."""
        self.spectrum = self.s
        self.energy = float(np.sum(self.s**2))
        self.iso = float(iso(self.s, *X.shape))
        if cfg["redundancy"] == "overlap":  # raw-data moments for the overlap
            self.mean, self.raw_norm2 = mean, float(np.sum(X**2))
            self.factor = scale if cfg["scaling"] == "unit_variance" else 1.0
            self.p = mean_coords() if self.s.size else self.s

    def factors(self):
        """The thin SVD ``(U, s)`` of a light layer, on first use."""
        if not hasattr(self, "U"):
            self.U, self.s = thin_svd(self.Xp, center=False)
        return self.U, self.s


def _light_path(cfg, has_targets):
    """Whether no layer is decomposed unless it joins the selected span.

    True for the fused objective with targets and redundancy weight 0 (the
    CKA is then not computed). The isotropy is then taken from the Gram
    spectrum, the duplicate guard runs on the Gram spectra and, for a pair
    that passes the spectral test, on the centred rows
    (:meth:`_Path.duplicate`), and the triangle (3 or more classes, a nonzero
    ``volume_weight``) reads each candidate's residual against the span from
    its rows (:class:`_RowResidual`); only the selected layers are decomposed.
    """
    return bool(
        _LIGHT
        and has_targets
        and cfg["objective"] == "fused"
        and cfg["redundancy_weight"] == 0
    )


#: Switch of the light preparation and of the shared Gram (the tests turn it
#: off to compare with the full path).
_LIGHT = True

#: Switch of the factor-row form of the ridge projection
#: (:mod:`skloes.selection._loes_ridge`; the tests turn it off to compare).
_FACTOR_ROWS = True


@dataclass
class LOESPath:
    """The result of one greedy LOES run on the calibration rows.

    The estimators of :mod:`skloes.selection._loes` name their fitted
    attributes from it; :meth:`truncate` gives the prefix for a smaller budget
    (paths are nested).
    """

    selection_order: np.ndarray
    scores: dict
    isotropy: np.ndarray
    calibration_indices: np.ndarray
    classes: np.ndarray | None
    degenerate_layers: np.ndarray
    layer_mean: np.ndarray
    layer_scale: np.ndarray
    candidates: np.ndarray
    triplets: np.ndarray | None
    step_fits: np.ndarray | None
    residual: np.ndarray | None
    complete: bool = False

    def truncate(self, n_select):
        """The path of the first ``n_select`` steps (a stagewise residual is
        restored by adding back the later steps' fits)."""
        k = min(n_select, self.selection_order.size)
        residual, fits = self.residual, self.step_fits
        if fits is not None:
            residual = self.residual + fits[k:].sum(axis=0)
            fits = fits[:k]
        return replace(
            self,
            selection_order=self.selection_order[:k],
            scores={key: v[:k] for key, v in self.scores.items()},
            step_fits=fits,
            residual=residual,
            complete=self.complete and k == self.selection_order.size,
        )


# When the fused fit scores a step (robust with targets), the two label-blind
# priors default to 0: a layer redundant with the selection adds nothing to the
# fused fit, and on a decoder both the CKA penalty and the isotropy prior favour
# the extreme layers (embedding output, last layer) that the probe cannot use
# (doc/user_guide/selection.rst, "loes_fused"). Otherwise they keep the spec's
# values (redundancy 0.5; isotropy from VARIANTS).


class _Path:
    """State of one greedy LOES run on the calibration rows."""

    def __init__(self, stack, y, cfg, rng, name):
        self.cfg, self.name = cfg, name
        n_layers, n_all, dim = stack.shape
        task = cfg["task"]
        classes = None
        if task == "classification":
            classes, codes_all = np.unique(y, return_inverse=True)
        rows = _calibration_rows(
            cfg["max_samples"], n_all, codes_all if classes is not None else None, rng
        )
        n = rows.size
        if n_all < 3:
            raise ValueError(
                f"{name}: needs at least 3 samples to select layers; got {n_all}."
            )
        if n < 3:
            raise ValueError(
                f"{name}: `max_samples` must leave at least 3 "
                f"calibration rows; got {n}."
            )
        self.rows, self.n, self.classes = rows, n, classes
        self._targets(y, codes_all if classes is not None else None)
        self.triplets = None
        if task == "classification" and self.n_present >= 3:
            self.triplets = draw_triplets(cfg["triplet_rule"], self.n_present, rng)
        self._prepare(stack, rows)

    @property
    def triangle(self):
        """Whether steps score the triangle (3+ classes present, a weight)."""
        return self.triplets is not None and self.cfg["volume_weight"] != 0

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
                raise ValueError(
                    f"{self.name}: `y` must not have a constant "
                    "(zero-variance) column on the calibration rows."
                )
            if self.cfg["variant"] == "robust":
                Y = (Y - Y.mean(axis=0)) / std
            self.Y = Y
        if self.Y is not None:
            self.denom = float(np.sum((self.Y - self.Y.mean(axis=0)) ** 2))

    def _prepare(self, stack, rows):
        n_layers, eps = stack.shape[0], input_epsilon(stack.dtype)
        means, scale, raws = [], np.empty(n_layers), []
        degenerate = np.zeros(n_layers, dtype=bool)
        for l in range(n_layers):
            X = np.asarray(stack[l][rows], dtype=np.float64)
            mean, scale[l], degenerate[l] = layer_spread(X, eps, self.name, l)
            means.append(mean)
            raws.append(X)
        self.layer_mean = np.vstack(means)
        self.layer_scale = scale
        candidates, self.degenerate = candidate_layers(
            degenerate, self.cfg["include_embedding"], self.name, stacklevel=6
        )
        if self.cfg.get("grid") is not None:  # the candidate grid (_loes_grid)
            candidates = candidates[np.isin(candidates, self.cfg["grid"])]
        self.candidates = candidates.tolist()
        fused = _LIGHT and self.cfg["objective"] == "fused" and self.Y is not None
        self.light = light = _light_path(self.cfg, self.Y is not None)
        self.factor_rows = (
            _FACTOR_ROWS
            and self.cfg["objective"] == "residual"
            and self.cfg["orthogonalization"] == "ridge"
        )
        self.layers = {
            l: _Layer(
                raws[l],
                self.layer_mean[l],
                self.layer_scale[l],
                self.cfg,
                light,
                fused,
                rows=light and self.triangle,
                factor_rows=self.factor_rows,
            )
            for l in self.candidates
        }
        self._red, self._cka, self._cross = {}, {}, {}
        self._twins = {}
        if light and self.cfg["exclude_duplicates"]:
            self._twins = self._spectral_twins(raws)
        if self.cfg["objective"] == "fused" and self.Y is not None:
            F = {
                l: standardized_components(
                    raws[l], self.cfg["fused_rank"], self.layers[l].gram
                )
                for l in self.candidates
            }
            self.fused = _FusedLoss(
                F, self.Y, self.cfg["ridge_alpha"], self.cfg["loss"], self.denom
            )
        for layer in self.layers.values():
            layer.gram = None  # not kept (a cached path stays small)

    def _spectral_twins(self, raws):
        """Centred rows of the layers with a spectral near-twin (light path).

        Only a pair that passes the spectral test of :meth:`duplicate` can be
        a duplicate; their centred rows are kept for the exact CKA.
        """
        keep = {}
        cands = self.candidates
        for i, a in enumerate(cands):
            for b in cands[i + 1 :]:
                if self._spectra_close(a, b):
                    for l in (a, b):
                        keep.setdefault(l, raws[l] - self.layer_mean[l])
        return keep

    def cross(self, a, b):
        """``U_aᵀU_b`` (``F_aᵀF_b`` in factor-row form), computed once per pair."""
        if (a, b) in self._cross:
            return self._cross[(a, b)]
        if (b, a) in self._cross:
            return self._cross[(b, a)].T
        if self.factor_rows:
            la, lb = self.layers[a], self.layers[b]
            self._cross[(a, b)] = la.H if a == b else la.F.T @ lb.F
        else:
            self._cross[(a, b)] = self.layers[a].U.T @ self.layers[b].U
        return self._cross[(a, b)]

    def layer_centroids(self, l):
        """Class centroids of the rows of ``U_l`` (``F_l``), computed once."""
        layer = self.layers[l]
        if not hasattr(layer, "cent_U"):
            rows = layer.F if self.factor_rows else layer.U
            layer.cent_U = class_centroids(rows, self.codes, self.n_present)
        return layer.cent_U

    def _moments(self, a, b):
        """``s_a U_aᵀU_b s_b`` (``F_aᵀF_b``): the centred cross-moments of a pair."""
        if self.factor_rows:
            return self.cross(a, b)
        la, lb = self.layers[a], self.layers[b]
        return (la.s[:, None] * self.cross(a, b)) * lb.s[None, :]

    def _coords(self, l, T):
        """``U_lᵀT`` (``F_lᵀT``): a sample-space ``T`` in the layer's columns."""
        layer = self.layers[l]
        return (layer.F if self.factor_rows else layer.U).T @ T

    def cka(self, a, b):
        key = (min(a, b), max(a, b))
        if key not in self._cka:
            la, lb = self.layers[a], self.layers[b]
            if not la.s.size or not lb.s.size:
                self._cka[key] = 0.0
            else:
                c = self._moments(a, b)
                denom = np.sqrt((la.s**4).sum()) * np.sqrt((lb.s**4).sum())
                self._cka[key] = float(min((c**2).sum() / denom, 1.0))
        return self._cka[key]

    def _spectra_close(self, a, b):
        """Whether the normalised Gram spectra of ``a`` and ``b`` are within 1e-4."""
        pa, pb = self.layers[a].spectrum ** 2, self.layers[b].spectrum ** 2
        if not pa.size or not pb.size:
            return True
        size = max(pa.size, pb.size)
        pa = np.pad(pa / np.linalg.norm(pa), (0, size - pa.size))
        pb = np.pad(pb / np.linalg.norm(pb), (0, size - pb.size))
        return np.linalg.norm(pa - pb) <= 1e-4

    def duplicate(self, a, b):
        """Whether CKA(a, b) >= 1 - 1e-10 (the duplicate guard).

        CKA is the cosine of the two Gram matrices, so by Hoffman-Wielandt a
        duplicate's normalised Gram spectra ``s²/‖s²‖`` differ by at most
        ``√(2·1e-10) ≈ 1.4e-5`` in norm; more than 1e-4 rules it out without
        computing CKA. On the light path (no factors) the CKA of a pair that
        passes comes from the centred rows kept by :meth:`_spectral_twins`.
        """
        if not self._spectra_close(a, b):
            return False
        if self.light:
            return self._rows_cka(a, b) >= DUPLICATE_CKA
        return self.cka(a, b) >= DUPLICATE_CKA

    def _rows_cka(self, a, b):
        """Linear CKA ``‖X_aᵀX_b‖² / (‖X_aᵀX_a‖‖X_bᵀX_b‖)`` of the centred rows."""
        key = (min(a, b), max(a, b))
        if key not in self._cka:
            Xa, Xb = self._twins[a], self._twins[b]
            wa, wb = self.layers[a].spectrum ** 2, self.layers[b].spectrum ** 2
            denom = np.sqrt((wa**2).sum()) * np.sqrt((wb**2).sum())
            num = float(np.sum((Xa.T @ Xb) ** 2))
            if self.cfg["scaling"] == "unit_variance":
                num /= (self.layer_scale[a] * self.layer_scale[b]) ** 2
            self._cka[key] = float(min(num / denom, 1.0)) if denom > 0 else 0.0
        return self._cka[key]

    def redundancy(self, a, b):
        if self.cfg["redundancy"] == "cka":
            return self.cka(a, b)
        key = (min(a, b), max(a, b))
        if key not in self._red:
            self._red[key] = self._overlap(a, b)
        return self._red[key]

    def _overlap(self, a, b):
        """The authors' ``‖AᵀB‖_F / (‖A‖_F ‖B‖_F)`` on raw rows, from factors.

        With ``A = c_a U_a s_a V_aᵀ + 1μ_aᵀ`` (``U ⊥ 1``), ``‖AᵀB‖_F²`` is
        ``c_a²c_b²‖K‖² + 2n c_a c_b p_aᵀK p_b + n²‖μ_a‖²‖μ_b‖²`` with
        ``K = s_a U_aᵀU_b s_b`` and ``p = Vᵀμ``: no ``n × d`` product
        (:func:`skloes.core._geometry.overlap_redundancy` is the direct form).
        """
        la, lb, n = self.layers[a], self.layers[b], self.n
        K = self._moments(a, b)
        ca, cb = la.factor, lb.factor
        num2 = (
            (ca * cb) ** 2 * float(np.sum(K**2))
            + 2 * n * ca * cb * float(la.p @ K @ lb.p)
            + n**2 * float(la.mean @ la.mean) * float(lb.mean @ lb.mean)
        )
        denom = np.sqrt(la.raw_norm2) * np.sqrt(lb.raw_norm2)
        return float(np.sqrt(max(num2, 0.0)) / denom) if denom > 0 else 0.0

    def _svd_factors(self, l):
        """``(U, s)`` of layer ``l``; in factor-row form from ``eigh(H)``."""
        layer = self.layers[l]
        if not self.factor_rows:
            return layer.U, layer.s
        w, W = np.linalg.eigh(layer.H)
        m = layer.s.size
        s = np.sqrt(np.maximum(w[::-1][:m], 0.0))
        return layer.F @ (W[:, ::-1][:, :m] / s), s

    def ridge(self, U, s, T):
        cfg = self.cfg
        return ridge_svd(
            U,
            s,
            T,
            alpha=cfg["ridge_alpha"],
            loss=cfg["loss"],
            loo_denominator=self.denom,
        )

    def run(self, n_select, start=None):
        """Greedy selection of up to ``n_select`` layers.

        ``start`` (a :class:`LOESPath` of this same preparation) continues a
        shorter path instead of recomputing its steps.
        """
        cfg, n, L = self.cfg, self.n, len(self.layer_scale)
        label_free = cfg["task"] == "label_free"
        order, rows, fits = [], [], []
        if not label_free:
            self.Y_hat = np.tile(self.Y.mean(axis=0), (n, 1))
        if start is not None:
            order = start.selection_order.tolist()
            keys = list(start.scores)
            rows = [
                {key: start.scores[key][i] for key in keys} for i in range(len(order))
            ]
            if not label_free:
                fits = list(start.step_fits)
                self.Y_hat = self.Y - start.residual
        R = None if label_free else self.Y - self.Y_hat
        stopped = False
        for k in range(len(order), n_select):
            ctx = None if label_free else self._context(k, order, R)
            table = {key: np.full(L, np.nan) for key in SCORE_KEYS}
            eligible = np.zeros(L, dtype=bool)
            sols = {}
            for l in self.candidates:
                if l in order or (
                    cfg["exclude_duplicates"]
                    and k
                    and any(self.duplicate(l, j) for j in order)
                ):
                    continue
                eligible[l] = True
                sols[l] = self._score(l, k, order, ctx, table)
            if not eligible.any():
                warnings.warn(
                    f"{self.name}: no eligible candidate left after "
                    f"{k} step(s); stopping early.",
                    UserWarning,
                    stacklevel=4,
                )
                stopped = True
                break
            score = np.where(eligible, table["score"], np.inf)
            best = int(np.argmin(score))  # ties -> smallest index
            table["eligible"] = eligible
            rows.append(table)
            if not label_free:
                fits.append(self._update(best, k, sols[best], ctx))
                R = self.Y - self.Y_hat
            order.append(best)
        return self._result(order, rows, fits, R, stopped)

    def _result(self, order, rows, fits, R, stopped):
        L = len(self.layer_scale)
        iso = np.full(L, np.nan)
        for l, layer in self.layers.items():
            iso[l] = layer.iso
        keys = (*SCORE_KEYS, "eligible")
        scores = {
            key: np.array([r[key] for r in rows]).reshape(len(rows), L) for key in keys
        }
        return LOESPath(
            selection_order=np.asarray(order, dtype=np.intp),
            scores=scores,
            isotropy=iso,
            calibration_indices=self.rows,
            classes=self.classes,
            degenerate_layers=self.degenerate,
            layer_mean=self.layer_mean,
            layer_scale=self.layer_scale,
            candidates=np.asarray(self.candidates, dtype=np.intp),
            triplets=self.triplets,
            step_fits=None if not fits else np.stack(fits),
            residual=R,
            complete=stopped or len(order) == len(self.candidates),
        )

    def _context(self, k, order, R):
        """Per-step quantities shared by every candidate."""
        cfg, n = self.cfg, self.n
        Rc = R - R.mean(axis=0)
        ctx = {
            "R": R,
            "tc2": float(np.sum(Rc**2)),
            "scale": 1.0,
            "span": None,
            "order": list(order),
        }
        if not k:
            return ctx
        if cfg["objective"] == "fused":
            return self._fused_context(ctx, order)
        span = ctx["span"] = (_RidgeSpan if self.factor_rows else _Span)(self, order)
        ctx["QtR"] = span.Qt(M=R)
        if self.triangle:
            ctx["cent_Q"] = span.centroids(self.layer_centroids)
        if cfg["loss_normalization"] == "relative":
            null = ridge_svd(
                np.zeros((n, 0)),
                np.zeros(0),
                R,
                loss=cfg["loss"],
                loo_denominator=self.denom,
            )
            ctx["scale"] = 1.0 / max(null.loss, 1e-300)
        return ctx

    def _fused_context(self, ctx, order):
        """Per-step quantities of ``objective="fused"`` (steps k >= 1)."""
        cfg = self.cfg
        if self.triangle:
            if self.light:  # a light path decomposes a layer once it is selected
                for j in order:
                    self.layers[j].factors()
            span = ctx["span"] = _Span(self, order)
            ctx["cent_Q"] = span.centroids(self.layer_centroids)
        if cfg["loss_normalization"] == "relative":
            ctx["scale"] = 1.0 / max(self.fused(order).loss, 1e-300)
        return ctx

    def _score(self, l, k, order, ctx, table):
        """Fill candidate ``l``'s row of the step's table; returns its fit."""
        cfg, layer = self.cfg, self.layers[l]
        retained, res, sol, tri = 1.0, None, None, 0.0
        if ctx is None:
            table["loss"][l] = 0.0
        else:
            loss, lam, res, sol = self._candidate_loss(l, k, ctx)
            table["loss"][l], table["ridge_alpha"][l] = loss * ctx["scale"], lam
            if res is not None:
                retained = res.energy / layer.energy
                if "cent_Q" in ctx:
                    tri = self._triangle(l, res, ctx["cent_Q"], retained)
        red = self._redundancy_term(l, k, order)
        table["isotropy"][l] = layer.iso
        table["redundancy"][l] = red
        table["triangle"][l] = tri
        table["retained"][l] = retained
        table["score"][l] = (
            table["loss"][l]
            + cfg["isotropy_weight"] * (1 - layer.iso)
            + (cfg["redundancy_weight"] * red if cfg["redundancy_weight"] else 0.0)
            - cfg["volume_weight"] * tri
        )
        return sol

    def _redundancy_term(self, l, k, order):
        """Red_l; not computed (NaN) when the fused fit scores with weight 0."""
        if not k:
            return 0.0
        if (
            self.cfg["redundancy_weight"] == 0
            and self.cfg["objective"] == "fused"
            and self.Y is not None
        ):
            return np.nan  # no weight in the score, and CKA is the costly part
        return max(self.redundancy(l, j) for j in order)

    def _candidate_loss(self, l, k, ctx):
        """The fit term of candidate ``l`` at step ``k``: ``(loss, λ, res, fit)``.

        Step 0 fits the prepared layer; later steps fit the layer
        orthogonalised against the span of the selected ones (``res``). The
        loss is the in-sample MSE (``loss="train"``) or the normalised
        leave-one-out error (``"loo"``) of a ridge of the current residual.
        ``fit`` is what :meth:`_update` needs if ``l`` wins.
        """
        cfg, layer, n = self.cfg, self.layers[l], self.n
        if cfg["objective"] == "fused":
            sol = self.fused([*ctx["order"], l])
            res = (
                None
                if ctx["span"] is None
                else _RowResidual(self, l, ctx["span"])
                if self.light
                else _Residual(layer, ctx["span"], l, gram=False)
            )
            return sol.loss, sol.alpha, res, sol
        if self.factor_rows:  # step 0 too: the layer's factor rows, no span
            res = _RidgeResidual(self, l, ctx["span"])
        elif not k:
            sol = self.ridge(layer.U, layer.s, ctx["R"])
            return sol.loss, sol.alpha, None, sol
        else:
            res = _Residual(layer, ctx["span"], l)
        exhausted = res.energy / layer.energy < EXHAUSTED
        w = None if exhausted else res.full_rank(n)
        if w is None:  # exact eigendecomposition route
            sigma, W = res.eig(n)
            if exhausted and cfg["ridge_alpha"] == "gcv":
                sigma, W = sigma[:0], W[:, :0]  # rounding noise only
                res._eig = (sigma, W)
            if cfg["loss"] == "train":
                Z = (W / sigma).T @ res.b(self._coords(l, ctx["R"]), ctx.get("QtR"))
                lam, loss = ridge_train_loss(
                    sigma, Z, ctx["tc2"], n, alpha=cfg["ridge_alpha"]
                )
                return loss, lam, res, (res, lam)
            U = res.left(n) if sigma.size else np.zeros((n, 0))
            sol = self.ridge(U, sigma, ctx["R"])
            return sol.loss, sol.alpha, res, sol
        R = ctx["R"]
        b = res.b(self._coords(l, R), ctx.get("QtR"))
        lam, rss = _spectral_ridge(res, w, b, ctx["tc2"], n, cfg["ridge_alpha"])
        if cfg["loss"] == "train":
            return rss / (n * R.shape[1]), lam, res, (res, lam)
        loss, lam = self._loo(res, b, lam, R)
        return loss, lam, res, res.fit

    def _loo(self, res, b, lam, R, hat=True):
        """Normalised LOO loss of the ridge on ``M`` at ``λ``: ``(loss, λ)``.

        The fit ``M (G + λI)⁻¹b`` is kept in ``res.fit``; ``hat=False`` skips
        the hat diagonal (a fit without its loss).
        """
        n = self.n
        L = np.linalg.cholesky(res.G + lam * np.eye(res.G.shape[0]))
        c = cho_solve((L, True), b)
        t_mean = R.mean(axis=0)
        if not hat:
            res.fit = _FastFit(lam, np.nan, t_mean + res.apply(c))
            return np.nan, lam
        M = res.M()
        fit_c = M @ c
        E = (R - t_mean) - fit_c
        hat = 1.0 / n + np.sum(solve_triangular(L, M.T, lower=True) ** 2, axis=0)
        E_loo = E / np.maximum(1.0 - hat, LOO_FLOOR)[:, None]
        loss = float(np.sum(E_loo**2)) / self.denom if self.denom > 0 else 0.0
        res.fit = _FastFit(lam, loss, t_mean + fit_c)
        return loss, lam

    def _triangle(self, l, res, cent_Q, retained):
        """Mean centroid-triangle area of X̃."""
        rescale = self.cfg["scaling"] == "unit_variance"
        if rescale and retained < EXHAUSTED:
            return 0.0  # exhausted candidate
        areas = triangle_areas(res.centroids(cent_Q), self.triplets)
        tri = float(areas.mean()) if areas.size else 0.0
        return tri / (res.energy / self.n) if rescale else tri

    def _update(self, best, k, sol, ctx):
        """Stagewise or refit update of ``Ŷ``; returns the contribution."""
        if self.cfg["objective"] == "fused":  # the fused fit replaces Ŷ
            fit = sol.fitted - self.Y_hat
        elif self.cfg["update"] == "refit" and k:
            fit = self.ridge(*self._svd_factors(best), self.Y).fitted
        elif isinstance(sol, tuple) and hasattr(sol[0], "tri"):  # full rank
            res, lam = sol
            R = ctx["R"]
            b = res.b(self._coords(best, R), ctx.get("QtR"))
            self._loo(res, b, lam, R, hat=False)
            fit = res.fit.fitted
        elif isinstance(sol, tuple):  # spectral-only scoring: build the fit now
            res, lam = sol
            sigma, _ = res.eig(self.n)
            U = res.left(self.n) if sigma.size else np.zeros((self.n, 0))
            fit = ridge_svd(
                U, sigma, ctx["R"], alpha=lam if lam > 0 else 1.0, loss="train"
            ).fitted
        else:
            fit = sol.fitted
        self.Y_hat = self.Y_hat + fit
        return fit


#: How many path preparations and greedy steps this process computed (the
#: tests read it to prove that a ``memory`` cache is hit).
COUNTS = {"prepare": 0, "steps": 0}


def _prepare_path(stack, y, cfg, random_state, name):
    """The prepared state of a path (calibration rows, decomposed layers)."""
    COUNTS["prepare"] += 1
    return _Path(stack, y, cfg, check_random_state(random_state), name)


def _check_budget(n_select, path, stack, name, clip):
    """The budget as an int (``"auto"``: ``min(4, #candidates)``); ``clip``
    lowers an int above the number of candidates to it instead of raising.
    ``path`` is a prepared path or a cached result (its candidates and
    degenerate layers)."""
    candidates = path.candidates
    if isinstance(n_select, str):
        return resolve_n_layers(n_select, len(candidates), name)
    if clip:
        n_select = min(n_select, len(candidates))
    if n_select > len(candidates):  # the feature count helps on flat tables
        degenerate = getattr(path, "degenerate", None)
        if degenerate is None:
            degenerate = path.degenerate_layers
        left_out = (
            f"; layers {np.asarray(degenerate).tolist()} are degenerate"
            if len(degenerate)
            else ""
        )
        raise ValueError(
            f"{name}: `n_layers_to_select` must be at most the number of candidate "
            f"layers; got {n_select} for {len(candidates)} candidate layer(s) "
            f"of {stack.shape[0]} ({stack.shape[0] * stack.shape[2]} feature(s))"
            f"{left_out}."
        )
    return int(n_select)


def _run(path, n_select, start=None):
    before = 0 if start is None else start.selection_order.size
    result = path.run(n_select, start=start)
    COUNTS["steps"] += result.selection_order.size - before
    return result


def _loes_path(stack, y, n_select, cfg, random_state, name, clip=False, memory=None):
    """Fit one LOES path; returns a :class:`LOESPath`.

    With ``clip``, a budget above the number of candidates is lowered to it
    (LOESSelectorCV's ``max_layers_to_select``) instead of raising. With a
    ``memory`` (a :class:`joblib.Memory` with a location), the prepared
    layers and the path are cached on disk under a hash of the inputs: a
    budget within a cached path is a slice of it, a larger one extends the
    longest cached path from its last step (paths are nested), to at least
    twice its length, so that a search over budgets ``1..K`` extends a
    path about ``log2(K)`` times.
    """
    if memory is None or getattr(memory, "location", None) is None:
        path = _prepare_path(stack, y, cfg, random_state, name)
        return _run(path, _check_budget(n_select, path, stack, name, clip))
    try:
        return _memory_path(stack, y, n_select, cfg, random_state, name, clip, memory)
    except OSError as exc:  # the folder, not the numbers
        raise memory_error(exc, memory, name) from None


def _memory_path(stack, y, n_select, cfg, random_state, name, clip, memory):
    """:func:`_loes_path` through ``memory`` (an unreadable cached result is
    computed again, see :func:`cached_call`)."""
    # SHA-1 runs on the CPU's hashing unit: twice MD5's speed on large stacks
    key = joblib.hash(
        (np.asarray(stack), y, sorted(cfg.items()), random_state), hash_name="sha1"
    )
    run = memory.cache(_cached_run, ignore=["path", "start"])
    hit = None
    for k in range(stack.shape[0], 0, -1):
        hit = cached_call(run, LOESPath, name, key, k, None, None, compute=False)
        if hit is not None:
            break
    if hit is not None:
        n = _check_budget(n_select, hit, stack, name, clip)
        if hit.selection_order.size >= n or hit.complete:
            return hit.truncate(n)
    prepare = memory.cache(_cached_prepare, ignore=["stack", "y", "name"])
    path = cached_call(prepare, _Path, name, key, stack, y, cfg, random_state, name)
    n = _check_budget(n_select, path, stack, name, clip)
    if hit is not None:  # extend ahead (doubling): a budget search asks for more
        n_run = min(len(path.candidates), max(n, 2 * hit.selection_order.size))
        return cached_call(run, LOESPath, name, key, n_run, path, hit).truncate(n)
    return cached_call(run, LOESPath, name, key, n, path, None)


def _cached_prepare(key, stack, y, cfg, random_state, name):
    """:func:`_prepare_path` keyed by ``key`` (the hash of the inputs)."""
    return _prepare_path(stack, y, cfg, random_state, name)


def _cached_run(key, n_select, path, start):
    """``path.run`` keyed by ``(key, n_select)``; extends ``start``."""
    return _run(path, n_select, start)


def _resolve_config(est, task):
    """The variant's components with the explicit overrides of ``est``."""
    defaults = VARIANTS[est.variant]
    cfg = {
        c: defaults[c] if getattr(est, c) is None else getattr(est, c)
        for c in COMPONENTS
    }
    t = cfg["triplets"]
    cfg["triplet_rule"] = (
        (defaults["triplets"], int(t)) if isinstance(t, Integral) else (t, None)
    )
    for p in (
        "variant",
        "volume_weight",
        "update",
        "loss_normalization",
        "fused_rank",
        "include_embedding",
        "exclude_duplicates",
        "orth_energy",
        "orth_max_rank",
        "max_samples",
    ):
        cfg[p] = getattr(est, p)
    cfg["task"] = task
    fused = cfg["objective"] == "fused" and task != "label_free"
    if fused and est.isotropy_weight is None:
        cfg["isotropy_weight"] = 0.0
    cfg["redundancy_weight"] = (
        est.redundancy_weight
        if est.redundancy_weight is not None
        else 0.0
        if fused
        else 0.5
    )
    return cfg
