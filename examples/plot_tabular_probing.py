"""
=================================================
Tabular probing: your own per-layer features
=================================================

Features you computed yourself (another library, another model, a feature
store) fit skloes as a **flat table**: one row per sample, the layers' columns
side by side, block width ``layer_dim``. The table cross-validates like any
scikit-learn input, and ``set_output(transform="pandas")`` keeps the column
names ``layer{l}_{j}`` through the pipeline.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# A precomputed feature table
# ---------------------------
# To stay self-contained we make the table with skloes itself (the embedded
# MiniLM, ``output="flat"``) and then forget where it came from: from here on
# it is just a DataFrame of 7 blocks of 384 columns.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import transformers
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skloes import HiddenStatesTransformer, LOESSelector
from skloes.datasets import load_rotten_tomatoes

transformers.logging.set_verbosity_error()
cache = Path(tempfile.gettempdir()) / "skloes_examples_cache"
texts, y = load_rotten_tomatoes(n_samples=400, random_state=0, return_X_y=True)
hst = HiddenStatesTransformer(output="flat", max_length=64, cache=cache)
table = pd.DataFrame(hst.fit_transform(texts), columns=hst.get_feature_names_out())
print(table.shape)
print(table.iloc[:3, [0, 1, 384, 385]])

# %%
# A plain scikit-learn workflow
# -----------------------------
# ``layer_dim=384`` tells the selector the block width; nothing is guessed.
# The selector keeps whole layers, so its output columns are still named by
# layer and the scaler and the probe see a DataFrame.
pipe = make_pipeline(
    LOESSelector(layer_dim=384, n_layers_to_select=2, random_state=0),
    StandardScaler(),
    LogisticRegression(C=0.1, max_iter=2000),
).set_output(transform="pandas")

cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
search = GridSearchCV(
    pipe, {"loesselector__n_layers_to_select": [1, 2, 3, 4]}, cv=cv
).fit(table, y)
print("best budget:", search.best_params_, f"accuracy {search.best_score_:.3f}")

# %%
# What the fitted pipeline selected, by layer (0 = embedding output):
selector = search.best_estimator_[0]
print(
    "selected layers:",
    selector.selected_layers_,
    "in the order",
    selector.selection_order_,
)
fused = search.best_estimator_[:-1].transform(table)
print(type(fused).__name__, fused.shape)
print(list(fused.columns[:3]), "...", list(fused.columns[-2:]))

# %%
# Cross-validated accuracy by budget
# ----------------------------------
scores = search.cv_results_
budgets = [p["loesselector__n_layers_to_select"] for p in scores["params"]]
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.errorbar(
    budgets,
    scores["mean_test_score"],
    yerr=scores["std_test_score"],
    marker="o",
    capsize=3,
)
ax.set_xticks(budgets)
ax.set_xlabel("layers selected by LOES")
ax.set_ylabel("5-fold CV accuracy")
ax.set_title("LOES on a precomputed flat table")
fig.tight_layout()
plt.show()
