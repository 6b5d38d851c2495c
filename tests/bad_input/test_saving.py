"""save_probe and ``skloes probe --save``: the targets a save refuses or takes
(a folder holding files no save wrote, the current folder, the report's
folder), what a save replaces, crashes at every stage (the old probe or the
new, never half of each), and what can never be loaded back.

New in issue 34 (the section at the end): the model card (edited, emptied,
a link, a folder, deleted, edited while the save runs), odd targets (inside
a saved probe, a file of one, link loops, links to user folders and files,
a report folder, the same folder written other ways), two writers
(interleaved deterministically, and one real two-process race), a full disk
at each stage of save_probe and of ``skloes probe --save``, and numpy flags.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from _support.probes import torch_or_skip

torch = torch_or_skip()

from _support.outcomes import cases, cli_error, err, ok, snapshot  # noqa: E402
from _support.probes import first_layer  # noqa: E402
from _support.remote_models import edit_json  # noqa: E402
from _support.texts import PROBE_TEXTS, PROBE_Y  # noqa: E402
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


# --------------------------------------------------------------------------
# Targets: a save writes only its own files, never where it should not
# --------------------------------------------------------------------------
def _user_files(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("mine")
    return folder


def _saved_then_written(name, text):
    """A setup: save the first probe in ``folder``, then write ``text`` to
    its file ``name``."""

    def setup(folder, fitted):
        save_probe(fitted[0], folder)
        (folder / name).write_text(text)
        return folder

    return setup


_probe_and_user_file = _saved_then_written("app.py", "print('my web app')")


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


@pytest.mark.parametrize("setup, needle", cases(REFUSED_TARGETS))
def test_save_refuses_a_folder_holding_what_it_did_not_write(
    fitted, tmp_path, setup, needle
):
    folder = setup(tmp_path / "target", fitted)
    before = snapshot(tmp_path)
    err(needle).check(lambda: save_probe(fitted[1], folder, overwrite=True))
    assert snapshot(tmp_path) == before  # nothing deleted, nothing changed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("setup, needle", cases(REFUSED_TARGETS))
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


@pytest.mark.parametrize("setup", cases(ACCEPTED_TARGETS))
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

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", refuse)
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


def _resave_writing_just_before_the_swap(fitted, folder, monkeypatch, name, text):
    """Save ``fitted[1]`` over ``folder``; the user writes ``text`` to its
    file ``name`` just before the swap (after the save's last look)."""
    exchange = _atomic.exchange

    def user_writes_meanwhile(a, b):
        (folder / name).write_text(text)
        return exchange(a, b)

    monkeypatch.setattr(_atomic, "exchange", user_writes_meanwhile)
    save_probe(fitted[1], folder, overwrite=True)


def test_a_file_that_appears_during_the_save_is_kept(fitted, tmp_path, monkeypatch):
    """A file that appears after the save's last look at the folder (under
    its lock, just before the swap) is kept aside, and the save says where;
    one that appears before that look stops the save (test_a_file_that_
    appears_before_the_swap_stops_the_save)."""
    folder = save_probe(fitted[0], tmp_path / "p")
    with pytest.warns(UserWarning, match=r"appeared in .* they are kept in"):
        _resave_writing_just_before_the_swap(
            fitted, folder, monkeypatch, "late.txt", "mine"
        )
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


@pytest.mark.parametrize("call, needle", cases(SAVE_CALL_CASES))
def test_save_parameters(fitted, tmp_path, call, needle):
    folder = save_probe(fitted[0], tmp_path / "p")
    before = snapshot(tmp_path)
    err(needle).check(lambda: call(fitted[1], folder))
    assert snapshot(tmp_path) == before


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


@pytest.mark.parametrize("make, outcome", cases(ROUND_TRIP))
def test_a_pipeline_that_cannot_load_back_is_an_error_at_save(
    tiny_model_path, tmp_path, make, outcome
):
    pipe = prune_layers(
        make_pipeline(
            _hst(tiny_model_path), first_layer(), make(), LogisticRegression()
        ).fit(PROBE_TEXTS, PROBE_Y)
    )
    outcome.check(lambda: save_probe(pipe, tmp_path / "p"))
    if isinstance(outcome, err):
        assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_lambda_pooling_is_an_error_at_save(tiny_model_path, tmp_path):
    pooling = lambda hidden, mask: hidden.mean(1)  # noqa: E731
    pipe = prune_layers(
        make_pipeline(
            _hst(tiny_model_path, pooling=pooling), first_layer(), LogisticRegression()
        ).fit(PROBE_TEXTS, PROBE_Y)
    )
    err(r"<lambda>.*cannot be loaded back").check(
        lambda: save_probe(pipe, tmp_path / "p")
    )


def test_a_probe_whose_estimator_holds_a_lambda_is_an_error_at_save(
    tiny_model_path, tmp_path
):
    head = make_pipeline(FunctionTransformer(lambda x: x), LogisticRegression())
    probe = LayerProbeClassifier(
        tiny_model_path, device="cpu", selector=first_layer(), estimator=head
    ).fit(PROBE_TEXTS, PROBE_Y)
    err(r"<lambda>").check(lambda: save_probe(probe, tmp_path / "p"))


# ==========================================================================
# New in issue 34: the model card, odd targets, two writers, a full disk
# ==========================================================================
def _hidden(folder):
    """Hidden siblings a save left next to ``folder`` (staging, aside)."""
    return sorted(p.name for p in Path(folder).parent.iterdir() if p.name[0] == ".")


def _layers_at(folder):
    return load_probe(folder).selected_layers_.tolist()


# --------------------------------------------------------------------------
# The model card is the user's once edited: never replaced, never required
# --------------------------------------------------------------------------
_card_edited = _saved_then_written("README.md", "# my notes on this probe\n")
_card_emptied = _saved_then_written("README.md", "")


def _card_a_link_to_a_user_file(folder, fitted):
    save_probe(fitted[0], folder)
    (folder.parent / "mine.md").write_text("mine")
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(folder.parent / "mine.md")
    return folder


def _card_a_folder(folder, fitted):
    save_probe(fitted[0], folder)
    (folder / "README.md").unlink()
    (folder / "README.md").mkdir()
    (folder / "README.md" / "notes.txt").write_text("mine")
    return folder


def _only_a_card(folder, fitted):
    folder.mkdir()
    (folder / "README.md").write_text("# a card, no probe\n")
    return folder


CARD_REFUSED = [  # (id, setup, overwrite, needle)
    ("edited", _card_edited, True, r"whose README\.md changed since the save"),
    (
        "edited_overwrite_false",
        _card_edited,
        False,
        r"whose README\.md changed since the save",
    ),
    ("emptied", _card_emptied, True, r"whose README\.md changed since the save"),
    (
        "a_link_to_a_user_file",
        _card_a_link_to_a_user_file,
        True,
        r"whose README\.md changed since the save",
    ),
    ("a_folder", _card_a_folder, True, r"files that no save wrote \(README\.md\)"),
    ("only_a_card", _only_a_card, True, r"holds no saved probe \(README\.md\)"),
]


@pytest.mark.parametrize(
    "setup, overwrite, needle",
    cases(CARD_REFUSED),
)
def test_a_card_the_user_touched_is_never_replaced(
    fitted, tmp_path, setup, overwrite, needle
):
    folder = setup(tmp_path / "p", fitted)
    before = snapshot(tmp_path)
    err(needle).check(lambda: save_probe(fitted[1], folder, overwrite=overwrite))
    assert snapshot(tmp_path) == before and _hidden(folder) == []


def test_a_deleted_card_is_written_again_by_the_next_save(fitted, tmp_path):
    folder = save_probe(fitted[0], tmp_path / "p")
    (folder / "README.md").unlink()
    ok(lambda out: _layers_at(out) == fitted[1].selected_layers_.tolist()).check(
        lambda: save_probe(fitted[1], folder, overwrite=True)
    )
    assert "LayerProbeClassifier" in (folder / "README.md").read_text()


def test_a_card_edited_while_the_save_runs_stops_it(fitted, tmp_path, monkeypatch):
    folder = save_probe(fitted[0], tmp_path / "p")
    check = _persistence._check_loads_back

    def user_edits_the_card(staging, owner):
        (folder / "README.md").write_text("# edited meanwhile\n")
        check(staging, owner)

    monkeypatch.setattr(_persistence, "_check_loads_back", user_edits_the_card)
    err(r"README\.md changed since the save.*it changed while this save ran").check(
        lambda: save_probe(fitted[1], folder, overwrite=True)
    )
    assert (folder / "README.md").read_text() == "# edited meanwhile\n"
    assert _layers_at(folder) == fitted[0].selected_layers_.tolist()
    assert _hidden(folder) == []


def test_a_card_edited_after_the_last_look_is_kept_aside(fitted, tmp_path, monkeypatch):
    """Edited between the save's last look (under its lock) and the swap: the
    new probe goes in, the edited card is kept, and the warning says where."""
    folder = save_probe(fitted[0], tmp_path / "p")
    with pytest.warns(UserWarning, match=r"README\.md changed since its save.*kept"):
        _resave_writing_just_before_the_swap(
            fitted, folder, monkeypatch, "README.md", "# edited at the last moment\n"
        )
    kept = [p for p in tmp_path.rglob("README.md") if p.parent != folder]
    assert [p.read_text() for p in kept] == ["# edited at the last moment\n"]
    assert _layers_at(folder) == fitted[1].selected_layers_.tolist()


# --------------------------------------------------------------------------
# Odd targets
# --------------------------------------------------------------------------
def _inside_a_probe(tmp_path, fitted):
    return save_probe(fitted[0], tmp_path / "p") / "sub"


def _deep_inside_a_probe(tmp_path, fitted):
    return save_probe(fitted[0], tmp_path / "p") / "a" / "b"


def _a_file_of_a_probe(tmp_path, fitted):
    return save_probe(fitted[0], tmp_path / "p") / "estimator.skops"


def _a_link_loop(tmp_path, fitted):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return tmp_path / "loop"


def _a_link_to_a_user_folder(tmp_path, fitted):
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "a.txt").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "user", target_is_directory=True)
    return tmp_path / "link"


