"""Folders and files that appear whole (skloes.core._atomic)."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from skloes.core import _atomic


def _staged(parent, name="new", files=("a",)):
    staging = _atomic.staging_folder(parent / name, "test")
    for f in files:
        (staging / f).write_text(f)
    return staging


def test_staging_is_a_hidden_sibling_that_swaps_into_an_absent_folder(tmp_path):
    staging = _staged(tmp_path)
    assert staging.parent == tmp_path and staging.name.startswith(".new-")
    _atomic.swap_in(staging, tmp_path / "new", remove_old=pytest.fail)
    assert (tmp_path / "new" / "a").read_text() == "a"
    assert [p.name for p in tmp_path.iterdir()] == ["new"]


def test_an_empty_folder_is_replaced_without_removing_anything(tmp_path):
    (tmp_path / "new").mkdir()
    _atomic.swap_in(_staged(tmp_path), tmp_path / "new", remove_old=pytest.fail)
    assert (tmp_path / "new" / "a").is_file()


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "move_aside"])
def test_an_existing_folder_is_swapped_and_handed_to_remove_old(
    tmp_path, monkeypatch, exchange
):
    old = tmp_path / "new"
    old.mkdir()
    (old / "b").write_text("old")
    if not exchange:
        monkeypatch.setattr(_atomic, "exchange", lambda a, b: False)
    seen = []

    def remove_old(folder):
        seen.append(sorted(os.listdir(folder)))
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()

    _atomic.swap_in(_staged(tmp_path), old, remove_old)
    assert seen == [["b"]] and sorted(os.listdir(old)) == ["a"]
    assert [p.name for p in tmp_path.iterdir()] == ["new"]


def test_a_folder_filled_meanwhile_is_never_replaced(tmp_path, monkeypatch):
    """Between the check and the rename another writer fills the target: the
    rename fails (ENOTEMPTY) rather than replacing its files."""
    target = tmp_path / "new"
    staging = _staged(tmp_path)
    exists = _atomic.Path.exists

    def filled_after_check(path):
        found = exists(path)
        if path == target and not found:
            target.mkdir()
            (target / "theirs").write_text("theirs")
        return found

    monkeypatch.setattr(_atomic.Path, "exists", filled_after_check)
    with pytest.raises(OSError) as info:
        _atomic.swap_in(staging, target, remove_old=pytest.fail)
    assert info.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
    assert (target / "theirs").read_text() == "theirs"


def test_the_staging_folder_takes_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        staging = _staged(tmp_path)
        _atomic.swap_in(staging, tmp_path / "new", remove_old=pytest.fail)
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "new").st_mode & 0o777 == 0o750


def test_write_whole_leaves_no_part_of_a_file_on_a_crash(tmp_path):
    target = tmp_path / "shard.parquet"
    target.write_text("previous")

    def crash(path):
        path.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _atomic.write_whole(target, crash)
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["shard.parquet"]
    _atomic.write_whole(target, lambda path: path.write_text("whole"))
    assert target.read_text() == "whole"
    assert [p.name for p in tmp_path.iterdir()] == ["shard.parquet"]


def test_the_folder_lock_serialises_two_writers(tmp_path):
    order, held, trying = [], threading.Event(), threading.Event()

    def first():
        with _atomic.folder_lock(tmp_path):
            held.set()
            order.append("first in")
            trying.wait(10)
            threading.Event().wait(0.3)  # unlocked, the second would enter now
            order.append("first out")

    def second():
        held.wait(10)
        trying.set()
        with _atomic.folder_lock(tmp_path):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert order == ["first in", "first out", "second in"]
    assert list(tmp_path.iterdir()) == []  # no lock file left behind


def test_staging_takes_the_callers_prefix_and_error(tmp_path):
    staging = _atomic.staging_folder(tmp_path / "model", "test", prefix=".tmp-model-")
    assert staging.parent == tmp_path and staging.name.startswith(".tmp-model-")
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ValueError, match="test: cannot write next to `path`"):
        _atomic.staging_folder(tmp_path / "file" / "x", "test")
    with pytest.raises(LookupError, match="^an OSError$"):
        _atomic.staging_folder(
            tmp_path / "file" / "x",
            "test",
            error=lambda exc: LookupError("an OSError" * isinstance(exc, OSError)),
        )


def test_publish_puts_a_folder_in_place_and_a_racing_twin_wins(tmp_path):
    target = tmp_path / "model"
    assert _atomic.publish(_staged(tmp_path, "model"), target, pytest.fail)
    assert (target / "a").read_text() == "a"
    twin = _staged(tmp_path, "model", files=("b",))
    assert not _atomic.publish(twin, target, lambda folder: folder == target)
    assert not twin.exists() and sorted(p.name for p in target.iterdir()) == ["a"]
    # A folder there that is not a complete one is an error; staging is kept.
    other = _staged(tmp_path, "model", files=("c",))
    with pytest.raises(OSError):
        _atomic.publish(other, target, lambda folder: False)
    assert (other / "c").is_file() and (target / "a").is_file()


def _foreign(tmp_path, name, kind):
    """``name`` in ``tmp_path`` as something skloes did not write; the file
    outside that a link points to, if any."""
    path, outside = tmp_path / name, tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("user's")
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "dangling":
        path.symlink_to(tmp_path.parent / f"{tmp_path.name}-nowhere")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path, outside


FOREIGN = ["link", "dangling", "fifo", "folder"]


@pytest.mark.parametrize("kind", FOREIGN)
def test_write_whole_never_writes_through_a_link_or_into_a_special_file(tmp_path, kind):
    path, outside = _foreign(tmp_path, "shard.parquet", kind)
    with pytest.raises(_atomic.ForeignFile, match=r"shard\.parquet'.* is a"):
        _atomic.write_whole(path, lambda tmp: tmp.write_text("ours"))
    assert outside.read_text() == "user's"
    assert not (tmp_path.parent / f"{tmp_path.name}-nowhere").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["shard.parquet"]  # nothing left


@pytest.mark.parametrize("kind", FOREIGN)
def test_the_writer_note_is_never_followed_nor_opened(tmp_path, kind):
    """A ``.skloes-writer`` carried in (a tarball, a shared disk) that is a
    link or a special file refuses the folder naming it, writes nothing
    outside, never blocks on a pipe, and leaves the lock free."""
    path, outside = _foreign(tmp_path, _atomic.WRITER_NOTE, kind)
    with pytest.raises(_atomic.ForeignFile, match=r"\.skloes-writer'.* is a"):
        _atomic.WriterLock(tmp_path)
    assert outside.read_text() == "user's"
    assert not (tmp_path.parent / f"{tmp_path.name}-nowhere").exists()
    assert os.path.lexists(path)
    path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    lock = _atomic.WriterLock(tmp_path)  # the lock was released
    assert (tmp_path / _atomic.WRITER_NOTE).read_text().startswith("pid ")
    lock.release()
    assert list(tmp_path.iterdir()) == []


def test_a_busy_folder_whose_note_is_a_pipe_names_no_holder_without_blocking(
    tmp_path,
):
    lock = _atomic.WriterLock(tmp_path)
    (tmp_path / _atomic.WRITER_NOTE).unlink()
    os.mkfifo(tmp_path / _atomic.WRITER_NOTE)
    with pytest.raises(_atomic.FolderBusy, match="another process"):
        _atomic.WriterLock(tmp_path)
    lock.release()  # does not open the pipe either
    assert (tmp_path / _atomic.WRITER_NOTE).exists()
