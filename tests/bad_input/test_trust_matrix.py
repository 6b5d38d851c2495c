"""The trust matrix: saved probes, caches and settings that a user did not write.

Issue 26. Each case asserts one outcome, as in ``test_matrix.py``:

- ``err(needle)``: an exception on one line whose message matches ``needle``
  (it names the parameter, file or option at fault);
- ``warns(match)``: a warning, then a result;
- ``ok(check)``: a correct result.

And, where it applies: no code ran that nobody opted into (a marker file that
the model folder's own code writes stays absent), no file the library did not
write was deleted or changed, and no result is silently wrong.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("skops")

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from skloes import HiddenStatesTransformer, probe_folder  # noqa: E402
from skloes.cli import main  # noqa: E402
from skloes.core import _atomic  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    LayerProbeRegressor,
    _persistence,  # noqa: E402
    load_probe,
    prune_layers,
    save_probe,
)
from skloes.selection import LastKSelector  # noqa: E402

TEXTS = ["a good movie", "a dull plot", "fun", "the story was great"] * 3
Y = [1, 0, 1, 0] * 3
NEW = ["a fun film", "the plot was dull"]
MARKER_ENV = "SKLOES_TEST_CODE_RAN"


# --------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------
class err:  # noqa: N801 - reads as a table entry
    """An exception of ``exc`` on one line whose message matches ``needle``."""

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


class warns:  # noqa: N801
    def __init__(self, match, then=None):
        self.match, self.then = match, then

    def check(self, run):
        with pytest.warns(UserWarning, match=self.match):
            result = run()
        if self.then is not None:
            self.then(result)


class ok:  # noqa: N801
    def __init__(self, then=None):
        self.then = then

    def check(self, run):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = run()
        if self.then is not None:
            self.then(result)


def cli_error(argv, needle, capsys):
    """``skloes ...`` exits with 2 and one error line matching ``needle``."""
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


def _first_layer():
    return LastKSelector(n_layers_to_select=1)


def _probe(model, **params):
    params.setdefault("device", "cpu")
    params.setdefault("selector", _first_layer())
    return LayerProbeClassifier(model, **params)


def _csv(path, texts):
    path.write_text("text\n" + "".join(f"{t}\n" for t in texts), encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------
# Model folders that ask for their own code, in each place transformers reads
# an ``auto_map``; their code writes a marker file when it runs.
# --------------------------------------------------------------------------
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


def _edit_json(path, **changes):
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(changes)
    path.write_text(json.dumps(data))


def _remote_config(folder):
    (folder / "configuration_x.py").write_text(_CONFIG_CODE)
    (folder / "modeling_x.py").write_text(_MODEL_CODE)
    auto_map = {
        "AutoConfig": "configuration_x.XConfig",
        "AutoModel": "modeling_x.XModel",
    }
    _edit_json(folder / "config.json", model_type="xbert", auto_map=auto_map)


def _remote_tokenizer(folder):
    (folder / "tokenization_x.py").write_text(_TOKENIZER_CODE)
    _edit_json(
        folder / "tokenizer_config.json",
        auto_map={"AutoTokenizer": [None, "tokenization_x.XTokenizer"]},
        tokenizer_class="XTokenizer",
    )


def _remote_preprocessor(folder):
    (folder / "processing_x.py").write_text("raise RuntimeError('ran')\n")
    _edit_json(
        folder / "preprocessor_config.json",
        auto_map={"AutoProcessor": "processing_x.XProcessor"},
    )


def _remote_hub(folder):  # code of another repository, named in an auto_map
    _edit_json(
        folder / "processor_config.json",
        auto_map={"AutoProcessor": "someone/elsewhere--processing.XProcessor"},
    )


REMOTE_KINDS = {
    "config_auto_map": (_remote_config, r"config\.json"),
    "tokenizer_auto_map": (_remote_tokenizer, r"tokenizer_config\.json"),
    "preprocessor_auto_map": (_remote_preprocessor, r"preprocessor_config\.json"),
    "hub_code_in_auto_map": (_remote_hub, r"someone/elsewhere--processing"),
}


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
        probe = _probe(str(folder), extractor_params={"trust_remote_code": True})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            probe.fit(TEXTS, Y)
        out[kind] = (str(folder), save_probe(probe, root / f"probe_{kind}"))
    marker.unlink(missing_ok=True)
    return out


def _no_code_ran(marker, run):
    marker.unlink(missing_ok=True)
    run()
    assert not marker.exists(), marker.read_text()


# --------------------------------------------------------------------------
# 1. Loading opts in, never inherits: a model's own code
# --------------------------------------------------------------------------
def _refusal(kind):
    return (
        rf"(?=.*trust_remote_code|.*--trust-remote-code)(?=.*{REMOTE_KINDS[kind][1]})"
    )


REFUSING_ENTRIES = {
    "load_probe": lambda model, saved: load_probe(saved),
    "load_probe_false": lambda model, saved: load_probe(saved, trust_remote_code=False),
    "load_probe_trusted_types": lambda model, saved: load_probe(
        saved, trusted=["torch.device"]
    ),
    "extractor_fit": lambda model, saved: HiddenStatesTransformer(
        model, device="cpu"
    ).fit(TEXTS),
    "probe_fit": lambda model, saved: _probe(model).fit(TEXTS, Y),
    "regressor_fit": lambda model, saved: LayerProbeRegressor(
        model, device="cpu", selector=_first_layer()
    ).fit(TEXTS, np.arange(12.0)),
}


@pytest.mark.parametrize("entry", list(REFUSING_ENTRIES))
@pytest.mark.parametrize("kind", list(REMOTE_KINDS))
def test_own_code_is_refused_without_opt_in(remote, marker, kind, entry):
    model, saved = remote[kind]
    outcome = err(_refusal(kind))
    _no_code_ran(
        marker, lambda: outcome.check(lambda: REFUSING_ENTRIES[entry](model, saved))
    )


@pytest.mark.parametrize("kind", list(REMOTE_KINDS))
def test_skloes_predict_refuses_own_code_without_the_option(
    remote, marker, kind, tmp_path, capsys
):
    _, saved = remote[kind]
    data = _csv(tmp_path / "new.csv", NEW)
    _no_code_ran(
        marker,
        lambda: cli_error(
            ["predict", str(saved), "--data", data],
            rf"{REMOTE_KINDS[kind][1]}.*--trust-remote-code only if you trust it",
            capsys,
        ),
    )


@pytest.mark.parametrize("kind", list(REMOTE_KINDS))
def test_skloes_probe_refuses_own_code(remote, marker, kind, tmp_path, capsys):
    model, _ = remote[kind]
    data = tmp_path / "d.csv"
    data.write_text("text,label\n" + "a b,0\nc d,1\n" * 6)
    argv = ["probe", "--model", model, "--data", str(data), "--out", str(tmp_path)]
    _no_code_ran(
        marker,
        lambda: cli_error(argv, "skloes probe does not run a model's own code", capsys),
    )


@pytest.mark.parametrize("kind", list(REMOTE_KINDS))
def test_opting_in_at_load_runs_the_code(remote, marker, kind):
    _, saved = remote[kind]
    marker.unlink(missing_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        probe = load_probe(saved, trust_remote_code=True)
        assert probe.extractor_params == {"trust_remote_code": True}
        assert probe.predict(NEW).shape == (2,)
    if kind in ("config_auto_map", "tokenizer_auto_map"):  # code that runs
        assert marker.exists()


@pytest.mark.parametrize("kind", ["config_auto_map", "tokenizer_auto_map"])
def test_skloes_predict_with_the_option_runs(remote, marker, kind, tmp_path, capsys):
    _, saved = remote[kind]
    data = _csv(tmp_path / "new.csv", NEW)
    assert main(["predict", str(saved), "--data", data, "--trust-remote-code"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("prediction,proba_")


def test_load_probe_trust_remote_code_must_be_a_bool(remote):
    err(r"`trust_remote_code` must be True or False").check(
        lambda: load_probe(remote["config_auto_map"][1], trust_remote_code="yes")
    )


# --------------------------------------------------------------------------
# 1. Saved settings that run code or write files are never restored
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def clean(tiny_model_path, tmp_path_factory):
    """A copy of the tiny model and probes saved on it with settings that a
    loader must not inherit."""
    root = tmp_path_factory.mktemp("clean")
    model = str(root / "model")
    shutil.copytree(tiny_model_path, model)
    saver_cache = root / "saver-cache"
    out = {"model": model, "root": root, "saver_cache": saver_cache}
    classifier = _probe(
        model, extractor_params={"trust_remote_code": True}, cache=str(saver_cache)
    ).fit(TEXTS, Y)
    regressor = LayerProbeRegressor(
        model,
        device="cpu",
        selector=_first_layer(),
        extractor_params={"trust_remote_code": True},
        cache=str(saver_cache),
    ).fit(TEXTS, np.arange(12.0))
    pipeline = prune_layers(
        make_pipeline(
            HiddenStatesTransformer(
                model, device="cpu", trust_remote_code=True, cache=str(saver_cache)
            ),
            _first_layer(),
            LogisticRegression(),
        ).fit(TEXTS, Y)
    )
    for name, est in [("classifier", classifier), ("regressor", regressor)]:
        out[name] = save_probe(est, root / name)
    out["pipeline"] = save_probe(pipeline, root / "pipeline")
    shutil.rmtree(saver_cache)
    return out


SAVED = ["classifier", "regressor", "pipeline"]


def _extractor(est):
    return getattr(est, "pipeline_", est)[0]


@pytest.mark.parametrize("saved", SAVED)
def test_saved_trust_remote_code_is_not_restored(clean, saved):
    est = load_probe(clean[saved])
    assert _extractor(est).trust_remote_code is False
    if hasattr(est, "extractor_params"):
        assert not (est.extractor_params or {}).get("trust_remote_code")


@pytest.mark.parametrize("saved", SAVED)
def test_saved_cache_is_not_restored_and_not_written(clean, saved):
    est = load_probe(clean[saved])
    assert _extractor(est).cache is None
    est.predict(NEW)
    assert not clean["saver_cache"].exists()  # nothing written where the saver chose


@pytest.mark.parametrize("saved", SAVED)
def test_cache_given_at_load_is_used(clean, saved, tmp_path):
    est = load_probe(clean[saved], cache=tmp_path / "mine")
    first = est.predict(NEW)
    assert list((tmp_path / "mine").rglob("*.npy"))
    np.testing.assert_allclose(
        load_probe(clean[saved]).predict(NEW), first, rtol=1e-5, atol=1e-6
    )


def test_skloes_predict_writes_no_saved_cache(clean, tmp_path, capsys):
    data = _csv(tmp_path / "new.csv", NEW)
    assert main(["predict", str(clean["classifier"]), "--data", data]) == 0
    assert not clean["saver_cache"].exists()


# The model reference: what the manifest and the estimator say must agree,
# and the files must hash as at fit.
def _copy_saved(clean, tmp_path, name="classifier"):
    return Path(shutil.copytree(clean[name], tmp_path / "saved"))


def _edit_manifest(folder, **changes):
    _edit_json(folder / "manifest.json", **changes)
    return folder


MANIFEST_CASES = [
    ("model_elsewhere", {"model": "/elsewhere/model"}, r"inconsistent.*\bmodel\b"),
    ("model_path_elsewhere", {"model_path": "/elsewhere"}, r"inconsistent.*model_path"),
    (
        "fingerprint_other",
        {"model_fingerprint": "0" * 64},
        r"inconsistent.*fingerprint",
    ),
    ("model_hub_id", {"model": "bert-base-uncased"}, r"inconsistent.*\bmodel\b"),
    ("format_future", {"format": 99}, r"format 99.*reads format 1"),
]


@pytest.mark.parametrize(
    "changes, needle", [pytest.param(c, n, id=i) for i, c, n in MANIFEST_CASES]
)
def test_manifest_that_disagrees_with_its_estimator_is_refused(
    clean, tmp_path, changes, needle
):
    folder = _edit_manifest(_copy_saved(clean, tmp_path), **changes)
    err(needle).check(lambda: load_probe(folder))


def _model_with_code(folder):
    _remote_config(folder)


MODEL_CHANGES = {
    "auto_map_added": _model_with_code,
    "python_file_added": lambda f: (f / "helper.py").write_text("x = 1\n"),
    "tokenizer_config_edited": lambda f: _edit_json(
        f / "tokenizer_config.json", model_max_length=7
    ),
    "config_edited": lambda f: _edit_json(f / "config.json", hidden_act="relu"),
    "tokenizer_auto_map_added": _remote_tokenizer,
}


@pytest.mark.parametrize("change", list(MODEL_CHANGES))
def test_model_folder_changed_after_save_is_refused(
    tiny_model_path, tmp_path, marker, change
):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path, model)
    saved = save_probe(_probe(str(model)).fit(TEXTS, Y), tmp_path / "saved")
    MODEL_CHANGES[change](model)
    _no_code_ran(
        marker, lambda: err(r"model files .* changed").check(lambda: load_probe(saved))
    )


def test_model_gone_is_refused(tiny_model_path, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path, model)
    saved = save_probe(_probe(str(model)).fit(TEXTS, Y), tmp_path / "saved")
    shutil.rmtree(model)
    err(r"is gone").check(lambda: load_probe(saved))


# Types read by name from the archive: only skloes' estimator classes (public,
# or in modules already imported); a name never imports a module: only the
# modules the estimator packages declare are imported.
TYPE_NAMES = [
    ("lazy_torch_head", "skloes.heads._scalar_mix.ScalarMixClassifier", True),
    ("extractor", "skloes.extraction._hidden_states.HiddenStatesTransformer", True),
    ("selector", "skloes.selection._baselines.LastKSelector", True),
    ("main_module", "skloes.__main__.Anything", False),
    ("cli_function", "skloes.cli._main.main", False),
    ("a_function", "skloes.probe._persistence.save_probe", False),
    ("lookalike_package", "skloesx.probe.Thing", False),
    ("not_an_estimator", "skloes.core._contract.LayerTable", False),
    ("missing_module", "skloes.nowhere.Thing", False),
]


@pytest.mark.parametrize(
    "name, trusted", [pytest.param(n, t, id=i) for i, n, t in TYPE_NAMES]
)
def test_type_names_never_import(name, trusted, monkeypatch):
    imported = []
    real = probe_folder.importlib.import_module

    def record(module, *args):
        imported.append(module)
        return real(module, *args)

    monkeypatch.setattr(probe_folder.importlib, "import_module", record)
    probe_folder._public_estimators.cache_clear()
    assert probe_folder.is_skloes_estimator(name) is trusted
    declared = set(probe_folder.ESTIMATOR_PACKAGES)
    for package in probe_folder.ESTIMATOR_PACKAGES:  # the modules they declare
        module = sys.modules[package]
        declared |= set(getattr(module, "_LAZY", {}).values())
    assert set(imported) <= declared, imported
    assert "skloes.nowhere" not in sys.modules


def scale_pooling(hidden, mask):  # a module-level callable: stored by its name
    weights = mask.unsqueeze(-1).float()
    return (hidden * weights).sum(1) / weights.sum(1)


def test_callable_pooling_loads_only_when_trusted(tiny_model_path, tmp_path):
    pipe = prune_layers(
        make_pipeline(
            HiddenStatesTransformer(
                tiny_model_path, device="cpu", pooling=scale_pooling
            ),
            _first_layer(),
            LogisticRegression(),
        ).fit(TEXTS, Y)
    )
    saved = save_probe(pipe, tmp_path / "p")
    name = f"{__name__}.scale_pooling"
    err(r"not trusted.*scale_pooling").check(lambda: load_probe(saved))
    loaded = load_probe(saved, trusted=[name])
    np.testing.assert_array_equal(loaded.predict(NEW), pipe.predict(NEW))


# --------------------------------------------------------------------------
# 5. Damaged probe folders: one line naming the folder and the file
# --------------------------------------------------------------------------
def _zip_without(name):
    def damage(folder):
        archive = folder / "estimator.skops"
        with zipfile.ZipFile(archive) as zf:
            members = {n: zf.read(n) for n in zf.namelist() if n != name}
        with zipfile.ZipFile(archive, "w") as zf:
            for n, data in members.items():
                zf.writestr(n, data)

    return damage


def _zip_schema(text):
    def damage(folder):
        archive = folder / "estimator.skops"
        with zipfile.ZipFile(archive) as zf:
            members = {n: zf.read(n) for n in zf.namelist()}
        members["schema.json"] = text.encode()
        with zipfile.ZipFile(archive, "w") as zf:
            for n, data in members.items():
                zf.writestr(n, data)

    return damage


def _truncate(name, keep=0.5):
    def damage(folder):
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: int(len(data) * keep)])

    return damage


def _replace(name, data):
    def damage(folder):
        (folder / name).write_bytes(data)

    return damage


def _remove(name):
    def damage(folder):
        (folder / name).unlink()

    return damage


def _record(files):
    def damage(folder):
        _edit_json(folder / "manifest.json", files=files)

    return damage


def _estimator_is_a_folder(folder):
    (folder / "estimator.skops").unlink()
    (folder / "estimator.skops").mkdir()


DAMAGE = [  # (id, damage, the file the message names)
    ("skops_garbage", _replace("estimator.skops", b"not a zip"), "estimator.skops"),
    ("skops_empty", _replace("estimator.skops", b""), "estimator.skops"),
    ("skops_truncated", _truncate("estimator.skops"), "estimator.skops"),
    ("skops_no_schema", _zip_without("schema.json"), "estimator.skops"),
    ("skops_bad_schema", _zip_schema("{not json"), "estimator.skops"),
    ("skops_schema_list", _zip_schema("[1, 2]"), "estimator.skops"),
    ("skops_missing", _remove("estimator.skops"), "estimator.skops"),
    ("skops_a_folder", _estimator_is_a_folder, "estimator.skops"),
    ("manifest_not_json", _replace("manifest.json", b"{bad"), "manifest.json"),
    ("manifest_empty", _replace("manifest.json", b""), "manifest.json"),
    ("manifest_binary", _replace("manifest.json", b"\xff\xfe\x00"), "manifest.json"),
    ("manifest_a_list", _replace("manifest.json", b"[]"), "manifest.json"),
    ("manifest_truncated", _truncate("manifest.json"), "manifest.json"),
    (
        "manifest_no_fingerprint",
        lambda f: _replace("manifest.json", b'{"format": 1}')(f),
        "manifest.json",
    ),
    ("manifest_missing", _remove("manifest.json"), "manifest.json"),
    ("record_not_a_list", _record("estimator.skops"), "manifest.json"),
    ("record_escapes", _record(["../outside.txt"]), "manifest.json"),
    ("record_file_missing", _record(["estimator.skops", "model.onnx"]), "model.onnx"),
]


@pytest.fixture
def damaged(clean, tmp_path):
    def make(damage):
        folder = _copy_saved(clean, tmp_path)
        damage(folder)
        return folder

    return make


@pytest.mark.parametrize(
    "damage, file", [pytest.param(d, f, id=i) for i, d, f in DAMAGE]
)
def test_damaged_folder_is_one_line_naming_folder_and_file(damaged, damage, file):
    folder = damaged(damage)
    needle = re.escape(str(folder)) + ".*" + re.escape(file)
    err(needle).check(lambda: load_probe(folder))


@pytest.mark.parametrize(
    "damage, file", [pytest.param(d, f, id=i) for i, d, f in DAMAGE]
)
def test_skloes_predict_reports_a_damaged_folder_in_one_line(
    damaged, damage, file, capsys
):
    folder = damaged(damage)
    data = _csv(folder.parent / "new.csv", NEW)
    line = cli_error(["predict", str(folder), "--data", data], re.escape(file), capsys)
    assert str(folder) in line and "load_probe:" not in line


def test_not_a_folder_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    err(r"not a saved probe \(no such folder\)").check(
        lambda: load_probe(tmp_path / "file")
    )
    err(r"not a saved probe \(no such folder\)").check(
        lambda: load_probe(tmp_path / "missing")
    )


# --------------------------------------------------------------------------
# 2. Saving writes only its own files
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted(tiny_model_path):
    """Two fitted probes with different layers (to tell old from new)."""
    one = _probe(tiny_model_path).fit(TEXTS, Y)
    two = _probe(tiny_model_path, selector=LastKSelector(n_layers_to_select=2))
    return one, two.fit(TEXTS, Y)


def _user_files(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("mine")
    return folder


def _probe_and_user_file(folder, fitted):
    save_probe(fitted[0], folder)
    (folder / "app.py").write_text("print('my web app')")
    return folder


def _probe_and_subfolder(folder, fitted):
    save_probe(fitted[0], folder)
    (folder / "static").mkdir()
    (folder / "static" / "index.html").write_text("<html>")
    return folder


def _foreign_manifest(folder, fitted):
    folder.mkdir()
    (folder / "manifest.json").write_text('{"name": "my web app", "version": 2}')
    (folder / "index.html").write_text("<html>")
    return folder


def _foreign_manifest_only(folder, fitted):
    folder.mkdir()
    (folder / "manifest.json").write_text('{"name": "my web app"}')
    return folder


def _record_reaching_out(files):
    def setup(folder, fitted):
        save_probe(fitted[0], folder)
        (folder.parent / "outside.txt").write_text("keep me")
        _edit_json(folder / "manifest.json", files=files)
        return folder

    return setup


def _legacy_probe_and_user_file(folder, fitted):
    _legacy(save_probe(fitted[0], folder))
    (folder / "README.md").write_text("mine")
    return folder


def _a_file(folder, fitted):
    folder.write_text("x")
    return folder


def _broken_link(folder, fitted):
    folder.symlink_to(folder.parent / "nowhere")
    return folder


REFUSED_TARGETS = [  # (id, setup(folder, fitted) -> path, needle)
    (
        "user_files_only",
        lambda f, p: _user_files(f),
        r"holds no saved probe.*notes\.txt",
    ),
    ("probe_and_user_file", _probe_and_user_file, r"no save wrote \(app\.py\)"),
    ("probe_and_subfolder", _probe_and_subfolder, r"no save wrote \(static\)"),
    ("foreign_manifest", _foreign_manifest, r"holds no saved probe.*index\.html"),
    ("foreign_manifest_only", _foreign_manifest_only, r"holds no saved probe"),
    (
        "record_parent",
        _record_reaching_out(["../outside.txt"]),
        r"holds no saved probe",
    ),
    ("record_subpath", _record_reaching_out(["sub/x"]), r"holds no saved probe"),
    ("record_hidden", _record_reaching_out([".bashrc"]), r"holds no saved probe"),
    ("record_absolute", _record_reaching_out(["/etc/passwd"]), r"holds no saved probe"),
    (
        "record_not_list",
        _record_reaching_out("estimator.skops"),
        r"holds no saved probe",
    ),
    (
        "legacy_and_user_file",
        _legacy_probe_and_user_file,
        r"no save wrote \(README\.md\)",
    ),
    ("a_file", _a_file, r"is a file"),
    ("broken_link", _broken_link, r"broken symbolic link"),
]


@pytest.mark.parametrize(
    "setup, needle", [pytest.param(s, n, id=i) for i, s, n in REFUSED_TARGETS]
)
def test_save_refuses_a_folder_holding_what_it_did_not_write(
    fitted, tmp_path, setup, needle
):
    folder = setup(tmp_path / "target", fitted)
    before = snapshot(tmp_path)
    err(needle).check(lambda: save_probe(fitted[1], folder, overwrite=True))
    assert snapshot(tmp_path) == before  # nothing deleted, nothing changed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    "setup, needle", [pytest.param(s, n, id=i) for i, s, n in REFUSED_TARGETS]
)
def test_skloes_probe_save_refuses_them_before_any_work(
    fitted, tmp_path, tiny_model_path, monkeypatch, capsys, setup, needle
):
    import skloes.cli._probe

    folder = setup(tmp_path / "target", fitted)
    before = snapshot(tmp_path)

    def never(*args, **kwargs):
        raise AssertionError("the data were read before --save was checked")

    monkeypatch.setattr(skloes.cli._probe, "load_data", never)
    argv = ["probe", "--model", tiny_model_path, "--out", str(tmp_path / "out")]
    cli_error([*argv, "--save", str(folder), "--force"], needle, capsys)
    assert snapshot(tmp_path) == before


def _place(kind, tmp_path):
    """A target relative to the current folder ``tmp_path / 'work'``."""
    return {
        "dot": ".",
        "empty_string": "",
        "dot_slash": "./",
        "dotdot": "..",
        "cwd_absolute": str(tmp_path / "work"),
        "parent_absolute": str(tmp_path),
        "root": "/",
        "dot_of_subfolder": "sub/..",
    }[kind]


PLACES = [
    "dot",
    "empty_string",
    "dot_slash",
    "dotdot",
    "cwd_absolute",
    "parent_absolute",
    "root",
    "dot_of_subfolder",
]


@pytest.mark.parametrize("kind", PLACES)
def test_save_refuses_the_current_folder_and_those_above(
    fitted, tmp_path, monkeypatch, kind
):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "mine.txt").write_text("mine")
    monkeypatch.chdir(work)
    before = snapshot(tmp_path)
    err(r"current folder or one above it").check(
        lambda: save_probe(fitted[0], _place(kind, tmp_path), overwrite=True)
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "save, needle",
    [
        pytest.param("rep", r"--out folder", id="same_as_out"),
        pytest.param("rep/", r"--out folder", id="same_as_out_slash"),
        pytest.param("rep/../rep", r"--out folder", id="same_as_out_dotdot"),
        pytest.param("parent", r"--out folder", id="above_out"),
        pytest.param(".", r"current folder", id="current_folder"),
    ],
)
def test_skloes_probe_refuses_to_save_into_its_report(
    tmp_path, tiny_model_path, monkeypatch, capsys, save, needle
):
    import skloes.cli._probe

    monkeypatch.chdir(tmp_path)
    out = "parent/rep" if save == "parent" else "rep"
    for existing in ("rep", "parent/rep"):
        (tmp_path / existing).mkdir(parents=True, exist_ok=True)
        (tmp_path / existing / "selection.json").write_text("{}")
    before = snapshot(tmp_path)
    monkeypatch.setattr(skloes.cli._probe, "load_data", lambda *a, **k: 1 / 0)
    argv = ["probe", "--model", tiny_model_path, "--out", out, "--save", save]
    cli_error([*argv, "--force"], needle, capsys)
    assert snapshot(tmp_path) == before


def _reload_layers(folder):
    return load_probe(folder).selected_layers_.tolist()


ACCEPTED_TARGETS = [  # (id, setup(folder, fitted) -> path)
    ("new_folder", lambda f, p: f),
    ("new_nested_folders", lambda f, p: f / "a" / "b"),
    ("empty_folder", lambda f, p: (f.mkdir(), f)[1]),
    ("saved_probe", lambda f, p: save_probe(p[0], f)),
    ("legacy_probe", lambda f, p: _legacy(save_probe(p[0], f))),
    ("link_to_saved_probe", lambda f, p: _link(save_probe(p[0], f.parent / "real"), f)),
]


def _legacy(folder):
    """A folder as skloes 0.2 saved it: no file record, no model card."""
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["files"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "README.md").unlink()
    return folder


def _link(real, link):
    link.symlink_to(real, target_is_directory=True)
    return link


@pytest.mark.parametrize("setup", [pytest.param(s, id=i) for i, s in ACCEPTED_TARGETS])
def test_save_replaces_its_own_files_only(fitted, tmp_path, setup):
    folder = setup(tmp_path / "target", fitted)
    save_probe(fitted[1], folder, overwrite=True)
    assert _reload_layers(folder) == fitted[1].selected_layers_.tolist()
    real = Path(os.path.realpath(folder))
    manifest = json.loads((real / "manifest.json").read_text())
    assert sorted(os.listdir(real)) == sorted([*manifest["files"], "manifest.json"])
    assert not [p for p in real.parent.iterdir() if p.name.startswith(".")]


def test_save_without_overwrite_keeps_the_probe(fitted, tmp_path):
    folder = save_probe(fitted[0], tmp_path / "p")
    before = snapshot(folder)
    err(r"already holds a saved probe; pass overwrite=True").check(
        lambda: save_probe(fitted[1], folder)
    )
    assert snapshot(folder) == before


def test_saved_folder_follows_the_umask(fitted, tmp_path):
    old = os.umask(0o022)
    try:
        folder = save_probe(fitted[0], tmp_path / "p")
    finally:
        os.umask(old)
    assert os.stat(folder).st_mode & 0o777 == 0o755
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in folder.iterdir())


def test_save_on_an_unwritable_parent_is_refused(fitted, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):  # chmod cannot stop root: fake it
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(probe_folder.tempfile, "mkstemp", refuse)
    err(r"`path` .* is not writable \(Permission denied").check(
        lambda: save_probe(fitted[0], tmp_path / "p")
    )
    assert not (tmp_path / "p").exists()


# --------------------------------------------------------------------------
# 2. Atomic: a crash leaves the old probe or the new one, never half of each
# --------------------------------------------------------------------------
class Crash(BaseException):
    """Stands for a kill: not an Exception, so nothing catches it by accident."""


def _crash(*args, **kwargs):
    raise Crash


def _old_or_new(folder, fitted):
    layers = _reload_layers(folder)
    assert layers in (
        fitted[0].selected_layers_.tolist(),
        fitted[1].selected_layers_.tolist(),
    )
    return layers


CRASH_POINTS = {  # (what to patch, then the probe at the path is the old one)
    "skops_dump": (
        lambda mp: mp.setattr(_persistence, "PROBE_WRITERS", [_crash]),
        True,
    ),
    "manifest_write": (
        lambda mp: mp.setattr(probe_folder, "write_manifest", _crash),
        True,
    ),
    "load_back_check": (
        lambda mp: mp.setattr(_persistence, "_check_loads_back", _crash),
        True,
    ),
    "exchange": (lambda mp: mp.setattr(_atomic, "exchange", _crash), True),
    "removing_the_old_probe": (
        lambda mp: mp.setattr(probe_folder, "remove_saved_files", _crash),
        False,
    ),
    "fallback_move_aside": (
        lambda mp: (
            mp.setattr(_atomic, "exchange", lambda a, b: False),
            mp.setattr(_atomic.os, "rename", _rename_crashing_at(1)),
        ),
        True,
    ),
    "fallback_move_in": (
        lambda mp: (
            mp.setattr(_atomic, "exchange", lambda a, b: False),
            mp.setattr(_atomic.os, "rename", _rename_crashing_at(2)),
        ),
        True,
    ),
}


def _rename_crashing_at(n):
    rename, calls = os.rename, []

    def patched(a, b):
        calls.append((a, b))
        if len(calls) == n:
            raise Crash
        return rename(a, b)

    return patched


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_leaves_the_old_probe_or_the_new(fitted, tmp_path, monkeypatch, point):
    folder = save_probe(fitted[0], tmp_path / "p")
    patch, old = CRASH_POINTS[point]
    with monkeypatch.context() as mp:
        patch(mp)
        with pytest.raises(Crash):
            save_probe(fitted[1], folder, overwrite=True)
    layers = _old_or_new(folder, fitted)
    assert (layers == fitted[0].selected_layers_.tolist()) is old
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sorted(os.listdir(folder)) == sorted([*manifest["files"], "manifest.json"])


@pytest.mark.parametrize("point", ["skops_dump", "manifest_write", "load_back_check"])
def test_a_crash_before_the_swap_leaves_nothing_behind(
    fitted, tmp_path, monkeypatch, point
):
    with monkeypatch.context() as mp:
        CRASH_POINTS[point][0](mp)
        with pytest.raises(Crash):
            save_probe(fitted[1], tmp_path / "p")
    assert list(tmp_path.iterdir()) == []  # no probe, no staging folder


def test_the_fallback_swap_replaces_the_probe(fitted, tmp_path, monkeypatch):
    folder = save_probe(fitted[0], tmp_path / "p")
    monkeypatch.setattr(_atomic, "exchange", lambda a, b: False)
    save_probe(fitted[1], folder, overwrite=True)
    assert _reload_layers(folder) == fitted[1].selected_layers_.tolist()
    assert [p.name for p in tmp_path.iterdir()] == ["p"]


def test_a_file_that_appears_during_the_save_is_kept(fitted, tmp_path, monkeypatch):
    folder = save_probe(fitted[0], tmp_path / "p")
    check = _persistence._check_loads_back

    def user_writes_meanwhile(staging, owner):
        (folder / "late.txt").write_text("mine")
        check(staging, owner)

    monkeypatch.setattr(_persistence, "_check_loads_back", user_writes_meanwhile)
    with pytest.warns(UserWarning, match=r"appeared in .* they are kept in"):
        save_probe(fitted[1], folder, overwrite=True)
    kept = [p for p in tmp_path.rglob("late.txt")]
    assert len(kept) == 1 and kept[0].read_text() == "mine"
    assert _reload_layers(folder) == fitted[1].selected_layers_.tolist()


# --------------------------------------------------------------------------
# 3. The cache: an entry is valid only under the settings it was computed with
# --------------------------------------------------------------------------
def _hst(path, **params):
    params.setdefault("device", "cpu")
    return HiddenStatesTransformer(path, **params)


OTHER_SETTINGS = {
    "pooling": {"pooling": "max"},
    "max_length": {"max_length": 6},
    "layers": {"layers": [1, 2]},
    "dtype": {"dtype": "float16"},
    "precision": {"precision": "bfloat16"},
    "exclude_tokens": {"exclude_tokens": "special"},
}


def _entries(folder):
    return {p.stem: p for p in Path(folder).glob("*/*/*.npy")}


@pytest.mark.parametrize("setting", list(OTHER_SETTINGS))
def test_an_entry_copied_into_other_settings_is_recomputed(
    tiny_model_path, tmp_path, setting
):
    params = OTHER_SETTINGS[setting]
    cache = tmp_path / "c"
    _hst(tiny_model_path, cache=cache).fit_transform(TEXTS)
    expected = _hst(tiny_model_path, **params).fit_transform(TEXTS)
    other = _hst(tiny_model_path, cache=cache, **params).fit(TEXTS)
    root = other._store().root
    for key, entry in _entries(cache).items():  # planted by hand
        target = root / key[:2] / f"{key}.npy"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(entry, target)
    np.testing.assert_array_equal(other.transform(TEXTS), expected)
    np.testing.assert_array_equal(other.transform(TEXTS), expected)  # rewritten


def test_a_memory_mapped_output_copied_into_other_settings_is_recomputed(
    tiny_model_path, tmp_path, monkeypatch
):
    from skloes.extraction import _hidden_states

    monkeypatch.setattr(_hidden_states, "MEMMAP_MIN_BYTES", 0)
    cache = tmp_path / "c"
    first = _hst(tiny_model_path, cache=cache).fit(TEXTS)
    first.transform(TEXTS)
    expected = _hst(tiny_model_path, pooling="max").fit_transform(TEXTS)
    other = _hst(tiny_model_path, cache=cache, pooling="max").fit(TEXTS)
    source = first._store().output_path([])
    target = other._store().output_path([])
    for output in source.parent.glob("*.npy"):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(output, target.parent / output.name)
    np.testing.assert_array_equal(np.asarray(other.transform(TEXTS)), expected)


def test_an_entry_of_an_older_skloes_is_recomputed(tiny_model_path, tmp_path):
    from skloes.core import _cache

    cache = tmp_path / "c"
    expected = _hst(tiny_model_path, cache=cache).fit_transform(TEXTS)
    for key, entry in _entries(cache).items():  # 0.2's trailer: key, no settings
        body = entry.read_bytes()[:-20]
        entry.write_bytes(body + _cache._trailer(key, body))
    hst = _hst(tiny_model_path, cache=cache).fit(TEXTS)
    assert all(hst._store().read(key) is None for key in _entries(cache))
    np.testing.assert_array_equal(hst.transform(TEXTS), expected)


# Settings changed after the model loaded: they take effect (a reload) ...
TAKE_EFFECT = {  # (the setting at fit, the setting after the load)
    "precision_int8": ({}, {"precision": "int8"}),
    "precision_bfloat16": ({}, {"precision": "bfloat16"}),
    "precision_back_to_float32": ({"precision": "int8"}, {"precision": "float32"}),
    "dtype_float16": ({}, {"dtype": "float16"}),
    "device_auto_to_cpu": ({"device": "auto"}, {"device": "cpu"}),
    "batch_size": ({}, {"batch_size": 1}),
    "max_batch_tokens": ({}, {"max_batch_tokens": 8}),
}


@pytest.mark.parametrize("with_cache", [False, True], ids=["no_cache", "cache"])
@pytest.mark.parametrize("setting", list(TAKE_EFFECT))
def test_a_setting_changed_after_load_takes_effect(
    tiny_model_path, tmp_path, setting, with_cache
):
    before, params = TAKE_EFFECT[setting]
    cache = tmp_path / "c" if with_cache else None
    hst = _hst(tiny_model_path, cache=cache, **before).fit(TEXTS)
    hst.transform(TEXTS)
    assert hst._model is not None  # loaded
    hst.set_params(**params)
    expected = _hst(tiny_model_path, **params).fit_transform(TEXTS)
    np.testing.assert_allclose(hst.transform(TEXTS), expected, rtol=1e-6, atol=1e-6)
    if with_cache:  # what a correctly built extractor reads back is right
        fresh = _hst(tiny_model_path, cache=cache, **params).fit(TEXTS)
        np.testing.assert_allclose(
            fresh.transform(TEXTS), expected, rtol=1e-6, atol=1e-6
        )


def test_trust_remote_code_switched_off_after_load_is_honoured(remote, marker):
    model, _ = remote["config_auto_map"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        hst = _hst(model, trust_remote_code=True).fit(TEXTS)
        hst.transform(TEXTS)
    hst.set_params(trust_remote_code=False)
    _no_code_ran(
        marker, lambda: err(r"trust_remote_code").check(lambda: hst.transform(NEW))
    )


def test_precision_changed_on_an_unpickled_extractor_takes_effect(tiny_model_path):
    import pickle

    hst = _hst(tiny_model_path).fit(TEXTS)
    hst.transform(TEXTS)
    back = pickle.loads(pickle.dumps(hst))
    back.set_params(precision="int8")
    expected = _hst(tiny_model_path, precision="int8").fit_transform(TEXTS)
    np.testing.assert_array_equal(back.transform(TEXTS), expected)


# ... or are refused until the next fit, naming the parameter.
FIXED = {
    "model": {"model": "/another/model"},
    "pooling": {"pooling": "max"},
    "exclude_tokens": {"exclude_tokens": "special"},
    "layers": {"layers": [1]},
    "layers_mask": {"layers": [True, False, True]},
    "max_length": {"max_length": 6},
}


@pytest.mark.parametrize("setting", list(FIXED))
def test_a_setting_fixed_at_fit_is_refused_after_fit(
    tiny_model_path, tmp_path, setting
):
    params = FIXED[setting]
    cache = tmp_path / "c"
    hst = _hst(tiny_model_path, cache=cache).fit(TEXTS)
    hst.transform(TEXTS)
    written = snapshot(cache)
    hst.set_params(**params)
    name = next(iter(params))
    err(rf"`{name}` is .* but was .* at fit.*set `{name}` back").check(
        lambda: hst.transform(NEW)
    )
    assert snapshot(cache) == written  # nothing filed under any key
    if setting != "model":  # the next fit takes it
        assert hst.fit(TEXTS).transform(NEW).shape[1] == 2


PROBE_FIXED = {
    "max_length": ({"max_length": 6}, r"`max_length`"),
    "pooling": ({"pooling": "max"}, r"`pooling`"),
    "model": ({"model": "/another/model"}, r"`model`"),
    "exclude_tokens": (
        {"extractor_params": {"exclude_tokens": "special"}},
        r"`extractor_params\['exclude_tokens'\]`",
    ),
}


@pytest.mark.parametrize("setting", list(PROBE_FIXED))
def test_a_probe_refuses_a_setting_fixed_at_fit(tiny_model_path, setting):
    params, needle = PROBE_FIXED[setting]
    probe = _probe(tiny_model_path).fit(TEXTS, Y)
    probe.set_params(**params)
    err(rf"LayerProbeClassifier: {needle} is .* at fit").check(
        lambda: probe.predict(NEW)
    )


PROBE_TAKE_EFFECT = {
    "precision": {"extractor_params": {"precision": "int8"}},
    "dtype": {"extractor_params": {"dtype": "float16"}},
    "batch_size": {"batch_size": 1},
    "device": {"device": "auto"},
}


@pytest.mark.parametrize("setting", list(PROBE_TAKE_EFFECT))
def test_a_probe_honours_a_setting_changed_after_fit(tiny_model_path, setting):
    params = PROBE_TAKE_EFFECT[setting]
    probe = _probe(tiny_model_path).fit(TEXTS, Y)
    probe.predict(NEW)
    probe.set_params(**params)
    assert probe.predict(NEW).shape == (2,)  # gives the extractor the settings
    features = probe.pipeline_[0].transform(NEW)
    expected = _hst(
        tiny_model_path,
        max_length=128,
        layers=probe.selected_layers_.tolist(),
        **params.get("extractor_params", {}),
    ).fit_transform(NEW)
    np.testing.assert_allclose(features, expected, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------
# 6. Shared homes: prepared folders as readable as the umask says
# --------------------------------------------------------------------------
def _staged(home, mode=0o600):
    """A staging folder as a preparation leaves it: mkdtemp's 0700, and
    files written through mkstemp (model.safetensors) at 0600."""
    from skloes.models import _registry

    target = home / "gguf" / "tiny-0123456789abcdef"
    tmp = _registry._staging(target)
    empty_weights = (2).to_bytes(8, "little") + b"{}"  # a valid safetensors
    for name, data in [
        ("model.safetensors", empty_weights),
        ("config.json", b"{}"),
        ("tokenizer.json", b"{}"),
    ]:
        (tmp / name).write_bytes(data)
        os.chmod(tmp / name, mode)
    (tmp / "sub").mkdir()
    (tmp / "sub" / "extra.json").write_bytes(b"{}")
    os.chmod(tmp / "sub" / "extra.json", mode)
    return _registry, tmp, target


def _modes(folder):
    return {
        p.relative_to(folder).as_posix(): p.stat().st_mode & 0o777
        for p in [folder, *folder.rglob("*")]
    }


@pytest.mark.parametrize(
    "umask, folder_mode, file_mode",
    [
        pytest.param(0o022, 0o755, 0o644, id="umask_022"),
        pytest.param(0o002, 0o775, 0o664, id="umask_002_group_writes"),
        pytest.param(0o027, 0o750, 0o640, id="umask_027_group_reads"),
        pytest.param(0o077, 0o700, 0o600, id="umask_077_private"),
    ],
)
def test_prepared_files_follow_the_umask(
    tmp_path, monkeypatch, umask, folder_mode, file_mode
):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path))
    old = os.umask(umask)
    try:
        registry, tmp, target = _staged(tmp_path)
        registry._publish(tmp, target, {"gguf": "tiny.gguf"})
    finally:
        os.umask(old)
    for name, mode in _modes(target).items():
        is_dir = (target / name).is_dir() if name != "." else True
        assert mode == (folder_mode if is_dir else file_mode), (name, oct(mode))


def test_a_folder_prepared_before_is_widened_by_its_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path))
    registry, tmp, target = _staged(tmp_path)
    registry._publish(tmp, target, {"gguf": "tiny.gguf"})
    for path in [target, *target.rglob("*")]:  # as skloes 0.2 left it
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    old = os.umask(0o022)
    try:
        assert registry._ready(target, "skloes")
    finally:
        os.umask(old)
    assert (target / "model.safetensors").stat().st_mode & 0o777 == 0o644
    assert target.stat().st_mode & 0o777 == 0o755


# --------------------------------------------------------------------------
# 3. A memory= folder: no pickle from a folder we did not write
# --------------------------------------------------------------------------
MEMORY_STACK = np.random.RandomState(7).randn(6, 40, 5)
MEMORY_Y = np.arange(40) % 2


class Planted:
    """A pickle that writes the marker when anything unpickles it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('unpickled')",))


