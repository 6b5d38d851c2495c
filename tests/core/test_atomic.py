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
        with _atomic.FolderLock(tmp_path, wait=True):
            held.set()
            order.append("first in")
            trying.wait(10)
            threading.Event().wait(0.3)  # unlocked, the second would enter now
            order.append("first out")

    def second():
        held.wait(10)
        trying.set()
        with _atomic.FolderLock(tmp_path, wait=True):
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
        _atomic.FolderLock(tmp_path, note=True)
    assert outside.read_text() == "user's"
    assert not (tmp_path.parent / f"{tmp_path.name}-nowhere").exists()
    assert os.path.lexists(path)
    path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    lock = _atomic.FolderLock(tmp_path, note=True)  # the lock was released
    assert (tmp_path / _atomic.WRITER_NOTE).read_text().startswith("pid ")
    lock.release()
    assert list(tmp_path.iterdir()) == []


def test_a_busy_folder_whose_note_is_a_pipe_names_no_holder_without_blocking(
    tmp_path,
):
    lock = _atomic.FolderLock(tmp_path, note=True)
    (tmp_path / _atomic.WRITER_NOTE).unlink()
    os.mkfifo(tmp_path / _atomic.WRITER_NOTE)
    with pytest.raises(_atomic.FolderBusy, match="another process"):
        _atomic.FolderLock(tmp_path, note=True)
    lock.release()  # does not open the pipe either
    assert (tmp_path / _atomic.WRITER_NOTE).exists()


def test_a_lock_file_of_its_own_is_removed_on_release_and_tells_a_live_holder(
    tmp_path,
):
    """The lock on a file of its own (the model cache's staging folders):
    held, a second holder is refused and :meth:`is_held` says so; released,
    the file is gone and the lock is free."""
    lock = _atomic.FolderLock(tmp_path, file=".lock")
    assert (tmp_path / ".lock").is_file()
    assert _atomic.FolderLock.is_held(tmp_path, file=".lock")
    with pytest.raises(_atomic.FolderBusy, match="another process"):
        _atomic.FolderLock(tmp_path, file=".lock")
    lock.release()
    lock.release()  # again: nothing happens
    assert list(tmp_path.iterdir()) == []
    with _atomic.FolderLock(tmp_path, file=".lock"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_the_lock_is_released_when_its_block_raises(tmp_path):
    with pytest.raises(RuntimeError), _atomic.FolderLock(tmp_path, note=True):
        raise RuntimeError("the job failed")
    assert not _atomic.FolderLock.is_held(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("durable", [True, False])
def test_a_whole_file_gets_the_mode_asked_or_the_umasks(tmp_path, durable):
    old = os.umask(0o022)
    try:
        _atomic.write_bytes_whole(tmp_path / "a", b"x", durable=durable)
        _atomic.write_bytes_whole(tmp_path / "b", b"y", mode=0o600, suffix=".json")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a").st_mode & 0o777 == 0o644
    assert os.stat(tmp_path / "b").st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_a_file_filled_over_time_is_put_in_place_or_removed(tmp_path):
    tmp = _atomic.temporary_beside(tmp_path / "out.npy", ".tmp-", ".part")
    assert tmp.parent == tmp_path and tmp.name.endswith(".part")
    tmp.write_bytes(b"whole")
    _atomic.put_in_place(tmp, tmp_path / "out.npy")
    assert [p.name for p in tmp_path.iterdir()] == ["out.npy"]
    tmp = _atomic.temporary_beside(tmp_path / "link")
    (tmp_path / "link").symlink_to(tmp_path / "out.npy")
    with pytest.raises(_atomic.ForeignFile, match="symbolic link"):
        _atomic.put_in_place(tmp, tmp_path / "link")
    assert not tmp.exists() and (tmp_path / "out.npy").read_bytes() == b"whole"


def test_writable_problem_names_the_folder_that_refuses(tmp_path):
    assert _atomic.writable_problem(tmp_path / "not" / "yet") is None
    assert list(tmp_path.iterdir()) == []
    if os.geteuid() == 0:
        pytest.skip("root writes everywhere")
    tmp_path.chmod(0o500)
    try:
        problem = _atomic.writable_problem(tmp_path / "x")
    finally:
        tmp_path.chmod(0o700)
    assert problem.startswith("is not writable (Permission denied on")
