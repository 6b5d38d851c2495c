"""Image data for the ``skloes`` command: a folder of class subfolders, or a
table whose input column holds image file paths.

Images are handed on as :class:`pathlib.Path` objects (absolute), so that
the rest of the command knows the data are images without another flag:
the extractor reads them with Pillow (see :ref:`images-in`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from skloes.cli._args import UserError
from skloes.core._contract import first_line


def _extensions():
    """The file endings Pillow opens, or an error naming the extra."""
    from skloes.core._images import image_extensions

    try:
        return image_extensions()
    except ImportError as exc:
        raise UserError(f"cannot read images: {first_line(exc)}") from None


def is_image_data(inputs) -> bool:
    """Whether the command's inputs are image files (from this module)."""
    return len(inputs) > 0 and isinstance(inputs[0], Path)


def _visible(path):
    return not path.name.startswith(".")


def read_image_folder(folder):
    """Image files and labels of a folder of class subfolders.

    ``folder/<label>/.../<image>``: every image file (by its extension) under
    a subfolder is one sample, labelled with the name of the subfolder right
    under ``folder`` (the layout of torchvision's ``ImageFolder`` and Hugging
    Face's ``imagefolder``); hidden files and folders are left out and other
    files are counted in a note. Files are sorted by their path, so the
    order never depends on the file system.

    Parameters
    ----------
    folder : pathlib.Path
        An existing folder.

    Returns
    -------
    paths : ndarray of pathlib.Path objects
    labels : ndarray of str objects
    """
    endings = _extensions()
    classes = sorted(p for p in folder.iterdir() if p.is_dir() and _visible(p))
    loose = sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and p.suffix.lower() in endings and _visible(p)
    )
    if loose:
        raise UserError(
            f"--data {str(folder)!r}: image files sit in the folder itself "
            f"({', '.join(loose[:3])}); put them in one subfolder per class "
            "(the subfolder's name is the label)"
        )
    paths, labels, skipped = [], [], 0
    for sub in classes:
        for file in sorted(sub.rglob("*")):
            hidden = any(part.startswith(".") for part in file.relative_to(sub).parts)
            if not file.is_file() or hidden:
                continue
            if file.suffix.lower() not in endings:
                skipped += 1
                continue
            paths.append(file.resolve())
            labels.append(sub.name)
    if not paths:
        raise UserError(
            f"--data {str(folder)!r} is a folder with no image file in a "
            "subfolder; give a folder with one subfolder of images per class, or "
            "a data file"
        )
    if skipped:
        print(
            f"skloes: note: {skipped} file(s) under {str(folder)!r} are not images "
            "(by their extension) and are left out",
            file=sys.stderr,
        )
    return _objects(paths), _objects(labels)


def _objects(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def image_paths(values, table, column):
    """The cells of a table's input column as image paths, or None for texts.

    A column is read as image files when every cell ends with an extension
    Pillow opens (``.png``, ``.jpg``...) and Pillow is installed; a relative
    path is relative to the table's folder (as in Hugging Face's
    ``imagefolder`` metadata files), and every file must exist.

    Parameters
    ----------
    values : ndarray of str objects
        The column, checked to hold strings.
    table : pathlib.Path
        The data file.
    column : str
        The column's name, for errors.

    Returns
    -------
    paths : ndarray of pathlib.Path objects or None
    """
    try:
        from skloes.core._images import image_extensions

        endings = image_extensions()
    except ImportError:  # no Pillow: texts (an image model says so later)
        return None
    suffixes = [Path(v).suffix.lower() for v in values]
    if not len(values) or any(s not in endings for s in suffixes):
        return None
    base = table.resolve().parent
    paths = [(base / Path(v).expanduser()).resolve() for v in values]
    missing = [i for i, p in enumerate(paths) if not p.is_file()]
    if missing:
        raise UserError(
            f"--text-column {column!r} of {str(table)!r} holds image paths, and "
            f"{len(missing)} of them are not files (row {missing[0]}: "
            f"{values[missing[0]]!r}; a relative path is read from the table's "
            "folder)"
        )
    return _objects(paths)