def _loes(memory, k=3, **params):
    from skloes import LOESSelector

    memory = None if memory is None else str(memory)
    return LOESSelector(n_layers_to_select=k, memory=memory, random_state=0, **params)


def _stored(folder, prefix):
    return sorted(Path(folder).rglob(f"skloes_loes/*/{prefix}*.npz"))


def _state_naming(name):  # a well-formed state that names another class
    import io

    tree = {"format": 1, "root": {"o": name, "state": {}}}
    buffer = io.BytesIO()
    np.savez(
        buffer, **{"state.json": np.frombuffer(json.dumps(tree).encode(), np.uint8)}
    )
    return buffer.getvalue()


def _object_array_npz():
    import io

    buffer = io.BytesIO()
    np.savez(buffer, **{"state.json": np.array([Planted("/nowhere")], dtype=object)})
    return buffer.getvalue()


PLANTED_RESULTS = {  # what a hostile or careless writer puts in the folder
    "pickle_that_runs_code": lambda m, good: __import__("pickle").dumps(Planted(m)),
    "object_array_in_npz": lambda m, good: _object_array_npz(),
    "state_naming_os_system": lambda m, good: _state_naming("posix.system"),
    "state_naming_a_skloes_estimator": lambda m, good: _state_naming(
        "skloes.selection._loes._estimators.LOESSelector"
    ),
    "truncated": lambda m, good: good[: len(good) // 2],
    "empty": lambda m, good: b"",
    "garbage": lambda m, good: np.random.RandomState(0).bytes(len(good)),
}


@pytest.mark.parametrize("prefix", ["run-", "prepared"])
@pytest.mark.parametrize("plant", list(PLANTED_RESULTS))
def test_memory_results_never_run_code(tmp_path, marker, plant, prefix):
    k = 3 if prefix == "run-" else 5  # 5: the 3-path cannot serve it
    expected = _loes(None, k).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    _loes(tmp_path).fit(MEMORY_STACK, MEMORY_Y)
    stored = _stored(tmp_path, prefix)
    assert stored
    for file in stored:
        file.write_bytes(PLANTED_RESULTS[plant](marker, file.read_bytes()))

    def fit():
        est = _loes(tmp_path, k).fit(MEMORY_STACK, MEMORY_Y)
        np.testing.assert_array_equal(est.selection_order_, expected)

    _no_code_ran(
        marker,
        lambda: warns(r"`memory`.*could not be read.*computed again").check(fit),
    )


def test_memory_never_reads_joblibs_pickles(tmp_path, marker):
    """Paths cached by 0.2 through joblib sit in <memory>/joblib/: unread."""
    expected = _loes(None).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    import joblib

    old = joblib.Memory(tmp_path, verbose=0).cache(lambda x: x)
    old(1)  # joblib's own layout, with an output.pkl
    for output in tmp_path.rglob("output.pkl"):
        output.write_bytes(__import__("pickle").dumps(Planted(marker)))
    assert list(tmp_path.rglob("output.pkl"))
    _no_code_ran(
        marker,
        lambda: np.testing.assert_array_equal(
            _loes(tmp_path).fit(MEMORY_STACK, MEMORY_Y).selection_order_, expected
        ),
    )


def test_a_memory_result_copied_from_other_inputs_is_not_served(tmp_path):
    other_stack = np.random.RandomState(8).randn(6, 40, 5)
    expected = _loes(None).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    _loes(tmp_path / "a").fit(other_stack, MEMORY_Y)
    _loes(tmp_path / "b").fit(MEMORY_STACK, MEMORY_Y)
    for source, target in zip(
        _stored(tmp_path / "a", "run-"), _stored(tmp_path / "b", "run-"), strict=True
    ):
        shutil.copy(source, target)  # the other inputs' path, under this key
    warns(
        r"`memory`.*belongs to other inputs",
        lambda est: np.testing.assert_array_equal(est.selection_order_, expected),
    ).check(lambda: _loes(tmp_path / "b").fit(MEMORY_STACK, MEMORY_Y))


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="robust"),
        pytest.param({"variant": "reference"}, id="reference"),
        pytest.param({"task": "label_free"}, id="label_free"),
        pytest.param({"task": "regression"}, id="regression"),
    ],
)
def test_memory_round_trip_gives_the_selection_of_no_memory(tmp_path, params):
    y = MEMORY_Y.astype(float) if params.get("task") == "regression" else MEMORY_Y
    y = None if params.get("task") == "label_free" else y
    plain = _loes(None, 3, **params).fit(MEMORY_STACK, y)
    for _ in range(2):  # written, then read back
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            est = _loes(tmp_path, 3, **params).fit(MEMORY_STACK, y)
        np.testing.assert_array_equal(est.selection_order_, plain.selection_order_)
        for key, value in est.scores_.items():
            np.testing.assert_array_equal(value, plain.scores_[key])
    assert not list(tmp_path.rglob("*.pkl"))


