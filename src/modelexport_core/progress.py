"""A progress display for the slow steps of an export (loading, exporting, verifying)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console


@contextmanager
def progress_display(console: Console, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """Yields a callback that shows the current step with a spinner; silent when disabled or not a terminal."""
    if not enabled or not console.is_terminal:
        yield lambda _step: None
        return
    with console.status("starting") as status:
        yield lambda step: status.update(f"{step}...")
