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
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.utils import Bunch, check_random_state

from skloes.core._atomic import write_whole
from skloes.core._store import FOOTER_KEY, READ_ROWS, ROW_ID, temporary_prefix
from skloes.scale._extract import extract_to_store
from skloes.scale._heads import StreamingRidgeClassifier
from skloes.scale._input import check_output, is_empty, open_input
from skloes.scale._predict import PREDICTION_COLUMNS
from skloes.selection import LOESSelector
from skloes.selection._base import calibration_rows
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


def _write_predictions(head, view, out, columns):
    """The head's predictions (and class probabilities) of every row of
    ``view`` into ``out``, batch by batch; written aside, then renamed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    batch_size = getattr(head, "batch_size", None) or READ_ROWS
    count = {"rows": 0}

    def write(tmp):
        writer = None
        try:
            for batch in view.iter_batches(batch_size, columns=columns):
                data = {ROW_ID: pa.array(batch.row_ids)}
                data.update({c: pa.array(batch.columns[c]) for c in columns})
                data["prediction"] = pa.array(
                    np.asarray(head.predict(batch.stack)).tolist()
                )
                if hasattr(head, "predict_proba"):
                    proba = head.predict_proba(batch.stack)
                    for j, label in enumerate(np.asarray(head.classes_).tolist()):
                        data[f"proba_{label}"] = pa.array(
                            proba[:, j].astype(np.float64)
                        )
                table = pa.table(data)
                if writer is None:
                    schema = table.schema.with_metadata({FOOTER_KEY: PREDICTIONS_MARK})
                    writer = pq.ParquetWriter(tmp, schema)
                writer.write_table(table)
                count["rows"] += len(table)
        finally:
            if writer is not None:
                writer.close()

    write_whole(out, write, prefix=temporary_prefix("probe_at_scale", out.name))
    return count["rows"]


# What the footer of a predictions file this workflow wrote says: a file of
# that name without it is the user's, and the workflow does not replace it.
PREDICTIONS_MARK = b'{"written_by": "skloes.scale.probe_at_scale"}'


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
    n = _write_predictions(head, store.select(rows=unlabelled), out, keep)
    return head, out, n


def _missing(values):
    """Where a column read from a store is missing (None, NaN or an empty
    string: the rule of the input's reader)."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    return np.asarray([v is None for v in values], dtype=bool) | is_empty(values)
