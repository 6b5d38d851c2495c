"""The outcomes a bad-input case asserts, one definition for every file of
tests/bad_input.

Each case asserts one of three outcomes:

- ``err(needle)``: an exception (``ValueError`` or ``TypeError`` unless
  ``exc`` says otherwise) whose message matches ``needle`` (it names the
  parameter, input, file or field at fault), on one line, with no traceback
  text in it;
- ``warns(match)``: a warning matching ``match``, then a result ``then``
  checks;
- ``ok(then)``: a correct result (``then`` says what correct is: it
  asserts, or returns True).

And for data: :func:`snapshot` the files before and after, to assert that no
file the library did not write was deleted or changed. :func:`cli_error` is
``err`` for the command line: exit status 2 and one error line.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

__all__ = ["Outcome", "cases", "cli_error", "err", "ok", "snapshot", "warns"]


class Outcome:
    """What a case asserts (``kind``: "error", "warning" or "correct")."""

    kind = "?"

    def check(self, run):  # pragma: no cover - each outcome defines it
        raise NotImplementedError


class err(Outcome):  # noqa: N801 - reads as a table entry
    """An exception of ``exc`` on one line whose message matches ``needle``."""

    kind = "error"

    def __init__(self, needle, exc=(ValueError, TypeError)):
        self.needle, self.exc = needle, exc

    def check(self, run):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(self.exc) as info:
                run()
        message = str(info.value)
        assert re.search(self.needle, message), (self.needle, message)
        assert "\n" not in message and "Traceback" not in message, message
        return info.value


class warns(Outcome):  # noqa: N801
    """A warning matching ``match``; then ``then`` checks the result."""

    kind = "warning"

    def __init__(self, match, then=None, category=UserWarning):
        self.match, self.then, self.category = match, then, category

    def check(self, run):
        with pytest.warns(self.category, match=self.match):
            result = run()
        _then(self.then, result)
        return result


class ok(Outcome):  # noqa: N801
    """A result; ``then`` checks it is correct (warnings of the data, such as
    a degenerate layer, are not what is asserted here)."""

    kind = "correct"

    def __init__(self, then=None):
        self.then = then

    def check(self, run):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = run()
        _then(self.then, result)
        return result


def _then(check, result):
    """Run ``check(result)``: it asserts, or returns a bool that must be True
    (a check written ``lambda r: r.task_ == "regression"``)."""
    if check is None:
        return
    verdict = check(result)
    if isinstance(verdict, (bool, np.bool_)):
        assert verdict, (check, result)


def cases(table):
    """``pytest.param``s from a table of ``(id, *values)`` rows."""
    return [pytest.param(*values, id=i) for i, *values in table]


def cli_error(argv, needle, capsys):
    """``skloes ...`` exits with 2 and one error line matching ``needle``
    (progress bars of a run that got far may precede it)."""
    from skloes.cli import main

    status = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert status == 2, lines
    assert len(errors) == 1 and re.search(needle, errors[0]), lines
    assert not any("Traceback" in line for line in lines)
    return errors[0]


def snapshot(folder):
    """Every file under ``folder`` with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file()
    }
