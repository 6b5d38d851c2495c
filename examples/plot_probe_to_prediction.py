"""
==============================================
From probe to prediction, with only its layers
==============================================

A :class:`~skloes.probe.LayerProbeClassifier` extracts every layer of a model
over raw texts, chooses layers with LOES, fits a logistic regression on them,
and then predicts new texts by running the model only through the deepest
layer it uses. Saved, it holds no model weights and loads without pickle.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Fit a probe on raw texts
# ------------------------
# 600 real Rotten Tomatoes snippets (fresh vs rotten), two thirds to fit, and
# the embedded MiniLM (7 layers: the embedding output and 6 blocks).
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import transformers

from skloes.datasets import load_rotten_tomatoes
from skloes.extraction import HiddenStatesTransformer
from skloes.probe import LayerProbeClassifier, load_probe, save_probe
from skloes.selection import BestSingleLayerSelector

transformers.logging.set_verbosity_error()
X, y = load_rotten_tomatoes(n_samples=600, random_state=0, return_X_y=True)
cut = 2 * len(X) // 3
X_train, y_train, X_new, y_new = X[:cut], y[:cut], X[cut:], y[cut:]

probe = LayerProbeClassifier(max_length=64, random_state=0)
probe.fit(X_train, y_train)
print("layers used:", probe.selected_layers_)
print("held-out accuracy:", round(probe.score(X_new, y_new), 3))

# %%
# Predict with only the layers it uses
# ------------------------------------
# The probe's extractor asks for the selected layers only, so the forward
# pass stops after the deepest of them. MiniLM's last block is trained as a
# sentence embedding and often selected, which leaves nothing to skip; the
# single best layer by cross-validation, an early block on this task, shows
# the saving (any selector of skloes.selection plugs in).
early = LayerProbeClassifier(
    max_length=64,
    random_state=0,
    selector=BestSingleLayerSelector(random_state=0),
)
early.fit(X_train, y_train)
full = HiddenStatesTransformer(max_length=64).fit(X_new)


def seconds(fn, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


full.model_, early.pipeline_[0].model_  # load both models before timing
t_full = seconds(lambda: full.transform(X_new))
t_probe = seconds(lambda: early.predict_proba(X_new))
deepest = int(early.selected_layers_.max())
print(
    f"layer {early.selected_layers_}: predict {t_probe:.2f} s against "
    f"{t_full:.2f} s for every layer (expected about "
    f"{(deepest + 1) / 7:.2f} of it)"
)

# %%
# Save without the weights, load without pickle
# ---------------------------------------------
folder = save_probe(probe, Path(tempfile.mkdtemp()) / "rt_probe")
size = sum(f.stat().st_size for f in folder.iterdir())
print(sorted(f.name for f in folder.iterdir()), f"{size / 1e3:.0f} kB")
loaded = load_probe(folder)
same = np.array_equal(loaded.predict_proba(X_new), probe.predict_proba(X_new))
print("identical predictions after loading:", same)

# %%
# The cost of each forward pass
# -----------------------------
fig, ax = plt.subplots(figsize=(5, 2.5))
ax.barh(
    ["every layer", f"through block {deepest}"],
    [t_full, t_probe],
    color=["0.6", "tab:blue"],
)
ax.set_xlabel(f"seconds to predict {len(X_new)} texts")
fig.tight_layout()
plt.show()
