"""One-line reasons from the long, multi-paragraph errors of torch.export and the ONNX exporter.

The fallback chain shows the user why a strategy failed in one line, so the line must
carry the exporter's own words (the failing check) and, where PyTorch names it, the
line of the user's code that triggered it.
"""

from __future__ import annotations

import re

_MAX_LENGTH = 400
_CALL_SITE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(\S[^\n]*)')
_NOISE = ("For more information", "consider using", "For extended logs", "If you suspect", "For C++", "Use tlparse")


def root_cause(error: BaseException) -> BaseException:
    """The innermost exception behind ``error`` (the ONNX exporter wraps the real one in ConversionError)."""
    seen = {id(error)}
    while error.__cause__ is not None and id(error.__cause__) not in seen:
        error = error.__cause__
        seen.add(id(error))
    return error


def first_line(text: str) -> str:
    """The first informative line of an error message."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(_NOISE) and not line.startswith("#"):
            return line
    return ""


def call_site(text: str) -> str:
    """``file.py:12 `code``` for the user-code call PyTorch names in the message, '' if none."""
    marker = text.find("The following call raised this error")
    matches = list(_CALL_SITE.finditer(text, marker if marker >= 0 else 0))
    if not matches:
        return ""
    path, line, _, code = matches[-1 if marker < 0 else 0].groups()
    return f"{path.rsplit('/', 1)[-1]}:{line} `{code.strip()}`"


def one_line_reason(error: BaseException) -> str:
    """``ErrorType: first line of the message (at file.py:N `code`)``, at most a few hundred characters."""
    cause = root_cause(error)
    text = str(cause)
    reason = f"{type(cause).__name__}: {first_line(text) or 'no message'}"
    site = call_site(text)
    if site:
        reason += f" (at {site})"
    reason = re.sub(r"\s+", " ", reason)
    return reason if len(reason) <= _MAX_LENGTH else reason[: _MAX_LENGTH - 3] + "..."
