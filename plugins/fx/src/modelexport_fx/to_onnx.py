"""The ExportedProgram to ONNX with the dynamo exporter, inputs and dynamic axes named as the user asked."""

from __future__ import annotations

import contextlib
import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core import ExportContext

from .shapes import axis_renames

if TYPE_CHECKING:
    import torch

MIN_OPSET = 18
"""Below this opset the dynamo exporter converts versions and drops every node's metadata."""


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's warnings and its notices about optional packages (torchvision ops)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _dims(shape: Any) -> list[Any]:
    """An ONNX IR shape as a list of sizes (int) and symbol names (str)."""
    if shape is None:
        return []
    return [dim if isinstance(dim, int) else getattr(dim, "value", None) for dim in shape]


def program_to_onnx(
    program: "torch.export.ExportedProgram", ctx: ExportContext, opset: int, optimize: bool
) -> tuple[Any, dict[str, str]]:
    """Convert ``program`` (decompositions, translation, optional optimizer); returns the ONNXProgram and axis renames.

    The ONNXProgram keeps, as ``exported_program``, the decomposed program its nodes were
    translated from: that is the FX graph the ``pkg.torch.onnx.fx_node`` records name.
    """
    import torch

    output_count = len(program.graph_signature.user_outputs)
    with _quiet_exporter():
        onnx_program = torch.onnx.export(
            program,
            (),
            dynamo=True,
            optimize=optimize,
            opset_version=opset,
            input_names=list(ctx.input_names),
            output_names=list(ctx.output_names) if output_count == len(ctx.output_names) else None,
            verbose=False,
        )
    shapes = {value.name: _dims(value.shape) for value in onnx_program.model.graph.inputs}
    renames = axis_renames([shapes.get(name, []) for name in ctx.input_names], ctx)
    if renames:
        onnx_program.rename_axes(renames)
    return onnx_program, renames


def save(onnx_program: Any, onnx_path: Path) -> None:
    """Write the ONNX file (weights inline; beside it as external data when over 2 GB)."""
    onnx_program.save(str(onnx_path))
