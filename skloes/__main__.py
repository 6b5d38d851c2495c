"""``python -m skloes``: the same command line as the ``skloes`` console script."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
