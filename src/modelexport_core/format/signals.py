"""SIGTERM and SIGINT as an exception, so that an export stopped by either unwinds and removes its work folder.

The command line installs the handlers (``stop_on_signals``); the library only marks the few steps
that must not be cut in half (``deferred_signals``: moving the finished files into place).
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_deferring = 0
_received: list[int] = []  # the stop signal received within ``stop_on_signals``, even where its exception was lost


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
    _received[:] = [signum]
    for each in STOP_SIGNALS:
        if signal.getsignal(each) is _on_signal:
            signal.signal(each, signal.SIG_IGN)
    if not _deferring:  # within ``deferred_signals`` it takes effect at the block's end (``_received``)
        raise Stopped(signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise ``Stopped``; a signal the parent ignores stays ignored
    (a background job in a shell ignores SIGINT)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    _received.clear()
    previous = {each: signal.getsignal(each) for each in STOP_SIGNALS}
    unraisable = sys.unraisablehook

    def quiet_stop(lost: "sys.UnraisableHookArgs") -> None:
        # a stop raised where Python can only print it (a finalizer): ``_received`` keeps it, so no traceback
        if not isinstance(lost.exc_value, Stopped):
            unraisable(lost)

    for each, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(each, _on_signal)
    sys.unraisablehook = quiet_stop
    try:
        yield
    finally:
        _received.clear()  # outside the block no stop is pending (a library call after a stopped command)
        sys.unraisablehook = unraisable
        for each, handler in previous.items():
            if handler is not None:
                signal.signal(each, handler)


def stop_if_signalled() -> None:
    """Raise ``Stopped`` where a stop signal came and its exception was lost on the way: code run as the signal
    came may swallow it (an exception raised in a finalizer is only printed) or turn it into another error (a
    library's native code calling back into Python), and an export must not go on as if it had not come."""
    if _received and not _deferring:
        raise Stopped(_received[0])


@contextmanager
def deferred_signals() -> Iterator[None]:
    """A stop signal that arrives within the block takes effect at its end; one that came before it, at its
    start (the step it guards is not begun)."""
    global _deferring
    stop_if_signalled()
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    stop_if_signalled()
