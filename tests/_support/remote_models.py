"""Model folders that ask for their own code, in each place transformers reads
an ``auto_map``; their code writes a marker file when it runs, so that a test
can assert that no code ran that nobody opted into."""

from __future__ import annotations

import json

__all__ = [
    "MARKER_ENV",
    "REMOTE_KINDS",
    "edit_json",
    "no_code_ran",
    "remote_config",
    "remote_hub",
    "remote_preprocessor",
    "remote_tokenizer",
]

# The environment variable naming the marker file the planted code writes.
MARKER_ENV = "SKLOES_TEST_CODE_RAN"

_CONFIG_CODE = """import os
from transformers import BertConfig


class XConfig(BertConfig):
    model_type = "xbert"

    def __init__(self, **kwargs):
        open(os.environ["SKLOES_TEST_CODE_RAN"], "a").write("config ")
        super().__init__(**kwargs)
"""
_MODEL_CODE = """import os
from transformers import BertModel

from .configuration_x import XConfig


class XModel(BertModel):
    config_class = XConfig

    def __init__(self, config):
        open(os.environ["SKLOES_TEST_CODE_RAN"], "a").write("model ")
        super().__init__(config)
"""
_TOKENIZER_CODE = """import os
from transformers import BertTokenizerFast


class XTokenizer(BertTokenizerFast):
    def __init__(self, *args, **kwargs):
        open(os.environ["SKLOES_TEST_CODE_RAN"], "a").write("tokenizer ")
        super().__init__(*args, **kwargs)
"""


def edit_json(path, **changes):
    """Update the JSON object in ``path`` (created when missing)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(changes)
    path.write_text(json.dumps(data))


def map_to_x_code(folder):
    """Point the model's config.json at the xbert code of its folder
    (configuration_x.XConfig, modeling_x.XModel)."""
    auto_map = {
        "AutoConfig": "configuration_x.XConfig",
        "AutoModel": "modeling_x.XModel",
    }
    edit_json(folder / "config.json", model_type="xbert", auto_map=auto_map)


def remote_config(folder):
    (folder / "configuration_x.py").write_text(_CONFIG_CODE)
    (folder / "modeling_x.py").write_text(_MODEL_CODE)
    map_to_x_code(folder)


def remote_tokenizer(folder):
    (folder / "tokenization_x.py").write_text(_TOKENIZER_CODE)
    edit_json(
        folder / "tokenizer_config.json",
        auto_map={"AutoTokenizer": [None, "tokenization_x.XTokenizer"]},
        tokenizer_class="XTokenizer",
    )


def remote_preprocessor(folder):
    (folder / "processing_x.py").write_text("raise RuntimeError('ran')\n")
    edit_json(
        folder / "preprocessor_config.json",
        auto_map={"AutoProcessor": "processing_x.XProcessor"},
    )


def remote_hub(folder):  # code of another repository, named in an auto_map
    edit_json(
        folder / "processor_config.json",
        auto_map={"AutoProcessor": "someone/elsewhere--processing.XProcessor"},
    )


# kind -> (make the folder ask for code, the file the refusal names)
REMOTE_KINDS = {
    "config_auto_map": (remote_config, r"config\.json"),
    "tokenizer_auto_map": (remote_tokenizer, r"tokenizer_config\.json"),
    "preprocessor_auto_map": (remote_preprocessor, r"preprocessor_config\.json"),
    "hub_code_in_auto_map": (remote_hub, r"someone/elsewhere--processing"),
}


def no_code_ran(marker, run):
    """Run ``run``; the planted code's marker file must stay absent."""
    marker.unlink(missing_ok=True)
    run()
    assert not marker.exists(), marker.read_text()
