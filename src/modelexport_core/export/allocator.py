"""The command's memory allocator: large buffers reused from the heap instead of mapped afresh each time.

An export allocates and frees buffers of tens to hundreds of megabytes over and over (weights
folded, copied, serialized). glibc's ``malloc`` gives every block over its mmap threshold (at most
32 MB, adjusted as it goes) pages of its own and returns them on ``free``, so each new buffer is
faulted in and zeroed by the kernel again: a plain TorchScript export of GPT-2 small takes 1.5
million page faults (6 GB touched for a 2.7 GB peak), over 6 s of system time. With the threshold
raised, freed blocks stay in the heap and are reused: 0.66 million faults, 2.5 s less system time,
the same peak (see docs/overhead.md). One arena for every thread: with an arena per thread, what one
thread frees is held beside the memory the others allocate (htp's GPT-2 peak 3.3 GB instead of 2.7).
The ``modelexport`` command sets this for its own process; the library leaves a caller's process as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
LARGEST = 2**31 - 1
"""The largest value ``mallopt`` takes (an ``int``): no block is mapped alone, no freed top trimmed."""

OWN_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX")
"""Environment variables through which a user has tuned glibc's allocator: then it is left as they set it."""

SETTINGS = ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, LARGEST), (M_TRIM_THRESHOLD, LARGEST))
"""What the command sets (``mallopt`` parameter, value)."""

ENVIRONMENT = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(LARGEST), "MALLOC_TRIM_THRESHOLD_": str(LARGEST)}
"""The same settings as glibc's environment variables (for another process: a benchmark's plain export)."""

OPT_OUT = "MODELEXPORT_SYSTEM_MALLOC"
"""Set to 1 to leave the allocator at the system's defaults."""


def keep_freed_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; whether they were raised.

    Nothing happens off glibc (macOS, Windows, musl), where the user tuned the allocator through the
    environment, or where ``MODELEXPORT_SYSTEM_MALLOC=1``.
    """
    if not sys.platform.startswith("linux") or os.environ.get(OPT_OUT, "") not in ("", "0"):
        return False
    if any(name in os.environ for name in OWN_SETTINGS) or "malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # one arena: a block freed by one thread (htp's second) is reused by the others, not held beside them
    return all([bool(mallopt(parameter, value)) for parameter, value in SETTINGS])
