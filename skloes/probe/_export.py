"""Writing a probe's exported graph: the model cut at its deepest selected block.

:func:`write_export_files` is what ``save_probe(..., export=...)`` adds to a
saved folder: the model traced through its deepest selected block with the
selected layers pooled inside the graph (ONNX, float32 or int8), the model's
tokenizer as ``tokenizer.json`` and the head as plain arrays, each hashed in
the manifest, and the check of the graph against the torch pipeline on
held-in texts. :mod:`skloes.serving` loads them without torch.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy
import os
import warnings

import numpy as np
from sklearn.linear_model import (
    ElasticNet,
    Lasso,
    LinearRegression,
    LogisticRegression,
    Ridge,
    RidgeCV,
)
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import skloes.probe_folder as probe_folder
from skloes.core._digests import file_sha256
from skloes.core._fusion import meta_columns
from skloes.probe._concatenation import SelectedLayerConcatenation
from skloes.serving import open_exported
from skloes.utils._cpu import cpu_description
from skloes.utils._optional import import_optional

__all__ = ["EXPORTS", "write_export_files"]

# ``export=`` values: the runtime's format and the graph's arithmetic.
EXPORTS = {"onnx": "float32", "onnx-int8": "int8"}
# The float32 graph must reproduce the torch features to this, relative to
# their largest magnitude (float32 rounding over a few dozen blocks is ~1e-6).
FLOAT_TOLERANCE = 1e-4
# Below this share of identical predictions an int8 export warns.
INT8_MIN_AGREEMENT = 0.99
CHECK_MAX_TEXTS = 256
# The served head must give the fitted head's outputs on the same features to
# this, relative to their magnitude (float rounding only).
HEAD_TOLERANCE = 1e-5
_LINEAR_REGRESSORS = (Ridge, RidgeCV, LinearRegression, Lasso, ElasticNet)


def _steps(pipeline):
    """The steps after the extractor, nested pipelines flattened."""
    out = []
    for _, step in pipeline.steps[1:]:
        out += (
            _steps(Pipeline([("x", None), *step.steps]))
            if isinstance(step, Pipeline)
            else [step]
        )
    return out


def _linear_kind(model):
    """``"logistic"`` or ``"linear"`` for a linear model the server computes
    in numpy, else None."""
    if type(model) is LogisticRegression:
        return "logistic"
    if type(model) in _LINEAR_REGRESSORS:
        return "linear"
    return None


def _model_arrays(model, prefix=""):
    """A linear model's coefficients (one row per score) and intercepts, in
    the dtypes it holds (so that numpy computes what scikit-learn does)."""
    coef = np.asarray(model.coef_)
    return {
        prefix + "coef": coef.reshape(1, -1) if coef.ndim == 1 else coef,
        prefix + "intercept": np.atleast_1d(np.asarray(model.intercept_)),
    }


def _scaler_arrays(scaler, prefix=""):
    arrays = {}
    if scaler.with_mean:
        arrays[prefix + "scaler_mean"] = np.asarray(scaler.mean_)
    if scaler.with_std:
        arrays[prefix + "scaler_scale"] = np.asarray(scaler.scale_)
    return arrays


def _split_scaler(steps):
    """``(scaler or None, rest)`` of steps that may start with a scaler."""
    if steps and type(steps[0]) is StandardScaler:
        return steps[0], steps[1:]
    return None, steps


def _ensemble_arrays(ensemble):
    """``(arrays, kind)`` of a per-layer ensemble of [scaler →] linear models
    averaged or stacked by a linear meta model (``fusion="average"`` or
    ``"stack"``), or None for another one: each layer's scaler, coefficients
    and intercepts stacked along a first axis of layers, and the meta
    model's coefficients and intercepts, which score the meta features the
    server computes (:func:`~skloes.core._fusion.meta_features`, of
    :func:`~skloes.core._fusion.meta_columns` columns per layer)."""
    from skloes.probe._ensemble import LayerEnsembleClassifier, LayerEnsembleRegressor

    if type(ensemble) not in (LayerEnsembleClassifier, LayerEnsembleRegressor):
        return None
    classes = getattr(ensemble, "classes_", None)
    want = "linear" if classes is None else "logistic"
    layers = []
    for estimator in ensemble.estimators_:
        steps = (
            [s for _, s in estimator.steps]
            if isinstance(estimator, Pipeline)
            else [estimator]
        )
        scaler, rest = _split_scaler(steps)
        if len(rest) != 1 or _linear_kind(rest[0]) != want:
            return None
        if classes is not None and not np.array_equal(rest[0].classes_, classes):
            return None  # a layer's classes in another order
        layers.append((scaler, rest[0]))
    if (
        len(
            {
                (s is None, s is not None and s.with_mean, s is not None and s.with_std)
                for s, _ in layers
            }
        )
        != 1
    ):
        return None
    parts = [
        {
            **({} if s is None else _scaler_arrays(s, "layer_")),
            **_model_arrays(m, "layer_"),
        }
        for s, m in layers
    ]
    arrays = {key: np.stack([p[key] for p in parts]) for key in parts[0]}
    final = ensemble.final_estimator_
    if final is not None:
        if _linear_kind(final) != want:
            return None
        if classes is not None and not np.array_equal(final.classes_, classes):
            return None
        final_arrays = _model_arrays(final, "final_")
        n_classes = None if classes is None else len(classes)
        if final_arrays["final_coef"].shape[1] != len(layers) * meta_columns(n_classes):
            return None  # not the meta features the server computes
        arrays.update(final_arrays)
    return arrays, ensemble.combine


def _linear_arrays(steps, owner):
    """``(arrays, kind)`` of a fusion → [scaler] → linear model head (kind
    ``"logistic"`` or ``"linear"``) or → [scaler] → per-layer ensemble of
    linear models (``"average"`` or ``"stack"``), or None for another head."""
    if not steps or not isinstance(steps[0], SelectedLayerConcatenation):
        return None
    fusion, rest = steps[0], steps[1:]
    arrays = {}
    if fusion.mean_ is not None:
        arrays["fusion_mean"] = np.asarray(fusion.mean_, dtype=np.float64)
        arrays["fusion_scale"] = np.asarray(fusion.scale_, dtype=np.float64)
    scaler, rest = _split_scaler(rest)
    if scaler is not None:
        arrays.update(
            {k: v.astype(np.float64) for k, v in _scaler_arrays(scaler).items()}
        )
    if len(rest) != 1:
        return None
    model = rest[0]
    kind = _linear_kind(model)
    if kind is None:
        ensemble = _ensemble_arrays(model)
        if ensemble is None:
            return None
        arrays.update(ensemble[0])
        return arrays, ensemble[1]
    coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))
    arrays["coef"] = coef
    arrays["intercept"] = np.atleast_1d(np.asarray(model.intercept_, np.float64))
    return arrays, kind


def _labels_spec(classes):
    if classes is None:
        return None
    classes = np.asarray(classes)
    return {
        "values": classes.tolist(),
        "dtype": "object" if classes.dtype.kind == "O" else classes.dtype.str,
    }


def _write_head(pipeline, folder, owner):
    """Write the head (``head.npz``, or ``head.skops`` for other heads)."""
    steps = _steps(pipeline)
    classes = getattr(pipeline.steps[-1][1], "classes_", None)
    linear = _linear_arrays(steps, owner)
    if linear is None:
        head = Pipeline([(f"step{i}", s) for i, s in enumerate(steps)])
        kind = "skops"
        import_optional("skops.io").dump(head, folder / probe_folder.HEADS[kind])
    else:
        arrays, kind = linear
        np.savez(folder / probe_folder.HEADS[kind], **arrays)
    spec = {"file": probe_folder.HEADS[kind], "kind": kind}
    spec["classes"] = _labels_spec(classes)
    spec["sha256"] = file_sha256(folder / spec["file"])
    return spec


def _check_exportable(extractor, owner):
    if extractor.modality_ not in ("text", "image") or callable(extractor.pooling_):
        raise ValueError(
            f"{owner}: `export` needs a text or image model with a named pooling; got "
            f"modality {extractor.modality_!r} and pooling {extractor.pooling_!r}."
        )


def _write_tokenizer(tokenizer, folder, max_length, owner):
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(
            f"{owner}: `export` needs the model's fast tokenizer (tokenizer.json); "
            f"{type(tokenizer).__name__} has none."
        )
    tokenizers = import_optional("tokenizers", extra="serve")
    copy_ = tokenizers.Tokenizer.from_str(backend.to_str())
    copy_.no_padding()
    copy_.no_truncation()
    copy_.save(str(folder / probe_folder.TOKENIZER))
    return {
        "file": probe_folder.TOKENIZER,
        "sha256": file_sha256(folder / probe_folder.TOKENIZER),
        "max_length": int(max_length),
        "padding_side": tokenizer.padding_side,
        "pad_token_id": int(tokenizer.pad_token_id),
    }


def _float_reference(extractor):
    """A float32, CPU, cache-free twin of the fitted extractor (the check's
    torch side), sharing nothing that the caller's extractor holds loaded."""
    from skloes.core._torch import torch

    twin = copy.copy(extractor)
    twin.set_params(precision="float32", device="cpu", cache=None, verbose=0)
    twin.device_ = torch.device("cpu")
    if extractor.precision != "float32" or extractor.device_.type != "cpu":
        twin._drop_loaded()
    return twin


