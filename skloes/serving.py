"""Serve a saved probe from its exported graph: no torch, no transformers.

A probe saved with ``save_probe(..., export="onnx-int8")`` (or ``"onnx"``)
carries the model cut at its deepest selected block, with the selected layers
pooled inside the graph, as an ONNX file, the model's tokenizer as
``tokenizer.json`` and its head as plain arrays. :func:`load_exported` loads
such a folder with ONNX Runtime and the ``tokenizers`` library alone
(``pip install skloes[serve]``): it imports neither torch nor transformers
(nor ``skloes.heads``), whatever head the folder holds, nor scikit-learn for
the heads of plain arrays (every fusion of linear probes: concatenated,
averaged or stacked per-layer probes), so a fresh process predicts within
about a second. :func:`skloes.probe.load_probe` returns the same
object for such a folder.

This module imports only the standard library, numpy and skloes' own
dependency-free helpers at its top; ONNX Runtime and tokenizers inside
:func:`load_exported`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from pathlib import Path

import numpy as np

import skloes.probe_folder as probe_folder
from skloes.core._batching import token_batches
from skloes.core._fusion import average_outputs, meta_columns, meta_features
from skloes.core._texts import check_texts
from skloes.utils._cpu import cpu_description, has_int8_dot_product
from skloes.utils._docstrings import fill_x_doc
from skloes.utils._optional import import_optional
from skloes.utils._validation import check_count

__all__ = ["ExportedImageProbe", "ExportedProbe", "load_exported", "open_exported"]


def _tokenizer(path: Path, spec: dict):
    tokenizers = import_optional("tokenizers", extra="serve")
    tokenizer = tokenizers.Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(int(spec["max_length"]))
    return tokenizer


def _session(path: Path, n_threads, graph=None):
    """An ONNX Runtime session of the graph at ``path``; ``graph`` is its
    manifest entry (a graph optimized when saved is not optimized again)."""
    ort = import_optional("onnxruntime", extra="serve")
    options = ort.SessionOptions()
    if graph is not None and graph.get("optimized") == probe_folder.SAVED_OPTIMIZATION:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if n_threads is not None:
        options.intra_op_num_threads = int(n_threads)
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _labels(spec):
    if spec is None:
        return None
    dtype = object if spec["dtype"] == "object" else np.dtype(spec["dtype"])
    return np.asarray(spec["values"], dtype=dtype)


# The arrays of ``head.npz`` by head kind: those it must hold, those it may.
_HEAD_ARRAYS = {
    "linear": ({"coef", "intercept"}, set()),
    "ensemble": (
        {"layer_coef", "layer_intercept"},
        {"layer_scaler_mean", "layer_scaler_scale", "final_coef", "final_intercept"},
    ),
}
_SCALERS = {"fusion_mean", "fusion_scale", "scaler_mean", "scaler_scale"}


def check_head_arrays(arrays, kind, n_outputs):
    """Refuse a head whose arrays are not those its kind requires.

    Every array is a float32 or float64 array, finite, of the shape the
    head kind requires (one row of coefficients per score, intercepts,
    scalers and layers that agree); a required array missing, or one the
    kind has no use for, is refused too. ``n_outputs``: the scores the
    manifest's classes need (None: a regression). Raises ``ValueError``
    naming the array and what was expected.
    """
    family = "ensemble" if kind in ("average", "stack") else "linear"
    _check_head_values(arrays, kind, family)
    _check_head_shapes(arrays, family, n_outputs)


def _check_head_values(arrays, kind, family):
    """The names the kind uses, and float, finite values (no zero scale)."""
    required, optional = _HEAD_ARRAYS[family]
    missing = sorted(required - set(arrays))
    if missing:
        raise ValueError(f"it lacks the array(s) {missing} a {kind} head needs")
    unknown = sorted(set(arrays) - required - optional - _SCALERS)
    if unknown:
        raise ValueError(f"it holds array(s) {unknown} that no {kind} head has")
    for name, value in arrays.items():
        if value.dtype not in (np.float32, np.float64):
            raise ValueError(
                f"its array {name!r} must hold float32 or float64 numbers; got "
                f"{value.dtype}"
            )
        if not np.isfinite(value).all():
            raise ValueError(f"its array {name!r} holds NaN or infinite values")
    for name in ("fusion_scale", "scaler_scale", "layer_scaler_scale"):
        if name in arrays and not (arrays[name] != 0).all():
            raise ValueError(f"its array {name!r} holds a zero (a division by zero)")


def _check_head_shapes(arrays, family, n_outputs):
    """The arrays' shapes agree with the coefficients and the classes."""

    def shape(name, expected):
        got = arrays[name].shape
        if got != expected:
            raise ValueError(
                f"its array {name!r} must have shape {expected}; got {got}"
            )

    if family == "linear":
        if arrays["coef"].ndim != 2:
            raise ValueError(
                f"its array 'coef' must be 2-D (scores, features); got shape "
                f"{arrays['coef'].shape}"
            )
        rows, n_features = arrays["coef"].shape
        shape("intercept", (rows,))
    else:
        if arrays["layer_coef"].ndim != 3:
            raise ValueError(
                "its array 'layer_coef' must be 3-D (layers, scores, width); got "
                f"shape {arrays['layer_coef'].shape}"
            )
        n_layers, rows, dim = arrays["layer_coef"].shape
        n_features = n_layers * dim
        shape("layer_intercept", (n_layers, rows))
        for name in ("layer_scaler_mean", "layer_scaler_scale"):
            if name in arrays:
                shape(name, (n_layers, dim))
        if ("final_coef" in arrays) != ("final_intercept" in arrays):
            raise ValueError("it holds only one of 'final_coef' and 'final_intercept'")
        if "final_coef" in arrays:
            per_layer = meta_columns(n_outputs)
            final_rows = 1 if n_outputs in (None, 2) else n_outputs
            shape("final_coef", (final_rows, n_layers * per_layer))
            shape("final_intercept", (final_rows,))
    if n_outputs is not None and rows != (1 if n_outputs == 2 else n_outputs):
        return  # the head's own check names the classes it does not score
    if ("fusion_mean" in arrays) != ("fusion_scale" in arrays):
        raise ValueError("it holds only one of 'fusion_mean' and 'fusion_scale'")
    if "fusion_mean" in arrays:
        mean = arrays["fusion_mean"]
        if mean.ndim != 2 or mean.size != n_features:
            raise ValueError(
                f"its array 'fusion_mean' must be 2-D (layers, width) with "
                f"{n_features} values, as the coefficients; got shape {mean.shape}"
            )
        shape("fusion_scale", mean.shape)
    for name in ("scaler_mean", "scaler_scale"):
        if name in arrays:
            shape(name, (n_features,))


