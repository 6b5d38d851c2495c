"""Extraction: raw inputs to layer stacks, the public home of the extractor.

:class:`HiddenStatesTransformer` orchestrates the floors below: cache lookup,
input encoding, the truncated forward pass, pooling on the device, and the
stored output.

May import: utils, core, models.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.extraction._hidden_states import HiddenStatesTransformer

__all__ = ["HiddenStatesTransformer"]
