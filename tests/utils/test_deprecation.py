"""Renamed parameters (skloes.utils._deprecation): the former name keeps working
for two releases, warns naming the new one, and never silently loses to it.

The estimators' own renames are listed in tests/test_api.py; here the rules
are tested on a toy estimator, so they hold for any rename declared with
:func:`renamed_params`.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone

from skloes.utils._deprecation import (
    DEPRECATED,
    removed_in,
    renamed_params,
    resolved_params,
    warn_renamed,
)
from skloes.utils._param_validation import Interval, fit_context


@renamed_params(k="n_items", size=("width", float, "0.3"))
class _Toy(BaseEstimator):
    """A toy with two renamed parameters.

    Parameters
    ----------
    n_items : int, default=3
        Items.
    width : float, default=1.0
        Width.

    Attributes
    ----------
    seen_ : tuple
        What fit read.
    """

    _parameter_constraints = {
        "n_items": [Interval(Integral, 1, None, closed="left")],
        "width": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, n_items=3, width=1.0, k=DEPRECATED, size=DEPRECATED):
        self.n_items = n_items
        self.width = width
        self.k = k
        self.size = size

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        self.seen_ = (self.n_items, self.width)
        return self

    def transform(self, X):
        return np.full(len(X), self.n_items)

    def fit_transform(self, X, y=None):
        return self.fit(X, y).transform(X)

    # renamed_params wraps skloes' own methods only (not inherited ones)
    fit.__module__ = transform.__module__ = fit_transform.__module__ = "skloes.toy"


def test_the_former_name_warns_naming_the_new_name_and_its_value_is_used():
    with pytest.warns(FutureWarning) as record:
        toy = _Toy(k=5).fit()
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith("_Toy: the parameter `k` was renamed `n_items` in 0.2")
    assert "will be removed in 0.4; use `n_items` instead" in message
    assert "Its value 5 is used as `n_items`" in message
    assert "(the default 3) is ignored" in message
    assert toy.seen_ == (5, 1.0)


def test_the_release_of_a_rename_sets_its_removal():
    with pytest.warns(FutureWarning, match=r"`size` was renamed `width` in 0.3.*0.5"):
        toy = _Toy(size=2).fit()
    assert toy.seen_ == (3, 2.0) and isinstance(toy.seen_[1], float)  # converted
    assert removed_in("0.2") == "0.4" and removed_in("0.3") == "0.5"


def test_the_former_name_with_a_non_default_new_name_is_an_error():
    with pytest.raises(ValueError, match=r"_Toy: set `n_items` only; `k` is its"):
        _Toy(k=5, n_items=4).fit()
    with pytest.warns(FutureWarning):  # the new name at its default: no clash
        assert _Toy(k=5, n_items=3).fit().seen_[0] == 5


def test_the_parameters_never_change_and_survive_cloning():
    toy = _Toy(k=5)
    with pytest.warns(FutureWarning):
        toy.fit()
    assert toy.get_params()["k"] == 5 and toy.get_params()["n_items"] == 3
    assert clone(toy).get_params()["k"] == 5


def test_a_method_that_only_reads_honours_the_former_name_silently():
    with pytest.warns(FutureWarning):
        toy = _Toy(k=5).fit()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(toy.transform([1, 2]), [5, 5])


def test_nested_calls_warn_once():
    with pytest.warns(FutureWarning) as record:
        out = _Toy(k=2).fit_transform([1, 2, 3])
    assert len(record) == 1 and out.tolist() == [2, 2, 2]


def test_the_former_name_is_validated_as_the_new_one():
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match=r"'(k|n_items)' parameter"):
        with pytest.warns(FutureWarning):
            _Toy(k=0).fit()


def test_resolved_params_put_the_value_under_its_new_name():
    params = resolved_params(_Toy(k=7), warn=False)
    assert params["n_items"] == 7 and "k" not in params and "size" not in params


def test_the_former_names_are_documented_as_deprecated():
    doc = _Toy.__doc__
    assert "k : object, default='deprecated'" in doc
    assert ".. deprecated:: 0.3" in doc and "removed in 0.5" in doc
    assert doc.index("Former name of ``n_items``") < doc.index("Attributes")


def test_warn_renamed_is_the_one_warning_of_any_rename():
    with pytest.warns(FutureWarning, match=r"^Est: the option `--k` was renamed"):
        warn_renamed("Est", "--k", "--budget", what="option", note=" It is used.")
