"""Choose on a sample, then run big: the whole job in one call.

:func:`probe_at_scale` draws a stratified calibration sample of the labelled
rows, extracts every layer for it into a small store, selects layers on it,
extracts only the chosen layers for every row (the forward pass stops at the
deepest), fits a streaming head on every labelled row and writes the
predictions of the unlabelled rows. Each step writes into one folder and
resumes: run the same call again after a crash and the finished work is
reused (see :ref:`scale_workflow`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import joblib
import numpy as np
from sklearn.base import clone
from sklearn.utils import Bunch, check_random_state

from skloes.core._store import FOOTER_KEY, READ_ROWS, ROW_ID
from skloes.scale._engines import run_job
from skloes.scale._extract import extract_to_store
from skloes.scale._heads import StreamingRidgeClassifier
from skloes.scale._input import check_output, chunk_digest, is_empty, open_input
from skloes.scale._jobs import ShardTask
from skloes.scale._predict import PartsSpec
from skloes.scale._sink import PREDICTION_COLUMNS, PartsSink, parts_manifest
from skloes.selection import LOESSelector
from skloes.selection._base import calibration_rows
from skloes.utils._optional import import_optional
from skloes.utils._validation import check_count

__all__ = ["HEAD_ALPHAS", "probe_at_scale"]

# The default head's penalties, chosen among by generalized cross-validation
# on every labelled row (no further pass over the store).
HEAD_ALPHAS = np.logspace(-2, 5, 15)


def _labels(source, label_column, owner):
    """Every row's label and which rows have one."""
    values, missing = source.column(label_column)
    labelled = np.flatnonzero(~missing)
    if labelled.size < 2:
        raise ValueError(
            f"{owner}: `label_column` {label_column!r} of {source.name} has "
            f"{labelled.size} labelled row(s); the head needs labelled rows."
        )
    classes, counts = np.unique(values[labelled].astype(str), return_counts=True)
    if len(classes) < 2:
        raise ValueError(
            f"{owner}: the labelled rows of {source.name} hold a single class "
            f"({classes[0]!r}); a classifier needs two or more."
        )
    return values, labelled


def draw_calibration(values, labelled, calibration_size, random_state):
    """Input positions of the calibration sample: stratified over the classes
    of the labelled rows (uniform when a class is too small)."""
    rng = check_random_state(random_state)
    _, codes = np.unique(values[labelled].astype(str), return_inverse=True)
    rows = calibration_rows(calibration_size, labelled.size, codes, rng)
    return labelled[rows]


# What the footer of a predictions file this workflow wrote says: a file of
# that name without it is the user's, and the workflow does not replace it.
PREDICTIONS_MARK = b'{"written_by": "skloes.scale.probe_at_scale"}'


@dataclass(frozen=True)
class HeadSpec(PartsSpec):
    """What the worker predicting with the workflow's head is told
    (:class:`~skloes.scale._predict.PartsSpec`'s fields, and ``head``: the
    fitted head; this process only, the rows' layers come with each task).
    The predictions file carries the workflow's mark."""

    head: object

    def sink(self, owner="skloes"):
        """The predictions' parts sink, its file marked."""
        return PartsSink(
            self.output,
            self.digest,
            owner,
            id_column=self.id_column,
            footer={FOOTER_KEY: PREDICTIONS_MARK},
        )


class HeadWorker:
    """Predict one batch of a store's rows with the fitted head; write its
    part (class probabilities too when the head has them)."""

    def __init__(self, spec):
        self.spec = spec

    def __call__(self, task):
        head, stack = self.spec.head, task.values
        proba = head.predict_proba(stack) if hasattr(head, "predict_proba") else None
        classes = head.classes_ if proba is not None else None
        return {
            "record": self.spec.sink().write(task, head.predict(stack), proba, classes)
        }


def _check_predictions_target(out, owner):
    if not out.exists() and not out.is_symlink():
        return
    meta = None
    if out.is_file() and not out.is_symlink():
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(out).metadata or {}
        except (OSError, ValueError):
            meta = None
    if not meta or meta.get(FOOTER_KEY) != PREDICTIONS_MARK:
        raise ValueError(
            f"{owner}: {str(out)!r} exists and was not written by probe_at_scale; "
            "it is not replaced: move it away or give another `folder`."
        )


