"""The probe's labelled data: built-in data sets or CSV/TSV/JSONL/Parquet files."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from skloes.cli._args import BUILTIN_DATA, BUILTIN_GROUPS, UserError, _first_line


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


def read_texts(path, text_column):
    """Every text of a data file, in row order (``skloes predict``'s input)."""
    path = _existing_file(path)
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


def _read_table(path, text_column, label_column, group_column=None):
    frame = _read_frame(path, text_column)
    columns = [(text_column, "--text-column"), (label_column, "--label-column")]
    if group_column is not None:
        columns.append((group_column, "--group-column"))
    _check_columns(frame, path, columns)
    n_rows = len(frame)
    frame = frame[[c for c, _ in columns]].dropna()
    what = "a text and a label" + (" and a group" if group_column else "")
    if len(frame) == 0:
        raise UserError(f"{str(path)!r} has no row with {what}")
    if len(frame) < n_rows:  # said, never silent
        print(
            f"skloes probe: note: {n_rows - len(frame)} of {n_rows} rows of "
            f"{str(path)!r} lack {what} ({', '.join(repr(c) for c, _ in columns)}) "
            "and are left out",
            file=sys.stderr,
        )
    groups = None if group_column is None else frame[group_column].to_numpy()
    return _texts(frame[text_column], path), frame[label_column].to_numpy(), groups


def _subsample(labels, n, seed):
    """Sorted rows of a stratified subsample of ``n``, or None for all rows."""
    from sklearn.model_selection import train_test_split
    from sklearn.utils.multiclass import type_of_target

    if n is None or n >= len(labels):
        return None
    stratify = labels if type_of_target(labels) in ("binary", "multiclass") else None
    try:
        index, _ = train_test_split(
            np.arange(len(labels)), train_size=n, stratify=stratify, random_state=seed
        )
    except ValueError:  # a class too small to stratify: uniform draw
        index = np.random.RandomState(seed).choice(len(labels), n, replace=False)
    return np.sort(index)


def _builtin(data, group_column):
    """Texts, class names as labels, the class names and the groups of a
    built-in data set."""
    from skloes import datasets

    try:
        bunch = datasets.load_dataset(data)
    except ImportError as exc:
        raise UserError(f"data set {data!r} is not installed: {exc}") from None
    groups = None
    if group_column is not None:
        if BUILTIN_GROUPS.get(data) != group_column:
            has = BUILTIN_GROUPS.get(data)
            raise UserError(
                f"--group-column {group_column!r}: data set {data!r} "
                + (f"has the group column {has!r}" if has else "has no groups")
            )
        groups = bunch.groups
    labels = bunch.target_names[bunch.target].astype(object)  # the names, kept
    return bunch.data, labels, bunch.target_names, groups


def load_data(data, text_column, label_column, max_samples, seed, group_column=None):
    """Texts, labels and groups of a built-in data set or a data file.

    A built-in set's labels are its class names (``"fresh"``, not ``0``),
    so a probe fitted on them predicts names.

    Returns
    -------
    texts : ndarray of str objects
    labels : ndarray
    label_names : ndarray or None
    groups : ndarray or None
        The ``group_column`` of each text (None without one).
    """
    if data in BUILTIN_DATA:
        texts, labels, names, groups = _builtin(data, group_column)
    else:
        path = Path(data).expanduser()
        if not path.exists():
            if path.suffix == "":
                raise UserError(
                    f"unknown data set {data!r}; use one of {', '.join(BUILTIN_DATA)} "
                    "or a data file"
                )
            raise UserError(f"data file {data!r} does not exist")
        texts, labels, groups = _read_table(
            path, text_column, label_column, group_column
        )
        names = None
    index = _subsample(labels, max_samples, seed)
    if index is not None:
        texts, labels = texts[index], labels[index]
        groups = None if groups is None else groups[index]
    _check_labels(labels)
    _check_groups(groups, group_column)
    return texts, labels, names, groups


def _check_groups(groups, group_column):
    if groups is not None and len(np.unique(groups.astype(str))) < 2:
        raise UserError(
            f"--group-column {group_column!r} holds a single group; grouped "
            "cross-validation needs 2 or more"
        )


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