# The codec itself: builtins, arrays and the classes given, nothing else.
class _Node:
    pass


def _nested():
    shared = np.arange(6.0).reshape(2, 3)
    node = _Node()
    node.values, node.same, node.kind = shared, shared, _Node
    node.table = {1: "one", (2, 3): [np.float32(1.5), np.int64(7), np.bool_(True)]}
    node.inner = _Node()
    node.inner.parent_values = shared
    node.flags = (None, True, float("nan"), -0.0, float("inf"))
    return node


def test_safe_state_keeps_object_arrays_of_plain_values():
    """Class labels from a pandas column are an object array: kept as values."""
    from skloes.core._safe_state import dumps_state, loads_state

    labels = np.array(["fresh", 2, None, True, 1.5, np.str_("x")], dtype=object)
    grid = labels.reshape(2, 3)
    back = loads_state(dumps_state({"y": labels, "grid": grid}, []), [])
    assert back["y"].dtype == object and back["grid"].shape == (2, 3)
    assert back["y"].tolist() == ["fresh", 2, None, True, 1.5, "x"]
    assert [type(v) for v in back["y"]] == [str, int, type(None), bool, float, str]


def test_safe_state_round_trip_keeps_values_types_and_identities():
    from skloes.core._safe_state import dumps_state, loads_state

    back = loads_state(dumps_state(_nested(), [_Node]), [_Node])
    assert isinstance(back, _Node) and back.kind is _Node
    np.testing.assert_array_equal(back.values, np.arange(6.0).reshape(2, 3))
    assert back.values is back.same is back.inner.parent_values
    assert back.table[1] == "one"
    items = back.table[(2, 3)]
    assert [type(v) for v in items] == [np.float32, np.int64, np.bool_]
    assert back.flags[:2] == (None, True) and np.isnan(back.flags[2])
    assert str(back.flags[3]) == "-0.0" and back.flags[4] == float("inf")


