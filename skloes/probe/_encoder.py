"""A text column of a table, encoded by the layers of a model that carry the task.

:class:`LayerTextEncoder` is the tabular form of the probes: one text column in
(a pandas or polars Series, a one-column frame, a list of str), the fused
selected layers out, with columns named after the column, the layer and the
unit. It is a ``ColumnTransformer`` entry and skrub's ``TableVectorizer``
high-cardinality encoder.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from skloes.core._contract import layer_feature_names
from skloes.core._frames import (
    column_names,
    frame_column,
    is_frame,
    is_series,
    series_name,
)
from skloes.core._torch import may_use_accelerator
from skloes.probe._base import POOLING_DOC, LayerPipelineBase
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import fit_context

__all__ = ["LayerTextEncoder"]

_PARAMS_DOC = """
    model : str, os.PathLike or None, default=None
        The model, as :class:`~skloes.extraction.HiddenStatesTransformer`
        takes it: a Hugging Face id (offline bundles first), a local folder or
        a ``.gguf`` file; None is the bundled MiniLM.

    selector : skloes layer selector or None, default=None
        Chooses the layers (any of :mod:`skloes.selection`), from the
        targets ``y`` when ``fit`` gets them and from the texts alone
        otherwise; None is ``LOESSelector(random_state=random_state)``,
        which keeps 4 layers. Its parameters are nested:
        ``selector__n_layers_to_select``.

