"""Model folders a user or a download broke, a model's own code (refused before
it runs, whatever the entry point, unless the user opted in), the user model
cache (SKLOES_HOME) and shared homes, and weights changed after fit.
"""

from __future__ import annotations

import os
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from _support.probes import torch_or_skip

torch = torch_or_skip()

from _support.outcomes import cli_error, err, ok  # noqa: E402
from _support.probes import first_layer, quiet_hst, tiny_probe  # noqa: E402
from _support.remote_models import (  # noqa: E402
    REMOTE_KINDS,
    map_to_x_code,
    no_code_ran,
)
from _support.texts import LABELLED_TEXTS, PROBE_NEW, PROBE_TEXTS, PROBE_Y  # noqa: E402

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.cli import main  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerProbeRegressor,
    load_probe,
)

# --------------------------------------------------------------------------
# Model folders broken the ways a download or a user breaks them
# --------------------------------------------------------------------------
TEXTS = PROBE_TEXTS[:4]


HST_MODEL_CASES = [
    ("missing_folder", "nowhere", err(r"`model`.*does not exist")),
    ("a_file", "a_file", err(r"`model`.*is a file, not a model folder")),
    ("empty_folder", "empty", err(r"`model`.*config.json")),
    ("truncated_config", "bad_json", err(r"`model`.*config.json")),
    ("config_not_object", "list_json", err(r"`model`.*config.json")),
    ("config_no_type", "no_type", err(r"`model`")),
    ("config_unknown_type", "unknown_type", err(r"`model`")),
    ("truncated_weights", "half_weights", err(r"`model`.*model.safetensors")),
    ("empty_weights", "empty_weights", err(r"`model`.*model.safetensors")),
    ("no_weights", "no_weights", err(r"`model`.*safetensors")),
    ("pickle_weights_only", "bin_only", err(r"`model`.*safetensors")),
    ("remote_code_untrusted", "remote", err(r"trust_remote_code")),
    ("no_tokenizer", "no_tokenizer", err(r"`model`.*tokenizer vocabulary")),
    (
        "bin_and_decoy_safetensors",
        "bin_and_decoy",
        err(r"`model`.*no model.safetensors.*decoy.safetensors, pytorch_model.bin"),
    ),
    (
        "shard_missing",
        "shard_missing",
        err(r"`model`.*lacks weight shards \['model-00002.safetensors'\]"),
    ),
    ("bad_shard_index", "bad_index", err(r"`model`.*invalid model.safetensors.index")),
]


@pytest.mark.parametrize(
    "folder, outcome", [pytest.param(f, o, id=i) for i, f, o in HST_MODEL_CASES]
)
def test_hst_models(broken_models, folder, outcome):
    outcome.check(lambda: quiet_hst(str(broken_models / folder)).fit_transform(TEXTS))


# A model that cannot load fails at fit (headers only are
# read), with an error that blames what is wrong.
FIT_TIME_MODEL_CASES = [
    "half_weights",
    "empty_weights",
    "no_weights",
    "bin_only",
    "bin_and_decoy",
    "shard_missing",
    "bad_index",
]


@pytest.mark.parametrize("folder", FIT_TIME_MODEL_CASES)
def test_hst_model_that_cannot_load_fails_at_fit(broken_models, folder):
    err(r"`model`").check(lambda: quiet_hst(str(broken_models / folder)).fit(TEXTS))


MODEL_PATH_CASES = [
    (
        "weights_file",
        "model.safetensors",
        err(r"`model`.*is a file.*model.safetensors is a file of the model folder"),
    ),
    ("config_file", "config.json", err(r"`model`.*is a file.*pass that folder")),
]


@pytest.mark.parametrize(
    "name, outcome", [pytest.param(n, o, id=i) for i, n, o in MODEL_PATH_CASES]
)
def test_hst_model_path_of_a_file_in_the_folder(tiny_model_path, name, outcome):
    outcome.check(lambda: quiet_hst(os.path.join(tiny_model_path, name)).fit(TEXTS))