SAFE_STATE_REFUSALS = [
    (
        "class_not_given",
        lambda d, l: l(d(_nested(), [_Node]), []),
        r"may not be constructed",
    ),
    (
        "pickle_bytes",
        lambda d, l: l(__import__("pickle").dumps({"a": 1}), [_Node]),
        r"not a saved state",
    ),
    (
        "object_array",
        lambda d, l: l(_object_array_npz(), [_Node]),
        r"not a saved state",
    ),
    ("empty", lambda d, l: l(b"", [_Node]), r"not a saved state"),
    (
        "truncated",
        lambda d, l: l(d(_nested(), [_Node])[:100], [_Node]),
        r"not a saved state",
    ),
    (
        "names_a_builtin",
        lambda d, l: l(_state_naming("builtins.exec"), [_Node]),
        r"may not be constructed",
    ),
    (
        "dump_unknown_object",
        lambda d, l: d(object(), [_Node]),
        r"cannot be saved as a state",
    ),
    (
        "dump_object_array",
        lambda d, l: d(np.array([1, {"a": 1}], dtype=object), []),
        r"array holding a dict cannot be saved",
    ),
    (
        "dump_unknown_class_ref",
        lambda d, l: d(dict, []),
        r"class builtins\.dict cannot be saved",
    ),
]


