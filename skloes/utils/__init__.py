"""Utilities with no skloes concept in them: the floor every other stands on.

Parameter validation (``_param_validation``, the one home of scikit-learn's
private helpers), shared docstring paragraphs (``_docstrings``), optional
imports with their install hint (``_optional``) and the deprecation of renamed
parameters (``_deprecation``) and the version (``_version``).

May import: nothing of skloes.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause
