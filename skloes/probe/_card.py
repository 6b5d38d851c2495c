"""The model card of a saved probe: what it runs, what it learnt from, how well.

:func:`model_card` writes plain Markdown with a YAML header (the model-card
form Hugging Face and GitHub render): the model and the hash of its files,
what the folder holds (the weights or not, the exported graph and its
check), the layers and how stable their choice was, the training data, the
cross-validated scores against the last layer and all layers when a report
measured them, the arithmetic of the forward pass, and the limits. The card
is written last, from the folder's own record, and is meant to be shared: it
names the model by hub id or by a path relative to the folder, never by an
absolute path (a home folder). Every number comes from the fitted estimator,
the export's check or the report given; what is not known is said, never
made up.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import skloes.probe_folder as probe_folder
from skloes.metrics._stability import selection_stability
from skloes.models._loading import DEFAULT_MODEL_ID
from skloes.utils._version import VERSION

__all__ = ["model_card", "model_name", "shareable"]


def model_card(
    estimator, extractor, *, report=None, data_name=None, export=None, folder=None
):
    """The Markdown model card of a fitted probe or pipeline.

    Parameters
    ----------
    estimator : LayerProbeClassifier, LayerProbeRegressor or Pipeline
        Fitted.
    extractor : HiddenStatesTransformer
        Its fitted extractor.
    report : LayerReport, dict or None, default=None
        A fitted report of the same data (or its ``summary()``): the
        cross-validated scores and the stability of the layers.
    data_name : str or None, default=None
        Where the training data came from (a data set name or a file).
    export : dict or None, default=None
        The manifest's ``export`` entry when the folder holds an exported
        graph (its file, precision and check).
    folder : path-like or None, default=None
        The folder the card is saved in: local paths are written relative
        to it.

    Returns
    -------
    card : str
        Markdown with a YAML front matter.
    """
    summary = report.summary() if hasattr(report, "summary") else report
    saved = _saved_method(estimator, extractor, summary)
    sections = [
        _front_matter(estimator, extractor),
        f"# {_title(estimator, extractor)}\n",
        _model_section(extractor, export, folder),
        _layers_section(estimator, extractor, summary, saved),
        _data_section(estimator, summary, data_name, folder),
        _scores_section(summary, saved),
        _precision_section(extractor, export),
        _limits_section(estimator, extractor, summary),
        f"*Written by skloes {VERSION} (`skloes.probe.save_probe`).*\n",
    ]
    return "\n".join(s for s in sections if s)


# ---------------------------------------------------------------- the model
def model_name(extractor):
    """The model of ``extractor`` as a card names it (:func:`shareable`)."""
    if extractor.model is None:
        return f"{DEFAULT_MODEL_ID} (the bundled default model)"
    return shareable(extractor.model, None)


def _is_path(value):
    return os.path.exists(os.fspath(value))


def shareable(value, folder):
    """A model or data reference fit to share: a name as it is, a local path
    relative to the card's folder (else its last part), never absolute."""
    if not isinstance(value, (str, os.PathLike)):
        return str(value)  # a name given as a number or another object
    text = os.fspath(value)
    if not _is_path(text):
        return text  # a hub id or a data set name
    if folder is not None:
        try:
            return os.path.relpath(Path(text).resolve(), Path(folder).resolve())
        except ValueError:  # another drive (Windows)
            pass
    return Path(text).name


def _title(estimator, extractor):
    return f"{type(estimator).__name__} on the layers of {model_name(extractor)}"


def _front_matter(estimator, extractor):
    task = (
        "text-classification"
        if hasattr(estimator, "classes_") or hasattr(estimator, "predict_proba")
        else "text-regression"
    )
    lines = ["---", "library_name: skloes", "tags:", "- skloes", "- layer-probe"]
    lines += [f"- {task}"]
    model = DEFAULT_MODEL_ID if extractor.model is None else extractor.model
    if isinstance(model, str) and "/" in model and not _is_path(model):
        lines.append(f"base_model: {model}")
    return "\n".join([*lines, "---", ""])


def _model_section(extractor, export, folder):
    model = extractor.model
    if model is None:
        where = "the offline bundle skloes installs (`skloes models`)"
    elif _is_path(model):
        where = f"`{shareable(model, folder)}` (relative to this folder)"
    else:
        where = f"`{model}` (hub id; an offline bundle first, `skloes models`)"
    rows = [
        ("model", f"`{model_name(extractor)}`"),
        ("weights found from", where),
        (
            "fingerprint (hash of weights, config, tokenizer)",
            extractor.model_fingerprint_,
        ),
        ("hidden states", f"{extractor.n_model_layers_} (0 = embedding output)"),
        ("width", extractor.dim_),
        ("pooling", getattr(extractor, "pooling_", extractor.pooling)),
        ("tokens kept per text", extractor.max_length_),
    ]
    return "## Model\n\n" + _table(rows, header=("", "value")) + _weights(export)


