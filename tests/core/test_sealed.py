"""A folder whose files are named and hashed in a JSON manifest (skloes.core._sealed).

The layer store and the saved probe read and write their manifests through
it; what each folder's manifest must hold is tested with the folder
(tests/scale/test_store.py, tests/test_probe_folder.py).
"""

from __future__ import annotations

import json
import os

import pytest

from skloes.core import _sealed as sealed
from skloes.core._digests import file_sha256

MANIFEST = {"format": 1, "b": [1, 2], "a": {"z": None, "y": "é"}}


def _fail(problem, exc):
    return LookupError(f"{problem}: {type(exc).__name__}")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(json.dumps(MANIFEST, indent=2) + "\n", id="indent_2_newline"),
        pytest.param(json.dumps(MANIFEST, indent=1, sort_keys=True), id="indent_1"),
        pytest.param(json.dumps(MANIFEST), id="one_line"),
    ],
)
def test_every_style_older_folders_hold_reads(tmp_path, text):
    (tmp_path / "m.json").write_text(text, encoding="utf-8")
    assert sealed.read_manifest(tmp_path, "m.json", _fail) == MANIFEST


def test_the_manifest_is_written_whole_in_the_one_style(tmp_path):
    sealed.write_manifest(tmp_path, "m.json", MANIFEST, prefix=".job-")
    text = (tmp_path / "m.json").read_text(encoding="utf-8")
    # The bytes a saved probe's manifest always had (a job's digest hashes them).
    assert text == json.dumps(MANIFEST, indent=2) + "\n"
    assert text == sealed.manifest_text(MANIFEST)
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]
    assert sealed.read_manifest(tmp_path, "m.json") == MANIFEST


@pytest.mark.parametrize(
    "make, problem",
    [
        pytest.param(lambda d: d / "nowhere", "no folder: NoneType", id="no_folder"),
        pytest.param(lambda d: d, "no manifest: NoneType", id="no_manifest"),
        pytest.param(
            lambda d: (d / "m.json").mkdir() or d,
            "no manifest: NoneType",
            id="manifest_is_a_folder",
        ),
        pytest.param(
            lambda d: (d / "m.json").write_text("{") and d,
            "unreadable: JSONDecodeError",
            id="not_json",
        ),
        pytest.param(
            lambda d: (d / "m.json").write_bytes(b"\xff") and d,
            "unreadable: UnicodeDecodeError",
            id="not_utf8",
        ),
    ],
)
def test_a_missing_or_unreadable_manifest_fails_in_the_callers_words(
    tmp_path, make, problem
):
    folder = make(tmp_path)
    with pytest.raises(LookupError, match=f"^{problem}$"):
        sealed.read_manifest(folder, "m.json", _fail)
    assert sealed.read_manifest(folder, "m.json") is None


def test_the_recorded_files_hash_and_tell_which_changed(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name)
    hashes = sealed.file_hashes(tmp_path, ["c", "a", "b"])
    assert list(hashes) == ["a", "b", "c"]
    assert hashes["a"] == file_sha256(tmp_path / "a")
    assert sealed.changed_files(tmp_path, hashes, ["a", "b", "c"]) == []
    (tmp_path / "b").write_text("edited")
    (tmp_path / "c").unlink()
    # A missing file is not a changed one; a file recorded without a hash
    # (a manifest edited to list a user's file) cannot be told ours: changed.
    (tmp_path / "d").write_text("d")
    assert sealed.changed_files(tmp_path, hashes, ["a", "b", "c", "d"]) == ["b", "d"]
    assert sealed.as_recorded(tmp_path, "a", hashes["a"])
    assert not sealed.as_recorded(tmp_path, "b", hashes["b"])
    assert not sealed.as_recorded(tmp_path, "c", hashes["c"])


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "folder"])
def test_a_recorded_name_that_is_no_regular_file_is_never_as_recorded(tmp_path, kind):
    """Whatever stands at a recorded name that is not a regular file (a link
    to the very bytes recorded included) is not the writer's: it counts as
    changed, so that no later save replaces or removes it."""
    outside = tmp_path / "outside"
    outside.write_text("a")
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a").write_text("a")
    hashes = sealed.file_hashes(folder, ["a"])
    (folder / "a").unlink()
    if kind == "link":
        (folder / "a").symlink_to(outside)
    elif kind == "dangling":
        (folder / "a").symlink_to(tmp_path / "nowhere")
    elif kind == "fifo":
        os.mkfifo(folder / "a")
    else:
        (folder / "a").mkdir()
    assert sealed.changed_files(folder, hashes, ["a"]) == ["a"]
    assert not sealed.as_recorded(folder, "a", hashes["a"])
