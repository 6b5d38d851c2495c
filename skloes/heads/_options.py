"""The heads' shared vocabulary: option names and the GeoReg weight defaults.

Torch-free, so that estimator parameter constraints can name the options
without importing torch.

The two ``geo_weight`` defaults differ on purpose: the fine-tuner keeps the
paper's 0.1 (the loss shapes a backbone, the authors' setting), the feature
head uses 0.01 (it corrects a logistic regression on frozen features). The
measurements behind them are in the user guide, :ref:`georeg_head_weight`,
which both estimators' docstrings cite.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

__all__ = ["FUSIONS", "GEO_VARIANTS", "GEO_WEIGHT_FEATURES", "GEO_WEIGHT_FINETUNE"]

# How a head combines its layer blocks (LayerFusionHead's `fusion`).
FUSIONS = ("concat", "mean", "sum", "scalar_mix")
# GeoRegLoss's forms: the robust default and the authors' reference.
GEO_VARIANTS = ("robust", "reference")
# geo_weight defaults (see the module docstring for why they differ).
GEO_WEIGHT_FEATURES = 0.01
GEO_WEIGHT_FINETUNE = 0.1