def _a_link_to_a_file(tmp_path, fitted):
    (tmp_path / "f.txt").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "f.txt")
    return tmp_path / "link"


def _a_report_folder(tmp_path, fitted):
    (tmp_path / "report").mkdir()
    for name in ("layers.csv", "selection.json"):
        (tmp_path / "report" / name).write_text("mine")
    return tmp_path / "report"


ODD_TARGETS = [  # (id, setup(tmp_path, fitted) -> target, needle)
    ("inside_a_saved_probe", _inside_a_probe, r"is inside the saved probe '.*p'"),
    ("deep_inside_a_saved_probe", _deep_inside_a_probe, r"is inside the saved probe"),
    ("a_file_of_a_probe", _a_file_of_a_probe, r"is a file; give a folder"),
    ("a_link_loop", _a_link_loop, r"is a broken symbolic link"),
    ("a_link_to_a_user_folder", _a_link_to_a_user_folder, r"holds no saved probe"),
    ("a_link_to_a_file", _a_link_to_a_file, r"is a file; give a folder"),
    ("a_report_folder", _a_report_folder, r"holds no saved probe \(layers\.csv"),
]


@pytest.mark.parametrize("setup, needle", cases(ODD_TARGETS))
def test_an_odd_target_is_refused_before_anything_is_written(
    fitted, tmp_path, setup, needle
):
    target = setup(tmp_path, fitted)
    before = snapshot(tmp_path)
    err(rf"save_probe: `path` .*{needle}").check(
        lambda: save_probe(fitted[1], target, overwrite=True)
    )
    assert snapshot(tmp_path) == before


