"""One docstring template helper: shared parameter sections, one syntax.

A class docstring names a shared section on a line of its own, ``{NAME}``
(any indentation); :func:`fill_doc` replaces that whole line by the section's
text, which is written with its final indentation.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import re


def fill_doc(**sections):
    """Class decorator that fills ``{NAME}`` lines of the docstring.

    Parameters
    ----------
    **sections : str
        ``NAME=text``; leading and trailing blank lines of ``text`` are
        dropped.

    Returns
    -------
    decorator : callable
        Fills the docstring of the class it decorates and returns the class.
        A ``{NAME}`` line without a section raises ``KeyError``.

    Examples
    --------
    >>> from skloes.utils._docstrings import fill_doc
    >>> @fill_doc(ALPHA="    alpha : float\\n        A weight.")
    ... class A:
    ...     '''Doc.
    ...
    ...     {ALPHA}
    ...     '''
    >>> print(A.__doc__.splitlines()[2])
        alpha : float
    """
    texts = {name: text.strip("\n") for name, text in sections.items()}

    def decorate(cls):
        cls.__doc__ = re.sub(
            r"(?m)^[ \t]*\{([A-Z_]+)\}[ \t]*$", lambda m: texts[m.group(1)], cls.__doc__
        )
        return cls

    return decorate


def fill_x_doc(kind, description):
    """Decorator filling a method docstring's ``{X}`` line: the Parameters
    section of a method whose one parameter is ``X`` (``X : kind``)."""
    return fill_doc(
        X=f"""
        Parameters
        ----------
        X : {kind}
            {description}"""
    )