class _LinearHead:
    """The fused layers' standardization and a linear model, in numpy."""

    def __init__(self, arrays, spec):
        self._read_scalers(arrays, spec)
        self.coef, self.intercept = arrays["coef"], arrays["intercept"]
        self.classes_ = _labels(spec.get("classes"))
        self.name = "LogisticRegression" if self.kind == "logistic" else "linear model"
        rows = self.coef.shape[0] if self.coef.ndim == 2 else -1
        if self.classes_ is not None and rows != (
            1 if len(self.classes_) == 2 else len(self.classes_)
        ):
            raise ValueError(
                f"its {rows} rows of coefficients do not score the "
                f"{len(self.classes_)} classes of the manifest"
            )

    def _read_scalers(self, arrays, spec):
        """The head's kind and the fused layers' standardization arrays."""
        self.kind = spec["kind"]
        self.fusion_mean = arrays.get("fusion_mean")
        self.fusion_scale = arrays.get("fusion_scale")
        self.scaler_mean = arrays.get("scaler_mean")
        self.scaler_scale = arrays.get("scaler_scale")

    def has(self, method):
        return method != "predict_proba" or self.kind == "logistic"

    def _features(self, stack):
        """The fused, standardized layers, in the dtypes scikit-learn uses."""
        blocks = []
        for i, block in enumerate(stack):
            if self.fusion_mean is not None:
                block = (block.astype(np.float64) - self.fusion_mean[i]) / (
                    self.fusion_scale[i]
                )
            blocks.append(block)
        fused = np.concatenate(blocks, axis=1).astype(stack.dtype)
        if self.scaler_mean is not None:
            fused -= self.scaler_mean
        if self.scaler_scale is not None:
            fused /= self.scaler_scale
        return fused

    def decision_function(self, stack):
        features = self._features(stack)
        coef = self.coef.astype(features.dtype)
        scores = features @ coef.T + self.intercept.astype(features.dtype)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict_proba(self, stack):
        scores = self.decision_function(stack)
        return _proba(scores[:, None] if scores.ndim == 1 else scores)

    def predict(self, stack):
        scores = self.decision_function(stack)
        if self.kind != "logistic":
            return scores
        index = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(1)
        return self.classes_[index]