@pytest.mark.parametrize(
    "run, needle", [pytest.param(r, n, id=i) for i, r, n in SAFE_STATE_REFUSALS]
)
def test_safe_state_refuses_what_it_did_not_write(run, needle):
    from skloes.core._safe_state import dumps_state, loads_state

    err(needle).check(lambda: run(dumps_state, loads_state))


# --------------------------------------------------------------------------
# The same rules on the real MiniLM and real texts
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_texts(rotten_tomatoes_small):
    X, y = rotten_tomatoes_small
    return list(X[:40]), np.asarray(y[:40])


def test_minilm_int8_set_after_load_is_computed_in_int8(
    minilm_path, real_texts, tmp_path
):
    """The issue's case: int8 set after the model loaded was computed in
    float32 and cached under the int8 key (a max difference of 0.131)."""
    texts = real_texts[0][:16]
    cache = tmp_path / "c"
    hst = _hst(minilm_path, max_length=32, cache=cache).fit(texts)
    float32 = hst.transform(texts)
    hst.set_params(precision="int8")
    changed = hst.transform(texts)
    fresh = _hst(minilm_path, max_length=32, precision="int8").fit_transform(texts)
    np.testing.assert_allclose(changed, fresh, rtol=1e-5, atol=1e-5)
    assert np.abs(changed - float32).max() > 1e-3  # int8 moves the features
    reader = _hst(minilm_path, max_length=32, cache=cache, precision="int8").fit(texts)
    np.testing.assert_allclose(reader.transform(texts), fresh, rtol=1e-5, atol=1e-5)