def _sample_batch(extractor, texts):
    """One encoded batch (up to 8 check texts) for tracing."""
    from skloes.models._inputs import pad_batch, tokenize_texts

    tokenizer = extractor.processor_
    encoded = tokenize_texts(tokenizer, texts[:8], extractor.max_length_)
    inputs, mask, special = pad_batch(tokenizer, encoded, np.arange(len(texts[:8])))
    sample = dict(inputs)
    sample["attention_mask"] = mask.long()
    sample["special_tokens_mask"] = (special | ~mask).long()  # 1 at padding too
    return sample


def _write_graph(reference, layers, precision, folder, sample, owner, module=None):
    """Trace ``module`` (by default the text graph of ``reference``) on
    ``sample``, write it in ``precision`` and optimize it."""
    from skloes.models._graph import (
        PooledLayers,
        export_onnx,
        optimize_onnx,
        write_int8_graph,
    )

    if module is None:
        module = PooledLayers(
            reference.model_,
            layers,
            reference.pooling_,  # as "auto" resolved at fit
            reference.exclude_tokens_,
            decoder=reference._decoder,
            sample={k: v for k, v in sample.items() if k != "special_tokens_mask"},
        )
    float_file = folder / probe_folder.GRAPHS["float32"]
    inputs = export_onnx(module, sample, float_file)
    name = probe_folder.GRAPHS[precision]
    entry = {}
    if precision == "int8":
        # the model family's rule (skloes.models._families): which products
        # stay float32, per-token scales, smoothing calibrated on the sample
        calibration = [{k: sample[k] for k in inputs}]
        entry.update(
            write_int8_graph(
                float_file, folder / name, reference.model_.config, calibration
            )
        )
        os.unlink(float_file)
    optimize_onnx(folder / name)
    entry["optimized"] = probe_folder.SAVED_OPTIMIZATION
    return {
        "file": name,
        "sha256": file_sha256(folder / name),
        "n_bytes": os.path.getsize(folder / name),
        "inputs": inputs,
        **entry,
    }


