"""The core: what every floor above shares, with no estimator in it.

Owns the layer-data contract (``_contract``: stacks, flat tables, fusing),
targets and folds (``_targets``: task resolution, the class checks, CV splits),
shared geometry (``_geometry``, numpy and torch, one definition each), ridge
algebra (``_ridge``), token pooling (``_pooling``), the content-addressed
hidden-states cache (``_cache``), folders and files written whole
(``_atomic``: staged, then swapped in under a lock), process memory
(``_memory``), the paired
one-standard-error rule over shared folds (``_noise``) and the one torch
access point with the device rule (``_torch``).

May import: utils.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause
