"""SIGTERM and SIGINT as an exception, so that an export stopped by either unwinds and removes its work folder.

The command line installs the handlers (``stop_on_signals``); the library only marks the few steps
that must not be cut in half (``deferred_signals``: moving the finished files into place).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_deferring = 0
_pending: list[int] = []


class Stopped(BaseException):
    """The process received SIGTERM or SIGINT. A BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` of a strategy's fallback takes it for a failed attempt."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 plus the signal number (143 for SIGTERM, 130 for SIGINT)."""
        return 128 + self.signum


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    # one stop is enough: later signals must not cut the clean-up short
    for each in STOP_SIGNALS:
        if signal.getsignal(each) is _on_signal:
            signal.signal(each, signal.SIG_IGN)
    if _deferring:
        _pending.append(signum)
        return
    raise Stopped(signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise ``Stopped``; a signal the parent ignores stays ignored
    (a background job in a shell ignores SIGINT)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = {each: signal.getsignal(each) for each in STOP_SIGNALS}
    for each, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(each, _on_signal)
    try:
        yield
    finally:
        for each, handler in previous.items():
            if handler is not None:
                signal.signal(each, handler)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """A stop signal that arrives within the block takes effect at its end."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring and _pending:
        signum = _pending.pop()
        _pending.clear()
        raise Stopped(signum)
