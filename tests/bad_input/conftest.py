"""Fixtures the bad-input files share: broken model folders, models that ask
for their own code (with the marker their code writes), probes saved with
settings a loader must not inherit, and probes saved with heads that do and
do not give probabilities.

The cases of every file here assert an outcome of ``tests/_support/outcomes.py``:
``err`` (one line naming what is wrong), ``warns`` (a warning, then a
result), ``ok`` (a correct result).
"""

from __future__ import annotations

import os
import shutil
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("skops")
pytest.importorskip("transformers")

from _support.probes import first_layer, tiny_probe  # noqa: E402
from _support.remote_models import MARKER_ENV, REMOTE_KINDS, map_to_x_code  # noqa: E402
from _support.texts import PROBE_TEXTS, PROBE_Y, random_reviews  # noqa: E402
from sklearn.linear_model import LogisticRegression, RidgeClassifier  # noqa: E402
from sklearn.svm import SVC, LinearSVC  # noqa: E402

from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    LayerProbeRegressor,
    save_probe,
)
from skloes.selection import LastKSelector  # noqa: E402


@pytest.fixture(scope="module")
def broken_models(tiny_model_path, tmp_path_factory):
    """Model folders broken in the ways a download or a user breaks them."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("broken")

    def copy(name):
        shutil.copytree(tiny_model_path, root / name)
        return root / name

    (root / "empty").mkdir()
    copy("bad_json").joinpath("config.json").write_text('{"model_type": "be')
    copy("list_json").joinpath("config.json").write_text("[]")
    copy("no_type").joinpath("config.json").write_text("{}")
    copy("unknown_type").joinpath("config.json").write_text('{"model_type": "nope"}')
    weights = copy("half_weights") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    copy("empty_weights").joinpath("model.safetensors").write_bytes(b"")
    copy("no_weights").joinpath("model.safetensors").unlink()
    bin_only = copy("bin_only")
    bin_only.joinpath("model.safetensors").rename(bin_only / "pytorch_model.bin")
    remote = copy("remote")
    config = json.loads((remote / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_x.XModel"}
    (remote / "config.json").write_text(json.dumps(config))
    (remote / "modeling_x.py").write_text("raise RuntimeError('ran')\n")
    no_tok = copy("no_tokenizer")
    for name in os.listdir(no_tok):
        if "token" in name or name == "vocab.txt":
            os.remove(no_tok / name)
    (root / "a_file").write_text("x")
    decoy = copy("bin_and_decoy")
    decoy.joinpath("model.safetensors").rename(decoy / "pytorch_model.bin")
    decoy.joinpath("decoy.safetensors").write_bytes(b"\x02" + b"\x00" * 7 + b"{}")
    sharded = copy("shard_missing")
    sharded.joinpath("model.safetensors").rename(sharded / "model-00001.safetensors")
    sharded.joinpath("model.safetensors.index.json").write_text(
        json.dumps(
            {
                "weight_map": {
                    "a": "model-00001.safetensors",
                    "b": "model-00002.safetensors",
                }
            }
        )
    )
    copy("bad_index").joinpath("model.safetensors.index.json").write_text("{")
    inconsistent = copy("remote_inconsistent")
    (inconsistent / "configuration_x.py").write_text(
        "from transformers import BertConfig\n\n\nclass XConfig(BertConfig):\n"
        "    model_type = 'xbert'\n"
    )
    (inconsistent / "modeling_x.py").write_text(  # its config_class is another
        "from transformers import BertConfig, BertModel\n\n\n"
        "class XModel(BertModel):\n    config_class = BertConfig\n"
    )
    map_to_x_code(inconsistent)
    return root


@pytest.fixture(scope="module")
def marker(tmp_path_factory):
    path = tmp_path_factory.mktemp("marker") / "code-ran.txt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(MARKER_ENV, str(path))
        yield path


@pytest.fixture(scope="module")
def remote(tiny_model_path, tmp_path_factory, marker):
    """kind -> (model folder, probe saved with trust_remote_code=True)."""
    root = tmp_path_factory.mktemp("remote-models")
    out = {}
    for kind, (make, _) in REMOTE_KINDS.items():
        folder = root / f"model_{kind}"  # distinct names: distinct code modules
        shutil.copytree(tiny_model_path, folder)
        make(folder)
        probe = tiny_probe(str(folder), extractor_params={"trust_remote_code": True})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            probe.fit(PROBE_TEXTS, PROBE_Y)
        out[kind] = (str(folder), save_probe(probe, root / f"probe_{kind}"))
    marker.unlink(missing_ok=True)
    return out


# --------------------------------------------------------------------------
# Two fitted probes with different layers, to tell an old save from a new one
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted(tiny_model_path):
    """Two fitted probes with different layers (to tell old from new)."""
    one = tiny_probe(tiny_model_path).fit(PROBE_TEXTS, PROBE_Y)
    two = tiny_probe(tiny_model_path, selector=LastKSelector(n_layers_to_select=2))
    return one, two.fit(PROBE_TEXTS, PROBE_Y)


# --------------------------------------------------------------------------
# Real texts, for the cases on the real MiniLM
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_texts(rotten_tomatoes_small):
    X, y = rotten_tomatoes_small
    return list(X[:40]), np.asarray(y[:40])


@pytest.fixture(scope="module")
def saved_probes(tiny_model_path, tmp_path_factory):
    """Probes saved with heads that do and do not give probabilities."""
    root = tmp_path_factory.mktemp("heads")
    texts = random_reviews(24)
    labels = ["pos", "neg"] * 12
    heads = {
        "logistic": LogisticRegression(),
        "linear_svc": LinearSVC(),
        "ridge_classifier": RidgeClassifier(),
        "svc_no_probability": SVC(),
    }
    out = {}
    for name, head in heads.items():
        probe = LayerProbeClassifier(
            tiny_model_path, device="cpu", selector=first_layer(), estimator=head
        ).fit(texts, labels)
        out[name] = (probe, save_probe(probe, root / name))
    regressor = LayerProbeRegressor(
        tiny_model_path, device="cpu", selector=first_layer()
    ).fit(texts, np.arange(24.0))
    out["regressor"] = (regressor, save_probe(regressor, root / "regressor"))
    return out
