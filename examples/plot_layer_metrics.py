"""
===========================================
The Layer-by-Layer metrics across depth
===========================================

Skean et al. (ICML 2025) describe each layer of a language model with
information-theoretic, geometric and invariance metrics. This example computes
them for every layer of the embedded MiniLM on real movie-review snippets:
dataset entropy, effective rank and isotropy of the pooled vectors, prompt
entropy and curvature of each prompt's tokens (computed inside the batch loop,
so token states never pile up), and InfoNCE between two augmented views.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# Pooled vectors and token-level metrics in one forward pass
# ----------------------------------------------------------
# :class:`~skloes.metrics.TokenMetricPooling` is a pooling callable: for every
# layer and prompt it returns the mean-pooled vector plus the prompt's entropy
# and curvature, computed on the prompt's tokens while the batch is in memory.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import transformers

from skloes import HiddenStatesTransformer
from skloes.datasets import load_rotten_tomatoes
from skloes.metrics import (
    TokenMetricPooling,
    augmented_views,
    dataset_entropy,
    effective_rank,
    infonce,
    isotropy,
    prompt_vectors,
)

transformers.logging.set_verbosity_error()
pd.set_option("display.width", 120)
pd.set_option("display.max_columns", 10)
texts, _ = load_rotten_tomatoes(n_samples=200, random_state=0, return_X_y=True)

token_pooling = TokenMetricPooling(metrics=("prompt_entropy", "curvature"))
hst = HiddenStatesTransformer(pooling=token_pooling, max_length=64)
pooled, token_metrics = token_pooling.split(hst.fit_transform(texts))
print("pooled stack:", pooled.shape)  # (7 layers, 200 prompts, 384)

# %%
# Dataset-level metrics of the pooled vectors, one value per layer.
table = pd.DataFrame(
    {
        "dataset entropy": dataset_entropy(pooled),
        "effective rank": effective_rank(pooled),
        "isotropy": isotropy(pooled),
        "prompt entropy": token_metrics["prompt_entropy"],
        "curvature": token_metrics["curvature"],
    }
)

# %%
# Invariance to input perturbations: InfoNCE
# ------------------------------------------
# Two augmented views of every text (word splits, character substitutions and
# keyboard typos, seeded), each reduced to its *prompt vector* (the token mean
# of the centred, row-normalised tokens) by a small pooling callable.


def prompt_vector_pooling(hidden, mask):
    keep = mask.bool().cpu().numpy()
    states = hidden.detach().double().cpu().numpy()
    P = prompt_vectors([states[b][keep[b]] for b in range(len(states))])
    return torch.as_tensor(P, dtype=hidden.dtype)


views = augmented_views(texts, n_views=2, random_state=0)
print("original:", texts[0])
print("view 1:  ", views[0][0])
view_hst = HiddenStatesTransformer(pooling=prompt_vector_pooling, max_length=64).fit(
    views[0]
)
A, B = view_hst.transform(views[0]), view_hst.transform(views[1])
table["InfoNCE"] = infonce(A, B)

# %%
# Prompt vectors are means of unit rows, so their norms are well below 1 and,
# at the paper's temperature of 0.1, the softmax over the batch stays nearly
# flat: InfoNCE is close to 0 in absolute terms, and its *trend* across depth
# (how much more the deep layers tell a prompt's views apart from the others)
# is what carries information.
table.index.name = "layer"
print(table.round(3))

# %%
# Plot
# ----
# Layer 0 is the embedding output, layers 1-6 the blocks.
fig, axes = plt.subplots(2, 3, figsize=(10, 5.5), sharex=True)
for ax, column in zip(axes.ravel(), table.columns, strict=True):
    ax.plot(table.index, table[column], marker="o")
    ax.set_title(column)
    ax.set_xticks(np.arange(len(table)))
for ax in axes[1]:
    ax.set_xlabel("layer")
fig.suptitle("all-MiniLM-L6-v2 on 200 Rotten Tomatoes snippets")
fig.tight_layout()
plt.show()
