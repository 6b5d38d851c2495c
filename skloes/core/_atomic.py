"""Folders and files that appear whole, and the one lock of a folder.

A reader never sees half of something skloes writes. A folder (a saved probe)
is written into a hidden sibling made by :func:`staging_folder`, then put in
place by :func:`swap_in` (or by :func:`publish`, where a folder once written
is never replaced: a prepared model); a file is written beside its place and
renamed over it by :func:`write_whole` (or, for a file filled over time such
as a memory map, :func:`temporary_beside` then :func:`put_in_place`). Both
rely on ``rename`` being atomic within one file system, which is why the
staging is a sibling.

:class:`FolderLock` is the one lock of a folder: ``flock`` on what it opens
(the folder itself, or a lock file of its own in it), released on every path
out, its holder named in the message of a writer it refuses
(:class:`FolderBusy`). Waiting, it serialises the writers that swap into one
parent folder; not waiting, it makes a job the one writer of its folder.

The rule of every file skloes writes lives here: it is written only whole,
never through a symbolic link and never into a special file (a pipe, a
device, a folder): :func:`foreign_problem` says why a path is not skloes's
to replace, and :func:`write_whole` (and the lock's note) refuse it with
:class:`ForeignFile`, naming the file. Which files of a folder are its
writer's own (a manifest's hashes, a fixed set of names) stays with the
folder's owner.

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
import stat
import sys
import tempfile
from pathlib import Path

try:  # POSIX only: elsewhere the lock is a no-op (one writer assumed)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

#: Whether :class:`FolderLock` locks (False where ``flock`` is missing).
CAN_LOCK = fcntl is not None

__all__ = [
    "CAN_LOCK",
    "WRITER_NOTE",
    "FolderBusy",
    "FolderLock",
    "ForeignFile",
    "check_replaceable",
    "exchange",
    "foreign_problem",
    "give_umask_mode",
    "publish",
    "put_in_place",
    "staging_folder",
    "swap_in",
    "temporary_beside",
    "writable_problem",
    "write_bytes_whole",
    "write_whole",
]


class ForeignFile(ValueError):
    """A path skloes was to write holds something it did not write and may
    not replace: a symbolic link, or not a regular file. The message names
    the file and what to do; ``path`` and ``problem`` say it in parts."""

    def __init__(self, path, problem):
        self.path, self.problem = Path(path), problem
        super().__init__(
            f"{os.fspath(path)!r} {problem}; skloes writes only regular files of "
            "its own, never through a link or into a special file: move it away, "
            "or choose another folder."
        )


def foreign_problem(path):
    """Why ``path`` is not a file skloes may replace, or None (absent, or a
    regular file). Never follows a link and never opens the file (a named
    pipe would block)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be inspected ({exc.strerror or type(exc).__name__})"
    if stat.S_ISLNK(mode):
        target = os.readlink(path)
        dangling = "" if os.path.exists(path) else ", dangling"
        return f"is a symbolic link (to {target!r}{dangling})"
    if stat.S_ISDIR(mode):
        return "is a folder"
    if not stat.S_ISREG(mode):
        kind = "a named pipe" if stat.S_ISFIFO(mode) else "a special file"
        return f"is {kind}, not a regular file"
    return None


def check_replaceable(path):
    """Raise :class:`ForeignFile` unless ``path`` is absent or a regular file."""
    problem = foreign_problem(path)
    if problem:
        raise ForeignFile(path, problem)


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


class FolderBusy(Exception):
    """Another live process holds the lock of a folder; ``holder`` says who
    (``pid ... on host ..., since ...``) as its note records it."""

    def __init__(self, folder, holder):
        self.folder, self.holder = folder, holder
        super().__init__(f"{os.fspath(folder)!r} is being written by {holder}")