def _head_fidelity(served, head, stack, owner):
    """The served head (numpy, or the skops archive read back) against the
    fitted head on the same pooled features: the largest difference of its
    outputs (``predict_proba``, ``decision_function``, a regressor's
    ``predict``), relative to their magnitude. Beyond
    :data:`HEAD_TOLERANCE` it is an error: the server would not compute
    what the probe computes."""
    worst = 0.0
    methods = ["predict_proba", "decision_function"]
    if served.classes_ is None:
        methods.append("predict")
    for method in methods:
        if not hasattr(head, method):
            continue
        ours = np.asarray(getattr(served, method)(stack), dtype=np.float64)
        theirs = np.asarray(getattr(head, method)(stack), dtype=np.float64)
        size = max(1.0, float(np.abs(theirs).max(initial=0.0)))
        gap = float(np.abs(ours - theirs).max(initial=0.0)) / size
        if ours.shape != theirs.shape or gap > HEAD_TOLERANCE:
            raise ValueError(
                f"{owner}: the exported head ({served.name}) does not compute "
                f"what the probe's head computes ({method} differs by {gap:.1e}); "
                "this head cannot be exported. Save without `export`."
            )
        worst = max(worst, gap)
    return worst


def _check(exported, reference, pipeline, texts, precision, owner):
    """The exported graph against the torch pipeline on held-in texts."""
    torch_stack = reference.transform(texts)
    stack = exported.transform(texts)
    diff = float(np.abs(stack - torch_stack).max())
    scale = float(max(1.0, np.abs(torch_stack).max()))
    head = Pipeline(pipeline.steps[1:])
    ours, theirs = exported.head_.predict(stack), head.predict(torch_stack)
    check = {
        # the kernels that computed it (int8 products are the same integers
        # on every CPU; float sums are not bitwise)
        "cpu": cpu_description()["summary"],
        "n_texts": len(texts),
        "max_abs_feature_diff": diff,
        "max_abs_feature": scale,
        "same_prediction": float(np.mean(ours == theirs)),
    }
    if exported.classes_ is not None and hasattr(head, "predict_proba"):
        drift = np.abs(
            exported.head_.predict_proba(stack) - head.predict_proba(torch_stack)
        )
        check["max_proba_diff"] = float(drift.max())
        check["mean_proba_diff"] = float(drift.mean())
    check["max_head_diff"] = _head_fidelity(exported.head_, head, torch_stack, owner)
    if precision == "float32" and diff > FLOAT_TOLERANCE * scale:
        raise ValueError(
            f"{owner}: the exported float32 graph differs from the torch pipeline "
            f"by {diff:.2e} on the pooled features (tolerance "
            f"{FLOAT_TOLERANCE * scale:.1e}); this model does not export "
            "faithfully. Save without `export`."
        )
    if precision == "int8" and check["same_prediction"] < INT8_MIN_AGREEMENT:
        warnings.warn(
            f"{owner}: the int8 graph predicts as the float32 torch pipeline on "
            f"{check['same_prediction']:.1%} of the {len(texts)} check texts; "
            "consider export='onnx' (float32).",
            UserWarning,
            stacklevel=4,
        )
    return check