def test_trusted_remote_code_that_fails_is_wrapped(broken_models):
    hst = quiet_hst(str(broken_models / "remote_inconsistent"), trust_remote_code=True)
    err(
        r"`model`.*cannot be loaded by transformers \(its own code.*config_class"
    ).check(lambda: hst.fit_transform(TEXTS))


REMOTE_FRONT_ENDS = [  # each says what its user can do
    (
        "GeoRegFineTuner",
        lambda path: __import__("skloes")
        .GeoRegFineTuner(path, max_epochs=1, device="cpu")
        .fit(TEXTS, [0, 1, 0, 1]),
        r"GeoRegFineTuner does not run a model's own code(?!.*trust_remote_code=True)",
    ),
    (
        "LayerProbeClassifier",
        lambda path: __import__("skloes.probe")
        .probe.LayerProbeClassifier(path, device="cpu")
        .fit(TEXTS, [0, 1, 0, 1]),
        r"extractor_params=\{'trust_remote_code': True\}",
    ),
    (
        "HiddenStatesTransformer",
        lambda path: quiet_hst(path).fit(TEXTS),
        r"pass `trust_remote_code=True` only if you trust it",
    ),
]


@pytest.mark.parametrize(
    "run, needle", [pytest.param(r, n, id=i) for i, r, n in REMOTE_FRONT_ENDS]
)
def test_remote_code_refusal_names_what_the_caller_can_do(broken_models, run, needle):
    err(needle).check(lambda: run(str(broken_models / "remote")))


def test_hst_model_of_wrong_type():
    err(r"'model' parameter").check(lambda: quiet_hst(3).fit(TEXTS))


def _swap_weights_keeping_size_and_time(folder, other):
    weights = os.path.join(folder, "model.safetensors")
    stat = os.stat(weights)
    data = open(os.path.join(other, "model.safetensors"), "rb").read()
    assert len(data) == stat.st_size
    with open(weights, "wb") as handle:
        handle.write(data)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))


WEIGHT_CHANGES = {
    "same_size_weights_mtime_restored": (
        _swap_weights_keeping_size_and_time,
        r"`model`.*changed since",
    ),
    "config_edited": (
        lambda folder, other: open(os.path.join(folder, "config.json"), "a").write(" "),
        r"`model`.*changed since",
    ),
    "folder_deleted": (
        lambda folder, other: __import__("shutil").rmtree(folder),
        r"`model`.*is gone",
    ),
    "weights_deleted": (
        lambda folder, other: os.remove(os.path.join(folder, "model.safetensors")),
        r"`model`.*changed since",
    ),
}


@pytest.mark.parametrize("change", list(WEIGHT_CHANGES))
def test_fitted_extractor_refuses_changed_weights(tiny_model_path, tmp_path, change):
    import pickle
    import shutil

    from skloes.models._testing import make_tiny_model

    folder = str(tmp_path / "m")
    shutil.copytree(tiny_model_path, folder)
    other = make_tiny_model(tmp_path / "other", seed=1)
    blob = pickle.dumps(quiet_hst(folder).fit(TEXTS))
    damage, needle = WEIGHT_CHANGES[change]
    damage(folder, other)
    err(needle).check(lambda: pickle.loads(blob).transform(TEXTS))


# --------------------------------------------------------------------------
# The user model cache: every error names SKLOES_HOME and
# the fix; prepared folders are as readable as the umask allows; stale
# staging folders go at the next prepare, a live one stays; a prepared
# folder with broken weights is prepared again.
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def zip_parts(tiny_model_path, tmp_path_factory):
    """A tiny model zipped under all-mpnet-base-v2/, split in 3 parts."""
    import zipfile

    root = tmp_path_factory.mktemp("zip-parts")
    archive = root / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name in sorted(os.listdir(tiny_model_path)):
            zf.write(os.path.join(tiny_model_path, name), f"all-mpnet-base-v2/{name}")
    data = archive.read_bytes()
    parts = []
    for i, (a, b) in enumerate([(0, 100), (100, 1000), (1000, len(data))]):
        parts.append(root / f"all-mpnet-base-v2.zip.00{i + 1}")
        parts[-1].write_bytes(data[a:b])
    return parts