def _scores(X, coef, intercept):
    """A linear model's scores of ``X`` (``(n, rows)``), in numpy's dtype
    promotion, as scikit-learn computes them."""
    return X @ coef.T + intercept


def _proba(scores):
    """Logistic regression's probabilities of its scores: the sigmoid of
    one column (two classes), else the softmax."""
    if scores.shape[1] == 1:
        positive = 1.0 / (1.0 + np.exp(-scores[:, 0]))
        return np.column_stack([1.0 - positive, positive])
    scores = scores - scores.max(axis=1, keepdims=True)
    exp = np.exp(scores)
    return exp / exp.sum(axis=1, keepdims=True)


def _label_index(scores):
    return (scores[:, 0] > 0).astype(int) if scores.shape[1] == 1 else scores.argmax(1)


class _EnsembleHead(_LinearHead):
    """Per-layer linear probes, their outputs averaged or stacked by a linear
    meta model (``fusion="average"`` or ``"stack"``), in numpy: what
    :class:`~skloes.probe.LayerEnsembleClassifier` and
    :class:`~skloes.probe.LayerEnsembleRegressor` compute, from the arrays of
    ``head.npz`` (each layer's scaler, coefficients and intercepts along a
    first axis of layers; the meta model's)."""

    def __init__(self, arrays, spec):
        self._read_scalers(arrays, spec)
        self.layer_mean = arrays.get("layer_scaler_mean")
        self.layer_scale = arrays.get("layer_scaler_scale")
        self.layer_coef = arrays["layer_coef"]
        self.layer_intercept = arrays["layer_intercept"]
        self.final_coef = arrays.get("final_coef")
        self.final_intercept = arrays.get("final_intercept")
        self.classes_ = _labels(spec.get("classes"))
        self.name = (
            f"LayerEnsemble{'Classifier' if self.classes_ is not None else 'Regressor'}"
        )
        n_layers, rows, _ = self.layer_coef.shape
        expected = 1 if self.classes_ is None else len(self.classes_)
        if self.classes_ is not None and len(self.classes_) == 2:
            expected = 1
        if rows != expected:
            raise ValueError(
                f"its {rows} rows of per-layer coefficients do not score the "
                f"{expected} outputs of the manifest"
            )
        if self.layer_intercept.shape != (n_layers, rows):
            raise ValueError("its per-layer intercepts do not match its coefficients")
        if self.kind == "stack" and n_layers > 1 and self.final_coef is None:
            raise ValueError("its stack has no meta model (final_coef)")

    def has(self, method):
        if method == "predict_proba":
            return self.classes_ is not None
        if method == "decision_function":
            return self.kind == "stack"
        return True

    def _outputs(self, stack):
        """Each layer's probe's output ``(n_layers, n_samples, m)``: its
        probabilities (classes), else its predictions, as float64."""
        fused = self._features(stack).astype(np.float64)
        n_layers, _, dim = self.layer_coef.shape
        out = []
        for k in range(n_layers):
            block = fused[:, k * dim : (k + 1) * dim]
            if self.layer_mean is not None:
                block = block - self.layer_mean[k]
            if self.layer_scale is not None:
                block = block / self.layer_scale[k]
            scores = _scores(block, self.layer_coef[k], self.layer_intercept[k])
            out.append(_proba(scores) if self.classes_ is not None else scores)
        return np.asarray(out, dtype=np.float64)

    def _final(self, outputs):
        """The meta model's scores of the layers' outputs."""
        meta = meta_features(outputs, self.classes_)
        return _scores(meta, self.final_coef, self.final_intercept)

    def _stacked(self):
        return self.final_coef is not None

    def decision_function(self, stack):
        if self.kind != "stack":
            raise AttributeError(
                "ExportedProbe: a probe whose layers' probabilities are averaged "
                "(fusion_='average') has no decision scores; use predict_proba."
            )
        if not self._stacked():  # one layer: its own probe's scores
            fused = self._features(stack).astype(np.float64)
            if self.layer_mean is not None:
                fused = fused - self.layer_mean[0]
            if self.layer_scale is not None:
                fused = fused / self.layer_scale[0]
            scores = _scores(fused, self.layer_coef[0], self.layer_intercept[0])
        else:
            scores = self._final(self._outputs(stack))
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict_proba(self, stack):
        outputs = self._outputs(stack)
        if not self._stacked():
            return average_outputs(outputs, self.classes_)[0]
        return _proba(self._final(outputs))

    def predict(self, stack):
        outputs = self._outputs(stack)
        if not self._stacked():
            return average_outputs(outputs, self.classes_)[1]
        if self.classes_ is None:
            return self._final(outputs)[:, 0]
        return self.classes_[_label_index(self._final(outputs))]


