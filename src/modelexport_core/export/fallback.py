"""The strategy fallback loop: strategies tried in turn, each attempt a result, the first success kept.

Exporting, tagging an existing file and comparing strategies all walk a chain of
strategies the same way; each step is run here, owns its try/except and comes back as
an :class:`AttemptResult` (as torch.onnx's own capture strategies return a ``Result``),
so that no caller re-reads an exception's message to learn why an attempt failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Generic, Iterable, TypeVar

from modelexport_core.errors import AllStrategiesFailedError, ModelExportError, VerificationError, first_line, full_text
from modelexport_core.format.sidecar import Attempt
from modelexport_core.format.signals import stop_if_signalled
from modelexport_core.plugin.discovery import StrategyInfo
from modelexport_core.plugin.strategy import StrategyFailed, StrategyUnavailable

T = TypeVar("T")


class AttemptFailed(Exception):
    """An attempt whose file failed the checker or verification; the chain goes on."""

    def __init__(self, reason: str, max_abs_diff: float | None = None):
        super().__init__(reason)
        self.max_abs_diff = max_abs_diff


@dataclass
class AttemptResult(Generic[T]):
    """One strategy tried: its record (strategy, status, reason, seconds) and what it made when it succeeded."""

    attempt: Attempt
    value: T | None = None

    @property
    def ok(self) -> bool:
        return self.attempt.status == "ok"

    @property
    def strategy(self) -> str:
        return self.attempt.strategy

    @property
    def reason(self) -> str:
        return self.attempt.reason

    @property
    def seconds(self) -> float:
        return self.attempt.seconds

    def made(self) -> T:
        """What a successful attempt made (an error to ask a failed one)."""
        if self.value is None:
            raise ValueError(f"{self.strategy} {self.attempt.status}: it made nothing")
        return self.value


def _detail(error: BaseException) -> str:
    detail = getattr(error, "detail", "") or (full_text(error.__cause__) if error.__cause__ else "")
    return detail if detail and detail.strip() != str(error).strip() else ""


def failed_attempt(name: str, error: BaseException, seconds: float) -> Attempt:
    """The record of a failed attempt: one line for people, the whole message for the sidecar."""
    if isinstance(error, StrategyUnavailable):
        return Attempt(name, "unavailable", first_line(error), detail=_detail(error), seconds=seconds)
    if isinstance(error, AttemptFailed):
        return Attempt(name, "failed", str(error), max_abs_diff=error.max_abs_diff, seconds=seconds)
    if isinstance(error, (StrategyFailed, ModelExportError)):
        return Attempt(name, "failed", first_line(error), detail=_detail(error), seconds=seconds)
    # a strategy's bug must not stop the chain; its reason is reported
    return Attempt(name, "failed", f"{type(error).__name__}: {first_line(error)}", detail=full_text(error), seconds=seconds)


def run_attempt(
    name: str,
    step: Callable[[], T],
    *,
    stop_on: tuple[type[BaseException], ...] = (),
    measured: Callable[[T], float | None] = lambda _value: None,
) -> AttemptResult[T]:
    """Run one strategy's ``step``; any failure becomes the result's reason, except ``stop_on``, which stops the chain.

    ``measured`` gives the difference verification measured on a successful value, for the record.
    """
    started = time.perf_counter()
    try:
        value = step()
    except stop_on:
        raise
    except Exception as error:  # every failure of a strategy is an attempt's reason, never the end of the chain
        stop_if_signalled()  # but a failure a stop signal caused is the stop
        return AttemptResult(failed_attempt(name, error, round(time.perf_counter() - started, 3)))
    seconds = round(time.perf_counter() - started, 3)
    return AttemptResult(Attempt(name, "ok", seconds=seconds, max_abs_diff=measured(value)), value)


def first_success(
    chain: Iterable[StrategyInfo],
    step: Callable[[StrategyInfo], T],
    attempts: list[Attempt],
    *,
    stop_on: tuple[type[BaseException], ...] = (),
    measured: Callable[[T], float | None] = lambda _value: None,
) -> AttemptResult[T] | None:
    """Try ``step`` with each strategy of ``chain`` in turn until one succeeds; every attempt is appended to ``attempts``.

    Returns the successful result, or None when every attempt failed.
    """
    for info in chain:
        result = run_attempt(info.name, partial(step, info), stop_on=stop_on, measured=measured)
        attempts.append(result.attempt)
        if result.ok:
            return result
    return None


def chain_error(attempts: list[Attempt], named: bool, what: str = "export") -> ModelExportError:
    """The error when no attempt succeeded: the one named strategy's own (its static retry on the same line),
    or every attempt on a line of its own."""
    if named and len({attempt.strategy for attempt in attempts}) == 1:
        first = attempts[0]
        static = "".join(f"; with every axis static: {attempt.reason}" for attempt in attempts[1:])
        if all(attempt.max_abs_diff is not None for attempt in attempts):
            return VerificationError(
                f"{first.strategy}: {first.reason}{static}; rerun with --atol or --no-verify to keep the file",
                attempts)
        return AllStrategiesFailedError(f"{first.strategy} could not {what} the model: {first.reason}{static}", attempts)
    lines = "".join(f"\n  {a.label} {a.status}: {a.reason}" for a in attempts)
    return AllStrategiesFailedError(f"every strategy failed:{lines}", attempts)
