"""The one access point to torch, and the device rule of every torch estimator.

``torch`` here is a stand-in that imports the real module on first use, or
raises an ImportError that says ``pip install skloes[torch]``: modules that need
torch only inside their functions import this name at their top and stay
importable without torch. Nothing else in skloes imports torch directly.
The device rule: one ``_parameter_constraints`` entry (:data:`DEVICE_CONSTRAINT`)
and one resolver (:func:`resolve_device`) that returns a ``torch.device``, the
type of every estimator's ``device_``.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from skloes.utils._optional import import_optional
from skloes.utils._param_validation import HasMethods

__all__ = [
    "DEVICE_CONSTRAINT",
    "may_use_accelerator",
    "require_torch",
    "resolve_device",
    "torch",
    "torch_available",
]


class _LazyTorch:
    """``torch``, imported on the first attribute access (with the install hint)."""

    __slots__ = ("_module",)

    def __init__(self):
        self._module = None

    def __getattr__(self, name):
        module = self._module
        if module is None:
            module = import_optional("torch", extra="torch")
            object.__setattr__(self, "_module", module)
        return getattr(module, name)

    def __repr__(self):
        return "<torch, imported on first use>"


torch = _LazyTorch()


def require_torch() -> None:
    """Import torch now, or raise the ImportError with the install hint."""
    torch.Tensor  # noqa: B018 - the first access imports torch


def torch_available() -> bool:
    """Whether torch can be imported here."""
    try:
        require_torch()
    except ImportError:
        return False
    return True


class _TorchDevice(HasMethods):
    """A ``torch.device`` instance (checked without importing torch)."""

    def __init__(self):
        super().__init__([])

    def is_satisfied_by(self, val):
        cls = type(val)
        return cls.__name__ == "device" and cls.__module__.startswith("torch")

    def __str__(self):
        return "an instance of 'torch.device'"


# The one `_parameter_constraints` entry for `device` in every torch estimator.
DEVICE_CONSTRAINT = [str, _TorchDevice()]


def resolve_device(device="auto", *, owner: str = "skloes"):
    """Resolve a ``device`` parameter to a ``torch.device`` that exists here.

    Parameters
    ----------
    device : str or torch.device, default="auto"
        ``"auto"`` picks CUDA, then MPS, then CPU; anything else is parsed by
        torch (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) and must be
        available on this machine.
    owner : str, default="skloes"
        Name used in error messages (the calling estimator).

    Returns
    -------
    device : torch.device

    Examples
    --------
    >>> from skloes.core._torch import resolve_device
    >>> resolve_device("cpu")  # doctest: +SKIP
    device(type='cpu')
    """
    if isinstance(device, str) and device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"{owner}: `device` must be 'auto' or a torch device such as 'cpu' or "
            f"'cuda:0'; got {device!r}."
        ) from None
    _check_device_available(torch, resolved, device, owner)
    return resolved


def _check_device_available(torch, resolved, device, owner):
    """Fail now, naming ``device``, when torch cannot use the device here."""
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (resolved.index or 0) >= count:
            raise ValueError(
                f"{owner}: `device`={str(device)!r} is not available: this machine "
                f"has {count} CUDA device(s) usable by torch; use 'auto' or 'cpu'."
            )
    elif resolved.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(
                f"{owner}: `device`={str(device)!r} is not available on this machine; "
                "use 'auto' or 'cpu'."
            )
    elif resolved.type == "meta":  # shapes only: every value would be missing
        raise ValueError(
            f"{owner}: `device`={str(device)!r} computes no values (torch's meta "
            "device holds shapes only); use 'auto', 'cpu' or an accelerator."
        )
    elif resolved.type != "cpu":  # xpu, hpu...: torch's own availability test
        backend = getattr(torch, resolved.type, None)
        available = getattr(backend, "is_available", None)
        if available is None or not available():
            raise ValueError(
                f"{owner}: `device`={str(device)!r} is not available on this machine; "
                "use 'auto' or 'cpu'."
            )


def may_use_accelerator(device):
    """Whether ``device`` may put a fit on a GPU (whose kernels are not
    bit-reproducible): an explicit non-CPU device, or ``"auto"`` where one is
    available. Used for the ``non_deterministic`` estimator tag."""
    if str(device) == "cpu":
        return False
    if device != "auto":
        return True
    if not torch_available():  # no torch: nothing will run at all
        return False
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(mps and mps.is_available())
