"""Folders and files that appear whole: staged beside their place, then swapped in.

A reader never sees half of something skloes writes. A folder (a saved probe)
is written into a hidden sibling made by :func:`staging_folder`, then put in
place by :func:`swap_in` (or by :func:`publish`, where a folder once written
is never replaced: a prepared model); a file (a store's shard) is written
beside its place and renamed over it by :func:`write_whole`. Both rely on ``rename``
being atomic within one file system, which is why the staging is a sibling.
:func:`folder_lock` serialises the writers of one parent folder, so that two
processes saving to the same place cannot both believe they won.

May import: utils.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys
import tempfile
from pathlib import Path

try:  # POSIX only: elsewhere the lock is a no-op (one writer assumed)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = [
    "FolderBusy",
    "WriterLock",
    "exchange",
    "folder_lock",
    "give_umask_mode",
    "publish",
    "staging_folder",
    "swap_in",
    "write_whole",
]


def staging_folder(folder: Path, owner: str, prefix=None, error=None) -> Path:
    """A new hidden sibling of ``folder`` to write into (``.NAME-XXXX``).

    ``prefix``: the sibling's name before its random part (default
    ``.NAME-``). ``error(exc)``: the exception to raise when the system
    refuses (default: a ``ValueError`` naming ``owner`` and ``folder``).
    """
    prefix = f".{folder.name}-" if prefix is None else prefix
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=folder.parent, prefix=prefix))
    except OSError as exc:
        if error is not None:
            raise error(exc) from None
        raise ValueError(
            f"{owner}: cannot write next to `path` {os.fspath(folder)!r}: {exc}"
        ) from None


def give_umask_mode(folder: Path) -> None:
    """The mode the umask gives a new folder (``mkdtemp`` makes it 0700)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)


@contextlib.contextmanager
def folder_lock(parent: Path):
    """Hold an exclusive lock on ``parent`` (``flock`` on the folder itself:
    no lock file is left behind) for the writers that swap into it."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class FolderBusy(Exception):
    """Another live process holds the writer lock of a folder; ``holder``
    says who (``pid ... on host ..., since ...``) as its note records it."""

    def __init__(self, folder, holder):
        self.folder, self.holder = folder, holder
        super().__init__(f"{os.fspath(folder)!r} is being written by {holder}")


WRITER_NOTE = ".skloes-writer"


class WriterLock:
    """The one writer of a folder: ``flock`` on the folder itself, held
    until :meth:`release` or the process ends (a killed holder's lock goes
    with it, so a stale lock is taken over by the next writer, safely).

    The lock is the same one :func:`folder_lock` takes, taken without
    waiting: a second writer meets :class:`FolderBusy` at once. A note
    (``.skloes-writer``: pid, host and start time) says who holds it; it is
    the lock's own file, rewritten by each holder and removed on release.
    Where ``flock`` is missing (Windows) the lock is a no-op.
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        self.fd = None
        if fcntl is None:  # pragma: no cover - Windows
            return
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise FolderBusy(self.folder, self._holder()) from None
        self.fd = fd
        import socket
        import time

        self.note = (
            f"pid {os.getpid()} on host {socket.gethostname()}, since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}"
        )
        with contextlib.suppress(OSError):
            (self.folder / WRITER_NOTE).write_text(self.note, encoding="utf-8")

    def _holder(self):
        try:
            return (self.folder / WRITER_NOTE).read_text(encoding="utf-8")[:200]
        except (OSError, UnicodeDecodeError):
            return "another process"

    def release(self):
        """Remove the note (if still this holder's) and release the lock."""
        if self.fd is None:
            return
        note = self.folder / WRITER_NOTE
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if note.read_text(encoding="utf-8") == self.note:
                note.unlink()
        os.close(self.fd)
        self.fd = None


def swap_in(staging: Path, folder: Path, remove_old) -> None:
    """Put the complete ``staging`` folder at ``folder``, atomically.

    Where ``folder`` does not exist (or is an empty folder) the staging
    folder is renamed onto it; a folder that another writer filled meanwhile
    makes the rename fail (``ENOTEMPTY``) instead of being replaced. Where it
    exists, the old folder and the new swap places in one step (Linux
    ``renameat2``); elsewhere the old one is moved aside first, so that at
    every instant ``folder`` is the old folder, the new one, or (for that
    instant only) absent with the old one kept aside. ``remove_old(old)``
    then removes what the old folder held that the caller wrote.
    """
    give_umask_mode(staging)
    if not folder.exists() or (folder.is_dir() and not any(folder.iterdir())):
        os.rename(staging, folder)
        return
    if exchange(staging, folder):
        remove_old(staging)
        return
    aside = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-old-"))
    try:
        os.rename(folder, aside / "old")
    except BaseException:
        aside.rmdir()  # nothing moved: no hidden folder is left behind
        raise
    try:
        os.rename(staging, folder)
    except BaseException:
        os.rename(aside / "old", folder)  # the old folder goes back
        aside.rmdir()
        raise
    remove_old(aside / "old")
    with contextlib.suppress(OSError):
        aside.rmdir()


def publish(staging: Path, folder: Path, complete) -> bool:
    """Rename the complete ``staging`` folder to ``folder``, where none is yet.

    Of two writers racing to the same ``folder``, the first rename wins:
    where ``folder`` holds another writer's folder that ``complete(folder)``
    accepts, ``staging`` is removed and False is returned; any other failed
    rename raises its ``OSError`` (``staging`` is kept, the caller's to
    remove). Unlike :func:`swap_in`, a folder already there is never
    replaced (readers may be using it).
    """
    try:
        os.rename(staging, folder)
    except OSError:
        if not complete(folder):
            raise
        shutil.rmtree(staging, ignore_errors=True)
        return False
    return True


def exchange(a, b) -> bool:
    """Swap two folders in one step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    at_cwd, rename_exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), os.fspath(b))


def write_whole(path, write, prefix=None) -> None:
    """Write a file so that it appears only whole: ``write(tmp)`` fills a
    hidden sibling, which is flushed to disk and renamed onto ``path``.

    A crash leaves no file at ``path`` (or the previous one), never part of
    one; the hidden sibling is removed on any error. ``prefix``: the hidden
    sibling's name before its random part (default ``.NAME-``); a job passes
    one that carries its own token, so that what a killed writer leaves is
    told from any file of the user's.
    """
    path = Path(path)
    prefix = f".{path.name}-" if prefix is None else prefix
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