def test_a_link_to_an_empty_folder_takes_the_probe_there(fitted, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    save_probe(fitted[1], tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert _layers_at(tmp_path / "real") == fitted[1].selected_layers_.tolist()


@pytest.mark.parametrize("form", ["trailing_slash", "home_tilde", "dot_dot_inside"])
def test_a_target_written_another_way_is_the_same_folder(
    fitted, tmp_path, monkeypatch, form
):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "sub").mkdir()
    target = {
        "trailing_slash": str(tmp_path / "p") + "/",
        "home_tilde": "~/p",
        "dot_dot_inside": str(tmp_path / "sub" / ".." / "p"),
    }[form]
    save_probe(fitted[1], target)
    assert _layers_at(tmp_path / "p") == fitted[1].selected_layers_.tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p", "sub"]


def test_a_probe_folder_inside_a_report_folder_survives_the_report(fitted, tmp_path):
    """``skloes probe --out rep --save rep/probe``, as the error suggests, and
    then the report written again: the probe is not touched."""
    from skloes.report import LayerReport

    rng = np.random.RandomState(0)
    stack, y = rng.randn(3, 30, 4), np.arange(30) % 2
    report = LayerReport(n_layers_to_select=1, metrics=(), nested=False).fit(stack, y)
    report.save(tmp_path / "rep")
    probe = save_probe(fitted[1], tmp_path / "rep" / "probe")
    before = snapshot(probe)
    report.save(tmp_path / "rep", overwrite=True)
    assert snapshot(probe) == before
    assert _layers_at(probe) == fitted[1].selected_layers_.tolist()


@pytest.mark.parametrize("value", [np.True_, np.False_], ids=["numpy_true", "false"])
def test_overwrite_takes_a_numpy_bool(fitted, tmp_path, value):
    """The rule of every flag (utils._validation.check_bool); np.True_ was
    refused as not True or False."""
    folder = save_probe(fitted[0], tmp_path / "p")
    if value:
        ok().check(lambda: save_probe(fitted[1], folder, overwrite=value))
        assert _layers_at(folder) == fitted[1].selected_layers_.tolist()
    else:
        err(r"already holds a saved probe; pass overwrite=True").check(
            lambda: save_probe(fitted[1], folder, overwrite=value)
        )


# --------------------------------------------------------------------------
# Two writers: one whole probe, a clear error for the other
# --------------------------------------------------------------------------
def _during_the_save(monkeypatch, action):
    """Run ``action()`` while the save checks its staged probe (after it
    looked at the target, before it swaps)."""
    check = _persistence._check_loads_back

    def meanwhile(staging, owner):
        monkeypatch.setattr(_persistence, "_check_loads_back", check)
        action()
        check(staging, owner)

    monkeypatch.setattr(_persistence, "_check_loads_back", meanwhile)


TWO_WRITERS = [  # (id, existing, overwrite, what the other does, needle, left)
    (
        "new_folder_other_save_wins",
        False,
        False,
        lambda f, p: save_probe(p[0], f),
        r"was written by another save while this save ran; its probe is kept",
        "other",
    ),
    (
        "new_folder_other_save_wins_overwrite",
        False,
        True,
        lambda f, p: save_probe(p[0], f),
        r"was written by another save while this save ran; its probe is kept",
        "other",
    ),
    (
        "existing_other_save_replaces_it",
        True,
        True,
        lambda f, p: save_probe(p[0], f, overwrite=True),
        r"was written by another save while this save ran",
        "other",
    ),
    (
        "existing_removed_meanwhile",
        True,
        True,
        lambda f, p: __import__("shutil").rmtree(f),
        r"was removed while this save ran and nothing was written",
        None,
    ),
    (
        "new_folder_the_user_fills",
        False,
        False,
        lambda f, p: (f.mkdir(), (f / "mine.txt").write_text("mine")),
        r"holds no saved probe \(mine\.txt\).*it changed while this save ran",
        "user",
    ),
    (
        "existing_the_user_adds_a_file",
        True,
        True,
        lambda f, p: (f / "mine.txt").write_text("mine"),
        r"files that no save wrote \(mine\.txt\).*it changed while this save ran",
        "other",
    ),
]


@pytest.mark.parametrize(
    "existing, overwrite, other, needle, left",
    cases(TWO_WRITERS),
)
def test_two_writers_give_one_whole_probe_and_one_clear_error(
    fitted, tmp_path, monkeypatch, existing, overwrite, other, needle, left
):
    folder = tmp_path / "p"
    if existing:
        save_probe(fitted[0], folder)
    _during_the_save(monkeypatch, lambda: other(folder, fitted))
    err(needle).check(lambda: save_probe(fitted[1], folder, overwrite=overwrite))
    if left == "other":  # the other writer's probe, whole
        assert _layers_at(folder) == fitted[0].selected_layers_.tolist()
    elif left == "user":
        assert sorted(os.listdir(folder)) == ["mine.txt"]
    else:
        assert not folder.exists()
    if (folder / "mine.txt").exists():
        assert (folder / "mine.txt").read_text() == "mine"
    assert _hidden(folder) == []


_RACE = """
import json, sys, time
from pathlib import Path
from skloes.probe import LayerProbeClassifier, save_probe
from skloes.selection import LastKSelector
model, target, go, k = sys.argv[1:5]
texts = ["a good movie", "a dull plot", "fun", "the story was great"] * 3
probe = LayerProbeClassifier(
    model, device="cpu", selector=LastKSelector(n_layers_to_select=int(k))
).fit(texts, [1, 0, 1, 0] * 3)
Path(go + "." + k).write_text("ready")
while not Path(go).exists():
    time.sleep(0.01)
try:
    save_probe(probe, target)
    print(json.dumps({"saved": probe.selected_layers_.tolist()}))
except ValueError as exc:
    print(json.dumps({"error": str(exc)}))
"""


def test_two_processes_saving_to_one_new_folder(tiny_model_path, tmp_path):
    """A real race: two processes fit, wait at a barrier, then save to the
    same new folder with overwrite=False. One saves; the other is told, in
    one line, and the folder holds the winner's whole probe."""
    import subprocess
    import sys
    import time

    target, go = tmp_path / "p", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACE, tiny_model_path, str(target), str(go), k],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in ("1", "2")
    ]
    while not all(Path(f"{go}.{k}").exists() for k in ("1", "2")):
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.05)
    go.write_text("go")
    results = []
    for proc in procs:
        out, errors = proc.communicate(timeout=600)
        assert proc.returncode == 0, errors
        results.append(json.loads(out.strip().splitlines()[-1]))
    saved = [r["saved"] for r in results if "saved" in r]
    errors = [r["error"] for r in results if "error" in r]
    assert len(saved) == 1 and len(errors) == 1, results
    assert "\n" not in errors[0] and "save_probe: `path`" in errors[0]
    assert _layers_at(target) == saved[0]
    manifest = json.loads((target / "manifest.json").read_text())
    assert sorted(os.listdir(target)) == sorted([*manifest["files"], "manifest.json"])
    assert _hidden(target) == []