# scikit-learn's vendored array-API shims of other array libraries: each
# imports its library (torch among them) where it is installed.
_FOREIGN_ARRAYS = tuple(
    f"sklearn.externals.array_api_compat.{name}"
    for name in ("torch", "cupy", "dask", "jax")
)


class _NoForeignArrays:
    """A meta-path finder refusing :data:`_FOREIGN_ARRAYS` (while skops is
    imported: it lists scikit-learn's estimators by importing every module of
    scikit-learn, whose walk swallows the refusal)."""

    def find_spec(self, name, path=None, target=None):
        if name.startswith(_FOREIGN_ARRAYS):
            raise ImportError(f"{name}: not needed to read a head")


def _skops_io():
    """``skops.io``, imported without torch.

    skops builds its default trusted types from
    ``sklearn.utils.discovery.all_estimators``, which walks every module of
    scikit-learn, its vendored array-API shims included: the torch shim
    imports torch where it is installed, a second or more of a cold start
    and the import the server promises not to make. The walk skips modules
    that fail to import, and those shims hold no estimator, so they are
    refused while skops is imported.
    """
    if "skops.io" in sys.modules:
        return sys.modules["skops.io"]
    finder = _NoForeignArrays()
    sys.meta_path.insert(0, finder)
    try:
        return import_optional("skops.io")
    finally:
        sys.meta_path.remove(finder)


class _SkopsHead:
    """Any other head: the pipeline's steps after the extractor, from skops,
    built under the saved folder's one trust rule."""

    def __init__(self, path, trusted, owner):
        sio = _skops_io()
        try:
            untrusted = sio.get_untrusted_types(file=path)
        except Exception as exc:  # BadZipFile, KeyError, JSONDecodeError...
            raise probe_folder.damaged(
                path.parent,
                path.name,
                f"is not a readable skops archive ({type(exc).__name__}: "
                f"{(str(exc).strip().splitlines() or [''])[0][:200]})",
                owner,
            ) from None
        allowed = probe_folder.allowed_types(untrusted, trusted, owner)
        with _opening(path, "skops archive of the head", owner):
            self.pipeline = sio.load(path, trusted=allowed)
        self.classes_ = getattr(self.pipeline, "classes_", None)
        self.name = type(self.pipeline.steps[-1][1]).__name__

    def has(self, method):
        return hasattr(self.pipeline, method)

    def __getattr__(self, name):
        if name in ("decision_function", "predict_proba", "predict"):
            step = getattr(self.pipeline, name)
            return lambda stack: step(stack)
        raise AttributeError(name)


class _available_if_proba:  # noqa: N801 - a decorator
    """``predict_proba`` exists only where :meth:`ExportedProbe.has_proba`
    (scikit-learn's ``available_if``, without importing scikit-learn)."""

    def __init__(self, method):
        self.method = method
        self.__doc__ = method.__doc__

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:  # the class's attribute: the method, for the docs
            method = self.method

            @functools.wraps(method)
            def unbound(*args, **kwargs):
                return method(*args, **kwargs)

            return unbound
        if not obj.has_proba():
            obj._probabilities(None)  # raises the AttributeError that says why
        return self.method.__get__(obj, objtype)


_texts_doc = fill_x_doc("list of str", "Texts.")