def test_minilm_probe_saved_and_loaded_under_the_rules(
    minilm_path, real_texts, tmp_path
):
    texts, y = real_texts
    probe = _probe(
        minilm_path,
        max_length=32,
        extractor_params={"trust_remote_code": True},
        cache=str(tmp_path / "saver-cache"),
    ).fit(texts[:30], y[:30])
    expected = probe.predict_proba(texts[30:])
    folder = save_probe(probe, tmp_path / "probe")
    (folder / "notes.txt").write_text("mine")
    err(r"no save wrote \(notes\.txt\)").check(
        lambda: save_probe(probe, folder, overwrite=True)
    )
    assert (folder / "notes.txt").read_text() == "mine"
    shutil.rmtree(tmp_path / "saver-cache")
    loaded = load_probe(folder)
    assert loaded.pipeline_[0].trust_remote_code is False and loaded.cache is None
    np.testing.assert_allclose(loaded.predict_proba(texts[30:]), expected, atol=1e-6)
    assert not (tmp_path / "saver-cache").exists()


# --------------------------------------------------------------------------
# The parameters of save_probe and load_probe themselves
# --------------------------------------------------------------------------
CALL_CASES = [
    ("save_path_none", lambda p, f: save_probe(p, None), r"`path` must be a folder"),
    ("save_path_int", lambda p, f: save_probe(p, 3), r"`path` must be a folder"),
    (
        "save_overwrite_str",
        lambda p, f: save_probe(p, f, overwrite="yes"),
        r"`overwrite` must be True or False",
    ),
    (
        "save_overwrite_int",
        lambda p, f: save_probe(p, f, overwrite=1),
        r"`overwrite` must be True or False",
    ),
    (
        "save_unfitted",
        lambda p, f: save_probe(LayerProbeClassifier(), f),
        r"`estimator` must be a fitted",
    ),
    ("save_path_nul", lambda p, f: save_probe(p, "a\x00b"), r"`path` holds a NUL"),
    ("load_path_none", lambda p, f: load_probe(None), r"`path` must be a folder"),
    ("load_path_nul", lambda p, f: load_probe("a\x00b"), r"`path` holds a NUL"),
    (
        "load_trusted_str",
        lambda p, f: load_probe(f, trusted="torch.device"),
        r"`trusted` must be a list",
    ),
    (
        "load_trusted_ints",
        lambda p, f: load_probe(f, trusted=[1]),
        r"`trusted` must be a list",
    ),
    (
        "load_cache_int",
        lambda p, f: load_probe(f, cache=123),
        r"`cache` must be a folder",
    ),
    (
        "load_trust_int",
        lambda p, f: load_probe(f, trust_remote_code=1),
        r"`trust_remote_code` must be True or False",
    ),
]