{POOLING}

    max_length : int, default=128
        Tokens kept per text, capped at the model's limit.

    batch_size : int, default=32
        Texts per forward pass.

    cache : str, os.PathLike or None, default=None
        Folder of the hidden-states cache. With a cache, ``fit`` and
        ``transform`` read and write every layer of each text, so the folds
        and candidates of a search run each text through the model once;
        without one, ``transform`` runs the model only through the deepest
        selected block.

    device : str or torch.device, default="auto"
        Torch device of the extractor.

    extractor_params : dict or None, default=None
        Further :class:`~skloes.extraction.HiddenStatesTransformer`
        parameters (``exclude_tokens``, ``max_batch_tokens``, ``precision``,
        ``trust_remote_code``...).

    random_state : int, RandomState instance or None, default=None
        Seeds the default selector.

    verbose : int, default=0
        Progress bars of the forward passes.""".replace("{POOLING}\n", POOLING_DOC)


@fill_doc(PARAMS=_PARAMS_DOC)
class LayerTextEncoder(TransformerMixin, LayerPipelineBase):
    """Encode one text column by the layers of a model that carry the task.

    ``fit`` runs the model over the column once, extracting every layer's
    pooled hidden state; ``selector`` chooses the layers (by default LOES,
    4 layers, supervised when ``fit`` gets ``y``); ``transform`` returns the
    selected layers side by side, running the model only through the deepest
    selected block. The output is 2-D, with columns
    ``{column}__layer{l}_{j}`` (layer ``l`` as a Hugging Face
    ``hidden_states`` index, 0 the embedding output; unit ``j``), or
    ``layer{l}_{j}`` for an unnamed input (a list), and follows
    ``set_output(transform="pandas" | "polars")``.

    It takes exactly one column: a pandas or polars Series, a one-column
    DataFrame, or a list or 1-D array of str. In a ``ColumnTransformer``,
    name the column as a string (it gets a Series) or as a list of one name
    (it gets a one-column frame); the transformer's name is then prefixed as
    for any encoder (``text__review__layer4_0``; pass
    ``verbose_feature_names_out=False`` for ``review__layer4_0``). In skrub,
    pass it as ``TableVectorizer(high_cardinality=LayerTextEncoder())``.

    With a vision model (ViT, DINOv2, CLIP...), the column holds images as
    a table holds them: file paths, PIL images, arrays, or Hugging Face
    ``datasets`` image dicts (see :ref:`images-in`); a column of paths of a
    CLIP or SigLIP checkpoint goes to its vision tower.

    Read more in the :ref:`User Guide <tabular_text>`.

    Parameters
    ----------
    {PARAMS}

    Attributes
    ----------
    selected_layers_ : ndarray of int
        The layers of the output (Hugging Face ``hidden_states`` indices: 0
        is the embedding output), sorted.

    selector_ : layer selector
        The fitted selector (on every layer of the training column).

    pipeline_ : sklearn.pipeline.Pipeline
        What ``transform`` runs without a cache: the extractor of the
        selected layers and their fusion (:func:`~skloes.probe.prune_layers`).

    dim_ : int
        Width of one layer (the model width).

    n_model_layers_ : int
        Hidden states of the model (blocks + the embedding output).

    n_features_in_ : int
        1: the one text column.

    feature_names_in_ : ndarray of str of shape (1,)
        The name of the column, when ``fit`` got a named one (a Series or a
        frame).

    See Also
    --------
    LayerProbeClassifier : The same layers with a classifier on top.
    skloes.extraction.HiddenStatesTransformer : Every layer, unselected.

    Notes
    -----
    Requires ``pip install skloes[torch]``.

    .. versionadded:: 0.3

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skloes.probe import LayerTextEncoder
    >>> from skloes.selection import LOESSelector
    >>> table = pd.DataFrame({"review": ["a warm film", "a dull plot"] * 20,
    ...                       "stars": [4.0, 1.5] * 20})
    >>> text = LayerTextEncoder(selector=LOESSelector(n_layers_to_select=2))
    >>> encode = make_column_transformer(
    ...     (text, "review"),
    ...     (StandardScaler(), ["stars"]),
    ...     verbose_feature_names_out=False,
    ... ).set_output(transform="pandas")  # doctest: +SKIP
    >>> encode.fit_transform(table, [1, 0] * 20).columns[:2].tolist()  # doctest: +SKIP
    ['review__layer3_0', 'review__layer3_1']
    """

    _fit_methods = ("fit", "fit_transform")

    def __init__(
        self,
        model=None,
        *,
        selector=None,
        pooling="mean",
        max_length=128,
        batch_size=32,
        cache=None,
        device="auto",
        extractor_params=None,
        random_state=None,
        verbose=0,
    ):
        self.model = model
        self.selector = selector
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache = cache
        self.device = device
        self.extractor_params = extractor_params
        self.random_state = random_state
        self.verbose = verbose

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, **params):
        """Extract every layer of the column and select layers.

        Parameters
        ----------
        X : pandas or polars Series, one-column DataFrame, or list of str
            The text column (or image column, for a vision model).
        y : array-like of shape (n_samples,) or None, default=None
            Targets of the selection (None: selection from the texts alone).
        **params : dict
            Metadata for the selector's own cross-validation (``groups``),
            routed as for :meth:`LayerProbeClassifier.fit`.

        Returns
        -------
        self : object
            The fitted encoder.
        """
        self._fit(X, y, params, "fit")
        return self

    @fit_context(prefer_skip_nested_validation=False)
    def fit_transform(self, X, y=None, **params):
        """Fit, then encode the column (one forward pass per text).

        Parameters
        ----------
        X : pandas or polars Series, one-column DataFrame, or list of str
            The text column.
        y : array-like of shape (n_samples,) or None, default=None
            Targets of the selection.
        **params : dict
            Metadata for the selector's cross-validation, as for :meth:`fit`.

        Returns
        -------
        X_out : ndarray or DataFrame of shape (n_samples, n_selected * dim_)
            The selected layers, side by side.
        """
        return self._fit(X, y, params, "fit_transform")

    def _fit(self, X, y, params, method):
        texts = self._read(X, reset=True)
        y = _targets_of(y, len(texts), type(self).__name__)
        routed = self._routed_fit_params(params, method)
        extractor, stack = self._extract(texts, None)
        selector = self._fit_selector(extractor, stack, y, routed)
        self.dim_ = int(extractor.dim_)
        self._prune(extractor, [])
        return np.asarray(selector.transform(stack))

    def transform(self, X):
        """Encode the column by the selected layers.

        Parameters
        ----------
        X : pandas or polars Series, one-column DataFrame, or list of str
            The text column (the column ``fit`` saw, when named).

        Returns
        -------
        X_out : ndarray or DataFrame of shape (n_samples, n_selected * dim_)
            The selected layers, side by side.
        """
        check_is_fitted(self)
        return np.asarray(self._predictor().transform(self._read(X, reset=False)))

    # ------------------------------------------------------------- input
    def _read(self, X, *, reset):
        """The texts of the one column ``X``; its name recorded (fit) or
        checked (transform)."""
        column, name = _one_text_column(X, type(self).__name__)
        if reset:
            self.n_features_in_ = 1
            if name is None:
                if hasattr(self, "feature_names_in_"):
                    del self.feature_names_in_
            else:
                self.feature_names_in_ = np.asarray([name], dtype=object)
        else:
            fitted = getattr(self, "feature_names_in_", [None])[0]
            if name is not None and fitted is not None and name != fitted:
                raise ValueError(
                    f"{type(self).__name__}: `X` is the column {name!r}, but the "
                    f"encoder was fitted on the column {fitted!r}."
                )
        return column

    def get_feature_names_out(self, input_features=None):
        """Get the names of the output columns: ``{column}__layer{l}_{j}``.

        Parameters
        ----------
        input_features : array-like of one str or None, default=None
            The input column's name (a ``ColumnTransformer`` passes it);
            None uses the name seen in ``fit``, if any, else the names are
            ``layer{l}_{j}``.

        Returns
        -------
        feature_names_out : ndarray of str objects
            One name per output column: layer ``l`` (a Hugging Face
            ``hidden_states`` index) and unit ``j``, prefixed by the column.
        """
        check_is_fitted(self)
        fitted = getattr(self, "feature_names_in_", [None])[0]
        column = fitted
        if input_features is not None:
            given = np.asarray(input_features, dtype=object).ravel()
            if given.size != 1 or (fitted is not None and given[0] != fitted):
                raise ValueError(
                    f"{type(self).__name__}: `input_features` must be the one "
                    f"column seen in fit ({fitted!r}); got {list(given)!r}."
                )
            column = str(given[0])
        names = layer_feature_names(self.selected_layers_, self.dim_)
        if column is None:
            return names
        return np.asarray([f"{column}__{n}" for n in names], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.target_tags.required = False
        tags.transformer_tags.preserves_dtype = []
        tags.non_deterministic = may_use_accelerator(self.device)
        return tags


def _targets_of(y, n_texts, owner):
    """``y`` as one target per text (an iterator is read once), or None."""
    if y is None:
        return None
    if isinstance(y, (str, bytes)) or not hasattr(y, "__iter__"):
        raise TypeError(
            f"{owner}: `y` must be an array-like of one target per text of `X`, "
            f"or None; got {type(y).__name__}."
        )
    if not hasattr(y, "__len__"):  # a generator
        y = list(y)
    if len(y) != n_texts:
        raise ValueError(
            f"{owner}: `y` must have one entry per text of `X`; got {len(y)} for "
            f"{n_texts} texts."
        )
    return y


def _is_missing(value):
    """None, NaN of any float type, pandas' NA and NaT: a missing text."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):  # pd.NA refuses bool(); arrays are not one
        return type(value).__name__ == "NAType"