def _weights(export):
    """What the folder holds of the model."""
    if export is None:
        return (
            "\nThe weights are not in this folder: `load_probe` finds them again "
            "from the model reference and refuses if their hash changed.\n"
        )
    graph = export["graph"]
    kept = graph.get("float32_products")
    products = (
        "float32 arithmetic"
        if export["precision"] == "float32"
        else "int8 matrix products"
        + (
            f", weights within ±{graph['weight_max']} (no CPU's products saturate)"
            if graph.get("weight_max")
            else ""
        )
        + (f", {kept} kept in float32" if kept else "")
    )
    return (
        f"\nThis folder holds the model's weights through block "
        f"{max(export['layers'])}, in `{graph['file']}` "
        f"({graph.get('n_bytes', 0) / 1e6:.1f} MB, {products}), with the "
        f"{_preprocessing(export)} and the head "
        f"(`{export['head']['file']}`): `load_probe` and `skloes predict` run it "
        "with ONNX Runtime, without torch. `load_probe(..., runtime='torch')` "
        "runs the model with torch instead, found again from the model "
        "reference (refused if its hash changed).\n"
    )


def _preprocessing(export):
    """What turns an input into the graph's input, in the folder."""
    if export.get("modality") == "image":
        return (
            "image processor's settings (resize, crop, rescale, normalize, in "
            "the manifest; applied with Pillow and numpy)"
        )
    return f"tokenizer (`{probe_folder.TOKENIZER}`)"


# --------------------------------------------------------------- the layers
def _selector(estimator):
    """The fitted selector of a probe or pipeline (or None)."""
    selector = getattr(estimator, "selector_", None)
    if selector is None and hasattr(estimator, "steps") and len(estimator) > 1:
        fusion = estimator.steps[1][1]
        selector = getattr(fusion, "selector", None)
    return selector


def _selected_layers(estimator, extractor):
    layers = getattr(estimator, "selected_layers_", None)
    return np.asarray(extractor.layers_ if layers is None else layers, dtype=int)


def _saved_method(estimator, extractor, summary):
    """The report's entry for the saved answer: the method whose layers are
    the probe's (the recommended method first), or None."""
    if not summary or not summary.get("methods"):
        return None
    layers = sorted(_selected_layers(estimator, extractor).tolist())
    recommended = (summary.get("recommendation") or {}).get("method")
    matches = [e for e in summary["methods"] if sorted(e["layers"]) == layers]
    matches.sort(key=lambda e: e["method"] != recommended)
    return matches[0] if matches else None


def _layers_section(estimator, extractor, summary, saved):
    layers = _selected_layers(estimator, extractor)
    selector = _selector(estimator)
    lines = [
        "## Layers\n",
        f"- selected: {', '.join(map(str, layers))} (Hugging Face `hidden_states` "
        "indices; 0 is the embedding output)",
        f"- predictions run the model's blocks up to {int(layers.max())} (of "
        f"{extractor.n_model_layers_ - 1})",
    ]
    if selector is not None:
        lines.append(f"- chosen by `{_one_line(selector)}`")
    fusion = _fusion_line(estimator)
    if fusion:
        lines.append(fusion)
    lines.append(_stability_line(selector, summary, saved, extractor.n_model_layers_))
    return "\n".join(lines) + "\n"


_FUSION_WORDS = {
    "average": "one head per layer, their outputs averaged",
    "stack": "one head per layer, a meta model on their out-of-fold outputs",
    "concatenate": "one head on the concatenated layers",
}


def _fusion_line(estimator):
    """How the probe combines its layers (``fusion_``), and with
    ``fusion="auto"`` the leave-one-out scores that chose it."""
    fusion = getattr(estimator, "fusion_", None)
    if fusion is None:
        return None
    line = f"- combined by: {fusion} ({_FUSION_WORDS[fusion]})"
    scores = getattr(estimator, "fusion_scores_", None)
    if scores:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
        line += f", chosen by leave-one-out scores on the training rows ({shown})"
    elif getattr(estimator, "fusion", None) == "auto":
        line += ", the one selected layer's own head"
    return line


def _stability_line(selector, summary, saved, n_layers):
    """How stable the saved answer's own layers were across folds: from the
    report's entry for that answer, else the selector's own folds."""
    if saved is not None and saved.get("fold_layers"):
        return _fold_line(saved["method"], saved["fold_layers"], n_layers)
    if summary and summary.get("methods"):
        return (
            "- stability across folds: not measured for these layers (no method "
            "of the report chose them in every fold)"
        )
    folds = getattr(selector, "fold_selections_", None)
    if folds and len(folds) > 1 and n_layers > 1:
        return _fold_line("the selector's own CV", folds, n_layers)
    return (
        "- stability across folds: not measured (fit a `LOESSelectorCV`, or "
        "save from `skloes probe --save`)"
    )


