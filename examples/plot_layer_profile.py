"""
==========================================
Probe every layer and plot the profile
==========================================

Which layer of a model carries a task? This example extracts every layer of
the embedded MiniLM for real Rotten Tomatoes snippets (fresh vs rotten), fits
a cross-validated linear probe on each, puts label-free layer metrics next to
it, selects layers with LOES, and compares the fused layers against the last
layer, the best single layer and other baselines, and shows the report's page.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Extract every layer once
# ------------------------
# The stack has shape ``(n_layers, n_samples, dim)``; layer 0 is the embedding
# output, layers 1-6 the transformer blocks. The cache folder makes a re-run
# (or another example on the same texts) skip the forward pass.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import transformers

from skloes import HiddenStatesTransformer
from skloes.datasets import load_rotten_tomatoes
from skloes.report import layer_report

transformers.logging.set_verbosity_error()
pd.set_option("display.width", 120)
pd.set_option("display.max_columns", 10)
cache = Path(tempfile.gettempdir()) / "skloes_examples_cache"
texts, y = load_rotten_tomatoes(n_samples=400, random_state=0, return_X_y=True)
H = HiddenStatesTransformer(max_length=64, cache=cache).fit_transform(texts)
print(H.shape)

# %%
# The per-layer report
# --------------------
# A logistic probe, 5-fold cross-validated, on every layer; three dataset-level
# metrics; LOES with a budget of 3 layers; the baselines scored with the same
# probe and folds.
report = layer_report(
    H,
    y,
    n_layers_to_select=3,
    metrics=("dataset_entropy", "erank_sigma", "isotropy"),
    random_state=0,
)
print(report.to_frame().round(3))

# %%
# LOES against the baselines. The selectors are fitted on all rows here
# (``nested=False``), so LOES and the best single layer are slightly
# optimistic; ``nested=True`` selects inside each fold.
for row in report.summary_:
    print(
        f"{row['method']:>18}: layers {list(row['layers'])}, "
        f"accuracy {row['score']:.3f} +/- {row['score_std']:.3f}"
    )

# %%
# The layer profile
# -----------------
# Probe accuracy per layer (top), the metrics (bottom), the LOES layers marked,
# the last layer's accuracy as a reference line. ``report.plot()`` alone returns
# a standalone figure (``report.save`` writes it as ``profile.png``); here we
# hand it pyplot axes so that the figure shows in the notebook or gallery.
fig, axes = plt.subplots(
    2, 1, figsize=(10, 6), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
)
report.plot(ax=axes)
fig.subplots_adjust(left=0.08, right=0.72, top=0.93, bottom=0.09, hspace=0.08)
plt.show()

# %%
# The report page
# ---------------
# ``report.save(folder)`` writes ``report.html`` beside ``layers.csv``,
# ``selection.json`` and ``profile.png``: one self-contained page, nothing
# fetched, whose numbers are those of the two files. In a notebook, and here in
# the gallery, a fitted report displays as that page: hover a layer of the
# profile for its numbers, click a column's name to sort the per-layer table,
# switch the metric drawn below the probe score.
with tempfile.TemporaryDirectory() as tmp:
    folder = report.save(
        Path(tmp) / "report",
        about={"data": "rotten_tomatoes", "model": "all-MiniLM-L6-v2"},
    )
    size = (folder / "report.html").stat().st_size
    print(sorted(p.name for p in folder.iterdir()), f"report.html {size / 1e3:.0f} KB")
report  # noqa: B018 (the gallery and notebooks display the page)