def _prepare(parts):
    from skloes.models._registry import reassemble_zip_parts

    return reassemble_zip_parts(parts, "all-mpnet-base-v2")


def _home_file(home):
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("not a folder")


def _home_under_a_file(home):
    _home_file(home)
    os.environ["SKLOES_HOME"] = str(home / "sub")


def _bundles_a_file(home):
    home.mkdir(parents=True)
    (home / "bundles").write_text("x")


def _not_writable(home, monkeypatch):  # chmod cannot stop root: fake it
    import tempfile as tf

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(kwargs.get("dir")))

    monkeypatch.setattr(tf, "mkdtemp", denied)


def _unreadable_prepared(home, monkeypatch):
    from skloes.models import _registry

    def denied(target):
        raise PermissionError(13, "Permission denied", str(target / "config.json"))

    monkeypatch.setattr(_registry, "_prepared", denied)


HOME_CASES = {  # damage(home[, monkeypatch]) -> needle of the error
    "home_is_a_file": (_home_file, r"SKLOES_HOME.*is a file.*set SKLOES_HOME"),
    "home_under_a_file": (_home_under_a_file, r"SKLOES_HOME.*is a file"),
    "bundles_is_a_file": (_bundles_a_file, r"SKLOES_HOME.*bundles is a file"),
    "home_not_writable": (
        _not_writable,
        r"SKLOES_HOME.*permission denied.*folder you can write",
    ),
    "prepared_by_another_user": (
        _unreadable_prepared,
        r"SKLOES_HOME.*permission denied.*another user",
    ),
}


@pytest.mark.parametrize("case", list(HOME_CASES))
def test_user_model_cache_errors_name_skloes_home(
    zip_parts, tmp_path, monkeypatch, case
):
    home = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(home))
    damage, needle = HOME_CASES[case]
    if damage.__code__.co_argcount == 2:
        damage(home, monkeypatch)
    else:
        damage(home)
    err(needle).check(lambda: _prepare(zip_parts))


def test_user_model_cache_default_home_error_says_how_to_move_it(
    zip_parts, tmp_path, monkeypatch
):
    monkeypatch.delenv("SKLOES_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _home_file(tmp_path / "xdg" / "skloes")
    err(r"default user model cache; set SKLOES_HOME to move it").check(
        lambda: _prepare(zip_parts)
    )


def test_skloes_models_prepare_error_is_one_line(tmp_path, monkeypatch, capsys):
    from skloes.cli import main

    smollm2 = {m.name: m for m in __import__("skloes").offline_models()}["smollm2"]
    if not smollm2.installed:
        pytest.skip("the SmolLM2 bundle is not installed")
    _home_file(tmp_path / "home")
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    assert main(["models", "--prepare"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert re.search(r"skloes models: error: .*SKLOES_HOME", lines[0]), lines


def test_prepared_folder_is_readable_by_the_team(zip_parts, tmp_path, monkeypatch):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    old = os.umask(0o022)
    try:
        folder = _prepare(zip_parts)
    finally:
        os.umask(old)
    assert os.stat(folder).st_mode & 0o777 == 0o755


def _staging_dir(home, name, *, lock=True, age=0):
    folder = home / "bundles" / f".tmp-all-mpnet-base-v2-{name}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\x00" * 4096)
    if lock:
        (folder / ".skloes-staging.lock").write_bytes(b"")
    if age:
        stamp = os.stat(folder).st_mtime - age
        os.utime(folder, (stamp, stamp))
    return folder


STAGING_CASES = [  # (id, lock, age in seconds, held by a live process, removed)
    ("killed_with_lock", True, 0, False, True),
    ("killed_old_without_lock", False, 7200, False, True),
    ("recent_without_lock", False, 0, False, False),
    ("live_preparation", True, 0, True, False),
]


@pytest.mark.parametrize(
    "lock, age, held, removed",
    [pytest.param(*case[1:], id=case[0]) for case in STAGING_CASES],
)
def test_stale_staging_folders_go_at_the_next_prepare(
    zip_parts, tmp_path, monkeypatch, lock, age, held, removed
):
    fcntl = pytest.importorskip("fcntl")
    home = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(home))
    stale = _staging_dir(home, "x", lock=lock, age=age)
    with open(stale / ".skloes-staging.lock", "rb") if held else open(os.devnull) as h:
        if held:  # another open file description: conflicts like another process
            fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB)
        folder = _prepare(zip_parts)
        assert stale.exists() != removed
    assert os.path.isfile(os.path.join(folder, "config.json"))
    assert not (Path(folder) / ".skloes-staging.lock").exists()


