"""The probe's labelled data: built-in data sets or CSV/TSV/JSONL/Parquet files."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from skloes.cli._args import BUILTIN_DATA, UserError, _first_line


def _read_frame(path, text_column=None):
    """A data file as a DataFrame (CSV, TSV, JSONL, JSON or Parquet).

    The cells of ``text_column`` keep what the file holds: a CSV or TSV cell
    is read as a string (``007`` stays ``007``), a JSON value as what it is
    (no number inference), so :func:`_texts` can refuse non-text.
    """
    from skloes.utils._optional import import_optional

    pd = import_optional("pandas", extra="cli")
    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            return pd.read_csv(
                path,
                sep="\t" if suffix == ".tsv" else ",",
                dtype=None if text_column is None else {text_column: str},
            )
        if suffix in (".jsonl", ".json"):
            return pd.read_json(path, lines=suffix == ".jsonl", dtype=False)
        if suffix in (".parquet", ".pq"):
            import_optional("pyarrow", extra="cli")
            return pd.read_parquet(path)
    except ImportError as exc:
        raise UserError(f"cannot read {str(path)!r}: {_first_line(exc)}") from None
    except Exception as exc:  # a malformed file: pandas' own message
        raise UserError(f"cannot read {str(path)!r}: {_first_line(exc)}") from None
    raise UserError(
        f"data file {str(path)!r} has an unknown extension {suffix!r}; use "
        ".csv, .tsv, .jsonl, .json or .parquet"
    )


def _check_columns(frame, path, columns):
    for column, option in columns:
        if column not in frame.columns:
            raise UserError(
                f"{option} {column!r} is not a column of {str(path)!r}; columns: "
                f"{', '.join(map(str, frame.columns[:20]))}"
            )


def _stdlib_texts(path, text_column):
    """The text column of a CSV, TSV or JSONL file read without pandas (a
    serving install, ``skloes[serve]``, has none); empty cells count as
    missing, as pandas reads them."""
    import csv
    import json

    suffix = path.suffix.lower()
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            if suffix == ".jsonl":
                rows = [json.loads(line) for line in handle if line.strip()]
            else:
                rows = list(
                    csv.DictReader(handle, delimiter="\t" if suffix == ".tsv" else ",")
                )
    except (OSError, ValueError, csv.Error) as exc:
        raise UserError(f"cannot read {str(path)!r}: {_first_line(exc)}") from None
    columns = list(rows[0]) if rows and isinstance(rows[0], dict) else []
    if rows and text_column not in columns:
        raise UserError(
            f"--text-column {text_column!r} is not a column of {str(path)!r}; "
            f"columns: {', '.join(map(str, columns[:20]))}"
        )
    values = [row.get(text_column) for row in rows]
    missing = sum(v is None or v == "" for v in values)
    if missing:
        raise UserError(
            f"{missing} of {len(values)} rows of {str(path)!r} have no "
            f"text in column {text_column!r}; fill or drop them"
        )
    if not values:
        raise UserError(f"{str(path)!r} has no rows")
    bad = [i for i, v in enumerate(values) if not isinstance(v, str)]
    if bad:
        raise UserError(
            f"--text-column {text_column!r} of {str(path)!r} holds {len(bad)} "
            f"value(s) that are not text (row {bad[0]}: {type(values[bad[0]]).__name__}"
            f" {repr(values[bad[0]])[:40]}); every text must be a string"
        )
    return np.asarray(values, dtype=object)


def read_texts(path, text_column):
    """Every text of a data file, in row order (``skloes predict``'s input)."""
    path = _existing_file(path)
    if path.suffix.lower() in (".csv", ".tsv", ".jsonl"):
        try:
            import pandas  # noqa: F401 - the reader of every other path
        except ImportError:
            return _stdlib_texts(path, text_column)
    frame = _read_frame(path, text_column)
    _check_columns(frame, path, [(text_column, "--text-column")])
    column = frame[text_column]
    missing = int(column.isna().sum())
    if missing:
        raise UserError(
            f"{missing} of {len(column)} rows of {str(path)!r} have no "
            f"text in column {text_column!r}; fill or drop them"
        )
    if len(column) == 0:
        raise UserError(f"{str(path)!r} has no rows")
    return _texts(column, path)


def _texts(column, path):
    """The cells of a text column as an object array of ``str``; any other
    value (a JSON list, object, boolean or number) is an error naming the
    column and its first such row, as the Python API refuses them too."""
    values = column.to_numpy(dtype=object)
    bad = [i for i, value in enumerate(values) if not isinstance(value, str)]
    if bad:
        first = values[bad[0]]
        raise UserError(
            f"--text-column {column.name!r} of {str(path)!r} holds {len(bad)} "
            f"value(s) that are not text (row {column.index[bad[0]]}: "
            f"{type(first).__name__} {repr(first)[:40]}); every text must be a "
            "string"
        )
    return values


def _existing_file(data):
    path = Path(data).expanduser()
    if not path.exists():
        raise UserError(f"data file {data!r} does not exist")
    if not path.is_file():
        raise UserError(f"data file {data!r} is a folder, not a file")
    return path


def _read_table(path, text_column, label_column):
    frame = _read_frame(path, text_column)
    _check_columns(
        frame, path, [(text_column, "--text-column"), (label_column, "--label-column")]
    )
    n_rows = len(frame)
    frame = frame[[text_column, label_column]].dropna()
    if len(frame) == 0:
        raise UserError(f"{str(path)!r} has no row with both a text and a label")
    if len(frame) < n_rows:  # said, never silent
        print(
            f"skloes probe: note: {n_rows - len(frame)} of {n_rows} rows of "
            f"{str(path)!r} have no text ({text_column!r}) or no label "
            f"({label_column!r}) and are left out",
            file=sys.stderr,
        )
    return _texts(frame[text_column], path), frame[label_column].to_numpy()


def _subsample(texts, labels, n, seed):
    from sklearn.model_selection import train_test_split
    from sklearn.utils.multiclass import type_of_target

    if n is None or n >= len(texts):
        return texts, labels
    stratify = labels if type_of_target(labels) in ("binary", "multiclass") else None
    try:
        index, _ = train_test_split(
            np.arange(len(texts)), train_size=n, stratify=stratify, random_state=seed
        )
    except ValueError:  # a class too small to stratify: uniform draw
        index = np.random.RandomState(seed).choice(len(texts), n, replace=False)
    index = np.sort(index)
    return texts[index], labels[index]


def load_data(data, text_column, label_column, max_samples, seed):
    """Texts and labels of a built-in data set or a data file.

    Returns
    -------
    texts : ndarray of str objects
    labels : ndarray
    label_names : ndarray or None
    """
    from skloes import datasets

    if data in BUILTIN_DATA:
        try:
            bunch = datasets.load_dataset(data)
        except ImportError as exc:
            raise UserError(f"data set {data!r} is not installed: {exc}") from None
        texts, labels = _subsample(bunch.data, bunch.target, max_samples, seed)
        names = bunch.target_names
    else:
        path = Path(data).expanduser()
        if not path.exists():
            if path.suffix == "":
                raise UserError(
                    f"unknown data set {data!r}; use one of {', '.join(BUILTIN_DATA)} "
                    "or a data file"
                )
            raise UserError(f"data file {data!r} does not exist")
        texts, labels = _read_table(path, text_column, label_column)
        texts, labels = _subsample(texts, labels, max_samples, seed)
        names = None
    _check_labels(labels)
    return texts, labels, names


def _check_labels(labels):
    from sklearn.utils.multiclass import type_of_target

    kind = type_of_target(labels)
    if kind == "continuous":
        if len(labels) < 10:
            raise UserError(f"only {len(labels)} labelled rows; need at least 10")
        return
    if kind not in ("binary", "multiclass"):
        raise UserError(
            f"labels must be classes or one continuous target; got {kind} labels"
        )
    classes, counts = np.unique(labels, return_counts=True)
    classes = classes.tolist()  # 'a' and 1, not np.str_('a') and np.int64(1)
    if len(classes) < 2:
        raise UserError(f"the labels hold a single class ({classes[0]!r}); need 2+")
    if counts.min() < 2:
        raise UserError(
            f"class {classes[counts.argmin()]!r} has {counts.min()} sample; every "
            "class needs at least 2 (use more --max-samples or drop it)"
        )
