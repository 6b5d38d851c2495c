"""save_probe and ``skloes probe --save``: the targets a save refuses or takes
(a folder holding files no save wrote, the current folder, the report's
folder), what a save replaces, crashes at every stage (the old probe or the
new, never half of each), and what can never be loaded back.

Outcomes (``tests/_support/outcomes.py``): ``err`` (one line naming what is
wrong), ``warns`` (a warning, then a result), ``ok`` (a correct result).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("skops")
pytest.importorskip("transformers")

from _support.outcomes import cli_error, err, ok, snapshot  # noqa: E402
from _support.remote_models import edit_json  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402

from skloes import HiddenStatesTransformer, probe_folder  # noqa: E402
from skloes.core import _atomic  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerProbeClassifier,
    _persistence,
    load_probe,
    prune_layers,
    save_probe,
)
from skloes.selection import LastKSelector  # noqa: E402


# --------------------------------------------------------------------------
# Targets: a save writes only its own files, never where it should not
# --------------------------------------------------------------------------
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
        edit_json(folder / "manifest.json", files=files)
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
# Atomic: a crash leaves the old probe or the new one, never half of each
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
# The parameters of save_probe itself (load_probe's: test_loading.py)
# --------------------------------------------------------------------------
SAVE_CALL_CASES = [
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
]


@pytest.mark.parametrize(
    "call, needle", [pytest.param(c, n, id=i) for i, c, n in SAVE_CALL_CASES]
)
def test_save_parameters(fitted, tmp_path, call, needle):
    folder = save_probe(fitted[0], tmp_path / "p")
    before = snapshot(tmp_path)
    err(needle).check(lambda: call(fitted[1], folder))
    assert snapshot(tmp_path) == before


PROBE_TEXTS = ["a good movie", "a dull plot", "fun", "the story was great"] * 3
Y = [1, 0, 1, 0] * 3


def _first_layer():
    return LastKSelector(n_layers_to_select=1)


def _hst(path, **params):
    params.setdefault("device", "cpu")
    return HiddenStatesTransformer(path, **params)


# --------------------------------------------------------------------------
# A save that could never load back is an error at save, naming the object
# --------------------------------------------------------------------------
def _outer():
    def inner(x):
        return x

    return inner


def identity(x):  # a module-level function: it loads back (with trusted=)
    return x


ROUND_TRIP = [
    (
        "lambda_step",
        lambda: FunctionTransformer(lambda x: x),
        err(r"holds .*<lambda>.*cannot be loaded back"),
    ),
    (
        "nested_function_step",
        lambda: FunctionTransformer(_outer()),
        err(r"holds .*inner.*cannot be loaded back"),
    ),
    (
        "partial_of_a_lambda",
        lambda: FunctionTransformer(functools.partial(lambda x, y: x, y=1)),
        err(r"cannot be loaded back|does not load back"),
    ),
    ("module_function_step", lambda: FunctionTransformer(identity), ok()),
]


@pytest.mark.parametrize(
    "make, outcome", [pytest.param(m, o, id=i) for i, m, o in ROUND_TRIP]
)
def test_a_pipeline_that_cannot_load_back_is_an_error_at_save(
    tiny_model_path, tmp_path, make, outcome
):
    pipe = prune_layers(
        make_pipeline(
            _hst(tiny_model_path), _first_layer(), make(), LogisticRegression()
        ).fit(PROBE_TEXTS, Y)
    )
    outcome.check(lambda: save_probe(pipe, tmp_path / "p"))
    if isinstance(outcome, err):
        assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_lambda_pooling_is_an_error_at_save(tiny_model_path, tmp_path):
    pooling = lambda hidden, mask: hidden.mean(1)  # noqa: E731
    pipe = prune_layers(
        make_pipeline(
            _hst(tiny_model_path, pooling=pooling), _first_layer(), LogisticRegression()
        ).fit(PROBE_TEXTS, Y)
    )
    err(r"<lambda>.*cannot be loaded back").check(
        lambda: save_probe(pipe, tmp_path / "p")
    )


def test_a_probe_whose_estimator_holds_a_lambda_is_an_error_at_save(
    tiny_model_path, tmp_path
):
    head = make_pipeline(FunctionTransformer(lambda x: x), LogisticRegression())
    probe = LayerProbeClassifier(
        tiny_model_path, device="cpu", selector=_first_layer(), estimator=head
    ).fit(PROBE_TEXTS, Y)
    err(r"<lambda>").check(lambda: save_probe(probe, tmp_path / "p"))