def test_prepared_folder_with_truncated_weights_is_prepared_again(
    zip_parts, tiny_model_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    folder = _prepare(zip_parts)
    weights = Path(folder) / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])
    expected = quiet_hst(tiny_model_path).fit_transform(TEXTS)
    ok(lambda out: np.testing.assert_array_equal(out, expected)).check(
        lambda: quiet_hst(_prepare(zip_parts)).fit_transform(TEXTS)
    )
    assert weights.read_bytes() == good
    assert [p.name for p in (tmp_path / "home" / "bundles").iterdir()] == [
        Path(folder).name
    ]


# New in issue 55: the user model cache writes only what it owns. A user's
# file inside a prepared folder whose weights broke is never removed with it
# (the folder is refused, naming the file); whatever stands where a model is
# to be prepared (a link, a file, a folder skloes did not complete) is refused,
# never removed nor written through; modes are never changed through a link;
# a staging folder's lock that is a pipe or a link is never opened.
def _broken(folder):
    weights = Path(folder) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])


USER_FILES = {  # what a user leaves in a prepared folder
    "notes": lambda f: (f / "notes.txt").write_text("mine"),
    "nested": lambda f: (
        f.joinpath("mine").mkdir(),
        (f / "mine" / "a.json").write_text("{}"),
    ),
    "link_out": lambda f: (f / "elsewhere").symlink_to(f.parent.parent.parent),
}


@pytest.mark.parametrize("record", [True, False], ids=["recorded", "before_0.3"])
@pytest.mark.parametrize("user", list(USER_FILES))
def test_a_broken_prepared_folder_holding_a_users_file_is_refused(
    zip_parts, tmp_path, monkeypatch, user, record
):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    folder = Path(_prepare(zip_parts))
    if not record:  # a folder prepared before the record: files dated before
        (folder / ".skloes-files").unlink()
        stamp = (folder / "skloes_source.json").stat().st_mtime - 60
        for path in folder.iterdir():
            os.utime(path, (stamp, stamp))
    USER_FILES[user](folder)
    _broken(folder)
    before = sorted(p.name for p in folder.rglob("*"))
    err(
        r"model folder .* holds '[^']*(notes\.txt|mine|elsewhere)[^']*', which "
        r"skloes did not write; move it out"
    ).check(lambda: _prepare(zip_parts))
    assert sorted(p.name for p in folder.rglob("*")) == before  # nothing removed
    for path in folder.rglob("*"):  # the user's file is moved out: prepared again
        if path.name in ("notes.txt", "mine", "elsewhere"):
            if path.is_dir() and not path.is_symlink():
                __import__("shutil").rmtree(path)
            else:
                path.unlink()
    assert _prepare(zip_parts) == str(folder)
    assert safetensors_ok(folder / "model.safetensors")


def safetensors_ok(path):
    from skloes.models._registry import safetensors_problem

    return safetensors_problem(str(path)) is None


def _target_of(zip_parts, tmp_path):
    """Where the zip parts are prepared (prepared once, then taken away)."""
    folder = Path(_prepare(zip_parts))
    __import__("shutil").rmtree(folder)
    return folder