WRITER_NOTE = ".skloes-writer"
_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class FolderLock:
    """The one lock of a folder: ``flock`` on what the lock opens, held until
    :meth:`release` (or the ``with`` block ends, or the process ends: a killed
    holder's lock goes with it, so a stale lock is taken over by the next
    one, safely).

    Parameters
    ----------
    folder : str or os.PathLike
        The folder to lock.
    wait : bool, default=False
        Wait for the lock (the writers that swap into one parent folder take
        turns); else a second holder meets :class:`FolderBusy` at once.
    file : str or None, default=None
        None: ``flock`` on the folder itself, so that no lock file is left
        behind. A name: a lock file of the lock's own in ``folder``, created
        (never through a link) and removed on release; a folder's owner uses
        one where the file's presence says a lock was ever taken there (the
        model cache's staging rule, :mod:`skloes.models._registry`).
    note : bool, default=False
        Say who holds it in ``folder/.skloes-writer`` (pid, host and start
        time), the lock's own file, rewritten whole by each holder and removed
        on release; a second holder's :class:`FolderBusy` quotes it. A note
        that is a symbolic link or a special file is never followed nor
        opened: the folder is refused with :class:`ForeignFile`.

    Where ``flock`` is missing (Windows) the lock is a no-op.
    """

    def __init__(self, folder, *, wait=False, file=None, note=False):
        self.folder, self.file = Path(folder), file
        self.fd, self.note = None, None
        if fcntl is None:  # pragma: no cover - Windows
            return
        fd = self._open(self.folder, file)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if wait or exc.errno not in _BUSY:
                raise
            raise FolderBusy(self.folder, self._holder()) from None
        self.fd = fd
        if note:
            self._write_note()

    @staticmethod
    def _open(folder, file, create=True):
        if file is None:
            return os.open(folder, os.O_RDONLY)
        flags = getattr(os, "O_NOFOLLOW", 0)
        flags |= os.O_WRONLY | os.O_CREAT if create else os.O_RDONLY
        return os.open(folder / file, flags, 0o666)

    @classmethod
    def is_held(cls, folder, file=None) -> bool:
        """Whether a live process holds the lock of ``folder`` (False where
        ``flock`` is missing)."""
        if fcntl is None:  # pragma: no cover - Windows
            return False
        fd = cls._open(Path(folder), file, create=False)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing releases the lock just taken
        return False

    def _write_note(self):
        import socket
        import time

        self.note = (
            f"pid {os.getpid()} on host {socket.gethostname()}, since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}"
        )
        text = self.note
        try:
            write_whole(
                self.folder / WRITER_NOTE,
                lambda tmp: tmp.write_text(text, encoding="utf-8"),
            )
        except ForeignFile:
            self.release()
            raise
        except OSError:  # a read-only folder: the caller's writes will say so
            pass

    def _holder(self):
        note = self.folder / WRITER_NOTE
        if foreign_problem(note):
            return "another process"
        try:
            return note.read_text(encoding="utf-8")[:200]
        except (OSError, UnicodeDecodeError):
            return "another process"

    def release(self):
        """Remove the note (if still this holder's) and the lock file, then
        release the lock (again: nothing happens)."""
        if self.fd is None:
            return
        note = self.folder / WRITER_NOTE
        if self.note is not None:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                if (
                    not foreign_problem(note)
                    and note.read_text(encoding="utf-8") == self.note
                ):
                    note.unlink()
        if self.file is not None:
            with contextlib.suppress(OSError):
                (self.folder / self.file).unlink()
        os.close(self.fd)
        self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()


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


def temporary_beside(path, prefix=None, suffix=""):
    """A new empty hidden file next to ``path`` to write it into, as a Path.

    ``prefix``: its name before the random part (default ``.NAME-``); a job
    passes one that carries its own token, so that what a killed writer
    leaves is told from any file of the user's. ``suffix``: after it (the
    hidden-states cache's ``.part``, which its pruning recognises).
    """
    path = Path(path)
    prefix = f".{path.name}-" if prefix is None else prefix
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=suffix)
    os.close(fd)
    return Path(tmp)


def put_in_place(tmp, path, *, durable=True, mode=None) -> None:
    """Rename the complete temporary file ``tmp`` (from
    :func:`temporary_beside`) onto ``path``; ``tmp`` is removed on any error.

    A ``path`` that is a symbolic link or not a regular file is refused
    (:class:`ForeignFile`). ``durable``: flush the file to disk first (False
    for a cache's entry, which a crash may lose: it is a miss). ``mode``: the
    file's permissions (default: what the umask gives a new file; ``mkstemp``
    makes it 0600).
    """
    try:
        check_replaceable(path)
        if durable:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
        if mode is None:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_whole(path, write, prefix=None, *, suffix="", durable=True, mode=None):
    """Write a file so that it appears only whole: ``write(tmp)`` fills a
    hidden sibling (:func:`temporary_beside`), which is flushed to disk and
    renamed onto ``path`` (:func:`put_in_place`, whose ``durable`` and
    ``mode`` these are). The one way skloes writes a whole file.

    A ``path`` that is a symbolic link or not a regular file is refused
    (:class:`ForeignFile`) before anything is written. A crash leaves no file
    at ``path`` (or the previous one), never part of one; the hidden sibling
    is removed on any error.
    """
    path = Path(path)
    check_replaceable(path)
    tmp = temporary_beside(path, prefix, suffix)
    try:
        write(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    put_in_place(tmp, path, durable=durable, mode=mode)


def write_bytes_whole(path, data: bytes, prefix=None, **options) -> None:
    """:func:`write_whole` of ``data``, bytes made before anything is written
    (so that a text that cannot be encoded leaves no file behind); the
    ``options`` are :func:`write_whole`'s."""
    write_whole(path, lambda tmp: tmp.write_bytes(data), prefix=prefix, **options)


def writable_problem(folder):
    """Why files cannot be written into ``folder`` (or the nearest folder of
    it that exists), or None: a file is made there and removed."""
    probe = Path(folder)
    while not probe.exists():
        probe = probe.parent
    try:
        os.unlink(temporary_beside(probe / "x", prefix=".skloes-write-test-"))
    except OSError as exc:
        return f"is not writable ({exc.strerror or type(exc).__name__} on {probe})"
    return None
