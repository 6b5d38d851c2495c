"""The report tests' shared real-model report (MiniLM on real texts)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def minilm_report(minilm_path, rotten_tomatoes_small):
    """A report on the real MiniLM's 7 hidden states of 120 real Rotten
    Tomatoes texts (3 folds, kept small: the page is what is tested)."""
    from skloes import HiddenStatesTransformer
    from skloes.report import LayerReport

    texts, y = rotten_tomatoes_small
    texts, y = list(texts[:120]), np.asarray(y[:120])
    H = HiddenStatesTransformer(minilm_path, max_length=32).fit_transform(texts)
    return LayerReport(n_layers_to_select=2, cv=3, random_state=0).fit(H, y)
