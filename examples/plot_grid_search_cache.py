"""
======================================================
Grid search over LOES and the probe, one forward pass
======================================================

A ``GridSearchCV`` over a ``Pipeline`` that starts with
:class:`~skloes.extraction.HiddenStatesTransformer` re-runs the pipeline for
every fold and every candidate. With a ``cache`` folder, the transformer looks
each text up by content first, so the model runs **once per distinct text** in
total, and the search costs one extraction plus cheap fits.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Count the texts that go through the model
# -----------------------------------------
# Every forward pass of a BERT-style model starts with its embedding module;
# a global PyTorch forward hook on it counts the texts in each batch, wherever
# the model was loaded (the search clones the pipeline many times).
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import transformers
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline

from skloes import HiddenStatesTransformer, LOESSelector
from skloes.datasets import load_rotten_tomatoes

transformers.logging.set_verbosity_error()
texts_through_model = [0]


def count_texts(module, inputs, output):
    if type(module).__name__ == "BertEmbeddings":
        texts_through_model[0] += output.shape[0]


hook = torch.nn.modules.module.register_module_forward_hook(count_texts)

# %%
# Data and pipeline
# -----------------
# 200 real Rotten Tomatoes snippets (fresh vs rotten), the embedded MiniLM
# (7 layers: the embedding output and 6 blocks), LOES, and a logistic probe.
X, y = load_rotten_tomatoes(n_samples=200, random_state=0, return_X_y=True)
cache = Path(tempfile.mkdtemp(prefix="skloes_gs_cache_"))


def make_search(cache_folder):
    pipe = Pipeline(
        [
            ("hst", HiddenStatesTransformer(max_length=64, cache=cache_folder)),
            ("loes", LOESSelector(random_state=0)),
            ("clf", LogisticRegression(max_iter=2000)),
        ]
    )
    grid = {"loes__n_layers_to_select": [1, 2, 3], "clf__C": [0.1, 1.0]}
    cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
    return GridSearchCV(pipe, grid, cv=cv)


# %%
# Run the search with the cache
# -----------------------------
# 6 candidates x 3 folds = 18 fits, each transforming its training and test
# texts, plus the final refit on all 200 texts.
start = time.perf_counter()
search = make_search(cache).fit(X, y)
search_time = time.perf_counter() - start
n_cached = texts_through_model[0]
hook.remove()
print(f"best {search.best_params_}, CV accuracy {search.best_score_:.3f}")
print(f"search: {search_time:.1f} s, {n_cached} texts through the model")

# %%
# Without a cache every fit would extract its own rows again: each of the 18
# fits transforms all 200 texts (its training part in ``fit``, its test part
# in ``score``), and the refit transforms them once more.
n_fits = len(search.cv_results_["params"]) * search.n_splits_
n_without_cache = n_fits * len(X) + len(X)
n_distinct = len(set(X))
print(f"distinct texts: {n_distinct}; without a cache: {n_without_cache}")
assert n_cached == n_distinct  # one forward pass per distinct text

# %%
# The cache folder holds one ``.npy`` entry per distinct text, under a folder
# named by the settings (model weights, pooling, max_length, layers, dtype).
# A second search, e.g. over other probe settings, runs no forward pass.
print("cache entries:", sum(1 for _ in cache.rglob("*.npy")))

# %%
# Plot
# ----
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.bar(
    ["without cache\n(computed)", "with cache\n(measured)"],
    [n_without_cache, n_cached],
    color=["0.6", "C0"],
)
ax.axhline(n_distinct, color="k", ls="--", lw=1, label="distinct texts")
ax.set_ylabel("texts through the model")
ax.set_title("GridSearchCV, 6 candidates x 3 folds")
ax.legend()
fig.tight_layout()
plt.show()

# %%
# This example's cache was a fresh temporary folder (to count from zero);
# remove it.
shutil.rmtree(cache)
