"""Deprecated name: ``SelectedLayerFusion`` is :class:`SelectedLayerConcatenation`.

Renamed in 0.3 (what it does is concatenate; "fusion" names the probes'
choice among concatenating, averaging and stacking), removed in 0.5. The
class stays at this path so that pipelines pickled or saved before 0.3, which
name ``skloes.probe._fusion.SelectedLayerFusion``, still load.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.probe._concatenation import SelectedLayerConcatenation
from skloes.utils._deprecation import warn_renamed

__all__ = ["SelectedLayerFusion"]


class SelectedLayerFusion(SelectedLayerConcatenation):
    """Deprecated: use :class:`SelectedLayerConcatenation`.

    .. deprecated:: 0.3
       Renamed ``SelectedLayerConcatenation``; this name is removed in 0.5.

    Parameters
    ----------
    selector : fitted layer selector
        Any fitted skloes selector (:mod:`skloes.selection`).
    """

    def __init__(self, selector=None):
        warn_renamed(
            "skloes.probe",
            "SelectedLayerFusion",
            "SelectedLayerConcatenation",
            what="class",
            renamed_in="0.3",
        )
        super().__init__(selector=selector)
