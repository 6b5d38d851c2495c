"""
==================================================
A text column beside numeric ones, grouped folds
==================================================

A real table: Amazon review snippets (VADER's ground truth) with their text,
the review each one comes from, its place in the review and a lexicon score.
:class:`~skloes.probe.LayerTextEncoder` turns the text column into the
layers of MiniLM that carry the sentiment, inside a ``ColumnTransformer``
next to the numeric columns; the three ways (text, numbers, both) are scored
with folds grouped by review, since the snippets of one review share their
author, product and mood.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The table
# ---------
# ``as_frame=True`` gives the text and the columns the data file holds (the
# review and the snippet's position come from its identifiers) plus a
# precomputed lexicon score (the sum of the VADER word ratings of its words).
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import sklearn
import transformers
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    StratifiedGroupKFold,
    StratifiedKFold,
    cross_val_score,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skloes.datasets import load_vader_amazon3
from skloes.plotting import plot_budget_curve
from skloes.probe import LayerTextEncoder
from skloes.selection import LOESSelector, LOESSelectorCV

transformers.logging.set_verbosity_error()
cache = Path(tempfile.gettempdir()) / "skloes_examples_cache"
data = load_vader_amazon3(as_frame=True, as_labels=True)
# Whole reviews, so that each has its dozen snippets: 40 of the 300.
reviews = np.random.RandomState(0).choice(np.unique(data.groups), 40, replace=False)
keep = np.isin(data.groups, reviews)
table, y, groups = data.data[keep], data.target[keep], data.groups[keep]
numbers = ["position", "review_snippets", "lexicon_valence", "lexicon_words"]
print(table.shape, "rows from", len(reviews), "reviews")
print(table.head(3))


# %%
# Three pipelines
# ---------------
# The encoder takes the column by name (a string: it receives a Series) and
# keeps the 2 layers LOES picks on each training fold; the model runs once
# per snippet thanks to the cache, however many folds see it.
def text_encoder():
    return LayerTextEncoder(
        selector=LOESSelector(n_layers_to_select=2, random_state=0),
        max_length=64,
        cache=cache,
    )


def head():
    return LogisticRegression(C=0.1, max_iter=2000)


pipelines = {
    "numbers": make_pipeline(
        ColumnTransformer([("numbers", StandardScaler(), numbers)]), head()
    ),
    "text layers": make_pipeline(
        ColumnTransformer([("text", text_encoder(), "text")]), StandardScaler(), head()
    ),
    "text layers + numbers": make_pipeline(
        ColumnTransformer(
            [("text", text_encoder(), "text"), ("numbers", StandardScaler(), numbers)]
        ),
        StandardScaler(),
        head(),
    ),
}

# %%
# Grouped folds against plain ones
# --------------------------------
# With plain stratified folds, snippets of one review sit on both sides of a
# split, and a column that identifies the review (its number of snippets)
# passes for a predictor. Grouped folds keep each review on one side.
grouped = StratifiedGroupKFold(n_splits=5, shuffle=True, random_state=0)
plain = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
scores = {}
for name, pipe in pipelines.items():
    scores[name] = {
        "grouped by review": cross_val_score(pipe, table, y, cv=grouped, groups=groups)
    }
for name in ("numbers", "text layers + numbers"):
    scores[name]["plain"] = cross_val_score(pipelines[name], table, y, cv=plain)
for name, by_split in scores.items():
    print(
        f"{name:>22}: "
        + ", ".join(f"{split} {s.mean():.3f}" for split, s in by_split.items())
    )
print("majority class:", round(max(np.mean(y == c) for c in np.unique(y)), 3))

# %%
# Layer-aware names, pandas or polars out
# ---------------------------------------
# The fitted column transformer names every column: the transformer, the
# column, the layer (0 = embedding output) and the unit.
both = pipelines["text layers + numbers"].fit(table, y)
encode = both[0].set_output(transform="pandas")
frame = encode.transform(table)
print(frame.shape, list(frame.columns[:2]), "...", list(frame.columns[-2:]))

# %%
# The budget, chosen inside the fit by grouped folds
# --------------------------------------------------
# With scikit-learn's metadata routing on, ``groups`` travel from ``fit``
# through the pipeline and the column transformer to the encoder's
# ``LOESSelectorCV``, whose own folds are grouped too (it asks for them: no
# ``set_fit_request`` needed). Its cross-validated budget curve:
sklearn.set_config(enable_metadata_routing=True)
tuned_text = LayerTextEncoder(
    selector=LOESSelectorCV(
        cv=StratifiedGroupKFold(n_splits=3), max_layers_to_select=4
    ),
    max_length=64,
    cache=cache,
)
tuned = make_pipeline(
    ColumnTransformer(
        [("text", tuned_text, "text"), ("numbers", StandardScaler(), numbers)]
    ),
    StandardScaler(),
    head(),
).fit(table, y, groups=groups)
sklearn.set_config(enable_metadata_routing=False)
selector = tuned[0].named_transformers_["text"].selector_
print("budget:", selector.n_layers_to_select_, "layers", selector.selected_layers_)
fig, ax = plt.subplots(figsize=(5.5, 3.5))
plot_budget_curve(selector, ax=ax)

# %%
# The scores
# ----------
fig, ax = plt.subplots(figsize=(6, 3))
names = list(scores)
for offset, split in [(-0.18, "grouped by review"), (0.18, "plain")]:
    rows = [i for i, n in enumerate(names) if split in scores[n]]
    means = [scores[names[i]][split].mean() for i in rows]
    stds = [scores[names[i]][split].std() for i in rows]
    ax.barh(np.array(rows) + offset, means, height=0.34, xerr=stds, label=split)
ax.set_yticks(np.arange(len(names)), names)
ax.set_xlabel("5-fold CV accuracy (3 classes)")
ax.legend(loc="lower right", fontsize=8)
ax.set_xlim(0.3, 0.9)
fig.tight_layout()
plt.show()
