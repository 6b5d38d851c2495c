"""Images as users hold them, read into one form before the image processor.

:func:`read_images` turns each input (a file path, a PIL image, a 2-D or 3-D
array, a ``(C, H, W)`` tensor, a Hugging Face ``datasets`` image dict) into a
numpy array, so that the same picture hashes the same in the cache whatever
form it came in; :func:`to_pixels` then gives the image processor an RGB
``uint8`` ``(H, W, 3)`` array, grey images repeated on three channels and
small-range images scaled (see the user guide, :ref:`images-in`). Ready pixel
values (float ``(C, H, W)`` of the model's input size) skip the processor.

May import: utils, core.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import io
import os
import re

import numpy as np

from skloes.utils._optional import import_optional

__all__ = ["image_or_text", "read_images", "ready_shape", "to_pixels"]

# A string that names a resource on another machine: skloes never downloads.
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
# The highest value of an image on scikit-learn's digits scale (load_digits).
DIGITS_MAX = 16


def _pil_image():
    return import_optional("PIL.Image", extra="vision")


def image_extensions() -> frozenset:
    """The file name endings Pillow opens (``.png``, ``.jpg``...)."""
    return frozenset(_pil_image().registered_extensions())


def image_or_text(X) -> str:
    """``"image"`` or ``"text"``: what ``X`` holds, for a two-tower checkpoint.

    Strings are texts unless every one is the path of an existing file that
    Pillow opens (by its extension); anything else (arrays, PIL images,
    tensors, image dicts) is an image.

    Parameters
    ----------
    X : sequence
        The raw inputs (one column).

    Returns
    -------
    modality : {"image", "text"}
    """
    if getattr(X, "ndim", 1) >= 3:  # an array batch of images
        return "image"
    items = list(X)
    strings = [isinstance(item, (str, np.str_)) for item in items]
    if not all(strings):  # arrays, PIL images, dicts (mixtures fail later)
        return "text" if strings and strings[0] else "image"
    endings = image_extensions()
    for item in items:
        path = os.path.expanduser(str(item))
        extension = os.path.splitext(path)[1].lower()
        if extension not in endings or not os.path.isfile(path):
            return "text"
    return "image"


def read_images(items, owner: str = "skloes") -> list:
    """Each input as a numpy array (paths, dicts and PIL images decoded).

    Parameters
    ----------
    items : list
        File paths (str or os.PathLike; URLs refused), PIL images, 2-D
        ``(H, W)`` or 3-D ``(H, W, C)``/``(C, H, W)`` arrays or torch
        tensors, or Hugging Face ``datasets`` image dicts
        (``{"bytes": ..., "path": ...}``).
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    images : list of ndarray
        Files, dicts and PIL images as RGB ``uint8`` ``(H, W, 3)`` arrays
        (EXIF orientation applied, as transformers' ``load_image`` does);
        arrays and tensors as they are, checked (rank 2 or 3, numbers,
        finite, a range :func:`to_pixels` can scale).
    """
    out = []
    for i, item in enumerate(items):
        if isinstance(item, (str, np.str_, os.PathLike)):
            array = _open(_local_path(item, i, owner), i, owner)
        elif isinstance(item, dict):
            array = _from_dict(item, i, owner)
        elif hasattr(item, "getbands"):  # a PIL image
            array = _rgb(item)
        else:
            if hasattr(item, "detach"):  # a torch tensor
                item = item.detach().cpu().numpy()
            array = np.asarray(item)
            _check_array(array, i, owner)
        out.append(array)
    return out


def _local_path(item, i, owner) -> str:
    text = os.fspath(item) if not isinstance(item, np.str_) else str(item)
    if _URL.match(text):
        raise ValueError(
            f"{owner}: item {i} of `X` is a URL ({text[:80]!r}); skloes does not "
            "download images: save them and pass their local paths."
        )
    path = os.path.expanduser(text)
    if not os.path.isfile(path):
        raise ValueError(
            f"{owner}: item {i} of `X` must be an image file, a PIL image or an "
            f"array for an image model; {text[:80]!r} is not a file here."
        )
    return path


def _open(source, i, owner):
    image_module = _pil_image()
    try:
        with image_module.open(source) as image:
            return _rgb(image)
    except (OSError, SyntaxError, ValueError) as exc:  # UnidentifiedImageError
        name = source if isinstance(source, str) else "its bytes"
        raise ValueError(
            f"{owner}: item {i} of `X` cannot be read as an image ({name!r:.80}): {exc}"
        ) from None


def _rgb(image):
    """A PIL image as an RGB ``uint8`` array, EXIF orientation applied."""
    ops = import_optional("PIL.ImageOps", extra="vision")
    image = ops.exif_transpose(image)
    if image.mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image)


def _from_dict(item, i, owner):
    """A Hugging Face ``datasets`` image: its bytes, else its file."""
    data, path = item.get("bytes"), item.get("path")
    if data is not None:
        return _open(io.BytesIO(data), i, owner)
    if path is not None:
        return _open(_local_path(path, i, owner), i, owner)
    raise ValueError(
        f"{owner}: item {i} of `X` is a dict but not a Hugging Face datasets "
        "image: it must hold 'bytes' or 'path' (not None); got keys "
        f"{sorted(map(str, item))}."
    )


def _check_array(array, i, owner):
    if array.ndim not in (2, 3) or array.dtype.kind not in "biuf":
        raise ValueError(
            f"{owner}: `X` must hold images of rank 2 (H, W) or 3 (H, W, C or "
            f"C, H, W), or be a 4-D (n, C, H, W) or (n, H, W, C) array; item {i} "
            f"has shape {array.shape} and dtype {array.dtype}."
        )
    if array.ndim == 3 and _channel_axis(array) is None:
        raise ValueError(
            f"{owner}: item {i} of `X` has shape {array.shape}: a 3-D image needs "
            "1, 3 or 4 channels, first (C, H, W) or last (H, W, C)."
        )
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError(f"{owner}: image {i} of `X` has NaN or inf values.")
    if array.dtype.kind != "f" or array.ndim == 2 or _channel_axis(array) == -1:
        pixel_scale(array, i, owner)  # ready pixel values are checked later


def _channel_axis(array):
    if array.shape[-1] in (1, 3, 4):
        return -1
    if array.shape[0] in (1, 3, 4):
        return 0
    return None


def ready_shape(config):
    """``(C, H, W)`` of a vision config's input, or None when it has none."""
    size = getattr(config, "image_size", None)
    if size is None:
        return None
    size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
    return (int(getattr(config, "num_channels", 3)), *map(int, size))


def is_ready(array, shape) -> bool:
    """Whether ``array`` is ready pixel values: float, of the model's shape."""
    return shape is not None and array.dtype.kind == "f" and array.shape == shape


def pixel_scale(array, i=0, owner="skloes") -> float:
    """The factor that brings an image's values to 0..255.

    ``uint8``: 1. ``bool``: 255. Otherwise, by the image's own values (no
    other image of the batch matters): a maximum of at most 1 is the 0..1
    scale (scikit-image, float images), 255; whole numbers up to 16 are
    scikit-learn's digits scale, 255 / 16; a maximum up to 255 is already
    0..255, 1; beyond, an integer dtype's full range (``uint16``: 255 /
    65535). Negative values, or floats beyond 255, are an error.

    Parameters
    ----------
    array : ndarray
        One image.
    i : int, default=0
        Its position in ``X``, for the error.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    scale : float
    """
    if array.dtype == np.uint8:
        return 1.0
    if array.dtype.kind == "b":
        return 255.0
    if array.size == 0:
        raise ValueError(f"{owner}: image {i} of `X` is empty (shape {array.shape}).")
    low, high = float(array.min()), float(array.max())
    if low < 0:
        raise ValueError(
            f"{owner}: image {i} of `X` has negative values (down to {low:.3g}); "
            "give images on 0..1 or 0..255 (grey or RGB), or ready pixel values "
            "of the model's (C, H, W) input shape, as float."
        )
    if high <= 1:
        return 255.0
    if high <= DIGITS_MAX and np.array_equal(array, np.round(array)):
        return 255.0 / DIGITS_MAX
    if high <= 255:
        return 1.0
    if array.dtype.kind in "iu":
        return 255.0 / float(np.iinfo(array.dtype).max)
    raise ValueError(
        f"{owner}: image {i} of `X` has values up to {high:.3g}; give float images "
        "on 0..1 or 0..255, or integer images."
    )


def to_pixels(array, channels: int = 3, i=0, owner="skloes"):
    """One image as the processor's input: ``uint8`` ``(H, W, channels)``.

    A 2-D or one-channel image is repeated on every channel (grey); an alpha
    channel is dropped; ``(C, H, W)`` becomes ``(H, W, C)``; values are
    scaled by :func:`pixel_scale` and rounded.

    Parameters
    ----------
    array : ndarray
        From :func:`read_images`.
    channels : int, default=3
        The model's ``num_channels``.
    i : int, default=0
        Position in ``X``, for errors.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    pixels : ndarray of shape (H, W, channels), dtype uint8
    """
    if array.ndim == 2:
        array = array[:, :, None]
    elif _channel_axis(array) == 0 and array.shape[-1] not in (1, 3, 4):
        array = np.moveaxis(array, 0, -1)
    if array.shape[-1] == 4:  # RGBA: the alpha channel is not a colour
        array = array[:, :, :3]
    scale = pixel_scale(array, i, owner)
    if array.dtype != np.uint8:
        array = np.clip(np.rint(array.astype(np.float64) * scale), 0, 255)
        array = array.astype(np.uint8)
    have = array.shape[-1]
    if have == channels:
        return np.ascontiguousarray(array)
    if have == 1:
        return np.ascontiguousarray(np.repeat(array, channels, axis=-1))
    if channels == 1:  # an RGB image for a grey model: ITU-R 601 luma
        luma = array.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
        return np.rint(luma)[:, :, None].astype(np.uint8)
    raise ValueError(
        f"{owner}: image {i} of `X` has {have} channels; the model takes {channels}."
    )