IN_THE_WAY = {  # what stands where a model is prepared -> needle
    "partial_folder": (
        lambda t, out: (t.mkdir(), (t / "config.json").write_text("{}")),
        r"is a folder skloes did not complete",
    ),
    "user_file": (lambda t, out: t.write_text("mine"), r"is a file|not a regular"),
    "link_to_a_folder": (
        lambda t, out: (out.mkdir(), t.symlink_to(out)),
        r"is a symbolic link",
    ),
    "dangling_link": (lambda t, out: t.symlink_to(out), r"is a symbolic link"),
}


@pytest.mark.parametrize("case", list(IN_THE_WAY))
def test_what_stands_where_a_model_is_prepared_is_refused_never_removed(
    zip_parts, tmp_path, monkeypatch, case
):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    target = _target_of(zip_parts, tmp_path)
    outside = tmp_path / "outside"
    make, needle = IN_THE_WAY[case]
    make(target, outside)
    before = sorted(str(p) for p in tmp_path.rglob("*") if ".tmp-" not in str(p))
    err(rf"user model cache prepares this model, {needle}.*move it away").check(
        lambda: _prepare(zip_parts)
    )
    after = sorted(str(p) for p in tmp_path.rglob("*") if ".tmp-" not in str(p))
    assert after == before  # nothing removed, nothing written through the link
    assert not list((target.parent).glob(".tmp-*"))


def test_an_empty_folder_where_a_model_is_prepared_is_taken(
    zip_parts, tmp_path, monkeypatch
):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    target = _target_of(zip_parts, tmp_path)
    target.mkdir()
    assert _prepare(zip_parts) == str(target)


def test_a_linked_prepared_folder_is_read_never_changed(
    zip_parts, tmp_path, monkeypatch
):
    """A prepared folder that is a link (to a team copy): used as it is; its
    files' modes are not widened through the link, a broken one is unlinked
    (the link alone goes, the team copy stays)."""
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    target = Path(_prepare(zip_parts))
    team = tmp_path / "team"
    target.rename(team)
    (team / "config.json").chmod(0o600)
    target.symlink_to(team)
    assert _prepare(zip_parts) == str(target)
    assert (team / "config.json").stat().st_mode & 0o777 == 0o600
    _broken(team)
    before = sorted(p.name for p in team.iterdir())
    _prepare(zip_parts)
    assert sorted(p.name for p in team.iterdir()) == before
    assert target.is_dir() and not target.is_symlink()


@pytest.mark.parametrize("kind", ["pipe", "link"])
def test_a_staging_lock_that_is_a_pipe_or_a_link_is_never_opened(
    zip_parts, tmp_path, monkeypatch, kind
):
    home = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(home))
    stale = _staging_dir(home, "odd", lock=False, age=7200)
    lock = stale / ".skloes-staging.lock"
    if kind == "pipe":
        os.mkfifo(lock)
    else:
        lock.symlink_to(tmp_path / "elsewhere")
    assert os.path.isfile(os.path.join(_prepare(zip_parts), "config.json"))
    assert stale.exists()  # not skloes's lock: the folder is left alone


def test_skloes_cache_covers_the_user_model_cache(
    zip_parts, tmp_path, monkeypatch, capsys
):
    from skloes.cli import main

    home = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(home))
    folder = _prepare(zip_parts)
    stale = _staging_dir(home, "dead")
    broken = home / "bundles" / "other-0123"
    shutil_copy = __import__("shutil").copytree
    shutil_copy(folder, broken)
    (broken / "model.safetensors").write_bytes(b"\x08" + b"\x00" * 7)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"user model cache\): 3 folder", out), out
    for state, path in [("prepared", folder), ("stale", stale), ("broken", broken)]:
        assert re.search(rf"{state} .*{re.escape(str(path))}", out), out
    assert main(["cache", "prune"]) == 0
    assert "removed 1 folder" in capsys.readouterr().out
    assert not stale.exists() and os.path.isdir(folder)


def _csv(path, texts):
    path.write_text("text\n" + "".join(f"{t}\n" for t in texts), encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------
# Loading opts in, never inherits: a model's own code
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
    ).fit(PROBE_TEXTS),
    "probe_fit": lambda model, saved: tiny_probe(model).fit(PROBE_TEXTS, PROBE_Y),
    "regressor_fit": lambda model, saved: LayerProbeRegressor(
        model, device="cpu", selector=first_layer()
    ).fit(PROBE_TEXTS, np.arange(12.0)),
}


