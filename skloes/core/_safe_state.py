"""Objects to bytes and back without pickle: numpy arrays and JSON, nothing else.

:func:`dumps_state` writes an object made of builtins (None, bool, int,
float, str, list, tuple, dict), numpy arrays and scalars, and instances of
classes the caller names, as one ``.npz`` archive: the arrays as ``.npy``
members and the structure as JSON. :func:`loads_state` reads it back with
``allow_pickle=False`` and constructs only the classes it is given (as class
objects, never looked up by a name read from the data), setting their
attributes directly: no ``__init__``, ``__setstate__`` or ``__reduce__`` runs,
so bytes from a folder someone else can write cannot run code.

Each array's dtype, shape and finiteness are recorded beside it in the JSON
structure and checked on reading: an array member replaced or edited (other
integers, another shape, a NaN where there was none) is a :class:`StateError`
naming it, never a value handed on.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import io
import json

import numpy as np

__all__ = ["StateError", "dumps_state", "loads_state"]

_FORMAT = 2  # 2: each array's dtype, shape and finiteness recorded
_TREE = "state.json"


class StateError(ValueError):
    """Bytes that are not a state this module wrote for these classes."""


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def dumps_state(obj, classes):
    """``obj`` as bytes (an ``.npz`` archive of its arrays and its structure).

    Parameters
    ----------
    obj : object
        Builtins, numpy arrays (not of dtype object) and scalars, and
        instances of ``classes`` (their ``__dict__``), nested.
    classes : iterable of type
        The classes ``obj`` may hold (and refer to as values).

    Returns
    -------
    data : bytes
    """
    allowed = {_name(cls): cls for cls in classes}
    arrays = []
    tree = {"format": _FORMAT, "root": _encode(obj, allowed, arrays)}
    members = {f"a{i}": a for i, a in enumerate(arrays)}
    members[_TREE] = np.frombuffer(json.dumps(tree).encode("utf-8"), np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **members)
    return buffer.getvalue()


def loads_state(data, classes):
    """The object :func:`dumps_state` wrote, built from ``classes`` only.

    Parameters
    ----------
    data : bytes
    classes : iterable of type
        The classes that may be constructed.

    Returns
    -------
    obj : object

    Raises
    ------
    StateError
        When ``data`` is not such a state, or names another class.
    """
    allowed = {_name(cls): cls for cls in classes}
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        tree = json.loads(arrays.pop(_TREE).tobytes().decode("utf-8"))
    except Exception as exc:  # not an npz, a member missing, not JSON, pickled
        raise StateError(f"not a saved state ({type(exc).__name__}: {exc})") from None
    if not isinstance(tree, dict) or tree.get("format") != _FORMAT:
        raise StateError("not a saved state of this format")
    return _decode(tree.get("root"), allowed, arrays)


class _Encoder:
    """Pre-order walk; an object met again (a shared array, the same
    prepared layers held by two objects) is written as a reference, so that
    identities survive the round trip, as they do through pickle."""

    def __init__(self, allowed):
        self.allowed, self.arrays, self.memo, self.keep = allowed, [], {}, []

    def __call__(self, obj):
        if obj is None or isinstance(obj, (bool, str)) or type(obj) in (int, float):
            return obj  # numpy's scalars are np.generic, below
        if isinstance(obj, np.generic):
            return {"s": obj.dtype.str, "v": obj.item()}
        if isinstance(obj, type):
            if _name(obj) not in self.allowed:
                raise TypeError(f"the class {_name(obj)} cannot be saved as a state")
            return {"c": _name(obj)}
        if id(obj) in self.memo:
            return {"r": self.memo[id(obj)]}
        self.memo[id(obj)] = len(self.memo)
        self.keep.append(obj)  # ids stay unique while the walk lasts
        return self._container(obj)

    def _container(self, obj):
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                return {"A": [list(obj.shape), _plain_items(obj)]}
            self.arrays.append(obj)
            return {"a": f"a{len(self.arrays) - 1}", "m": _array_record(obj)}
        if isinstance(obj, (list, tuple)):
            return {"t" if isinstance(obj, tuple) else "l": [self(v) for v in obj]}
        if isinstance(obj, dict):
            return {"d": [[self(k), self(v)] for k, v in obj.items()]}
        if _name(type(obj)) in self.allowed and hasattr(obj, "__dict__"):
            state = {k: self(v) for k, v in vars(obj).items()}
            return {"o": _name(type(obj)), "state": state}
        raise TypeError(f"a {type(obj).__name__} cannot be saved as a state")


def _array_record(array):
    """What reading checks of an array: ``[dtype, shape, all finite]``."""
    finite = bool(np.isfinite(array).all()) if array.dtype.kind in "fc" else True
    return [array.dtype.str, list(array.shape), finite]


def _checked_array(array, record, name):
    """``array`` if it is what :func:`_array_record` recorded, else an error."""
    if not isinstance(array, np.ndarray):
        raise StateError(f"not a saved state (member {name!r} is not an array)")
    kept = _array_record(array)
    if not isinstance(record, list) or len(record) != 3:
        raise StateError(f"not a saved state (member {name!r} has no record)")
    if kept[:2] != record[:2] or (record[2] and not kept[2]):
        raise StateError(
            f"member {name!r} is {kept[0]} of shape {tuple(kept[1])}"
            f"{'' if kept[2] else ' holding NaN or inf'}; it was written as "
            f"{record[0]} of shape {tuple(record[1])}"
            f"{' with finite values' if record[2] else ''}"
        )
    return array


def _plain_items(array):
    """The items of an object array (class labels from a pandas column: str,
    numbers, bools, None) as JSON values; any other object is refused."""
    items = [v.item() if isinstance(v, np.generic) else v for v in array.ravel()]
    for v in items:
        if not (v is None or isinstance(v, (str, bool, int, float))):
            raise TypeError(
                f"an array holding a {type(v).__name__} cannot be saved as a state"
            )
    return [str(v) if isinstance(v, str) else v for v in items]


class _Decoder:
    """The inverse walk: objects are registered before their children, in the
    encoder's order, so that references resolve."""

    def __init__(self, allowed, arrays):
        self.allowed, self.arrays, self.memo = allowed, arrays, []

    def __call__(self, node):
        if node is None or isinstance(node, (bool, str, int, float)):
            return node
        if not isinstance(node, dict) or len(node) not in (1, 2):
            raise StateError(f"not a saved state (node {str(node)[:40]!r})")
        if "s" in node:
            return np.dtype(node["s"]).type(node["v"])
        if "c" in node:
            return _allowed(node["c"], self.allowed)
        if "r" in node:
            return self.memo[node["r"]]
        return self._container(node)

    def _container(self, node):
        if "a" in node:
            name = node["a"]
            array = _checked_array(self.arrays[name], node.get("m"), name)
            return self._register(array)
        if "A" in node:  # an object array of plain values
            shape, items = node["A"]
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return self._register(out.reshape(shape))
        if "l" in node:
            out = self._register([])
            out.extend(self(v) for v in node["l"])
            return out
        if "t" in node:
            slot = len(self.memo)
            self.memo.append(None)  # a tuple is built after its items
            self.memo[slot] = out = tuple(self(v) for v in node["t"])
            return out
        if "d" in node:
            out = self._register({})
            out.update((self(k), self(v)) for k, v in node["d"])
            return out
        if "o" in node:
            obj = self._register(object.__new__(_allowed(node["o"], self.allowed)))
            vars(obj).update({k: self(v) for k, v in node["state"].items()})
            return obj
        raise StateError(f"not a saved state (node {str(node)[:40]!r})")

    def _register(self, obj):
        self.memo.append(obj)
        return obj


def _encode(obj, allowed, arrays):
    encoder = _Encoder(allowed)
    root = encoder(obj)
    arrays.extend(encoder.arrays)
    return root


def _decode(node, allowed, arrays):
    try:
        return _Decoder(allowed, arrays)(node)
    except StateError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise StateError(f"not a saved state ({type(exc).__name__}: {exc})") from None


def _allowed(name, allowed):
    if name not in allowed:
        raise StateError(f"names the class {name!r}, which may not be constructed")
    return allowed[name]