def _fold_line(method, fold_layers, n_layers):
    folds = [sorted(int(v) for v in f) for f in fold_layers]
    if all(f == folds[0] for f in folds):
        return (
            f"- stability across {len(folds)} folds ({method}): the same layers "
            "in every fold"
        )
    stability = float(selection_stability(folds, n_layers))
    shown = " | ".join(",".join(map(str, f)) for f in folds)
    return (
        f"- stability across {len(folds)} folds ({method}): {stability:.2f} "
        "(Nogueira et al. 2018: 1 = the same layers in every fold, 0 = chance); "
        f"layers per fold: {shown}"
    )


# ------------------------------------------------------ data, scores, limits
def _data_section(estimator, summary, data_name, folder):
    lines = ["## Training data\n"]
    if data_name is not None:
        lines.append(f"- source: `{shareable(data_name, folder)}`")
    n = getattr(estimator, "n_samples_fit_", None)
    lines.append(f"- samples: {n if n is not None else 'not recorded'}")
    classes = getattr(estimator, "classes_", None)
    counts = getattr(estimator, "class_count_", None)
    if classes is not None:
        shown = [str(c) for c in classes]
        if counts is not None:
            shown = [f"{c} ({int(k)})" for c, k in zip(shown, counts, strict=True)]
        lines.append(f"- classes: {', '.join(shown)}")
    if summary and summary.get("n_groups"):
        lines.append(
            f"- groups: {summary['n_groups']} (the folds keep a group on one side)"
        )
    return "\n".join(lines) + "\n"


def _scores_section(summary, saved):
    if not summary:
        return (
            "## Cross-validated scores\n\nNot measured here: save from "
            "`skloes probe --save`, or pass `report=` (a fitted `LayerReport` of "
            "the same data) to `save_probe`.\n"
        )
    how = (
        "each method selects its layers inside every fold (nested)"
        if summary.get("nested")
        else "layers selected on all rows, then scored by CV (optimistic)"
    )
    rows = [
        (
            e["method"],
            ",".join(map(str, e["layers"])),
            f"{e['score']:.4f} ± {e['score_std']:.3f}",
            "yes" if e is saved else "",
        )
        for e in summary["methods"]
    ]
    head = ("method", "layers", f"{summary['scoring']} (mean ± sd)", "this probe")
    if summary.get("fusion"):
        how += f"; multi-layer methods under fusion={summary['fusion']!r}"
    return (
        f"## Cross-validated scores\n\n{summary['n_splits']}-fold CV; {how}.\n\n"
        + _table(rows, header=head)
    )


def _precision_section(extractor, export):
    lines = [
        "## Precision\n",
        f"- forward pass: {extractor.precision}",
        f"- features: {extractor.dtype}",
        f"- device at fit: {extractor.device_}",
    ]
    if export is not None:
        lines.append(f"- exported graph: {export['precision']} ({_check_text(export)})")
    return "\n".join(lines) + "\n"


def _check_text(export):
    """The export's stored check, in words."""
    check = export.get("check") or {}
    if "n_texts" not in check:
        return "not checked"
    parts = [
        f"checked on {check['n_texts']} held-in texts against the float32 torch "
        f"pipeline: the same prediction on {check['same_prediction']:.1%}",
        f"largest feature difference {check['max_abs_feature_diff']:.3g} "
        f"(features up to {check['max_abs_feature']:.3g})",
    ]
    if "max_proba_diff" in check:
        parts.append(f"largest probability difference {check['max_proba_diff']:.3g}")
    if "cpu" in check:
        parts.append(f"on {check['cpu']}")
    return "; ".join(parts)


def _limits_section(estimator, extractor, summary):
    classes = getattr(estimator, "classes_", None)
    lines = [
        "## Limits\n",
        "- It knows only its training data: the layers and the head were fitted "
        "on it, and nothing here measures how they transfer to other sources, "
        "domains or languages.",
        *(
            [f"- Texts are truncated to {extractor.max_length_} tokens."]
            if getattr(extractor, "max_length_", None) is not None
            else []
        ),
        "- It inherits the biases of the model and of its training labels.",
    ]
    if classes is not None:
        lines.append(
            f"- It predicts one of its {len(classes)} classes for any input, "
            "including inputs that belong to none of them."
        )
    if summary and not summary.get("nested", True):
        lines.append(
            "- Its scores were measured with the layers chosen on all rows, so "
            "they are optimistic."
        )
    return "\n".join(lines) + "\n"


def _one_line(estimator):
    """The estimator's repr on one line, a home folder shown as ``~``."""
    return " ".join(repr(estimator).split()).replace(str(Path.home()), "~")


def _table(rows, header):
    header = tuple(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
