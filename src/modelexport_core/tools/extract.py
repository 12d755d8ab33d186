"""Cutting one module out of a tagged ONNX file as a standalone model.

The part holds the module's nodes and its descendants' with their tags, the initializers
they read and the constants they use; its inputs and outputs are the module's boundary
values under their original names, so it can be fed the full model's intermediate values.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from modelexport_core.errors import OnnxFileError, OutputPathError, first_line
from modelexport_core.format.tagged import TaggedFile, load_external_tensors, load_tagged
from modelexport_core.tools.boundary import module_boundary

if TYPE_CHECKING:
    import onnx


@dataclass
class ExtractReport:
    """What extract wrote."""

    output: Path
    module: str
    tag: str
    nodes: int
    inputs: list[str]
    outputs: list[str]
    initializers: int


def typed_values(model: "onnx.ModelProto") -> dict[str, "onnx.ValueInfoProto"]:
    """Type and shape of every value ONNX shape inference can tell, graph inputs and outputs included."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # shape inference is a help, not a requirement: fall back to what the file records
        inferred = model
    known: dict[str, onnx.ValueInfoProto] = {}
    for value in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            known.setdefault(value.name, value)
    for tensor in model.graph.initializer:
        if tensor.name not in known:
            known[tensor.name] = onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
    return known


def _value_info(name: str, known: dict[str, "onnx.ValueInfoProto"]) -> "onnx.ValueInfoProto":
    import onnx

    if name in known:
        value = onnx.ValueInfoProto()
        value.CopyFrom(known[name])
        return value
    raise OnnxFileError(f"the type of value {name!r} is unknown (shape inference cannot tell it); cannot make it a graph input or output")


def build_part(tagged: TaggedFile, tag: str, module: str) -> "onnx.ModelProto":
    """The standalone model of module ``tag`` (graph only; external weights are not read)."""
    import onnx

    indices = tagged.node_indices(tag)
    boundary = module_boundary(tagged.graph, indices)
    known = typed_values(tagged.model)
    wanted_initializers = set(boundary.initializers)
    graph = onnx.GraphProto()
    graph.name = (module or tag.rsplit("/", 1)[-1]) or tagged.graph.name
    graph.node.extend(tagged.graph.node[i] for i in sorted(boundary.constant_indices + indices))
    graph.initializer.extend(t for t in tagged.graph.initializer if t.name in wanted_initializers)
    graph.sparse_initializer.extend(t for t in tagged.graph.sparse_initializer if t.values.name in wanted_initializers)
    graph.input.extend(_value_info(name, known) for name in boundary.inputs)
    graph.output.extend(_value_info(name, known) for name in boundary.outputs)
    internal = {v for i in indices for v in tagged.graph.node[i].output} - set(boundary.outputs)
    graph.value_info.extend(v for v in tagged.graph.value_info if v.name in internal)
    part = onnx.ModelProto()
    part.CopyFrom(tagged.model)
    part.graph.CopyFrom(graph)
    return part


def extract_module(onnx_path: Path, name: str, output: Path) -> ExtractReport:
    """Write module ``name`` (its ``named_modules()`` name or its tag) of ``onnx_path`` to ``output``."""
    import onnx

    tagged = load_tagged(onnx_path)
    tag, module = tagged.resolve(name)
    part = build_part(tagged, tag, module)
    load_external_tensors(part, {t.name for t in part.graph.initializer}, tagged.path.parent)
    output = Path(output).expanduser()
    if output.resolve() == tagged.path.resolve():
        raise OutputPathError(f"{output} is the input file; give another name")
    output.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".extract-", suffix=".onnx", dir=output.parent)
    os.close(handle)
    try:
        large = part.ByteSize() > 1_800_000_000
        onnx.save(part, temporary, save_as_external_data=large, location=output.name + ".data" if large else None)
        try:
            onnx.checker.check_model(temporary)
        except Exception as error:
            raise OnnxFileError(f"the extracted part fails the ONNX checker: {first_line(error)}") from error
        os.replace(temporary, output)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    boundary_inputs = [v.name for v in part.graph.input]
    return ExtractReport(
        output=output,
        module=module,
        tag=tag,
        nodes=len(part.graph.node),
        inputs=boundary_inputs,
        outputs=[v.name for v in part.graph.output],
        initializers=len(part.graph.initializer),
    )
