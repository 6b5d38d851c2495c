"""The registry of named layer metrics: one entry per name, read by every consumer.

:class:`~skloes.report.LayerReport` (its ``metrics``) and
:class:`~skloes.selection.MetricTopKSelector` (its ``metric``) both look names
up here, so a new metric is its function in this package plus one line below.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass, field

from skloes.metrics._dataset import (
    dataset_entropy,
    effective_rank,
    intrinsic_dim,
    isotropy,
    simplex_volume,
)

__all__ = ["METRICS", "LayerMetric", "label_free_metrics"]


@dataclass(frozen=True)
class LayerMetric:
    """A named metric: its function, fixed arguments and whether it needs labels.

    Parameters
    ----------
    function : callable
        ``function(X, [y,] **kwargs)`` on one matrix (a float) or a stack (one
        value per layer).
    fixed : dict
        Arguments that define the named variant (``kind="sigma2"``...).
    settings : tuple of str
        The callers' shared options this metric takes (``alpha``,
        ``normalization``, ``max_prompts``, ``random_state``): a report passes
        one set of options to every metric, and each takes only its own.
    needs_labels : bool
        Whether the function takes class labels after ``X``.
    """

    function: object
    fixed: dict = field(default_factory=dict)
    settings: tuple = ()
    needs_labels: bool = False

    def __call__(self, X, y=None, settings=None, **params):
        """The metric of ``X``.

        ``settings`` are the caller's shared options, passed where this metric
        takes them; ``params`` are the user's and passed as given.
        """
        kwargs = {k: v for k, v in (settings or {}).items() if k in self.settings}
        kwargs.update(self.fixed, **params)
        args = (X, y) if self.needs_labels else (X,)
        return self.function(*args, **kwargs)


_ROWS = ("max_prompts", "random_state")  # the metrics that subsample rows

METRICS = {
    "dataset_entropy": LayerMetric(
        dataset_entropy, settings=("alpha", "normalization", *_ROWS)
    ),
    "erank_sigma": LayerMetric(effective_rank, {"kind": "sigma"}, _ROWS),
    "erank_sigma2": LayerMetric(effective_rank, {"kind": "sigma2"}, _ROWS),
    # the function's own name, for its default kind
    "effective_rank": LayerMetric(effective_rank, {"kind": "sigma"}, _ROWS),
    "isotropy": LayerMetric(isotropy),
    "intrinsic_dim": LayerMetric(intrinsic_dim, settings=_ROWS),
    "simplex_volume": LayerMetric(
        simplex_volume, settings=("random_state",), needs_labels=True
    ),
}


def label_free_metrics():
    """Names of the registered metrics that need no labels."""
    return tuple(name for name, m in METRICS.items() if not m.needs_labels)