# --------------------------------------------------------------------------
# A full disk at each stage: one line, nothing written, nothing left behind
# --------------------------------------------------------------------------
def _no_space(*args, **kwargs):
    raise OSError(28, "No space left on device")


def _writer_at(stage):
    def patch(mp):
        writers = list(_persistence.PROBE_WRITERS)
        index = {"estimator": 0, "export": 1, "card": 2}[stage]
        writers[index] = _no_space
        mp.setattr(_persistence, "PROBE_WRITERS", writers)

    return patch


FULL_DISK = {  # stage -> patch(monkeypatch)
    "estimator": _writer_at("estimator"),
    "export": _writer_at("export"),
    "card": _writer_at("card"),
    "manifest": lambda mp: mp.setattr(probe_folder, "write_manifest", _no_space),
    "swap": lambda mp: (
        mp.setattr(_atomic, "exchange", _no_space),
        mp.setattr(_atomic.os, "rename", _no_space),
    ),
}


@pytest.mark.parametrize("existing", [False, True], ids=["new", "overwrite"])
@pytest.mark.parametrize("stage", list(FULL_DISK))
def test_a_full_disk_at_each_stage_is_one_line_and_leaves_nothing(
    fitted, tmp_path, monkeypatch, stage, existing
):
    folder = tmp_path / "p"
    if existing:
        save_probe(fitted[0], folder)
    before = snapshot(tmp_path)
    with monkeypatch.context() as mp:
        FULL_DISK[stage](mp)
        err(
            r"save_probe: cannot write the probe to '.*p' \(No space left on "
            r"device\); nothing was written",
            OSError,
        ).check(lambda: save_probe(fitted[1], folder, overwrite=True))
    assert snapshot(tmp_path) == before and _hidden(folder) == []
    if existing:
        assert _layers_at(folder) == fitted[0].selected_layers_.tolist()


