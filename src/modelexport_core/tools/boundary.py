"""The boundary of a module in an ONNX graph: the values its nodes read from outside and hand outside.

Used by extract (the part's inputs and outputs) and numerics (the values compared with
PyTorch's). Constants the module reads from another module's Constant nodes travel with
it instead of becoming inputs; initializers it reads are its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelexport_core.format.graph import used_values

if TYPE_CHECKING:
    import onnx


@dataclass
class ModuleBoundary:
    """One module's nodes and the values that cross its edge."""

    node_indices: list[int]  # the module's nodes, graph order
    constant_indices: list[int]  # Constant nodes outside the module whose values it reads
    inputs: list[str]  # values read from outside: graph inputs and other nodes' outputs
    outputs: list[str]  # values produced inside and read outside, or graph outputs
    initializers: list[str]  # initializers the module reads


def module_boundary(graph: "onnx.GraphProto", node_indices: list[int]) -> ModuleBoundary:
    """The boundary of the nodes ``node_indices`` of ``graph`` (one module and its descendants)."""
    inside = set(node_indices)
    produced_inside = {value for i in node_indices for value in graph.node[i].output if value}
    producer = {value: i for i, node in enumerate(graph.node) for value in node.output if value}
    initializer_names = {tensor.name for tensor in graph.initializer}
    graph_outputs = [value.name for value in graph.output]

    inputs: list[str] = []
    initializers: list[str] = []
    constants: list[int] = []
    for i in node_indices:
        for value in used_values(graph.node[i]):
            if value in produced_inside:
                continue
            if value in initializer_names and value not in producer:
                if value not in initializers:
                    initializers.append(value)
                continue
            source = producer.get(value)
            if source is not None and graph.node[source].op_type == "Constant" and not graph.node[source].input:
                if source not in constants:
                    constants.append(source)
                continue
            if value not in inputs:
                inputs.append(value)

    read_outside: set[str] = set()
    for j, node in enumerate(graph.node):
        if j not in inside:
            read_outside.update(used_values(node))
    outputs = [
        value
        for i in node_indices
        for value in graph.node[i].output
        if value and (value in read_outside or value in graph_outputs)
    ]
    if not outputs:  # a module whose results nobody reads: its last values are its outputs
        read_inside = {value for i in node_indices for value in used_values(graph.node[i])}
        outputs = [v for i in node_indices for v in graph.node[i].output if v and v not in read_inside]
    return ModuleBoundary(list(node_indices), sorted(constants), inputs, outputs, initializers)