class ExportedProbe:
    """A saved probe served from its exported graph (ONNX Runtime), torch-free.

    Made by :func:`load_exported`: texts are tokenized with the model's own
    tokenizer (``tokenizers``), batched by length, run through the graph of
    the model cut at its deepest selected block, which returns the pooled
    selected layers, and scored by the probe's head.

    Parameters
    ----------
    folder : pathlib.Path
        The saved folder.
    export : dict
        The manifest's ``export`` entry.
    session : onnxruntime.InferenceSession
        The graph, loaded.
    tokenizer : tokenizers.Tokenizer
        The model's tokenizer, truncating at the probe's ``max_length``.
    head : object
        The head: ``decision_function``, ``predict`` and, for a classifier,
        ``predict_proba`` of a pooled stack.
    batch_size : int or None, default=None
        Texts per run of the graph; None is the probe's own, as saved.

    Attributes
    ----------
    classes_ : ndarray or None
        The class labels of a classifier (None for a regressor).
    selected_layers_ : ndarray of int
        The layers the graph returns (Hugging Face ``hidden_states`` indices,
        0 is the embedding output).
    precision_ : {"float32", "int8"}
        The arithmetic of the graph.
    export_check_ : dict
        The check written when the graph was exported (its agreement with
        the torch pipeline on held-in texts).
    head_ : object
        The head: ``predict``, ``decision_function`` and, where it gives
        them, ``predict_proba`` of a pooled stack (the output of
        :meth:`transform`).

    See Also
    --------
    load_exported : Load one.
    skloes.probe.save_probe : Write one, with ``export=``.

    Examples
    --------
    >>> from skloes.serving import load_exported
    >>> probe = load_exported("my_probe")  # doctest: +SKIP
    >>> probe.selected_layers_, probe.precision_  # doctest: +SKIP
    (array([14, 18, 22, 26]), 'int8')
    """

    def __init__(self, folder, export, session, tokenizer, head, batch_size=None):
        self.folder = folder
        self._export, self._session, self._tokenizer = export, session, tokenizer
        self.batch_size = (
            export["batching"]["batch_size"] if batch_size is None else batch_size
        )
        self._inputs = [i.name for i in session.get_inputs()]
        self.classes_ = head.classes_
        self.selected_layers_ = np.asarray(export["layers"], dtype=np.intp)
        self.precision_ = export["precision"]
        self.export_check_ = export.get("check")
        self.head_ = head

    @property
    def batch_size(self):
        """Texts per run of the graph, a positive int.

        The probe's own, as saved, unless set; setting anything else is an
        error naming it.

        .. versionadded:: 0.3
        """
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value):
        self._batch_size = check_count(value, "ExportedProbe", "batch_size")

    def __repr__(self):
        return (
            f"ExportedProbe({str(self.folder)!r}, layers="
            f"{self.selected_layers_.tolist()}, precision={self.precision_!r})"
        )

    def _texts(self, X):
        """The texts of ``X`` by the rule of every text model (a list or
        array of str, or a table of one text column)."""
        return check_texts(X, "ExportedProbe")

    @_texts_doc
    def tokenize(self, X):
        """The token ids the graph is fed for each text.

        .. versionadded:: 0.3

        {X}

        Returns
        -------
        ids : list of list of int
            Truncated at the probe's ``max_length``, special tokens included.
        """
        return [list(e.ids) for e in self._encode(self._texts(X))]

    def _encode(self, texts):
        encodings = self._tokenizer.encode_batch(texts)
        for i, enc in enumerate(encodings):
            if not enc.ids:
                raise ValueError(
                    f"ExportedProbe: text {i} of `X` has no token for this "
                    "tokenizer (an empty string?); every text needs at least one."
                )
        return encodings

    def _feeds(self, encodings, index):
        spec = self._export["tokenizer"]
        rows = [encodings[i] for i in index]
        width = max(len(e.ids) for e in rows)
        left = spec["padding_side"] == "left"
        fields = {
            "input_ids": ("ids", spec["pad_token_id"]),
            "token_type_ids": ("type_ids", 0),
            "special_tokens_mask": ("special_tokens_mask", 1),
            "attention_mask": ("attention_mask", 0),
        }
        feeds = {}
        for name in self._inputs:
            attr, fill = fields[name]
            out = np.full((len(rows), width), fill, dtype=np.int64)
            for j, enc in enumerate(rows):
                values = getattr(enc, attr)
                if left:
                    out[j, width - len(values) :] = values
                else:
                    out[j, : len(values)] = values
            feeds[name] = out
        return feeds

    @_texts_doc
    def transform(self, X):
        """The pooled selected layers of ``X``, as the graph returns them.

        {X}

        Returns
        -------
        stack : ndarray of shape (n_layers, n_samples, dim)
            In float32, in the order of ``selected_layers_``.
        """
        texts = self._texts(X)
        encodings = self._encode(texts)
        lengths = [len(e.ids) for e in encodings]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        batching = self._export["batching"]
        out = None
        for index in token_batches(
            order,
            [lengths[i] for i in order],
            self.batch_size,
            batching["max_batch_tokens"] or float("inf"),
        ):
            pooled = self._session.run(None, self._feeds(encodings, index))[0]
            if out is None:
                out = np.empty(
                    (pooled.shape[0], len(texts), pooled.shape[2]), np.float32
                )
            out[:, index] = pooled
        if not np.isfinite(out).all():
            raise ValueError("ExportedProbe: the graph produced NaN or inf states.")
        return out

    @_texts_doc
    def decision_function(self, X):
        """Decision scores of the head.

        {X}

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            One column for two classes, as in scikit-learn.
        """
        return self.head_.decision_function(self.transform(X))

    def _probabilities(self, stack):
        if self.classes_ is None:
            raise AttributeError("ExportedProbe: a regressor has no predict_proba.")
        if not self.head_.has("predict_proba"):
            raise AttributeError(
                f"ExportedProbe: the probe's head ({self.head_.name}) gives no "
                "probabilities; use predict or decision_function."
            )
        return self.head_.predict_proba(stack)

    @_available_if_proba
    @_texts_doc
    def predict_proba(self, X):
        """Class probabilities, in the order of ``classes_``.

        Only for a classifier whose head gives probabilities
        (:meth:`has_proba`): elsewhere the attribute does not exist, as
        scikit-learn's ``hasattr`` convention wants.

        {X}

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            In the order of ``classes_``.
        """
        return self._probabilities(self.transform(X))

    def has_proba(self):
        """Whether :meth:`predict_proba` is available.

        It is for a classifier whose head gives probabilities.

        .. versionadded:: 0.3

        Returns
        -------
        available : bool
            True for a classifier whose head gives probabilities.
        """
        return self.classes_ is not None and self.head_.has("predict_proba")

    @_texts_doc
    def predict_with_proba(self, X):
        """``predict(X)`` and ``predict_proba(X)`` from one pass of the graph.

        .. versionadded:: 0.3

        {X}

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            As :meth:`predict`.
        proba : ndarray of shape (n_samples, n_classes) or None
            As :meth:`predict_proba`; None where that is not available
            (:meth:`has_proba`).
        """
        stack = self.transform(X)
        proba = self._probabilities(stack) if self.has_proba() else None
        return self.head_.predict(stack), proba

    @_texts_doc
    def predict(self, X):
        """Predicted labels (classifier) or values (regressor).

        {X}

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels as given at ``fit``, or values.
        """
        return self.head_.predict(self.transform(X))