def probe_at_scale(
    data,
    folder,
    *,
    label_column="label",
    text_column="text",
    id_column=None,
    model=None,
    selector=None,
    head=None,
    calibration_size=2000,
    random_state=0,
    engine="local",
    verbose=1,
    **extract_params,
):
    """Choose layers on a sample, then extract, fit and predict at scale.

    The one call of the workflow of :ref:`scale_workflow`:

    1. draw a calibration sample of ``calibration_size`` labelled rows,
       stratified by class (rows with no label are the ones to predict);
    2. extract every layer for it into ``folder/calibration``;
    3. fit ``selector`` on that store (LOES by default);
    4. extract only the chosen layers for every row into ``folder/store``
       (the forward pass stops at the deepest chosen block);
    5. fit ``head`` on every labelled row, streaming the store in bounded
       batches (exact ridge by default);
    6. write the predictions of the unlabelled rows to
       ``folder/predictions.parquet``.

    Every extraction resumes (see :func:`extract_to_store`), so the same
    call run again after a crash reuses the finished shards.

    Parameters
    ----------
    data : DataFrame, str or os.PathLike
        A table, or a CSV/TSV/JSONL/Parquet file or folder, with a text and a
        label column; rows whose label is missing (null, NaN or an empty
        string) are predicted.
    folder : str or os.PathLike
        Where the two stores and the predictions go.
    label_column : str, default="label"
        The label column.
    text_column : str, default="text"
        The text column.
    id_column : str or None, default=None
        The user's id column, kept in the stores and the predictions.
    model : str, os.PathLike or None, default=None
        The model (None: the bundled MiniLM).
    selector : layer selector or None, default=None
        Fitted on the calibration store of every layer; None is
        ``LOESSelector(random_state=random_state)``.
    head : estimator or None, default=None
        A streaming head (:class:`StreamingRidgeClassifier`,
        :class:`StreamingLogisticRegression`); None is exact ridge with its
        penalty chosen by generalized cross-validation,
        ``StreamingRidgeClassifier(alphas=np.logspace(-2, 5, 15))``.
    calibration_size : int, default=2000
        Labelled rows in the calibration sample (all when fewer).
    random_state : int, RandomState instance or None, default=0
        Seeds the sample and the default selector.
    engine : {"local", "ray", "dask"}, default="local"
        Where the extractions run.
    verbose : int, default=1
        Progress bars.
    **extract_params : dict
        Further :func:`extract_to_store` parameters (``max_length``,
        ``pooling``, ``dtype``, ``address``, ``n_workers``, ``num_gpus``...).

    Returns
    -------
    result : sklearn.utils.Bunch
        ``selector`` (fitted), ``layers`` (the chosen ``hidden_states``
        indices), ``head`` (fitted), ``calibration_store`` and ``store``
        (:class:`LayerStore`), ``predictions`` (the file, or None when every
        row is labelled), ``calibration_rows`` (input positions),
        ``n_labelled``, ``n_predicted`` and ``seconds`` (per step).

    See Also
    --------
    extract_to_store : One extraction.
    predict_to_parquet : Predict with a saved probe.

    Examples
    --------
    >>> from skloes.scale import probe_at_scale
    >>> result = probe_at_scale("reviews.parquet", "job",
    ...                         label_column="label")  # doctest: +SKIP
    >>> result.layers, result.n_predicted  # doctest: +SKIP
    ([2, 3, 5, 6], 250000)
    """
    owner = "probe_at_scale"
    check_count(calibration_size, owner, "calibration_size")
    folder = Path(folder)
    keep = [c for c in (id_column,) if c is not None]
    source = open_input(
        data,
        text_column=text_column,
        id_column=id_column,
        columns=[label_column],
        owner=owner,
        reserved=PREDICTION_COLUMNS,
    )
    check_output(folder, source, owner, "folder")
    _check_predictions_target(folder / "predictions.parquet", owner)
    folder.mkdir(parents=True, exist_ok=True)
    values, labelled = _labels(source, label_column, owner)
    common = dict(
        model=model,
        engine=engine,
        text_column=text_column,
        id_column=id_column,
        columns=[label_column],
        verbose=verbose,
        **extract_params,
    )
    seconds = {}
    tick = time.perf_counter()
    cal_rows = draw_calibration(values, labelled, calibration_size, random_state)
    cal = extract_to_store(data, folder / "calibration", rows=cal_rows, **common)
    seconds["calibration"] = time.perf_counter() - tick
    selector, layers = _select(selector, cal, label_column, random_state)
    seconds["selection"] = time.perf_counter() - tick - sum(seconds.values())
    store = extract_to_store(data, folder / "store", layers=layers, **common)
    seconds["extraction"] = time.perf_counter() - tick - sum(seconds.values())
    head, predictions, n_predicted = _fit_and_predict(
        head, store, label_column, keep, folder
    )
    seconds["head"] = time.perf_counter() - tick - sum(seconds.values())
    return Bunch(
        selector=selector,
        layers=layers,
        head=head,
        calibration_store=cal,
        store=store,
        predictions=predictions,
        calibration_rows=cal_rows,
        n_labelled=int(labelled.size),
        n_predicted=n_predicted,
        seconds=seconds,
    )