def write_export_files(pipeline, folder, export, check_texts, owner) -> dict:
    """Write the exported graph, tokenizer and head of ``pipeline`` into
    ``folder``; return the manifest's ``export`` entry (files, hashes, check).

    ``pipeline`` is a fitted pipeline whose first step is a
    ``HiddenStatesTransformer`` (a probe's ``pipeline_``, or a pruned one);
    ``check_texts`` are held-in texts the graph is checked on.
    """
    ort = import_optional("onnxruntime", extra="export")
    extractor = pipeline.steps[0][1]
    _check_exportable(extractor, owner)
    if extractor.modality_ == "image":
        raise ValueError(
            f"{owner}: an image model exports through "
            "skloes.probe._export_images.write_image_export_files."
        )
    precision = EXPORTS[export]
    texts = list(check_texts)[:CHECK_MAX_TEXTS]
    reference = _float_reference(extractor)
    sample = _sample_batch(reference, texts)
    if reference.exclude_tokens_ != "special":
        sample.pop("special_tokens_mask")
    entry = {
        "format": probe_folder.EXPORT_FORMAT,
        "runtime": "onnxruntime",
        "runtime_version": ort.__version__,
        "precision": precision,
        "layers": [int(l) for l in extractor.layers_],
        "pooling": extractor.pooling_,
        "exclude_tokens": reference.exclude_tokens_,
        "batching": {
            "batch_size": int(extractor.batch_size),
            "max_batch_tokens": extractor.max_batch_tokens_,
        },
        "tokenizer": _write_tokenizer(
            reference.processor_, folder, extractor.max_length_, owner
        ),
        "graph": _write_graph(
            reference, extractor.layers_, precision, folder, sample, owner
        ),
        "head": _write_head(pipeline, folder, owner),
    }
    exported = _load_staged(folder, entry, owner)
    entry["check"] = _check(exported, reference, pipeline, texts, precision, owner)
    entry["check"]["same_input_ids"] = _same_tokens(exported, reference, texts)
    return entry


def _load_staged(folder, entry, owner):
    """The staged export, opened as a reader will open it (hashes checked)."""
    return open_exported(folder, entry, owner=owner)


def _same_tokens(exported, reference, texts):
    """Whether the saved tokenizer gives the torch path's token ids."""
    from skloes.models._inputs import tokenize_texts

    ours = exported.tokenize(texts)
    theirs = tokenize_texts(reference.processor_, texts, reference.max_length_)
    same = all(
        ids == r.tolist() for ids, r in zip(ours, theirs["input_ids"], strict=True)
    )
    if not same:
        raise ValueError(
            "save_probe: the saved tokenizer.json does not reproduce the model's "
            "tokenizer on the check texts; this tokenizer cannot be exported."
        )
    return True
