"""Recipes for scaling skloes out: extraction in partitions, LOES on chunked data.

The user guide (``doc/user_guide/scaling.rst``) shows this code, and
``tests/test_dask.py`` runs it on a Dask ``LocalCluster``, so what the guide
shows is what is tested. Nothing here is a scheduler: Dask (or any engine that
maps a function over partitions and folds results) does the scheduling.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from math import floor
from numbers import Integral

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state


# -- extraction in partitions -------------------------------------------------
def extract_partition(texts, **params):
    """The layer stack of one partition, from its own HiddenStatesTransformer.

    Every partition builds its own transformer (cheap: weights load on first
    use) and writes to the same ``cache`` folder, whose entries are
    content-addressed and written atomically.
    """
    from skloes import HiddenStatesTransformer

    texts = list(texts)
    hst = HiddenStatesTransformer(**params)
    return hst.fit(texts).transform(texts)


def extract_on_dask(texts, *, npartitions, **params):
    """Extract a corpus in ``npartitions`` partitions on the active Dask client.

    Returns the same array as one ``HiddenStatesTransformer(**params)`` run on
    all texts (a stack, or a flat table with ``output="flat"``). For a corpus
    larger than memory, map a function that returns only ``len(part)`` instead
    and read the result back later from the cache.
    """
    import dask.bag as db

    bag = db.from_sequence(list(texts), npartitions=npartitions)
    parts = bag.map_partitions(lambda part: [extract_partition(part, **params)])
    axis = 0 if params.get("output") == "flat" else 1
    return np.concatenate(parts.compute(), axis=axis)


# -- LOES on data bigger than memory: the calibration rows ---------------------
def draw_calibration_rows(y, max_samples, random_state=None, *, stratify=True):
    """LOES's calibration rows, drawn from the labels alone (no features).

    The same draw as ``LOESSelector(max_samples=..., random_state=...)``: a
    stratified ``train_test_split`` for classification (uniform if that is
    impossible), uniform without replacement otherwise. Returns the sorted
    row indices and the random state, advanced past the draw: pass it on as
    the selector's ``random_state`` so that its later draws (the triangle
    triplets) match an in-memory fit too.
    """
    rng = check_random_state(random_state)
    n = len(y)
    if max_samples is None:
        count = n
    elif isinstance(max_samples, Integral):
        count = min(int(max_samples), n)
    else:
        count = min(n, floor(max_samples * n))
    if count >= n:
        return np.arange(n), rng
    if stratify:
        _, codes = np.unique(np.asarray(y), return_inverse=True)
        try:
            rows, _ = train_test_split(
                np.arange(n), train_size=count, stratify=codes, random_state=rng
            )
            return np.sort(rows), rng
        except ValueError:
            pass
    return np.sort(rng.choice(n, size=count, replace=False)), rng


def gather_rows(chunks, rows):
    """Rows ``rows`` (sorted, global) of a stack stored as chunks, in one pass.

    ``chunks`` yields ``(n_layers, n_chunk, dim)`` arrays in row order: slices
    of a memory-mapped file, blocks of a Dask array, partition files. Only the
    requested rows are ever held, so memory is ``n_layers * len(rows) * dim``.
    """
    out, start = [], 0
    for chunk in chunks:
        n = chunk.shape[1]
        local = rows[(rows >= start) & (rows < start + n)] - start
        if local.size:
            out.append(np.asarray(chunk[:, local]))
        start += n
    return np.concatenate(out, axis=1)


# -- statistics that merge chunk by chunk ---------------------------------------
class LayerMoments:
    """Mergeable first and second moments of every layer and pair of layers.

    Holds the row count, the per-layer means and the centred cross-scatter
    ``X_a,cᵀ X_b,c`` of every pair of layers (``n_layers² · dim²`` numbers).
    ``a + b`` merges two chunks with the pairwise update of Chan, Golub and
    LeVeque, which never forms the raw ``Σxxᵀ`` (no cancellation). Isotropy,
    total variance and linear CKA follow from the merged moments exactly.
    """

    def __init__(self, n, mean, scatter):
        self.n, self.mean, self.scatter = n, mean, scatter

    @classmethod
    def from_chunk(cls, chunk):
        X = np.asarray(chunk, dtype=np.float64)
        mean = X.mean(axis=1)
        Xc = X - mean[:, None, :]
        L = X.shape[0]
        scatter = np.empty((L, L, X.shape[2], X.shape[2]))
        for a in range(L):
            for b in range(a, L):
                scatter[a, b] = Xc[a].T @ Xc[b]
                scatter[b, a] = scatter[a, b].T
        return cls(X.shape[1], mean, scatter)

    def __add__(self, other):
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        correction = np.einsum("ai,bj->abij", delta, delta) * (self.n * other.n / n)
        return LayerMoments(n, mean, self.scatter + other.scatter + correction)

    def total_variance(self):
        """``v_l = ‖X_l,c‖_F² / n``, the robust variant's layer scale squared."""
        L = len(self.mean)
        return np.array([np.trace(self.scatter[l, l]) for l in range(L)]) / self.n

    def isotropy(self):
        """Bounded isotropy ``exp(H(s²/Σs²)) / min(n-1, d)`` of every layer."""
        L, d = self.mean.shape
        out = np.empty(L)
        for l in range(L):
            lam = np.linalg.eigvalsh(self.scatter[l, l])  # the s² of X_l,c
            lam = lam[lam > lam.max() * max(self.n, d) * np.finfo(float).eps]
            p = lam / lam.sum()
            out[l] = np.exp(-(p * np.log(p)).sum()) / min(self.n - 1, d)
        return out

    def cka(self):
        """Linear CKA ``‖A_cᵀB_c‖_F² / (‖A_cᵀA_c‖_F ‖B_cᵀB_c‖_F)`` of every pair."""
        L = len(self.mean)
        norms = np.array([np.linalg.norm(self.scatter[l, l]) for l in range(L)])
        cross = np.array(
            [
                [np.linalg.norm(self.scatter[a, b]) ** 2 for b in range(L)]
                for a in range(L)
            ]
        )
        return cross / np.outer(norms, norms)
