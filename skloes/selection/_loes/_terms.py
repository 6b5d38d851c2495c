"""The LOES score and its label-blind statistics.

A step scores every eligible candidate ``l`` by

    score = loss + isotropy_weight·(1 - isotropy) + redundancy_weight·redundancy
            - volume_weight·triangle

(Batra et al., 2026; user guide :ref:`loes_variants`): ``loss`` comes from the
objective (:mod:`~skloes.selection._loes._residual` or
:mod:`~skloes.selection._loes._fused`), the other terms from
:class:`ScoreTerms`: the layer's isotropy, its redundancy with the selected
layers (linear CKA or the authors' overlap), the mean area of the triangles of
its class centroids once orthogonalised against the selection, and the
duplicate guard that keeps a layer equal to a selected one out.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.core._geometry import triangle_areas

#: The per-step score table's terms (``scores_``), besides ``eligible``.
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


class ScoreTerms:
    """Isotropy, redundancy, triangle and duplicate guard of a fit's candidates.

    Parameters
    ----------
    prep : PreparedLayers
        The prepared layers (their factors, spectra and calibration rows).
        While its raw rows are still held, the centred rows of the light
        layers that the duplicate guard may need are kept.
    """

    def __init__(self, prep):
        self.prep, self.cfg = prep, prep.cfg
        self._red, self._cka = {}, {}
        self._twins = {}
        if prep.form == "light" and self.cfg.exclude_duplicates:
            self._twins = self._spectral_twins(prep.raws)

    def score(self, loss, l, redundancy, triangle):
        """The score of candidate ``l`` from its loss and terms."""
        cfg = self.cfg
        iso = self.prep.layers[l].iso
        red = cfg.redundancy_weight * redundancy if cfg.redundancy_weight else 0.0
        return (
            loss + cfg.isotropy_weight * (1 - iso) + red - cfg.volume_weight * triangle
        )

    # ----------------------------------------------------------------------
    # Redundancy
    # ----------------------------------------------------------------------
    def redundancy_term(self, l, order):
        """Red_l against the selected ``order``; NaN when it is not computed.

        It is not computed when the fused fit scores a step with redundancy
        weight 0 (CKA is the costly part, and it has no weight in the score).
        """
        if not order:
            return 0.0
        if self.cfg.redundancy_weight == 0 and self.cfg.fused:
            return np.nan
        return max(self.redundancy(l, j) for j in order)

    def redundancy(self, a, b):
        """Redundancy of layers ``a`` and ``b`` (CKA or the overlap)."""
        if self.cfg.redundancy == "cka":
            return self.cka(a, b)
        key = (min(a, b), max(a, b))
        if key not in self._red:
            self._red[key] = self._overlap(a, b)
        return self._red[key]

    def cka(self, a, b):
        """Linear CKA of the prepared layers ``a`` and ``b``, from their factors."""
        key = (min(a, b), max(a, b))
        if key not in self._cka:
            la, lb = self.prep.layers[a], self.prep.layers[b]
            if not la.s.size or not lb.s.size:
                self._cka[key] = 0.0
            else:
                c = self.prep.moments(a, b)
                denom = np.sqrt((la.s**4).sum()) * np.sqrt((lb.s**4).sum())
                self._cka[key] = float(min((c**2).sum() / denom, 1.0))
        return self._cka[key]

    def _overlap(self, a, b):
        """The authors' ``‖AᵀB‖_F / (‖A‖_F ‖B‖_F)`` on raw rows, from factors.

        With ``A = c_a U_a s_a V_aᵀ + 1μ_aᵀ`` (``U ⊥ 1``), ``‖AᵀB‖_F²`` is
        ``c_a²c_b²‖K‖² + 2n c_a c_b p_aᵀK p_b + n²‖μ_a‖²‖μ_b‖²`` with
        ``K = s_a U_aᵀU_b s_b`` and ``p = Vᵀμ``: no ``n × d`` product
        (:func:`skloes.core._geometry.overlap_redundancy` is the direct form).
        """
        la, lb, n = self.prep.layers[a], self.prep.layers[b], self.prep.n
        K = self.prep.moments(a, b)
        ca, cb = la.factor, lb.factor
        num2 = (
            (ca * cb) ** 2 * float(np.sum(K**2))
            + 2 * n * ca * cb * float(la.p @ K @ lb.p)
            + n**2 * float(la.mean @ la.mean) * float(lb.mean @ lb.mean)
        )
        denom = np.sqrt(la.raw_norm2) * np.sqrt(lb.raw_norm2)
        return float(np.sqrt(max(num2, 0.0)) / denom) if denom > 0 else 0.0

    # ----------------------------------------------------------------------
    # The duplicate guard
    # ----------------------------------------------------------------------
    def duplicate(self, a, b):
        """Whether CKA(a, b) >= 1 - 1e-10 (the duplicate guard).

        CKA is the cosine of the two Gram matrices, so by Hoffman-Wielandt a
        duplicate's normalised Gram spectra ``s²/‖s²‖`` differ by at most
        ``√(2·1e-10) ≈ 1.4e-5`` in norm; more than 1e-4 rules it out without
        computing CKA. For light layers (no factors) the CKA of a pair that
        passes comes from the centred rows kept by :meth:`_spectral_twins`.
        """
        if not self._spectra_close(a, b):
            return False
        if self.prep.form == "light":
            return self._rows_cka(a, b) >= DUPLICATE_CKA
        return self.cka(a, b) >= DUPLICATE_CKA

    def _spectra_close(self, a, b):
        """Whether the normalised Gram spectra of ``a`` and ``b`` are within 1e-4."""
        pa = self.prep.layers[a].spectrum ** 2
        pb = self.prep.layers[b].spectrum ** 2
        if not pa.size or not pb.size:
            return True
        size = max(pa.size, pb.size)
        pa = np.pad(pa / np.linalg.norm(pa), (0, size - pa.size))
        pb = np.pad(pb / np.linalg.norm(pb), (0, size - pb.size))
        return np.linalg.norm(pa - pb) <= 1e-4

    def _spectral_twins(self, raws):
        """Centred rows of the layers with a spectral near-twin (light layers).

        Only a pair that passes the spectral test of :meth:`duplicate` can be
        a duplicate; their centred rows are kept for the exact CKA.
        """
        keep = {}
        cands = self.prep.candidates
        for i, a in enumerate(cands):
            for b in cands[i + 1 :]:
                if self._spectra_close(a, b):
                    for l in (a, b):
                        keep.setdefault(l, raws[l] - self.prep.layer_mean[l])
        return keep

    def _rows_cka(self, a, b):
        """Linear CKA ``‖X_aᵀX_b‖² / (‖X_aᵀX_a‖‖X_bᵀX_b‖)`` of the centred rows."""
        key = (min(a, b), max(a, b))
        if key not in self._cka:
            Xa, Xb = self._twins[a], self._twins[b]
            wa = self.prep.layers[a].spectrum ** 2
            wb = self.prep.layers[b].spectrum ** 2
            denom = np.sqrt((wa**2).sum()) * np.sqrt((wb**2).sum())
            num = float(np.sum((Xa.T @ Xb) ** 2))
            if self.cfg.scaling == "unit_variance":
                scale = self.prep.layer_scale
                num /= (scale[a] * scale[b]) ** 2
            self._cka[key] = float(min(num / denom, 1.0)) if denom > 0 else 0.0
        return self._cka[key]

    # ----------------------------------------------------------------------
    # The class-triangle term
    # ----------------------------------------------------------------------
    def triangle(self, residual, cent_span, retained):
        """Mean centroid-triangle area of a candidate against the span.

        ``residual`` is the candidate orthogonalised against the span (its
        ``energy`` and ``centroids``), ``cent_span`` the class centroids of the
        span's basis and ``retained`` its fraction of the layer's energy.
        """
        rescale = self.cfg.scaling == "unit_variance"
        if rescale and retained < EXHAUSTED:
            return 0.0  # exhausted candidate
        areas = triangle_areas(residual.centroids(cent_span), self.prep.triplets)
        tri = float(areas.mean()) if areas.size else 0.0
        return tri / (residual.energy / self.prep.n) if rescale else tri
