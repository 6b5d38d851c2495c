"""A vision model's image processor in Pillow and numpy (resize, crop, normalize).

:func:`processor_spec` reads what a Hugging Face image processor does (its
``to_dict()``: plain numbers and names) into a small spec that a saved probe
keeps in its manifest; :func:`pixel_values` applies the spec to images with
Pillow and numpy alone, with transformers' own arithmetic (its Pillow
backend: ``PilBackend`` and ``image_transforms``), so that a probe served
without torch or transformers (:mod:`skloes.serving`) feeds its exported
graph the pixel values the model's processor gives. Images are read as the
extractor reads them (:mod:`skloes.core._images`: paths, PIL images, grey,
small-range values) before the spec applies.

The processors covered are those of the vision families (ViT, DeiT, DINOv2's
BiT processor, BEiT, CLIP, SigLIP, ViT-MAE): a setting this module does not
reproduce (padding, a resize by longest edge or pixel count...) is refused
when the spec is made, not served approximately.

May import: utils, core.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.core._images import is_ready, read_images, to_pixels
from skloes.utils._optional import import_optional

__all__ = ["check_spec", "image_items", "pixel_values", "processor_spec"]

# Pillow's resampling filters by their number (``PIL.Image.Resampling``).
RESAMPLE = {
    0: "nearest",
    1: "lanczos",
    2: "bilinear",
    3: "bicubic",
    4: "box",
    5: "hamming",
}
# Processor settings that change nothing for an RGB uint8 image, or that
# concern other inputs (segmentation maps, labels).
_INERT = {
    "do_convert_rgb",
    "do_reduce_labels",
    "image_processor_type",
    "processor_class",
    "default_to_square",
    "input_data_format",
    "data_format",
    "return_tensors",
    "device",
    "disable_grouping",
    "image_seq_length",
}
_SPEC_KEYS = (
    "resize",
    "resample",
    "crop",
    "rescale",
    "mean",
    "std",
    "channels",
    "ready_shape",
)


def processor_spec(processor, ready_shape=None, channels=3, owner="skloes") -> dict:
    """The spec of a Hugging Face image processor, or an error naming what
    this module does not reproduce.

    Parameters
    ----------
    processor : transformers image processor
        The model's, as loaded (read through its ``to_dict()``).
    ready_shape : tuple of int or None, default=None
        ``(C, H, W)`` of the model's input: float arrays of that shape are
        ready pixel values and skip the processor, as in the extractor.
    channels : int, default=3
        The model's ``num_channels``.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    spec : dict
        ``resize`` (``{"height", "width"}`` or ``{"shortest_edge"}``, or
        None), ``resample`` (a Pillow filter number), ``crop``
        (``{"height", "width"}`` or None), ``rescale`` (a factor or None),
        ``mean`` and ``std`` (per channel, or None), ``channels`` and
        ``ready_shape``.
    """
    settings = dict(processor.to_dict())
    name = settings.get("image_processor_type", type(processor).__name__)

    def refuse(what):
        raise ValueError(
            f"{owner}: the image processor {name} {what}, which skloes' torch-free "
            "preprocessing does not reproduce; save without `export`."
        )

    if settings.get("do_pad"):
        refuse("pads images")
    if settings.get("do_flip_channel_order"):
        refuse("flips the channel order")
    resize = None
    if settings.get("do_resize", False):
        size = {k: v for k, v in dict(settings.get("size") or {}).items() if v}
        if set(size) == {"height", "width"} or set(size) == {"shortest_edge"}:
            resize = {k: int(v) for k, v in size.items()}
        else:
            refuse(f"resizes by {sorted(size)}")
    resample = int(settings.get("resample", 2) if resize else 2)
    if resample not in RESAMPLE:
        refuse(f"resamples with filter {resample!r}")
    crop = None
    if settings.get("do_center_crop", False):
        size = {k: v for k, v in dict(settings.get("crop_size") or {}).items() if v}
        if set(size) != {"height", "width"}:
            refuse(f"crops by {sorted(size)}")
        crop = {k: int(v) for k, v in size.items()}
    if not (resize and ("height" in resize or crop)):
        refuse("gives images of more than one size")
    rescale = None
    if settings.get("do_rescale", False):
        rescale = float(settings["rescale_factor"])
    mean = std = None
    if settings.get("do_normalize", False):
        mean, std = (
            _per_channel(settings["image_mean"]),
            _per_channel(settings["image_std"]),
        )
        if len(mean) not in (1, channels) or len(std) not in (1, channels):
            refuse(f"normalizes {len(mean)} channels, not {channels}")
    spec = {
        "processor": name,
        "resize": resize,
        "resample": resample,
        "crop": crop,
        "rescale": rescale,
        "mean": mean,
        "std": std,
        "channels": int(channels),
        "ready_shape": None if ready_shape is None else [int(v) for v in ready_shape],
    }
    return spec


def _per_channel(value):
    if isinstance(value, (int, float)):
        return [float(value)]
    return [float(v) for v in value]


def check_spec(spec) -> str | None:
    """What is wrong with a spec read from a file, or None (every field the
    preprocessing acts on, checked before it is used)."""
    if not isinstance(spec, dict) or any(k not in spec for k in _SPEC_KEYS):
        return f"a dict with {', '.join(_SPEC_KEYS)}"

    def side(v):
        return isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 14

    def sizes(v, keys):
        return isinstance(v, dict) and set(v) in keys and all(map(side, v.values()))

    square = {frozenset({"height", "width"})}
    if not (
        spec["resize"] is None
        or sizes(spec["resize"], square | {frozenset({"shortest_edge"})})
    ):
        return "resize: {height, width} or {shortest_edge} of positive ints, or null"
    if spec["resample"] not in RESAMPLE:
        return f"resample: one of {sorted(RESAMPLE)}"
    if not (spec["crop"] is None or sizes(spec["crop"], square)):
        return "crop: {height, width} of positive ints, or null"
    if not side(spec["channels"]) or spec["channels"] > 4:
        return "channels: 1 to 4"
    if spec["rescale"] is not None and not _finite(spec["rescale"]):
        return "rescale: a finite number or null"
    for key in ("mean", "std"):
        value = spec[key]
        ok = value is None or (
            isinstance(value, list)
            and len(value) in (1, spec["channels"])
            and all(map(_finite, value))
        )
        if not ok:
            return f"{key}: a list of 1 or `channels` finite numbers, or null"
    if (spec["mean"] is None) != (spec["std"] is None) or (
        spec["std"] is not None and 0 in spec["std"]
    ):
        return "mean and std: both null, or both given with std non-zero"
    shape = spec["ready_shape"]
    if shape is not None and not (
        isinstance(shape, list) and len(shape) == 3 and all(map(side, shape))
    ):
        return "ready_shape: [C, H, W] of positive ints, or null"
    return None


def _finite(value):
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and bool(np.isfinite(value))
    )


def pixel_values(images, spec, owner="skloes") -> np.ndarray:
    """The model's ``pixel_values`` of ``images`` under ``spec``.

    Each image is read as the extractor reads it (file paths, PIL images,
    arrays, Hugging Face image dicts; grey repeated on the channels,
    small-range values scaled), then resized with Pillow (its shortest edge
    to ``shortest_edge``, the other edge truncated as transformers does, or
    to ``height`` x ``width``), centre-cropped, rescaled in float64 then
    cast to float32, and normalized in float32 per channel: transformers'
    Pillow backend step by step. Float ``(C, H, W)`` arrays of the model's
    input shape are ready pixel values and are kept as they are.

    Parameters
    ----------
    images : list
        As :func:`skloes.core._images.read_images` takes them.
    spec : dict
        From :func:`processor_spec` (checked by :func:`check_spec`).
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    pixel_values : ndarray of shape (n_images, C, H, W), dtype float32
    """
    arrays = read_images(images, owner)
    ready = tuple(spec["ready_shape"]) if spec["ready_shape"] is not None else None
    rows = []
    for i, array in enumerate(arrays):
        if is_ready(array, ready):
            rows.append(array.astype(np.float32))
        else:
            rows.append(_process(to_pixels(array, spec["channels"], i, owner), spec))
    shapes = {row.shape for row in rows}
    if len(shapes) > 1:
        raise ValueError(
            f"{owner}: the images of `X` give pixel values of shapes "
            f"{sorted(shapes)}; the model takes one size."
        )
    return np.stack(rows)


def _process(pixels, spec):
    """One ``uint8`` ``(H, W, C)`` image through the spec: ``(C, H, W)`` float32."""
    image = pixels
    if spec["resize"] is not None:
        height, width = _resized_size(image.shape[:2], spec["resize"])
        pil = import_optional("PIL.Image", extra="vision")
        grey = image.shape[-1] == 1
        picture = pil.fromarray(image[:, :, 0] if grey else image)
        picture = picture.resize((width, height), resample=spec["resample"])
        image = np.asarray(picture)
        image = image[:, :, None] if image.ndim == 2 else image
    if spec["crop"] is not None:
        image = _center_crop(image, spec["crop"]["height"], spec["crop"]["width"])
    image = np.moveaxis(image, -1, 0)  # (C, H, W)
    if spec["rescale"] is not None:
        image = (image.astype(np.float64) * spec["rescale"]).astype(np.float32)
    if spec["mean"] is not None:
        image = image.astype(np.float32, copy=False)
        channels = image.shape[0]
        mean = np.array(spec["mean"] * (channels // len(spec["mean"])), np.float32)
        std = np.array(spec["std"] * (channels // len(spec["std"])), np.float32)
        image = ((image.T - mean) / std).T
    return np.ascontiguousarray(image, dtype=np.float32)


def _resized_size(shape, resize):
    """``(height, width)`` after the resize (transformers'
    ``get_resize_output_image_size`` with ``default_to_square=False``)."""
    if "height" in resize:
        return resize["height"], resize["width"]
    height, width = shape
    short, long = (width, height) if width <= height else (height, width)
    new_short = resize["shortest_edge"]
    new_long = int(new_short * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def _center_crop(image, height, width):
    """transformers' ``center_crop`` of an ``(H, W, C)`` image: zero-padded
    where the image is smaller than the crop."""
    rows, cols = image.shape[:2]
    top, left = (rows - height) // 2, (cols - width) // 2
    if top >= 0 and left >= 0 and top + height <= rows and left + width <= cols:
        return image[top : top + height, left : left + width]
    new_rows, new_cols = max(height, rows), max(width, cols)
    canvas = np.zeros((new_rows, new_cols, image.shape[2]), dtype=image.dtype)
    top_pad, left_pad = -(-(new_rows - rows) // 2), -(-(new_cols - cols) // 2)
    canvas[top_pad : top_pad + rows, left_pad : left_pad + cols] = image
    top, left = top + top_pad, left + left_pad
    return canvas[
        max(0, top) : min(new_rows, top + height),
        max(0, left) : min(new_cols, left + width),
    ]


def image_items(X, owner="skloes") -> list:
    """The images of ``X`` as a list, by the extractor's rule for an image
    model: a 3-D or 4-D array batch, or a sequence (a list, a one-column
    table) of images; each is read later by :func:`pixel_values`."""
    from skloes.core._texts import one_column

    if X is None or isinstance(X, (str, bytes)):
        raise TypeError(
            f"{owner}: `X` must be a list or array of images; got {type(X).__name__}."
        )
    X = one_column(X, "image", owner)
    try:
        items = list(X)
    except TypeError:
        raise TypeError(
            f"{owner}: `X` must be a list or array of images; got {type(X).__name__}."
        ) from None
    if not items:
        raise ValueError(f"{owner}: `X` is empty; pass at least one image.")
    return items