def _one_text_column(X, owner):
    """``(texts, name)`` of one text column; a one-line error for anything else.

    A Series (pandas, polars) or a frame of one column gives its name; a list
    or 1-D array has none. Two or more columns, or cells that are not str
    (numbers, missing values), are errors naming ``X``.
    """
    name = None
    if is_frame(X):
        names = column_names(X)
        if len(names) != 1:
            shown = ", ".join(map(repr, names[:5]))
            raise ValueError(
                f"{owner}: `X` must be one text column; got a table of "
                f"{len(names)} columns ({shown}). In a ColumnTransformer give "
                "it one column, by name (a string) or as a list of one name."
            )
        name, X = names[0], frame_column(X)
    elif is_series(X):
        name = series_name(X)
    elif isinstance(X, str) or X is None or hasattr(X, "tocsr"):
        sparse = " (sparse input is not supported)" if hasattr(X, "tocsr") else ""
        raise TypeError(
            f"{owner}: `X` must be a column of texts (a Series, a one-column "
            f"frame or a list of str); got {type(X).__name__}{sparse}."
        )
    elif getattr(X, "ndim", 0) in (3, 4) and hasattr(X, "shape"):
        return list(X), None  # a batch of images: (n, H, W) or (n, H, W, C)...
    elif getattr(getattr(X, "dtype", None), "kind", "O") in "biufcm":
        raise TypeError(
            f"{owner}: `X` must hold strings (one text column); got a numeric "
            f"array of shape {X.shape}."
        )
    elif getattr(X, "ndim", 1) == 2:
        if X.shape[1] != 1:
            raise ValueError(
                f"{owner}: `X` must be one text column; got an array of "
                f"{X.shape[1]} columns."
            )
        X = X[:, 0]
    texts = list(X)
    for i, text in enumerate(texts):
        if isinstance(text, str) or _is_image(text):
            continue
        missing = _is_missing(text)
        where = "`X`" if name is None else f"column {name!r}"
        what, fix = (
            ("a missing value", "fill or drop the missing texts")
            if missing
            else (
                f"{type(text).__name__} {text!r}",
                "encode such a column with a numeric or categorical transformer",
            )
        )
        raise TypeError(
            f"{owner}: `X` must hold strings (one text column); {where} holds "
            f"{what} at row {i}; {fix}."
        )
    return [str(t) if isinstance(t, str) else t for t in texts], name


def _is_image(value):
    """An image as a cell holds it: a file path, a PIL image, a 2-D or 3-D
    array or tensor, a Hugging Face ``datasets`` image dict (the extractor
    reads it, or refuses it for a text model)."""
    if isinstance(value, (os.PathLike, dict)) or hasattr(value, "getbands"):
        return True
    return getattr(value, "ndim", 0) in (2, 3) and hasattr(value, "shape")
