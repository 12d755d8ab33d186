"""PyTorch's two ONNX exporters, called the way every strategy needs them, failing in one line."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Iterator

from modelexport_core.errors import first_line, full_text
from modelexport_core.plugin.strategy import ExportContext, StrategyFailed

__all__ = ["TORCHSCRIPT_DEFAULT_OPSET", "export_torchscript", "failure", "first_line", "full_text"]

TORCHSCRIPT_DEFAULT_OPSET = 17


def failure(message: str, error: BaseException, log: str = "") -> StrategyFailed:
    """A one-line :class:`StrategyFailed` whose ``detail`` keeps the exporter's full message and log."""
    failed = StrategyFailed(message)
    failed.detail = full_text(error) + (f"\n{log}" if log else "")  # type: ignore[attr-defined]
    return failed


@contextlib.contextmanager
def torchscript_log() -> Iterator[list[str]]:
    """Collect what the TorchScript exporter logs on failure (its whole IR graph) instead of printing it."""
    import torch

    lines: list[str] = []
    original = torch._C._jit_onnx_log

    def collect(*parts: object) -> None:
        lines.append("".join(str(part) for part in parts))

    torch._C._jit_onnx_log = collect
    try:
        yield lines
    finally:
        torch._C._jit_onnx_log = original


def export_torchscript(ctx: ExportContext, onnx_path: Path) -> None:
    """A plain TorchScript export of ``ctx.module`` (dynamic axes and opset as the context says)."""
    import torch

    from modelexport_core.export.symbolics import register_missing_symbolics

    register_missing_symbolics()
    with warnings.catch_warnings(), torchscript_log() as log:
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                ctx.module,
                ctx.args,
                str(onnx_path),
                input_names=ctx.input_names,
                output_names=ctx.output_names,
                dynamic_axes=ctx.dynamic_axes or None,
                opset_version=ctx.opset or TORCHSCRIPT_DEFAULT_OPSET,
                dynamo=False,
            )
        except Exception as error:
            raise failure(f"TorchScript export failed: {first_line(error)}", error, "\n".join(log)) from error