@pytest.mark.parametrize("entry", list(REFUSING_ENTRIES))
@pytest.mark.parametrize("kind", list(REMOTE_KINDS))
def test_own_code_is_refused_without_opt_in(remote, marker, kind, entry):
    model, saved = remote[kind]
    outcome = err(_refusal(kind))
    no_code_ran(
        marker, lambda: outcome.check(lambda: REFUSING_ENTRIES[entry](model, saved))
    )


@pytest.mark.parametrize("kind", list(REMOTE_KINDS))
def test_skloes_predict_refuses_own_code_without_the_option(
    remote, marker, kind, tmp_path, capsys
):
    _, saved = remote[kind]
    data = _csv(tmp_path / "new.csv", PROBE_NEW)
    no_code_ran(
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
    no_code_ran(
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
        assert probe.predict(PROBE_NEW).shape == (2,)
    if kind in ("config_auto_map", "tokenizer_auto_map"):  # code that runs
        assert marker.exists()


@pytest.mark.parametrize("kind", ["config_auto_map", "tokenizer_auto_map"])
def test_skloes_predict_with_the_option_runs(remote, marker, kind, tmp_path, capsys):
    _, saved = remote[kind]
    data = _csv(tmp_path / "new.csv", PROBE_NEW)
    assert main(["predict", str(saved), "--data", data, "--trust-remote-code"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("prediction,proba_")


# --------------------------------------------------------------------------
# Shared homes: prepared folders as readable as the umask says
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


# --------------------------------------------- 9. trust_remote_code
def _remote_model(src, dst, *, broken=False):
    shutil.copytree(src, dst)
    (dst / "configuration_x.py").write_text(
        "from transformers import BertConfig\n\n\nclass XConfig(BertConfig):\n"
        "    model_type = 'xbert'\n"
    )
    body = (
        "raise RuntimeError('remote code ran')\n"
        if broken
        else "from transformers import BertModel\n\nfrom .configuration_x import "
        "XConfig\n\n\nclass XModel(BertModel):\n    config_class = XConfig\n"
    )
    (dst / "modeling_x.py").write_text(body)
    map_to_x_code(dst)
    return str(dst)


def test_remote_code_is_refused_before_it_runs(tiny_model_path, tmp_path):
    path = _remote_model(tiny_model_path, tmp_path / "m", broken=True)
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        quiet_hst(path).fit(LABELLED_TEXTS)


def test_trusted_remote_code_works_and_warns(tiny_model_path, tmp_path):
    path = _remote_model(tiny_model_path, tmp_path / "m")
    hst = quiet_hst(path, trust_remote_code=True)
    with pytest.warns(UserWarning, match="runs Python code shipped with the model"):
        out = hst.fit_transform(LABELLED_TEXTS)
    expected = quiet_hst(tiny_model_path).fit_transform(LABELLED_TEXTS)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


# ------------------------------------- 10. broken config and weights
@pytest.mark.parametrize(
    "text", ['{"model_type": "bert", "hid', "[1, 2]", "", "\udcff"]
)
def test_invalid_config_json_is_one_line(tiny_model_path, tmp_path, text):
    path = tmp_path / "m"
    shutil.copytree(tiny_model_path, path)
    (path / "config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match=r"`model`.*config\.json") as info:
        quiet_hst(str(path)).fit(LABELLED_TEXTS)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("cut", [0, 5, 100, -10])
def test_truncated_safetensors_is_one_line(tiny_model_path, tmp_path, cut):
    path = tmp_path / "m"
    shutil.copytree(tiny_model_path, path)
    weights = path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:cut] if cut >= 0 else data[: len(data) + cut])
    with pytest.raises(ValueError, match=r"`model`.*model\.safetensors.*truncated"):
        quiet_hst(str(path)).fit_transform(LABELLED_TEXTS)
