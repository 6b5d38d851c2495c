"""
=======================================================
Probing the layers of a vision model on real images
=======================================================

Images go through the same loop as texts: the extractor pools each layer the
way the model's family was trained (a DINOv2 by its class token, never
averaging its register tokens into a mean), a probe chooses layers and
predicts, and the saved probe loads back. **The model's weights here are
random**: no pretrained vision weights ship offline, so it is a small DINOv2
built from its real configuration (4 register tokens); the images are real
(scikit-image's LFW faces against non-faces). Point ``model`` at a hub id or
a folder of trained weights to probe a real one.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# A small DINOv2 with registers, and real images
# ----------------------------------------------
# 60 faces and 60 non-faces, grey 25 x 25 images on 0..1: the extractor
# repeats them on three channels and scales them to 0..255 before the image
# processor.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import transformers
from skimage.data import lfw_subset
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skloes.extraction import HiddenStatesTransformer
from skloes.models._testing import make_tiny_vision_model
from skloes.probe import LayerProbeClassifier, load_probe, save_probe

transformers.logging.set_verbosity_error()
images = lfw_subset()
X = np.concatenate([images[:60], images[100:160]])
y = np.array(["face"] * 60 + ["not a face"] * 60)
model = make_tiny_vision_model(
    "dinov2-registers", num_hidden_layers=4, hidden_size=32, image_size=32
)

# %%
# Pooled the way the family was trained
# -------------------------------------
# ``pooling="auto"`` (the default) takes a DINOv2's class token; ``"mean"``
# averages its patch tokens only; ``exclude_tokens=None`` puts the class
# token and the 4 registers back into the mean (what skloes did before 0.3).
poolings = {
    "class token (auto)": {},
    "mean of patches": {"pooling": "mean"},
    "mean of every token": {"pooling": "mean", "exclude_tokens": None},
}
scores = {}
for name, params in poolings.items():
    hst = HiddenStatesTransformer(model, device="cpu", **params)
    stack = hst.fit_transform(X)
    head = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    scores[name] = [cross_val_score(head, layer, y, cv=5).mean() for layer in stack]
print("prefix tokens:", hst.n_prefix_tokens_, "| family:", hst.family_)

fig, ax = plt.subplots(figsize=(6, 3.5))
for name, values in scores.items():
    ax.plot(range(len(values)), values, marker="o", label=name)
ax.set_xlabel("layer (0 = embedding output)")
ax.set_ylabel("5-fold accuracy")
ax.set_title("Random-weight DINOv2, LFW faces vs not")
ax.legend()
fig.tight_layout()

# %%
# Layer 0's class token is the same for every image (no patch has reached it
# yet), so its accuracy is chance; the deeper class tokens have read the
# patches.
#
# A probe from images to predictions
# ----------------------------------
# The probe chooses layers with LOES, runs the model only through the deepest
# one it uses, and saves without the weights.
probe = LayerProbeClassifier(model, pooling="auto", device="cpu", random_state=0)
probe.fit(X[::2], y[::2])
print("layers used:", probe.selected_layers_)
print("held-out accuracy:", probe.score(X[1::2], y[1::2]))
folder = Path(tempfile.mkdtemp()) / "face_probe"
save_probe(probe, folder)
back = load_probe(folder)
print("same predictions after loading:", (back.predict(X) == probe.predict(X)).all())
