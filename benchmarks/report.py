"""Shared pieces of the benchmark scripts: running a child and measuring it, the machine, Markdown sections."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "overhead.md"


@dataclass
class Run:
    """One child process: its wall time, its own peak resident memory, and whether it succeeded."""

    seconds: float
    peak_mb: float
    returncode: int
    stderr_tail: str = ""
    cpu_seconds: float = 0.0  # user + system time: on a loaded machine, close to what an idle one takes


def measure(command: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> Run:
    """Run ``command`` as a child; wall time around it, its peak RSS and CPU time from ``wait4`` (its own, not a max).

    Every run starts with the page cache written back (``sync``, untimed): the gigabytes the previous run
    wrote would otherwise be flushed while this one writes, and charged to whichever run came second.
    """
    os.sync()
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, cwd=cwd,
                                   env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        tail = errors.read().decode(errors="replace").strip().splitlines()[-3:]
    return Run(seconds, usage.ru_maxrss / 1024, process.returncode, " | ".join(tail),
               usage.ru_utime + usage.ru_stime)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def machine() -> str:
    memory_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    versions = ", ".join(
        f"{name} {_version(name)}" for name in ("torch", "onnx", "onnxruntime", "onnxscript", "transformers")
    )
    return (f"{os.cpu_count()} cores, {memory_kb / 1024**2:.0f} GiB RAM, {platform.machine()}, "
            f"Python {platform.python_version()}; {versions}")


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def command_line() -> str:
    return " ".join([".venv/bin/python", os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])


def replace_section(path: Path, name: str, text: str) -> None:
    """Put ``text`` between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in ``path`` (appended if absent)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    current = path.read_text() if path.exists() else "# Overhead of tagging\n"
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        current = head + block + rest.split(end, 1)[1]
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(current)
    os.replace(temporary, path)
