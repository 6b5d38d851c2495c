"""load_probe and ``skloes predict``: saved settings never restored (remote
code, cache), manifests that disagree with their estimator, models changed or
gone since the save, type names never imported, damaged folders (one line
naming the folder and the file), and the parameters of load_probe.
"""

from __future__ import annotations

import re
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from _support.probes import torch_or_skip

torch = torch_or_skip()

from _support.outcomes import cli_error, err, snapshot  # noqa: E402
from _support.probes import first_layer, tiny_probe  # noqa: E402
from _support.remote_models import (  # noqa: E402
    edit_json,
    no_code_ran,
    remote_config,
    remote_tokenizer,
)
from _support.texts import PROBE_NEW, PROBE_TEXTS, PROBE_Y  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from skloes import HiddenStatesTransformer, probe_folder  # noqa: E402
from skloes.cli import main  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerProbeRegressor,
    load_probe,
    prune_layers,
    save_probe,
)


def _csv(path, texts):
    path.write_text("text\n" + "".join(f"{t}\n" for t in texts), encoding="utf-8")
    return str(path)


def test_load_probe_trust_remote_code_must_be_a_bool(remote):
    err(r"`trust_remote_code` must be True or False").check(
        lambda: load_probe(remote["config_auto_map"][1], trust_remote_code="yes")
    )


# --------------------------------------------------------------------------
# Saved settings that run code or write files are never restored
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
    classifier = tiny_probe(
        model, extractor_params={"trust_remote_code": True}, cache=str(saver_cache)
    ).fit(PROBE_TEXTS, PROBE_Y)
    regressor = LayerProbeRegressor(
        model,
        device="cpu",
        selector=first_layer(),
        extractor_params={"trust_remote_code": True},
        cache=str(saver_cache),
    ).fit(PROBE_TEXTS, np.arange(12.0))
    pipeline = prune_layers(
        make_pipeline(
            HiddenStatesTransformer(
                model, device="cpu", trust_remote_code=True, cache=str(saver_cache)
            ),
            first_layer(),
            LogisticRegression(),
        ).fit(PROBE_TEXTS, PROBE_Y)
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
    est.predict(PROBE_NEW)
    assert not clean["saver_cache"].exists()  # nothing written where the saver chose


@pytest.mark.parametrize("saved", SAVED)
def test_cache_given_at_load_is_used(clean, saved, tmp_path):
    est = load_probe(clean[saved], cache=tmp_path / "mine")
    first = est.predict(PROBE_NEW)
    assert list((tmp_path / "mine").rglob("*.npy"))
    np.testing.assert_allclose(
        load_probe(clean[saved]).predict(PROBE_NEW), first, rtol=1e-5, atol=1e-6
    )


def test_skloes_predict_writes_no_saved_cache(clean, tmp_path, capsys):
    data = _csv(tmp_path / "new.csv", PROBE_NEW)
    assert main(["predict", str(clean["classifier"]), "--data", data]) == 0
    assert not clean["saver_cache"].exists()


# The model reference: what the manifest and the estimator say must agree,
# and the files must hash as at fit.
def _copy_saved(clean, tmp_path, name="classifier"):
    return Path(shutil.copytree(clean[name], tmp_path / "saved"))


def _edit_manifest(folder, **changes):
    edit_json(folder / "manifest.json", **changes)
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
    remote_config(folder)


MODEL_CHANGES = {
    "auto_map_added": _model_with_code,
    "python_file_added": lambda f: (f / "helper.py").write_text("x = 1\n"),
    "tokenizer_config_edited": lambda f: edit_json(
        f / "tokenizer_config.json", model_max_length=7
    ),
    "config_edited": lambda f: edit_json(f / "config.json", hidden_act="relu"),
    "tokenizer_auto_map_added": remote_tokenizer,
}


@pytest.mark.parametrize("change", list(MODEL_CHANGES))
def test_model_folder_changed_after_save_is_refused(
    tiny_model_path, tmp_path, marker, change
):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path, model)
    saved = save_probe(
        tiny_probe(str(model)).fit(PROBE_TEXTS, PROBE_Y), tmp_path / "saved"
    )
    MODEL_CHANGES[change](model)
    no_code_ran(
        marker, lambda: err(r"model files .* changed").check(lambda: load_probe(saved))
    )


def test_model_gone_is_refused(tiny_model_path, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path, model)
    saved = save_probe(
        tiny_probe(str(model)).fit(PROBE_TEXTS, PROBE_Y), tmp_path / "saved"
    )
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
    probe_folder._lazy_estimators.cache_clear()
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
            first_layer(),
            LogisticRegression(),
        ).fit(PROBE_TEXTS, PROBE_Y)
    )
    saved = save_probe(pipe, tmp_path / "p")
    name = f"{__name__}.scale_pooling"
    err(r"not trusted.*scale_pooling").check(lambda: load_probe(saved))
    loaded = load_probe(saved, trusted=[name])
    np.testing.assert_array_equal(loaded.predict(PROBE_NEW), pipe.predict(PROBE_NEW))


# --------------------------------------------------------------------------
# Damaged probe folders: one line naming the folder and the file
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
        edit_json(folder / "manifest.json", files=files)

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
    data = _csv(folder.parent / "new.csv", PROBE_NEW)
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


def test_minilm_probe_saved_and_loaded_under_the_rules(
    minilm_path, real_texts, tmp_path
):
    texts, y = real_texts
    probe = tiny_probe(
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
# The parameters of load_probe itself (save_probe's: test_saving.py)
# --------------------------------------------------------------------------
LOAD_CALL_CASES = [
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
    "call, needle", [pytest.param(c, n, id=i) for i, c, n in LOAD_CALL_CASES]
)
def test_load_parameters(fitted, tmp_path, call, needle):
    folder = save_probe(fitted[0], tmp_path / "p")
    before = snapshot(tmp_path)
    err(needle).check(lambda: call(fitted[1], folder))
    assert snapshot(tmp_path) == before