def _select(selector, cal, label_column, random_state):
    """The selector fitted on the every-layer calibration store, and the
    chosen layers as ``hidden_states`` indices."""
    selector = clone(selector) if selector is not None else None
    if selector is None:
        selector = LOESSelector(random_state=random_state)
    selector.fit(cal, cal.column(label_column))
    layers = [int(l) for l in cal.layers[selector.selected_layers_]]
    return selector, layers


def _fit_and_predict(head, store, label_column, keep, folder):
    """The head fitted on every labelled row of ``store`` (streamed), and the
    predictions of the others."""
    if head is None:
        head = StreamingRidgeClassifier(alphas=HEAD_ALPHAS)
    head = clone(head)
    labels = store.column(label_column)
    missing = _missing(labels)
    rows = np.flatnonzero(~missing)
    head.fit(store.select(rows=rows), labels[rows])
    unlabelled = np.flatnonzero(missing)
    if not unlabelled.size:
        return head, None, 0
    out = folder / "predictions.parquet"
    _write_predictions(head, store, unlabelled, out, keep)
    return head, out, int(unlabelled.size)


def _write_predictions(head, store, rows, out, columns):
    """The head's predictions of ``rows`` of ``store`` into ``out``, through
    the parts sink (a part per batch; the job resumes like any other)."""
    size = getattr(head, "batch_size", None) or READ_ROWS
    id_column = columns[0] if columns else None
    manifest = parts_manifest(
        {
            "job": "probe_at_scale",
            "store": store.manifest["digest"],
            "head": joblib.hash(head),
            "id_column": id_column,
            "shard_size": int(size),
            "out": out.name,
        }
    )
    spec = HeadSpec.of(out, manifest, id_column=id_column, head=head)
    view = store.select(rows=rows)
    tasks = _prediction_tasks(view, size, columns)
    run_job(spec, manifest, tasks, HeadWorker, owner="probe_at_scale")


def _prediction_tasks(view, size, columns):
    """A task per batch of the view: its row ids and kept columns, its
    layers beside."""
    pa = import_optional("pyarrow", extra="store")
    for index, batch in enumerate(view.iter_batches(size, columns=columns)):
        data = {ROW_ID: pa.array(batch.row_ids)}
        data.update({c: pa.array(batch.columns[c]) for c in columns})
        digest = chunk_digest((), [np.asarray(batch.row_ids).tolist()])
        yield ShardTask(index, pa.table(data), digest, values=batch.stack)


def _missing(values):
    """Where a column read from a store is missing (None, NaN or an empty
    string: the rule of the input's reader)."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    return np.asarray([v is None for v in values], dtype=bool) | is_empty(values)