@pytest.mark.parametrize(
    "call, needle", [pytest.param(c, n, id=i) for i, c, n in CALL_CASES]
)
def test_save_and_load_parameters(fitted, tmp_path, call, needle):
    folder = save_probe(fitted[0], tmp_path / "p")
    before = snapshot(tmp_path)
    err(needle).check(lambda: call(fitted[1], folder))
    assert snapshot(tmp_path) == before


def test_memory_takes_a_pathlib_folder(tmp_path):
    expected = _loes(None).fit(MEMORY_STACK, MEMORY_Y).selection_order_
    from skloes import LOESSelector

    est = LOESSelector(n_layers_to_select=3, memory=tmp_path, random_state=0)
    np.testing.assert_array_equal(
        est.fit(MEMORY_STACK, MEMORY_Y).selection_order_, expected
    )
    assert _stored(tmp_path, "run-")


@pytest.mark.parametrize("device", ["meta", "xpu", "hpu:0"])
def test_devices_that_cannot_compute_are_refused_at_fit(tiny_model_path, device):
    try:
        torch.device(device)
    except RuntimeError:
        pytest.skip(f"torch does not know {device!r}")
    err(rf"`device`='{device}'").check(
        lambda: HiddenStatesTransformer(tiny_model_path, device=device).fit(TEXTS)
    )
