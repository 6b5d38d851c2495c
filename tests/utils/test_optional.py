"""Optional dependencies (skloes.utils._optional): imported when needed, with
the install line of the extra that provides them."""

from __future__ import annotations

import json
import re

import pytest

from skloes.utils._optional import import_optional, quiet_transformers


def test_an_installed_module_is_returned():
    assert import_optional("json") is json


@pytest.mark.parametrize(
    "name, extra, hint",
    [
        pytest.param("no_such_module_skloes", None, "skloes[all]", id="unknown"),
        pytest.param("onnxruntime.no_such_sub", None, "skloes[serve]", id="by_top"),
        pytest.param("no_such_module_skloes", "plot", "skloes[plot]", id="given"),
    ],
)
def test_a_missing_module_says_how_to_install_it(name, extra, hint):
    needle = rf"skloes needs `{name}` here.*{re.escape(hint)}"
    with pytest.raises(ImportError, match=needle):
        import_optional(name, extra=extra)


def test_quiet_transformers_restores_the_verbosity():
    transformers = pytest.importorskip("transformers")
    logging = transformers.logging
    before = logging.get_verbosity()
    logging.set_verbosity_info()
    try:
        with quiet_transformers():
            assert logging.get_verbosity() == logging.ERROR
        assert logging.get_verbosity() == logging.INFO
    finally:
        logging.set_verbosity(before)