@pytest.mark.parametrize(
    "code, words",
    [
        pytest.param(28, "No space left on device", id="full_disk"),
        pytest.param(13, "Permission denied", id="read_only_old_probe"),
    ],
)
def test_a_failure_after_the_swap_says_the_new_probe_is_in(
    fitted, tmp_path, monkeypatch, code, words
):
    """The old probe's files cannot be removed once the new one is in (a full
    disk; a read-only folder, faked: root ignores chmod): a warning says
    where they are kept; the error said nothing was written."""
    folder = save_probe(fitted[0], tmp_path / "p")
    unlink = Path.unlink

    def refuse_in_the_old_folder(path, *args, **kwargs):
        if path.parent != folder and path.parent.name.startswith(".p-"):
            raise OSError(code, words)
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", refuse_in_the_old_folder)
    with pytest.warns(UserWarning, match=rf"holds the new probe; the old .*{words}"):
        save_probe(fitted[1], folder, overwrite=True)
    monkeypatch.setattr(Path, "unlink", unlink)
    assert _layers_at(folder) == fitted[1].selected_layers_.tolist()
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(".p-")]
    assert len(aside) == 1 and (aside[0] / "estimator.skops").is_file()


def _cli_data(tmp_path):
    words = "the a good bad great awful movie film plot actor story fun dull"
    rng = np.random.RandomState(0)
    rows = [
        " ".join(rng.choice(words.split(), size=5)) + f",{i % 2}" for i in range(24)
    ]
    (tmp_path / "d.csv").write_text("text,label\n" + "\n".join(rows) + "\n")
    return str(tmp_path / "d.csv")