def load_exported(path, *, n_threads=None, batch_size=None, trusted=None):
    """Load a probe saved with an exported graph, without torch.

    The graph, the tokenizer and the head must hash as the manifest says
    (a tampered or mismatched file is refused, naming the folder), and every
    field of the manifest's export entry is checked before it is used. Needs
    ``pip install skloes[serve]`` (ONNX Runtime and tokenizers) and nothing
    of torch or transformers, whatever head the folder holds; the heads of
    plain arrays (logistic regression or ridge on the concatenated layers,
    or per layer, averaged or stacked: every fusion of the default probe)
    do not import scikit-learn either.

    Read more in the :ref:`User Guide <probe-serving>`.

    Parameters
    ----------
    path : str or os.PathLike
        A folder written by :func:`skloes.probe.save_probe` with ``export=``.
    n_threads : int or None, default=None
        Threads of ONNX Runtime (None: its default, one per physical core).
    batch_size : int or None, default=None
        Texts per run of the graph (None: the probe's own, as saved).

        .. versionadded:: 0.3
    trusted : list of str or None, default=None
        Further types a non-linear head may hold (see
        :func:`skloes.probe.load_probe`).

    Returns
    -------
    probe : ExportedProbe
        Ready to predict, opened by :func:`open_exported`.

    See Also
    --------
    skloes.probe.load_probe : Loads the same folder; ``runtime="torch"``
        runs the model with torch instead.

    Examples
    --------
    >>> from skloes.serving import load_exported
    >>> probe = load_exported("my_probe")  # doctest: +SKIP
    >>> probe.predict(["a warm, funny film"])  # doctest: +SKIP
    array(['fresh'], dtype=object)
    """
    owner = "load_exported"
    probe_folder.check_folder_arg(path, owner)
    probe_folder.check_trusted(trusted, owner)
    n_threads = check_count(n_threads, owner, "n_threads", allow_none=True)
    batch_size = check_count(batch_size, owner, "batch_size", allow_none=True)
    folder = Path(path)
    export = probe_folder.read_export(folder, owner)
    return open_exported(
        folder,
        export,
        n_threads=n_threads,
        batch_size=batch_size,
        trusted=trusted,
        owner=owner,
    )


