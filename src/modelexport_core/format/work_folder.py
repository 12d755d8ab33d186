"""The hidden work folder an export writes in beside its output, and the removal of those a stopped export left.

Each folder records the process that owns it (pid, the process's start time and the host) in a file
inside it. A later run in the same output folder removes the folders whose owner is gone (killed,
out of memory) and never one whose owner still runs, here or on another host.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from modelexport_core.format.signals import deferred_signals

PREFIX = ".modelexport-"
OWNER_FILE = ".owner"

_open: set[Path] = set()


class StaleWorkFolderWarning(UserWarning):
    """Work folders left by exports that were stopped were removed from the output folder."""


@dataclass(frozen=True)
class Owner:
    """The process a work folder belongs to."""

    pid: int
    started: str  # the process's start time in clock ticks since boot (/proc/PID/stat), "" where unknown
    host: str

    def line(self) -> str:
        return f"{self.pid} {self.started} {self.host}\n"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        fields = text.split()
        if len(fields) != 3 or not fields[0].isdigit():
            return None
        return cls(int(fields[0]), fields[1], fields[2])


def _process_stat(pid: int) -> tuple[str, str] | None:
    """A process's state letter and start time from /proc; None where it has no entry or /proc is absent."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return fields[0], fields[19]


def current_owner() -> Owner:
    stat = _process_stat(os.getpid())
    return Owner(os.getpid(), stat[1] if stat else "-", socket.gethostname())


def owner_alive(owner: Owner) -> bool:
    """Whether the owner may still run; a process on another host, or one that cannot be checked, counts as running."""
    if owner.host != socket.gethostname():
        return True
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process with that pid: it exists
    stat = _process_stat(owner.pid)
    if stat is None:
        return True
    state, started = stat
    if state in ("Z", "X"):  # killed, not yet reaped by its parent
        return False
    return owner.started in ("-", started)  # a different start time: the pid was reused


def read_owner(folder: Path) -> Owner | None:
    try:
        return Owner.parse((folder / OWNER_FILE).read_text())
    except OSError:
        return None


def stale_work_folders(parent: Path) -> list[tuple[Path, Owner]]:
    """The work folders in ``parent`` whose owner has stopped; a folder that names no owner is left alone."""
    stale = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(PREFIX) or entry.is_symlink() or not entry.is_dir():
            continue
        owner = read_owner(entry)
        if owner is not None and not owner_alive(owner):
            stale.append((entry, owner))
    return sorted(stale)


def remove_stale_work_folders(parent: Path) -> list[tuple[Path, Owner]]:
    """Remove the work folders of stopped exports from ``parent``; one warning line says what went."""
    removed = []
    for folder, owner in stale_work_folders(parent):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append((folder, owner))
    if removed:
        pids = ", ".join(str(owner.pid) for _, owner in removed)
        warnings.warn(
            f"removed {len(removed)} work folder(s) left in {parent} by stopped export(s) (pid {pids})",
            StaleWorkFolderWarning,
            stacklevel=2,
        )
    return removed


def open_work_folder(parent: Path) -> Path:
    """A new work folder in ``parent`` that records this process as its owner, after removing stale ones."""
    remove_stale_work_folders(parent)
    with deferred_signals():  # a stop between creating and recording leaves no folder without an owner
        path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        _open.add(path)
        (path / OWNER_FILE).write_text(current_owner().line())
    return path


def close_work_folder(path: Path) -> None:
    """Remove a work folder and all in it."""
    shutil.rmtree(path, ignore_errors=True)
    _open.discard(path)


def close_open_work_folders() -> list[Path]:
    """Remove every work folder this process still has open (on a stop signal); returns those there were."""
    closed = sorted(_open)
    for path in closed:
        close_work_folder(path)
    return closed


def is_work_file(path: Path) -> bool:
    """The owner record, which is not part of an export's output."""
    return path.name == OWNER_FILE
