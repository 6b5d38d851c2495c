"""Layer-by-Layer metrics (Skean et al., 2025).

Every metric takes one matrix (and returns a float) or a layer stack of shape
``(n_layers, n_samples, dim)`` (and returns one value per layer). Only numpy,
scipy and scikit-learn are imported here: torch is needed only by the
streaming token path (:class:`TokenMetricPooling`), matplotlib only to plot
and pandas only for :meth:`LayerReport.to_frame`. A new metric is a function
here plus one entry in the registry (``_registry``), which the report and
:class:`~skloes.selection.MetricTopKSelector` both read.
:func:`selection_stability` is not a per-layer metric: it measures how much a
selector's picks move across resamples, and is not in the registry.

May import: utils, core, models, extraction.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.metrics._augment import augment_text, augmented_views
from skloes.metrics._dataset import (
    dataset_entropy,
    effective_rank,
    intrinsic_dim,
    isotropy,
    layer_similarity,
    simplex_volume,
)
from skloes.metrics._stability import selection_stability
from skloes.metrics._token import (
    TokenMetricPooling,
    curvature,
    prompt_entropy,
    prompt_vectors,
)
from skloes.metrics._views import dime, infonce, lidar, smooth_rank

__all__ = [
    "TokenMetricPooling",
    "augment_text",
    "augmented_views",
    "curvature",
    "dataset_entropy",
    "dime",
    "effective_rank",
    "infonce",
    "intrinsic_dim",
    "isotropy",
    "layer_similarity",
    "lidar",
    "prompt_entropy",
    "prompt_vectors",
    "selection_stability",
    "simplex_volume",
    "smooth_rank",
]
