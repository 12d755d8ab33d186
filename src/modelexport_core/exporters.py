"""PyTorch's two ONNX exporters, called the way every strategy needs them, failing in one line."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from .strategy import ExportContext, StrategyFailed

TORCHSCRIPT_DEFAULT_OPSET = 17


_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*m")


def first_line(error: BaseException) -> str:
    """An exception as one line: its first line of text (without terminal colours), or its type."""
    text = _TERMINAL_CODES.sub("", str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


def export_torchscript(ctx: ExportContext, onnx_path: Path) -> None:
    """A plain TorchScript export of ``ctx.module`` (dynamic axes and opset as the context says)."""
    import torch

    with warnings.catch_warnings():
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
            raise StrategyFailed(f"TorchScript export failed: {first_line(error)}") from error
