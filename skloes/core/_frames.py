"""Data frames: the one place skloes reads columns of, and builds, pandas and polars.

A frame is recognised by what it has (``columns`` and a 2-D ``shape``), never by
importing pandas or polars, so neither is needed unless the user passes or asks
for one. :func:`output_container` reads the output a transformer was configured
with (``set_output`` or scikit-learn's global ``transform_output``), and
:func:`as_container` builds it, for the transformers whose output is not always
2-D (the extractor's layer stack), which scikit-learn's automatic wrapping
cannot take.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.utils._optional import import_optional

#: The containers of ``set_output(transform=...)``.
CONTAINERS = ("default", "pandas", "polars")


def is_frame(X) -> bool:
    """Whether ``X`` is a 2-D table with named columns (pandas, polars...)."""
    shape = getattr(X, "shape", None)
    return hasattr(X, "columns") and shape is not None and len(shape) == 2


def is_series(X) -> bool:
    """Whether ``X`` is a named 1-D column (a pandas or polars Series)."""
    shape = getattr(X, "shape", None)
    return (
        not is_frame(X)
        and shape is not None
        and len(shape) == 1
        and hasattr(X, "name")
        and (hasattr(X, "to_numpy") or hasattr(X, "iloc"))
    )


def frame_column(X, i: int = 0):
    """Column ``i`` of a frame, as its library's Series."""
    if hasattr(X, "iloc"):  # pandas: by position, duplicate names allowed
        return X.iloc[:, i]
    if hasattr(X, "to_series"):  # polars
        return X.to_series(i)
    return X[X.columns[i]]


def column_names(X):
    """The column names of a frame as a list of str, or None for other input."""
    if not is_frame(X):
        return None
    return [str(c) for c in X.columns]


def series_name(X):
    """The name of a pandas or polars Series (None, or not a Series: None)."""
    if not is_series(X):
        return None
    name = X.name
    return None if name is None or name == "" else str(name)


def output_container(estimator, method: str = "transform") -> str:
    """The container ``estimator`` was configured to return from ``method``.

    Its own ``set_output`` setting, else scikit-learn's global
    ``transform_output``.

    Parameters
    ----------
    estimator : estimator instance
        A transformer with ``set_output``.
    method : str, default="transform"
        The configuration key.

    Returns
    -------
    container : {"default", "pandas", "polars"}
    """
    import sklearn  # here: reading a frame's columns needs no scikit-learn

    config = getattr(estimator, "_sklearn_output_config", {})
    value = config.get(method, sklearn.get_config()[f"{method}_output"])
    if value not in CONTAINERS:
        raise ValueError(
            f"{type(estimator).__name__}: `set_output(transform=...)` must be one "
            f"of {list(CONTAINERS)}; got {value!r}."
        )
    return value


def as_container(values, names, container: str, like=None):
    """A 2-D array as the configured container, with its column names.

    Parameters
    ----------
    values : ndarray of shape (n_samples, n_features)
        The output.
    names : array-like of str of shape (n_features,)
        Its column names.
    container : {"default", "pandas", "polars"}
        From :func:`output_container`; ``"default"`` returns ``values``.
    like : object or None, default=None
        The input; a pandas output keeps a pandas input's row index.

    Returns
    -------
    output : ndarray, pandas.DataFrame or polars.DataFrame
    """
    if container == "default":
        return values
    names = [str(n) for n in names]
    if container == "pandas":
        pd = import_optional("pandas", extra="plot")
        index = getattr(like, "index", None) if hasattr(like, "iloc") else None
        return pd.DataFrame(np.asarray(values), columns=names, index=index)
    pl = import_optional("polars")
    return pl.from_numpy(np.asarray(values), schema=names, orient="row")
