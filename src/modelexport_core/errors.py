"""Exceptions for the mistakes a user can make, and how any error is told in one line; the CLI prints each as one line."""

from __future__ import annotations

import re

_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*m")


def first_line(error: BaseException) -> str:
    """An exception as one line: its first line of text (without terminal colours), or its type."""
    text = _TERMINAL_CODES.sub("", str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


def full_text(error: BaseException) -> str:
    """An exception's whole message, the exceptions it came from first, without terminal colours."""
    chain: list[str] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 5:
        chain.append(f"{type(current).__name__}: {_TERMINAL_CODES.sub('', str(current)).strip()}")
        current = current.__cause__ or current.__context__
    return "\n".join(reversed(chain))


class ModelExportError(Exception):
    """Base of every error the CLI reports as one line without a traceback."""


class ModelLoadError(ModelExportError):
    """The model could not be loaded: unknown id or path, or a factory that failed."""


class InputSpecError(ModelExportError):
    """The example inputs could not be made or the input-spec file is wrong."""


class ModelRunError(ModelExportError):
    """The model raised when run in PyTorch on its example inputs."""


class UnknownStrategyError(ModelExportError):
    """A strategy name that no installed plugin provides."""


class DuplicateStrategyError(ModelExportError):
    """Two installed distributions provide a strategy of the same name."""


class AllStrategiesFailedError(ModelExportError):
    """Every strategy in the chain failed; the message lists each one's reason, a line each.

    ``attempts`` holds the attempt records (with the exporters' whole messages).
    """

    def __init__(self, message: str, attempts: list | None = None):
        super().__init__(message)
        self.attempts = list(attempts or [])


class OutputPathError(ModelExportError):
    """The output cannot be written where the user asked."""


class VerificationError(ModelExportError):
    """onnxruntime's output differs from PyTorch's beyond the tolerance."""

    def __init__(self, message: str, attempts: list | None = None):
        super().__init__(message)
        self.attempts = list(attempts or [])


class StrategyOptionError(ModelExportError):
    """A ``-O strategy.option=value`` that names no option or has a bad value."""


class ViewerNotInstalledError(ModelExportError):
    """``modelexport view`` without Model Explorer or its ONNX adapter installed."""


class OnnxFileError(ModelExportError):
    """An ONNX file given to a tool is missing or cannot be read."""


class NotTaggedError(ModelExportError):
    """A tool needs a tagged ONNX file and the one given carries no tags."""


class UnknownModuleError(ModelExportError):
    """A module name or tag that the tagged file does not hold."""


class ToolRunError(ModelExportError):
    """onnxruntime could not run a file a tool made or was given."""


class ModelMismatchError(ModelExportError):
    """An ONNX file given to ``tag --model`` was not exported from that model (other weights, another model).

    A strategy raises it when the file's evidence says so; the chain stops there, since no other
    strategy can tag a file with modules it was not made from."""
