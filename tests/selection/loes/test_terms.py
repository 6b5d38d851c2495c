"""The score terms as recorded: isotropy, triplets, redundancy."""

from __future__ import annotations

import numpy as np
import pytest
from _support.loes import (
    VARIANT_NAMES,
    noise,
    planted,
)

from skloes import LOESSelector


# --------------------------------------------------------------------------
# Score terms as recorded (properties 4, 5, 6)
# --------------------------------------------------------------------------
def test_robust_isotropy_is_scale_invariant_and_bounded():
    stack, y = planted(seed=4)
    a = LOESSelector(random_state=0).fit(stack, y)
    scaled = stack * np.array([1.0, 1e3, 1e-3, 7.0, 1.0, 0.01])[:, None, None]
    b = LOESSelector(random_state=0).fit(scaled, y)
    np.testing.assert_allclose(a.isotropy_, b.isotropy_, rtol=1e-9)
    assert np.all((a.isotropy_ > 0) & (a.isotropy_ <= 1))


def test_auto_triplets_enumerate_all_when_few_classes():
    stack, y = noise(n=120, n_layers=3, dim=6, n_classes=6, seed=5)
    sel = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    assert sel.triplets_.shape == (20, 3)  # C(6, 3)
    assert len({tuple(t) for t in sel.triplets_}) == 20
    two = LOESSelector(n_layers_to_select=2).fit(stack, y % 2)
    assert two.triplets_ is None
    assert np.nansum(np.abs(two.scores_["triangle"])) == 0.0


def test_many_classes_draw_200_distinct_triplets():
    stack, y = noise(n=400, n_layers=3, dim=6, n_classes=40, seed=6)
    sel = LOESSelector(n_layers_to_select=2, random_state=0).fit(stack, y)
    assert sel.triplets_.shape == (200, 3)
    assert len({tuple(t) for t in sel.triplets_}) == 200
    assert np.all(sel.triplets_[:, 0] < sel.triplets_[:, 1])


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_redundancy_lies_in_unit_interval(variant):
    stack, y = planted(seed=8)
    red = (
        LOESSelector(variant=variant, random_state=0)
        .fit(stack, y)
        .scores_["redundancy"]
    )
    red = red[~np.isnan(red)]
    assert np.all((red >= 0) & (red <= 1))
