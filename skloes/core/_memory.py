"""Process memory: hand freed heap back to the operating system."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import ctypes


def release_memory() -> None:
    """Hand freed heap memory back to the operating system (glibc only).

    glibc keeps the variable-size buffers a forward pass frees in its heap, so a
    long extraction's resident memory creeps up batch after batch (about 70 MiB
    over 2,000 MiniLM texts, see :ref:`extraction-memory`); ``malloc_trim``
    returns them. A no-op where glibc is not the C library.
    """
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None


def available_memory():
    """Bytes of memory this process can still take without swapping, or None
    where the system does not say (Linux's ``MemAvailable``; the cgroup's
    limit less its use, where a container sets a lower one)."""
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            limit = handle.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as handle:
            used = int(handle.read().strip())
        if limit != "max":
            found.append(max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return min(found) if found else None
