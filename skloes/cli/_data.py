"""The probe's labelled data: built-in data sets or CSV/TSV/JSONL/Parquet files."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from skloes.cli._args import BUILTIN_DATA, BUILTIN_GROUPS, UserError
from skloes.cli._images import image_paths, read_image_folder
from skloes.core._contract import first_line

# Byte-order marks, longest first: a file saved by a spreadsheet or an editor
# on Windows starts with one, which is not part of the first column's name.
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def _text_encoding(path):
    """The encoding of a text data file: the one its byte-order mark names
    (the mark itself is dropped), else UTF-8."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    return next((enc for bom, enc in _BOMS if head.startswith(bom)), "utf-8")


def _read_frame(path, text_column=None):
    """A data file as a DataFrame (CSV, TSV, JSONL, JSON or Parquet).

    The cells of ``text_column`` keep what the file holds: a CSV or TSV cell
    is read as a string (``007`` stays ``007``), a JSON value as what it is
    (no number inference), so :func:`_texts` can refuse non-text. A
    byte-order mark (UTF-8, UTF-16, UTF-32) is read as such.
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
                encoding=_text_encoding(path),
            )
        if suffix in (".jsonl", ".json"):
            return pd.read_json(
                path,
                lines=suffix == ".jsonl",
                dtype=False,
                encoding=_text_encoding(path),
            )
        if suffix in (".parquet", ".pq"):
            import_optional("pyarrow", extra="cli")
            return pd.read_parquet(path)
    except ImportError as exc:
        raise UserError(f"cannot read {str(path)!r}: {first_line(exc)}") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"cannot read {str(path)!r}: it is not UTF-8 text (byte "
            f"{exc.object[exc.start : exc.start + 1]!r} at offset {exc.start}); save "
            "it as UTF-8"
        ) from None
    except Exception as exc:  # a malformed file: pandas' own message
        raise UserError(f"cannot read {str(path)!r}: {first_line(exc)}") from None
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
        raise UserError(f"cannot read {str(path)!r}: {first_line(exc)}") from None
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
    """Every text of a data file, in row order (``skloes predict``'s input);
    a column of image file names gives image paths (:func:`image_paths`)."""
    path = _existing_file(path)
    values = _read_inputs(path, text_column)
    paths = image_paths(values, path, text_column)
    return values if paths is None else paths


def _read_inputs(path, text_column):
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
    column and its first such row, as the Python API refuses them too. A
    column of texts that are nearly all numbers is probed as text, with a
    note (it is more often the wrong column than a text column)."""
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
    _note_numeric_texts(values, column.name, path)
    return values


# A text column whose texts are numbers in at least this share of the rows
# is noted (a text probe on numbers is most often the wrong column).
NUMERIC_TEXT_SHARE = 0.9


def _is_number(text):
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def _note_numeric_texts(values, name, path):
    numbers = sum(map(_is_number, values))
    if len(values) and numbers >= NUMERIC_TEXT_SHARE * len(values):
        example = next(v for v in values if _is_number(v))
        print(
            f"skloes: note: --text-column {name!r} of {str(path)!r} holds numbers "
            f"in {numbers} of {len(values)} rows (e.g. {example!r}); they are read "
            "as text (is it the right --text-column?)",
            file=sys.stderr,
        )


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


def _subsample(labels, n, seed, task):
    """Sorted rows of a subsample of ``n`` (stratified for classes), or None
    for all rows."""
    from sklearn.model_selection import train_test_split

    if n is None or n >= len(labels):
        return None
    stratify = labels if task == "classification" else None
    try:
        index, _ = train_test_split(
            np.arange(len(labels)), train_size=n, stratify=stratify, random_state=seed
        )
    except ValueError:  # a class too small to stratify: uniform draw
        index = np.random.RandomState(seed).choice(len(labels), n, replace=False)
    return np.sort(index)


def _builtin(data, group_column, task):
    """Texts, class names as labels, the class names and the groups of a
    built-in data set."""
    import skloes.datasets as datasets

    if task == "regression":
        raise UserError(
            f"--task regression: the built-in data set {data!r} has classes, "
            "not a continuous target"
        )
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


def load_data(
    data, text_column, label_column, max_samples, seed, task="auto", group_column=None
):
    """Texts, labels, the task and groups of a built-in data set or a data file.

    A folder of images (one subfolder per class) gives image paths and the
    subfolders' names as labels; a data file whose input column holds image
    file names gives image paths (:mod:`skloes.cli._images`). A built-in
    set's labels are its class names (``"fresh"``, not ``0``), so a probe
    fitted on them predicts names.

    Returns
    -------
    texts : ndarray of str objects, or of pathlib.Path objects for images
    labels : ndarray
        Class labels, or float64 targets for regression.
    label_names : ndarray or None
    task : {"classification", "regression"}
    groups : ndarray or None
        The ``group_column`` of each text (None without one).
    """
    if data in BUILTIN_DATA:
        texts, labels, names, groups = _builtin(data, group_column, task)
        task = "classification"
    else:
        path = Path(data).expanduser()
        if not path.exists():
            if path.suffix == "":
                raise UserError(
                    f"unknown data set {data!r}; use one of {', '.join(BUILTIN_DATA)} "
                    "or a data file"
                )
            raise UserError(f"data file {data!r} does not exist")
        if path.is_dir():  # a folder of class subfolders of images
            texts, labels, task = _image_folder(path, task, group_column)
            groups = None
        else:
            texts, labels, groups = _read_table(
                path, text_column, label_column, group_column
            )
            paths = image_paths(texts, path, text_column)
            texts = texts if paths is None else paths
            task, labels = resolve_task(labels, task, label_column)
        names = None
    index = _subsample(labels, max_samples, seed, task)
    if index is not None:
        texts, labels = texts[index], labels[index]
        groups = None if groups is None else groups[index]
    if task == "classification":
        _check_classes(labels)
    else:
        _check_target(labels)
    _check_groups(groups, group_column)
    return texts, labels, names, task, groups


def _image_folder(path, task, group_column):
    """Images and labels of a folder of class subfolders (classification)."""
    for option, value in (
        ("--task regression", task == "regression"),
        ("--group-column", group_column is not None),
    ):
        if value:
            raise UserError(
                f"{option}: a folder of images has its classes in its subfolders' "
                "names, and no other column; use a data file of image paths"
            )
    texts, labels = read_image_folder(path)
    return texts, labels, "classification"


def _check_groups(groups, group_column):
    if groups is not None and len(np.unique(groups.astype(str))) < 2:
        raise UserError(
            f"--group-column {group_column!r} holds a single group; grouped "
            "cross-validation needs 2 or more"
        )


# ``--task auto`` reads float labels with at least this many distinct values
# as a continuous target (ratings, ages, prices), not as classes.
MANY_VALUES = 10


def resolve_task(labels, task, column):
    """The task of a data file's labels (``--task``) and the labels for it.

    ``auto`` is regression for continuous numbers and for float labels with
    at least :data:`MANY_VALUES` distinct values (with a note), else
    classification.
    """
    from sklearn.utils.multiclass import type_of_target

    labels = np.asarray(labels)
    numeric = labels.dtype.kind in "iuf"
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        raise UserError(
            f"--label-column {column!r} holds infinity (row "
            f"{int(np.flatnonzero(~np.isfinite(labels))[0])}); every label must be "
            "finite"
        )
    kind = type_of_target(labels)
    if task == "auto":
        many = labels.dtype.kind == "f" and len(np.unique(labels)) >= MANY_VALUES
        task = "regression" if kind == "continuous" or many else "classification"
        if task == "regression" and kind != "continuous":
            print(
                f"skloes probe: note: --label-column {column!r} holds "
                f"{len(np.unique(labels))} distinct numbers; probed as a continuous "
                "target (regression); pass --task classification to read them as "
                "classes",
                file=sys.stderr,
            )
    if task == "classification" and kind == "continuous":
        example = next(v for v in labels.tolist() if float(v) != int(float(v)))
        raise UserError(
            f"--task classification needs class labels; --label-column {column!r} "
            f"holds continuous numbers (e.g. {example!r}); pass --task regression"
        )
    if task == "regression":
        if not numeric:
            try:
                labels = labels.astype(np.float64)
            except (TypeError, ValueError):
                example = next(v for v in labels.tolist() if not _is_number(str(v)))
                raise UserError(
                    f"--task regression needs numbers; --label-column {column!r} "
                    f"holds {example!r}"
                ) from None
        labels = labels.astype(np.float64)
    return task, labels


def _check_target(labels):
    if len(labels) < 10:
        raise UserError(f"only {len(labels)} labelled rows; need at least 10")
    if not np.all(np.isfinite(labels)):
        raise UserError("the labels hold infinity; every target must be finite")
    if np.ptp(labels) == 0:
        raise UserError(
            f"the labels hold a single value ({labels[0]:g}); a regression needs "
            "a target that varies"
        )


def _check_classes(labels):
    from sklearn.utils.multiclass import type_of_target

    kind = type_of_target(labels)
    if kind not in ("binary", "multiclass"):
        raise UserError(
            f"labels must be classes or one continuous target; got {kind} labels"
        )
    classes, counts = np.unique(labels, return_counts=True)
    classes = classes.tolist()  # 'a' and 1, not np.str_('a') and np.int64(1)
    if len(classes) < 2:
        raise UserError(f"the labels hold a single class ({classes[0]!r}); need 2+")
    if counts.min() < 2:
        numeric = np.asarray(labels).dtype.kind in "iuf"
        hint = (
            "; if the labels are numbers on a scale, pass --task regression"
            if numeric
            else ""
        )
        raise UserError(
            f"class {classes[counts.argmin()]!r} has {counts.min()} sample; every "
            f"class needs at least 2 (use more --max-samples or drop it){hint}"
        )
