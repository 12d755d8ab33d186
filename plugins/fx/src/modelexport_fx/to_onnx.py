"""The ExportedProgram to ONNX with the dynamo exporter, inputs and dynamic axes named as the user asked."""

from __future__ import annotations

import contextlib
import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core.sdk import ExportContext

from .shapes import axis_renames

if TYPE_CHECKING:
    import torch

    from modelexport_core.sdk import StreamedModel

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


INLINE_LIMIT = 2**31 - 2**26
"""Weights above this go to external data, as the exporter itself decides (protobuf's 2 GB limit, with room)."""


def _streamed_tensor(name: str, tensor: Any) -> Any:
    """The core's streamed initializer for an onnx_ir tensor held in memory; None for other kinds."""
    import onnx
    import onnx_ir as ir

    from modelexport_core.sdk import StreamedTensor

    if tensor is None or isinstance(tensor, (ir.ExternalTensor, ir.StringTensor)):
        return None
    if type(tensor).__name__ == "TensorProtoTensor" or tensor.doc_string or tensor.metadata_props:
        return None
    if tensor.dtype.bitwidth % 8 or not hasattr(tensor, "tofile"):  # packed 4-bit types and the like
        return None
    header = onnx.TensorProto(name=name, data_type=tensor.dtype.value, dims=list(tensor.shape.numpy()))
    return StreamedTensor(header, tensor.nbytes, tensor.tofile)


def streamed_model(onnx_program: Any) -> "StreamedModel | None":
    """The ONNX model with each weight left in its tensor, to be written once (its initializers inline).

    None where a weight cannot be streamed or they pass 2 GB together: :func:`save` then lets
    ``ONNXProgram.save`` write them as external data.
    """
    import onnx_ir as ir

    from modelexport_core.sdk import StreamedModel

    graph = onnx_program.model.graph
    initializers = dict(graph.initializers)
    streamed = [_streamed_tensor(name, value.const_value) for name, value in initializers.items()]
    if any(s is None for s in streamed) or sum(s.nbytes for s in streamed) > INLINE_LIMIT:
        return None
    graph.initializers.clear()
    try:
        model = ir.serde.serialize_model(onnx_program.model)
    finally:
        graph.initializers.update(initializers)
    # what ir.save writes for initializers besides their data: type and shape as value_info
    wants_info = getattr(ir.serde, "_should_create_value_info_for_value", lambda value: True)
    inputs = {value.name for value in graph.inputs}
    for name, value in initializers.items():
        if name not in inputs and wants_info(value):
            model.graph.value_info.append(ir.serde.serialize_value(value))
    model.graph.initializer.extend(s.header for s in streamed)
    return StreamedModel(model, [(s.nbytes, s.write_data) for s in streamed])


def save(onnx_program: Any, onnx_path: Path) -> None:
    """Write the ONNX file: weights inline, streamed one at a time; as external data when over 2 GB.

    ``ONNXProgram.save`` builds every weight as a TensorProto and then one serialized string,
    three copies of the weights at its peak; writing each tensor from its own memory keeps
    the export's peak at about the model's size, like a plain ``torch.onnx.export`` (which
    writes external data by default).
    """
    streamed = streamed_model(onnx_program)
    if streamed is None:
        onnx_program.save(str(onnx_path))
        return
    streamed.write(onnx_path)
