"""Layer selection: the shared selector base, LOES and its path, the baselines.

The public names live in :mod:`skloes` (``LOESSelector``, ``LOESSelectorCV``)
and :mod:`skloes.baselines`; this package is their one home.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause
