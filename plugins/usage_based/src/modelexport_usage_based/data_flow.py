"""What each ONNX node computes (tensor data, shape arithmetic, or constants) and where data flows.

The three kinds are tagged differently. Data nodes carry a module's computation and are
propagated from the parameter seeds; shape arithmetic (``Shape`` and what is computed
from shapes alone) and constants exist to serve the node that reads them, so they take
their readers' module.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from modelexport_core.sdk import SHAPE_OPS, GraphIndex

if TYPE_CHECKING:
    import onnx

class NodeKind(Enum):
    DATA = "data"
    SHAPE = "shape"
    CONSTANT = "constant"


@dataclass
class NodeKinds:
    """The kind of every node, and which values' shapes each piece of shape arithmetic reads."""

    kinds: list[NodeKind]
    shape_values: set[str]
    """Values computed by shape arithmetic."""
    shape_sources: dict[str, frozenset[str]]
    """For each shape-arithmetic value, the data values whose ``Shape`` it is computed from."""

    def data_inputs(self, node: "onnx.NodeProto", static_values: set[str]) -> list[str]:
        """Inputs of a node that carry tensor data (not constants, not shape arithmetic)."""
        return [v for v in node.input if v and v not in static_values and v not in self.shape_values]

    def shape_inputs_from(self, node: "onnx.NodeProto") -> frozenset[str]:
        """The data values whose shapes feed this node through shape arithmetic."""
        sources: set[str] = set()
        for value in node.input:
            sources |= self.shape_sources.get(value, frozenset())
        return frozenset(sources)


def classify_nodes(graph: "onnx.GraphProto", static_values: set[str], seeded: set[int]) -> NodeKinds:
    """Sort every node into data, shape arithmetic or constant, in one pass in graph order.

    A node that reads a parameter or buffer computes data even when the rest of its inputs
    are shapes (a position-id buffer sliced to the sequence length).
    """
    kinds: list[NodeKind] = []
    shape_values: set[str] = set()
    shape_sources: dict[str, frozenset[str]] = defaultdict(frozenset)
    for i, node in enumerate(graph.node):
        dynamic = [v for v in node.input if v and v not in static_values]
        if i in seeded:
            kind = NodeKind.DATA
        elif not dynamic:
            kind = NodeKind.CONSTANT
        elif node.op_type in SHAPE_OPS:
            kind = NodeKind.SHAPE
            sources = frozenset(v for v in dynamic if v not in shape_values)
            sources |= frozenset().union(*(shape_sources.get(v, frozenset()) for v in dynamic))
        elif all(v in shape_values for v in dynamic):
            kind = NodeKind.SHAPE
            sources = frozenset().union(*(shape_sources.get(v, frozenset()) for v in dynamic))
        else:
            kind = NodeKind.DATA
        kinds.append(kind)
        if kind is NodeKind.SHAPE:
            for value in node.output:
                if value:
                    shape_values.add(value)
                    shape_sources[value] = sources
    return NodeKinds(kinds, shape_values, dict(shape_sources))


@dataclass
class DataGraph:
    """Producers and consumers of each node through data values only (no constants, no shapes).

    Shape arithmetic and constants are left out because exporters share them between
    modules (one ``Shape`` node serves every layer that asks for the same size).
    """

    producers: list[list[int]]
    consumers: list[list[int]]
    reads_graph_input: list[bool]
    inputs: list[list[str]]
    """Data values each node reads."""
    readers: dict[str, list[int]]
    """Data nodes reading each value."""
    producer: dict[str, int]
    graph_outputs: frozenset[str]
    op_types: tuple[str, ...] = ()
    """The op of each node."""

    @classmethod
    def of(cls, graph: "onnx.GraphProto", index: GraphIndex, kinds: NodeKinds, static_values: set[str]) -> "DataGraph":
        producers: list[list[int]] = [[] for _ in graph.node]
        consumers: list[list[int]] = [[] for _ in graph.node]
        inputs: list[list[str]] = [[] for _ in graph.node]
        readers: dict[str, list[int]] = defaultdict(list)
        reads_input = [False] * len(graph.node)
        for i, node in enumerate(graph.node):
            if kinds.kinds[i] is not NodeKind.DATA:
                continue
            for value in kinds.data_inputs(node, static_values):
                if value in inputs[i]:
                    continue
                inputs[i].append(value)
                readers[value].append(i)
                j = index.producer.get(value)
                if j is None:
                    reads_input[i] = True
                elif j not in producers[i]:
                    producers[i].append(j)
                    consumers[j].append(i)
        return cls(
            producers,
            consumers,
            reads_input,
            inputs,
            dict(readers),
            dict(index.producer),
            frozenset(value.name for value in graph.output),
            tuple(node.op_type for node in graph.node),
        )

    def outputs(self, graph: "onnx.GraphProto", i: int) -> list[str]:
        """Values a node writes that are read as data or returned by the graph."""
        written = graph.node[i].output
        return [value for value in written if value and (value in self.readers or value in self.graph_outputs)]

    def is_published(self, value: str) -> bool:
        """Whether a value is read in several places: by two nodes or more, or as a graph input or output."""
        return len(self.readers.get(value, ())) > 1 or value in self.graph_outputs or value not in self.producer


def value_shapes_and_types(model: "onnx.ModelProto") -> tuple[dict[str, tuple], dict[str, int]]:
    """Shapes (dimensions as numbers, or names when symbolic) and element types of the graph's values.

    Those the graph declares, completed by ONNX shape inference when the exporter
    declared none for intermediate values.
    """
    import onnx

    graph = model.graph
    if not graph.value_info:
        try:
            graph = onnx.shape_inference.infer_shapes(model).graph
        except Exception:  # shapes are a hint; a model inference rejects is tagged without them
            pass
    shapes: dict[str, tuple] = {}
    types: dict[str, int] = {}
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor = info.type.tensor_type
        if tensor.elem_type:
            types[info.name] = tensor.elem_type
        if tensor.HasField("shape"):
            shapes[info.name] = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in tensor.shape.dim)
    for initializer in graph.initializer:
        types.setdefault(initializer.name, initializer.data_type)
    return shapes, types
