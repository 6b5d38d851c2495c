"""The ``skloes`` command: ``probe``, ``predict``, ``extract``, ``models`` and
``cache``.

May import: utils, core, models, extraction, metrics, selection, heads, probe,
report, scale.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.cli._main import main

__all__ = ["main"]