def open_exported(
    folder, export, *, n_threads=None, batch_size=None, trusted=None, owner
):
    """Open the :class:`ExportedProbe` of a folder's checked ``export`` entry.

    The one place that opens an exported folder: :func:`load_exported`,
    :func:`skloes.probe.load_probe` and the check a save runs on its own
    staged export all come here. Each file is refused unless it hashes as
    the entry records.

    .. versionadded:: 0.3

    Parameters
    ----------
    folder : str or os.PathLike
        The saved folder.
    export : dict
        Its manifest's ``export`` entry, checked
        (:func:`skloes.probe_folder.export_entry`).
    n_threads : int or None, default=None
        Threads of ONNX Runtime.
    batch_size : int or None, default=None
        Texts per run of the graph (None: the probe's own).
    trusted : list of str or None, default=None
        Further types a non-linear head may hold.
    owner : str
        The caller's name, which starts every error message.

    Returns
    -------
    probe : ExportedProbe
        Ready to predict.

    See Also
    --------
    load_exported : Reads the entry from the folder, then opens it here.

    Examples
    --------
    >>> from skloes import probe_folder
    >>> from skloes.serving import open_exported
    >>> manifest = probe_folder.read_manifest("my_probe", "me")  # doctest: +SKIP
    >>> export = probe_folder.export_entry(manifest, "my_probe", "me")  # doctest: +SKIP
    >>> open_exported("my_probe", export, owner="me")  # doctest: +SKIP
    ExportedProbe('my_probe', layers=[14, 18, 22, 26], precision='int8')
    """
    folder = Path(folder)
    n_threads = check_count(n_threads, owner, "n_threads", allow_none=True)
    batch_size = check_count(batch_size, owner, "batch_size", allow_none=True)
    graph = probe_folder.checked_file(folder, export["graph"], owner)
    image = export.get("modality") == "image"  # preprocessed, not tokenized
    tokenizer_file = (
        None if image else probe_folder.checked_file(folder, export["tokenizer"], owner)
    )
    head_file = probe_folder.checked_file(folder, export["head"], owner)
    kind = export["head"]["kind"]
    if kind == "skops":
        head = _SkopsHead(head_file, trusted, owner)
    else:
        reader = _EnsembleHead if kind in ("average", "stack") else _LinearHead
        with _opening(head_file, "head of plain arrays", owner):
            with np.load(head_file, allow_pickle=False) as data:
                arrays = dict(data)
            classes = export["head"].get("classes")
            check_head_arrays(arrays, kind, classes and len(classes["values"]))
            head = reader(arrays, export["head"])
    _warn_if_saturating(folder, export, owner)
    with _opening(graph, "ONNX graph", owner):
        session = _session(graph, n_threads, export["graph"])
    if image:
        return ExportedImageProbe(folder, export, session, head, batch_size)
    with _opening(tokenizer_file, "tokenizer", owner):
        tokenizer = _tokenizer(tokenizer_file, export["tokenizer"])
    pad, size = export["tokenizer"]["pad_token_id"], tokenizer.get_vocab_size()
    if pad >= size:
        raise probe_folder.damaged(
            folder,
            probe_folder.MANIFEST,
            f"has an invalid export field `export.tokenizer.pad_token_id` "
            f"(expected a token id of {tokenizer_file.name}, below {size}; got "
            f"{pad})",
            owner,
        )
    return ExportedProbe(folder, export, session, tokenizer, head, batch_size)


def _warn_if_saturating(folder, export, owner):
    """An int8 graph exported before its weights were 7-bit (no
    ``weight_max``) can saturate its integer products on a CPU without VNNI
    (see :data:`skloes.models._graph.WEIGHT_MAX`): served there, its classes
    may drift from the torch probe's, so say so."""
    if export["precision"] != "int8" or export["graph"].get("weight_max"):
        return
    if has_int8_dot_product() is not False:
        return
    warnings.warn(
        f"{owner}: {os.fspath(folder)!r} was exported with 8-bit int8 weights, "
        f"whose products can saturate on this CPU ({cpu_description()['summary']}: "
        "no VNNI), so its predictions may differ from the torch probe's; save "
        "the probe again with this skloes (save_probe(..., export='onnx-int8')) "
        "for weights that cannot saturate on any CPU.",
        UserWarning,
        stacklevel=3,
    )


