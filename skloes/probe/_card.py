"""The model card of a saved probe: what it runs, what it learnt from, how well.

:func:`model_card` writes plain Markdown with a YAML header (the model-card
form Hugging Face and GitHub render): the model and the hash of its files,
the layers and how stable their choice was, the training data, the
cross-validated scores against the last layer and all layers when a report
measured them, the arithmetic of the forward pass, and the limits. Every
number comes from the fitted estimator or the report given; what is not
known is said, never made up.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.metrics._stability import selection_stability
from skloes.utils._version import VERSION

__all__ = ["CARD_FILE", "model_card"]

CARD_FILE = "README.md"


def model_card(estimator, extractor, *, report=None, data_name=None):
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

    Returns
    -------
    card : str
        Markdown with a YAML front matter.
    """
    summary = report.summary() if hasattr(report, "summary") else report
    sections = [
        _front_matter(estimator, extractor),
        f"# {_title(estimator, extractor)}\n",
        _model_section(extractor),
        _layers_section(estimator, extractor, summary),
        _data_section(estimator, summary, data_name),
        _scores_section(summary),
        _precision_section(extractor),
        _limits_section(estimator, extractor, summary),
        f"*Written by skloes {VERSION} (`skloes.probe.save_probe`).*\n",
    ]
    return "\n".join(s for s in sections if s)


def _model_name(extractor):
    return "the bundled default model" if extractor.model is None else extractor.model


def _title(estimator, extractor):
    kind = type(estimator).__name__
    return f"{kind} on the layers of {_model_name(extractor)}"


def _front_matter(estimator, extractor):
    task = (
        "text-classification"
        if hasattr(estimator, "classes_") or hasattr(estimator, "predict_proba")
        else "text-regression"
    )
    lines = ["---", "library_name: skloes", "tags:", "- skloes", "- layer-probe"]
    lines += [f"- {task}"]
    model = extractor.model
    if isinstance(model, str) and "/" in model and not model.startswith((".", "/")):
        lines.append(f"base_model: {model}")
    return "\n".join([*lines, "---", ""])


def _model_section(extractor):
    rows = [
        ("model", f"`{_model_name(extractor)}`"),
        ("files", f"`{extractor.model_path_}`"),
        (
            "fingerprint (hash of weights, config, tokenizer)",
            extractor.model_fingerprint_,
        ),
        ("hidden states", f"{extractor.n_model_layers_} (0 = embedding output)"),
        ("width", extractor.dim_),
        ("pooling", extractor.pooling),
        ("tokens kept per text", extractor.max_length_),
    ]
    return (
        "## Model\n\n"
        + _table(rows, header=("", "value"))
        + (
            "\nThe weights are not in this folder: `load_probe` finds them again "
            "from the model reference and refuses if their hash changed.\n"
        )
    )


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


def _layers_section(estimator, extractor, summary):
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
    stability, folds = _stability(selector, summary, extractor.n_model_layers_)
    if stability is None:
        lines.append(
            "- stability across folds: not measured (fit a `LOESSelectorCV`, or "
            "save from `skloes probe --save`)"
        )
    else:
        lines.append(
            f"- stability across {len(folds)} folds: {stability:.2f} (Nogueira "
            "et al. 2018: 1 = the same layers in every fold, 0 = chance); "
            "layers per fold: " + " | ".join(",".join(map(str, f)) for f in folds)
        )
    return "\n".join(lines) + "\n"


def _stability(selector, summary, n_layers):
    """Stability and fold selections: from the report, else the selector."""
    if summary and summary.get("fold_selections"):
        return summary.get("selection_stability"), summary["fold_selections"]
    folds = getattr(selector, "fold_selections_", None)
    if not folds or len(folds) < 2 or n_layers < 2:
        return None, None
    folds = [[int(v) for v in f] for f in folds]
    return float(selection_stability(folds, n_layers)), folds


def _data_section(estimator, summary, data_name):
    lines = ["## Training data\n"]
    if data_name is not None:
        lines.append(f"- source: `{data_name}`")
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


def _scores_section(summary):
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
        )
        for e in summary["methods"]
    ]
    head = [("method", "layers", f"{summary['scoring']} (mean ± sd)")]
    return (
        f"## Cross-validated scores\n\n{summary['n_splits']}-fold CV; {how}.\n\n"
        + _table(rows, header=head[0])
    )


def _precision_section(extractor):
    return (
        "## Precision\n\n"
        f"- forward pass: {extractor.precision}\n"
        f"- features: {extractor.dtype}\n"
        f"- device at fit: {extractor.device_}\n"
    )


def _limits_section(estimator, extractor, summary):
    classes = getattr(estimator, "classes_", None)
    lines = [
        "## Limits\n",
        "- It knows only its training data: the layers and the head were fitted "
        "on it, and nothing here measures how they transfer to other sources, "
        "domains or languages.",
        f"- Texts are truncated to {extractor.max_length_} tokens.",
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
    return " ".join(repr(estimator).split())


def _table(rows, header):
    header = tuple(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
