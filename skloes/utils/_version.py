"""The version of skloes: one home, read by the package, its build and its files."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

VERSION = "0.3.0"
