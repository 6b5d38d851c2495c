"""
=====================================================
Choosing the LOES budget by cross-validation
=====================================================

How many layers should LOES fuse? :class:`~skloes.selection.LOESSelectorCV` answers it
like ``RFECV``: LOES is greedy and nested (the selection for ``K`` layers is a
prefix of the selection for ``K + 1``), so one selection path per fold scores
every budget at once. This example draws the *budget curve* for the embedded
MiniLM on real movie-review snippets.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Features
# --------
# Every layer of MiniLM (7: the embedding output and 6 blocks) for 400 real
# Rotten Tomatoes snippets, from the examples' shared cache.
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import transformers

from skloes import HiddenStatesTransformer, LOESSelector, LOESSelectorCV
from skloes.datasets import load_rotten_tomatoes

transformers.logging.set_verbosity_error()
cache = Path(tempfile.gettempdir()) / "skloes_examples_cache"
texts, y = load_rotten_tomatoes(n_samples=400, random_state=0, return_X_y=True)
H = HiddenStatesTransformer(max_length=64, cache=cache).fit_transform(texts)

# %%
# One path per fold scores every budget
# -------------------------------------
# 5 folds: in each, LOES selects up to 7 layers on the training rows; the
# probe (the default ridge probe) is scored on the held-out rows for the first
# 1, 2, ..., 7 layers of that path. The chosen budget is the smallest with the
# best mean score, and the final selection is one path on all rows, cut there.
start = time.perf_counter()
selector = LOESSelectorCV(
    selector=LOESSelector(random_state=0), max_layers_to_select=7, cv=5
).fit(H, y)
print(
    f"fitted in {time.perf_counter() - start:.2f} s "
    f"(6 selection paths: 5 folds + the final one)"
)
print("chosen budget:", selector.n_layers_to_select_)
print(
    "selection order:",
    selector.selection_order_,
    "-> layers",
    selector.selected_layers_,
)

# %%
# Each fold's path (the order in which LOES picked the layers):
results = selector.cv_results_
for i in range(5):
    print(f"fold {i}:", np.asarray(results[f"split{i}_selection_order"]))

# %%
# The budget curve
# ----------------
budgets = np.asarray(results["n_layers"])
mean = np.asarray(results["mean_test_score"])
std = np.asarray(results["std_test_score"])
fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.plot(budgets, mean, marker="o", label="mean over 5 folds")
ax.fill_between(budgets, mean - std, mean + std, alpha=0.2, label="+/- 1 std")
ax.axvline(
    selector.n_layers_to_select_,
    color="k",
    ls="--",
    lw=1,
    label=f"chosen: {selector.n_layers_to_select_}",
)
ax.set_xticks(budgets)
ax.set_xlabel("layers selected by LOES (K)")
ax.set_ylabel("held-out accuracy (ridge probe)")
ax.set_title("LOESSelectorCV budget curve, MiniLM")
ax.legend()
fig.tight_layout()
plt.show()