@contextlib.contextmanager
def _opening(path, what, owner):
    """A file whose bytes hash as saved but do not open (another writer's
    file, recorded with its hash) is one error naming it, not the library's."""
    try:
        yield
    except ImportError:
        raise
    except Exception as exc:  # onnxruntime's, tokenizers', numpy's own kinds
        text = str(exc).strip().splitlines()
        detail = text[0][:200] if text else type(exc).__name__
        raise probe_folder.damaged(
            path.parent, path.name, f"is not a readable {what} ({detail})", owner
        ) from None


class ExportedImageProbe(ExportedProbe):
    """A saved image probe served from its exported graph, torch-free.

    Made by :func:`load_exported` for a probe on a vision model: images are
    read as the extractor reads them (file paths, PIL images, arrays, Hugging
    Face image dicts; grey and small-range images scaled) and preprocessed
    with Pillow and numpy as the model's image processor does (resize,
    centre crop, rescale, normalize: :mod:`skloes.core._pixels`, checked
    equal to the processor's pixel values when the probe was saved), then
    run through the vision encoder cut at its deepest selected block, which
    returns the pooled selected layers, and scored by the probe's head. It
    imports neither torch nor transformers.

    .. versionadded:: 0.3

    Parameters
    ----------
    folder : pathlib.Path
        The saved folder.
    export : dict
        The manifest's ``export`` entry (its ``image_processor`` spec).
    session : onnxruntime.InferenceSession
        The graph, loaded.
    head : object
        The head, as for :class:`ExportedProbe`.
    batch_size : int or None, default=None
        Images per run of the graph; None is the probe's own, as saved.

    Attributes
    ----------
    classes_ : ndarray or None
        The class labels of a classifier (None for a regressor).
    selected_layers_ : ndarray of int
        The layers the graph returns (0 is the embedding output).
    precision_ : {"float32", "int8"}
        The arithmetic of the graph.
    export_check_ : dict
        The check written when the graph was exported.
    head_ : object
        The head.

    See Also
    --------
    ExportedProbe : The same for a text probe.

    Examples
    --------
    >>> from skloes.serving import load_exported
    >>> probe = load_exported("my_image_probe")  # doctest: +SKIP
    >>> probe.predict(["cat.jpg", "dog.png"])  # doctest: +SKIP
    array(['cat', 'dog'], dtype=object)
    """

    def __init__(self, folder, export, session, head, batch_size=None):
        super().__init__(folder, export, session, None, head, batch_size)
        self._spec = export["image_processor"]

    def __repr__(self):
        return "ExportedImageProbe" + super().__repr__().removeprefix("ExportedProbe")

    def _texts(self, X):
        """The images of ``X`` as a list (read in :meth:`transform`)."""
        from skloes.core._pixels import image_items

        return image_items(X, "ExportedProbe")

    def tokenize(self, X):
        """Not available: an image probe has no tokenizer.

        Parameters
        ----------
        X : object
            Ignored.

        Raises
        ------
        TypeError
            Always.
        """
        raise TypeError("ExportedProbe: an image probe has no tokenizer.")

    def transform(self, X):
        """The pooled selected layers of the images ``X``, as the graph returns them.

        Parameters
        ----------
        X : list, or ndarray of shape (n_samples, ...)
            Images: file paths, PIL images, 2-D or 3-D arrays, a 3-D or 4-D
            batch, or Hugging Face ``datasets`` image dicts.

        Returns
        -------
        stack : ndarray of shape (n_layers, n_samples, dim)
            In float32, in the order of ``selected_layers_``.
        """
        from skloes.core._pixels import pixel_values

        images = self._texts(X)
        out = None
        for start in range(0, len(images), self.batch_size):
            pixels = pixel_values(
                images[start : start + self.batch_size], self._spec, "ExportedProbe"
            )
            pooled = self._session.run(None, {"pixel_values": pixels})[0]
            if out is None:
                out = np.empty(
                    (pooled.shape[0], len(images), pooled.shape[2]), np.float32
                )
            out[:, start : start + len(pixels)] = pooled
        if not np.isfinite(out).all():
            raise ValueError("ExportedProbe: the graph produced NaN or inf states.")
        return out