@pytest.mark.parametrize("stage", ["estimator", "export", "card", "manifest", "swap"])
def test_skloes_probe_save_on_a_full_disk_is_one_line(
    tiny_model_path, tmp_path, monkeypatch, capsys, stage
):
    data = _cli_data(tmp_path)
    FULL_DISK[stage](monkeypatch)
    argv = ["probe", "--model", tiny_model_path, "--data", data, "--out"]
    argv += [str(tmp_path / "out"), "--save", str(tmp_path / "probe")]
    argv += ["--n-layers-to-select", "1", "--device", "cpu", "--no-nested"]
    if stage == "export":
        argv += ["--export", "onnx"]
    cli_error(argv, r"cannot write the probe to .*No space left on device", capsys)
    assert not (tmp_path / "probe").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# --------------------------------------------------------------------------
# New in issue 55: a manifest entry the save cannot tell its own (no hash, a
# hash of another type, a file replaced by a link to the very bytes) is the
# user's: ``overwrite=True`` refuses the folder naming it, and deletes nothing.
# --------------------------------------------------------------------------
def _listing_a_user_file(*hash_entry):
    """The manifest lists notes.txt, with ``hash_entry`` (none if empty)."""

    def setup(folder, fitted):
        save_probe(fitted[0], folder)
        (folder / "notes.txt").write_text("the user's notes")
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["files"].append("notes.txt")
        if hash_entry:
            manifest["sha256"]["notes.txt"] = hash_entry[0]
        (folder / "manifest.json").write_text(json.dumps(manifest))
        return folder

    return setup


def _estimator_a_link_to_its_own_bytes(folder, fitted):
    save_probe(fitted[0], folder)
    copy = folder.parent / "copy.skops"
    copy.write_bytes((folder / "estimator.skops").read_bytes())
    (folder / "estimator.skops").unlink()
    (folder / "estimator.skops").symlink_to(copy)
    return folder


UNTOLD_RECORDS = [  # (id, setup, needle)
    ("no_hash", _listing_a_user_file(), r"whose notes\.txt changed since"),
    ("null_hash", _listing_a_user_file(None), r"whose notes\.txt"),
    ("number_hash", _listing_a_user_file(12), r"whose notes\.txt changed since"),
    ("empty_hash", _listing_a_user_file(""), r"whose notes\.txt changed since"),
    (
        "link_to_same_bytes",
        _estimator_a_link_to_its_own_bytes,
        r"whose estimator\.skops changed since",
    ),
]


@pytest.mark.parametrize("setup, needle", cases(UNTOLD_RECORDS))
def test_a_record_the_save_cannot_tell_its_own_is_never_removed(
    fitted, tmp_path, setup, needle
):
    folder = setup(tmp_path / "p", fitted)
    before = snapshot(tmp_path)
    err(needle).check(lambda: save_probe(fitted[1], folder, overwrite=True))
    assert snapshot(tmp_path) == before and _hidden(folder) == []
