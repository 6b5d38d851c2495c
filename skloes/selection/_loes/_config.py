"""The settings of one LOES fit: a frozen, typed configuration.

Every component of the score defaults to its variant's value (None in the
estimator's parameters); :meth:`LOESConfig.resolve` turns the estimator's
parameters into the values one fit uses, and this module is the one place that
says what they are and why (user guide: :ref:`loes_variants`,
:ref:`loes_fused`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

#: Component values of each variant (see the user guide, :ref:`loes_variants`).
#: The robust variant scores the fused selection (``objective="fused"``,
#: :ref:`loes_fused`).
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

#: The parameters whose None means "the variant's value".
COMPONENTS = tuple(VARIANTS["robust"])

#: The estimator parameters a fit reads as they are.
_PLAIN = (
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
)

#: Redundancy weight of a score the fused fit does not make (the spec's γ).
SPEC_REDUNDANCY_WEIGHT = 0.5


@dataclass(frozen=True)
class LOESConfig:
    """What one LOES fit computes, resolved from the estimator's parameters.

    The fields are the estimator's parameters of the same names with every
    None replaced by the value the fit uses, plus the resolved ``task`` and
    the candidate ``grid`` (None: every layer). Hashable and picklable, so a
    ``memory`` cache keys on it.
    """

    variant: str
    task: str
    scaling: str
    ridge_alpha: float | str
    loss: str
    orthogonalization: str
    isotropy: str
    redundancy: str
    triplets: str | int
    isotropy_weight: float
    objective: str
    redundancy_weight: float
    volume_weight: float
    update: str
    loss_normalization: str
    fused_rank: int
    include_embedding: bool
    exclude_duplicates: bool
    orth_energy: float
    orth_max_rank: float
    max_samples: int | float | None
    grid: tuple[int, ...] | None = None

    @classmethod
    def resolve(cls, params, task, grid=None):
        """The configuration of a fit from an estimator's parameters.

        Parameters
        ----------
        params : dict
            The LOES parameters (``get_params()`` of a LOES selector).
        task : {"classification", "regression", "label_free"}
            The resolved task.
        grid : tuple of int or None, default=None
            The candidate grid (:func:`~skloes.selection._loes._grid.resolve_grid`).

        Returns
        -------
        config : LOESConfig
        """
        defaults = VARIANTS[params["variant"]]
        values = {
            c: defaults[c] if params[c] is None else params[c] for c in COMPONENTS
        }
        values.update({p: params[p] for p in _PLAIN})
        # When the fused fit scores a step (robust with targets), the two
        # label-blind priors default to 0: a layer redundant with the selection
        # adds nothing to the fused fit, and on a decoder both the CKA penalty
        # and the isotropy prior favour the extreme layers (embedding output,
        # last layer) that the probe cannot use (user guide, loes_fused).
        # Otherwise they keep the spec's values.
        fused = values["objective"] == "fused" and task != "label_free"
        if fused and params["isotropy_weight"] is None:
            values["isotropy_weight"] = 0.0
        red = params["redundancy_weight"]
        values["redundancy_weight"] = (
            red if red is not None else 0.0 if fused else SPEC_REDUNDANCY_WEIGHT
        )
        return cls(task=task, grid=grid, **values)

    @property
    def has_targets(self):
        """Whether the fit scores a target fit (not label-free)."""
        return self.task != "label_free"

    @property
    def fused(self):
        """Whether one ridge fit of the targets on the fused selection scores a step."""
        return self.objective == "fused" and self.has_targets

    @property
    def triplet_rule(self):
        """``(rule, count)`` of the triangle triplets: an int ``triplets`` is a
        count drawn by the variant's rule."""
        if isinstance(self.triplets, Integral):
            return VARIANTS[self.variant]["triplets"], int(self.triplets)
        return self.triplets, None

    def components(self):
        """The resolved components and score weights (``components_``)."""
        keys = (*COMPONENTS, "redundancy_weight", "volume_weight")
        return {key: getattr(self, key) for key in keys}
