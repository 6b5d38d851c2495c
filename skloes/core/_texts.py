"""Text inputs: the one rule for what a text model takes as ``X``.

A list, tuple, array, generator or Series of str, or a table (a DataFrame, a
2-D array of strings) of one column; every item a str that is valid Unicode.
The torch extractor (:mod:`skloes.models._inputs`) and the torch-free server
(:mod:`skloes.serving`) read texts through these functions, so that both
take and refuse the same inputs in the same words.

May import: utils.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.core._frames import frame_column, is_frame

__all__ = ["check_texts", "check_text_items", "one_column"]


def one_column(X, modality, owner):
    """The single column of a 2-D table of inputs; an error for wider tables.

    A DataFrame (pandas or polars), and for text a 2-D array of strings,
    holds one input per row only when it has one column: iterating it
    otherwise yields column names or rows.
    """
    frame = is_frame(X)
    table = frame or (
        modality == "text"
        and getattr(X, "ndim", None) == 2
        and getattr(X, "dtype", np.float64).kind in "OUS"
    )
    if not table:
        return X
    if X.shape[1] == 1:
        return frame_column(X) if frame else X[:, 0]
    names = f" ({', '.join(map(repr, list(X.columns)[:5]))})" if frame else ""
    raise ValueError(
        f"{owner}: `X` is a 2-D table with {X.shape[1]} columns{names}; a "
        f"{modality} model takes one input per row: pass a single column "
        "(for example X['text'])."
    )


def check_text_items(items, owner):
    """``items`` (a list, changed in place) as str, each valid Unicode."""
    for i, item in enumerate(items):
        if isinstance(item, np.str_):
            items[i] = item = str(item)
        elif not isinstance(item, str):
            raise TypeError(
                f"{owner}: `X` must hold strings for a text model; item {i} is "
                f"{item!r:.80} ({type(item).__name__})."
            )
        if not item.isascii():
            _check_encodable(item, i, owner)
    return items


def _check_encodable(text, i, owner):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{owner}: `X` item {i} holds a lone surrogate {text[exc.start]!r} at "
            f"position {exc.start}, which is not valid Unicode text (decode your "
            "bytes with errors='replace')."
        ) from None


def check_texts(X, owner):
    """The texts of ``X`` as a non-empty list of str (see the module's rule)."""
    if X is None or isinstance(X, (str, bytes)):
        raise TypeError(
            f"{owner}: `X` must be a list or array of text inputs; got "
            f"{type(X).__name__}."
        )
    X = one_column(X, "text", owner)
    try:
        items = list(X)
    except TypeError:
        raise TypeError(
            f"{owner}: `X` must be a list or array of text inputs; got "
            f"{type(X).__name__}."
        ) from None
    if not items:
        raise ValueError(f"{owner}: `X` is empty; pass at least one text input.")
    return check_text_items(items, owner)
