"""``skloes probe``: extract every layer, report on each, select with LOES.

It extracts every layer of a model over a labelled data set, cross-validates a
probe on each layer, computes the layer metrics, selects layers with LOES,
compares the fused layers with the last layer, the best single layer and other
baselines, prints the tables and writes a report folder (``report.html``,
``layers.csv``, ``profile.png``, ``selection.json``).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from skloes.cli._args import UserError, as_options, option_values
from skloes.cli._data import load_data
from skloes.cli._images import is_image_data
from skloes.core._atomic import writable_problem
from skloes.core._contract import first_line


def check_out(out, force):
    """Fail before any work when the report cannot be written to ``out``.

    The check of :meth:`~skloes.report.LayerReport.save` itself: ``out``
    must be a folder or not exist yet (it is created only when the report
    is written); a report name there that is a link or a special file is
    refused, and a report already there is never overwritten without
    ``force``; its parent chain must be writable.
    """
    from skloes.report._folder import report_target_problem

    folder = Path(out).expanduser()
    problem = report_target_problem(folder, overwrite=force, replace_hint="--force")
    if problem:
        raise UserError(f"--out {out!r} {problem}")
    probe = folder
    while not probe.exists():  # the nearest existing folder must take files
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"--out {out!r}: {str(probe)!r} is a file, not a folder")
    problem = writable_problem(probe)
    if problem:
        raise UserError(f"--out {out!r} {problem}")


def _log(message):
    print(message, flush=True)


def _first_use_note(model):
    """Say so before an installed offline decoder that the set-up did not
    convert (Gemma 3, Qwen2: only ``scripts/setup.sh`` without ``--main``
    does) is converted into the user cache, once, on this first use."""
    from skloes.models._registry import bundle_for, needs_conversion, skloes_home

    if not needs_conversion(model):
        return
    bundle = bundle_for(model)
    _log(
        f"model: converting the offline {bundle.name} bundle into the user cache "
        f"({skloes_home()}), once, on its first use (a minute or two; "
        f"`skloes models --prepare {bundle.name}` does it ahead)"
    )


def _extract(args, texts):
    """Layer stack (and token metrics) of ``texts``, one forward pass each."""
    from skloes.extraction._hidden_states import HiddenStatesTransformer
    from skloes.metrics import TokenMetricPooling
    from skloes.models._loading import RemoteCodeError

    pooling = args.pooling
    token = None
    if args.token_metrics:
        token = TokenMetricPooling(pooling=args.pooling)
        pooling = token
    hst = HiddenStatesTransformer(
        args.model,
        pooling=pooling,
        **option_values(args, "batch_size", "max_length", "device", "precision"),
        verbose=1,
    )
    _first_use_note(args.model)
    if is_image_data(texts):
        _check_takes_images(hst, args)
    try:
        hst.fit(texts)  # resolves the model folder, its config and the device
    except RemoteCodeError as exc:  # the command has no trust_remote_code
        raise UserError(
            exc.message(
                None,
                "skloes probe does not run a model's own code (use it from "
                "Python: HiddenStatesTransformer(trust_remote_code=True), only if you "
                "trust it)",
            )
        ) from None
    except (ValueError, TypeError, OSError, ImportError) as exc:
        message = as_options(first_line(exc))
        if not message.startswith(type(hst).__name__):  # e.g. a raw JSON error
            message = f"cannot load model {args.model or 'default'}: {message}"
        raise UserError(message) from None
    try:
        _ = hst.model_  # load now, so that a broken model is a user error
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UserError(
            f"cannot load model {args.model or hst.model_path_!r}: {first_line(exc)}"
        ) from None
    wanted = "image" if is_image_data(texts) else "text"
    if hst.modality_ != wanted:
        raise UserError(
            f"model {hst.model_path_!r} takes {hst.modality_} inputs, and "
            f"--data {args.data!r} holds {wanted}s"
        )
    stack = hst.transform(list(texts))
    if token is None:
        return hst, stack, None
    stack, metrics = token.split(stack, random_state=args.seed)
    return hst, stack, metrics


def _check_takes_images(hst, args):
    """Refuse, before any loading, a model without an image tower (its
    config only is read; a config that cannot be read is ``fit``'s error)."""
    from skloes.models._loading import (
        detect_modality,
        is_two_tower,
        read_config,
        resolve_model_path,
    )

    try:
        config = read_config(resolve_model_path(hst.model))
    except Exception:  # noqa: BLE001 - fit says what is wrong with the model
        return
    modality = "image" if is_two_tower(config) else detect_modality(config)
    if modality != "image":
        raise UserError(
            f"model {args.model!r} takes {modality} inputs, and --data "
            f"{args.data!r} holds images"
        )


def _headline(s):
    """The recommendation and why, how the layers were combined, then one
    line that quotes the summary table's numbers (no other source): ``s`` is
    ``LayerReport.summary()``."""
    from skloes.report._presenting import fusion_text, recommendation_text

    by = {e["method"]: e for e in s["methods"]}
    how = "inner CV" if s["nested"] else "per-layer table"
    parts = [
        f"LOES layers {s['selected_layers']}: {s['fused_score']:.4f}",
        f"last layer {s['n_layers'] - 1}: {s['last_layer_score']:.4f}",
        f"best single layer ({how}) {s['best_layer']}: {s['best_layer_score']:.4f}",
    ]
    if "all_layers" in by:
        parts.append(f"all layers: {by['all_layers']['score']:.4f}")
    if s["selection_stability"] is not None:
        parts.append(
            f"stability of the LOES layers across folds: {s['selection_stability']:.2f}"
        )
    head = recommendation_text(s["recommendation"], s["n_splits"])
    fusion = fusion_text(
        s["fusion"],
        s.get("fusion_counts") or {},
        regression=s.get("task") == "regression",
    )
    return head + "\n" + fusion + "\n" + "  |  ".join(parts)


def _data_line(task, labels, names, groups, group_column):
    """What the data holds, as the log's ``data:`` line says it."""
    if task == "classification":
        n_classes = len(np.unique(labels))
        what = f"{n_classes} classes" + (
            f" ({', '.join(map(str, names))})" if names is not None else ""
        )
    else:
        low, high = np.min(labels), np.max(labels)
        what = f"a continuous target (regression, {low:g} to {high:g})"
    if groups is not None:
        what += f", {len(np.unique(groups.astype(str)))} groups ({group_column})"
    return what


def _about(args, hst, stack, pooling, data):
    """What the report says of its data and model: names fit to share, as
    the model card's (no absolute path); images have no ``max_length``."""
    from skloes.probe._card import model_name, shareable

    texts = hst.modality_ == "text"
    return {
        "data": f"{shareable(args.data, args.out)}, {data}",
        "model": f"{model_name(hst)} ({stack.shape[0]} hidden states of width "
        f"{stack.shape[2]})",
        "extraction": f"pooling {pooling}, "
        + (f"max_length {args.max_length}, " if texts else "")
        + f"precision {args.precision}",
        "seed": args.seed,
    }


def _print_tables(report, nested):
    """The per-layer table, the selection summary and the headline."""
    print(
        f"\nPer-layer table ({report.n_splits_}-fold CV {report.scoring_}; layer 0 "
        "= embedding output)"
    )
    print(report.format_table())
    how = (
        "selected inside each CV fold"
        if nested
        else "selected on all rows, scored by CV"
    )
    print(f"\nSelection summary (layers {how})")
    print(report.format_summary())
    print("\n" + _headline(report.summary()))


def run_probe(args):
    """Run the probe job for parsed arguments; returns the fitted report."""
    from skloes.report import LayerReport
    from skloes.report._presenting import REPORT_FILES

    start = time.perf_counter()
    check_out(args.out, args.force)
    check_save(args.save, args.force, args.out)
    if args.export is not None and args.save is None:
        raise UserError("--export needs --save DIR (the folder it writes into)")
    texts, labels, names, task, groups = load_data(
        args.data,
        args.text_column,
        args.label_column,
        args.max_samples,
        args.seed,
        task=args.task,
        group_column=args.group_column,
    )
    what = _data_line(task, labels, names, groups, args.group_column)
    kind = "images" if is_image_data(texts) else "texts"
    if args.pooling is None:  # images: pooled the way their family was trained
        args.pooling = "auto" if kind == "images" else "mean"
    _log(f"data: {args.data}, {len(texts)} {kind}, {what}")
    hst, stack, token_metrics = _extract(args, texts)
    t_extract = time.perf_counter() - start
    pooling = args.pooling
    if pooling == "auto":  # resolved at fit: the family's
        pooling = f"{pooling} ({hst.pooling_})"
    _log(
        f"model: {hst.model_path_} ({stack.shape[0]} hidden states of width "
        f"{stack.shape[2]}, pooling {pooling}); extracted in {t_extract:.1f} s"
    )
    report = LayerReport(
        n_layers_to_select=args.n_layers_to_select,
        nested=args.nested,
        fusion=args.fusion,
        task=task,
        random_state=args.seed,
        n_jobs=args.n_jobs,
        verbose=1,
    )
    try:
        report.fit(stack, labels, extra_metrics=token_metrics, groups=groups)
    except ValueError as exc:  # what the layers or labels cannot give
        raise UserError(
            f"cannot probe {args.data}: {as_options(first_line(exc))}"
        ) from None
    about = _about(args, hst, stack, pooling, f"{len(texts)} {kind}, {what}")
    try:
        folder = report.save(args.out, about=about, overwrite=args.force)
    except (OSError, ValueError) as exc:  # a full disk, a link put there meanwhile
        message = first_line(exc).removeprefix("LayerReport.save: ")
        raise UserError(
            f"--out {args.out!r}: cannot write the report ({message})"
        ) from None
    _print_tables(report, args.nested)
    if args.save is not None:
        _save_probe(args, report, hst, stack, labels, texts, groups)
    total = time.perf_counter() - start
    written = ", ".join(name for name in REPORT_FILES if (folder / name).exists())
    print(f"report written to {os.fspath(folder)}/ ({written}) in {total:.1f} s")
    return report


def check_save(save, force=False, out=None):
    """Fail before any work when ``--save`` cannot take a probe.

    The check of :func:`~skloes.probe.save_probe` itself: a probe saved
    there is replaced with ``force`` (only the files a save recorded); a
    folder holding anything else, the current folder or one above it, and
    the report folder ``out`` (or a folder holding or inside it) never are.
    """
    if save is None:
        return
    from skloes.probe_folder import target_problem

    problem = target_problem(
        save, overwrite=force, replace_hint="--force", reserved={"--out": out}
    )
    if problem:
        raise UserError(f"--save {save!r} {problem}")


def _save_probe(args, report, hst, stack, labels, texts, groups=None):
    """Fit a probe on every row with the selector of the report's
    recommendation (the cheapest answer within noise of the best), from the
    stack the report used (its groups to the selector's own folds)."""
    from skloes.core._routing import fit_takes
    from skloes.probe import LayerProbeClassifier, LayerProbeRegressor, save_probe

    cls = (
        LayerProbeClassifier
        if report.task_ == "classification"
        else LayerProbeRegressor
    )
    selector = report.method_selector(report.recommendation_.method)
    probe = cls(
        args.model,
        selector=selector,
        **option_values(args, "pooling", "max_length", "batch_size", "device"),
        random_state=args.seed,
        fusion=report.fusion,
        extractor_params={"precision": args.precision},
    )
    params = {"groups": groups} if fit_takes(selector, "groups") else {}
    probe.fit_stack(list(texts), stack, labels, **params)
    try:
        folder = save_probe(
            probe,
            args.save,
            overwrite=args.force,
            export=args.export,
            check_texts=None if args.export is None else list(texts),
            report=report,
            data_name=args.data,
        )
    except ImportError as exc:
        raise UserError(f"--export: {first_line(exc)}") from None
    except (ValueError, OSError) as exc:  # the target changed, the disk is full
        raise UserError(first_line(exc).removeprefix("save_probe: ")) from None
    size = sum(f.stat().st_size for f in folder.iterdir())
    what = (
        "no model weights"
        if args.export is None
        else f"with the {args.export} graph, which holds the model's weights "
        f"through layer {int(probe.selected_layers_.max())}"
    )
    fusion = probe.fusion_
    if probe.fusion_scores_:
        scores = ", ".join(f"{k} {v:.4f}" for k, v in probe.fusion_scores_.items())
        fusion += f", chosen by leave-one-out scores on all rows: {scores}"
    _log(
        f"probe on layers {probe.selected_layers_.tolist()} (fusion {fusion}) "
        f"saved to {folder}/ "
        f"({size / 1e6:.1f} MB, {what}): skloes predict {folder} --data FILE"
    )
