"""ONNX graph walking shared by strategies: producers, consumers, filling gaps."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

from modelexport_core.format.tags import common_ancestor
from modelexport_core.plugin.strategy import WRAPPER_ATTRIBUTE

if TYPE_CHECKING:
    import onnx


SHAPE_OPS = frozenset({"Shape", "Size"})
"""Operations that read a value's sizes alone, none of its elements."""


def node_key(node: "onnx.NodeProto", index: int) -> str:
    """The name a node is known by in results and the sidecar: its name, or op and index if unnamed."""
    return node.name or f"{node.op_type}#{index}"


@dataclass
class GraphIndex:
    """Which node produces and which nodes consume each value of a graph."""

    keys: list[str]
    producer: dict[str, int]
    consumers: dict[str, list[int]]

    @classmethod
    def of(cls, graph: "onnx.GraphProto") -> "GraphIndex":
        keys = [node_key(node, i) for i, node in enumerate(graph.node)]
        producer: dict[str, int] = {}
        consumers: dict[str, list[int]] = defaultdict(list)
        for i, node in enumerate(graph.node):
            for value in node.output:
                if value:
                    producer[value] = i
            for value in used_values(node):
                consumers[value].append(i)
        return cls(keys, producer, dict(consumers))

    def node_consumers(self, graph: "onnx.GraphProto", i: int) -> list[int]:
        return sorted({c for value in graph.node[i].output if value for c in self.consumers.get(value, [])})

    def node_producers(self, graph: "onnx.GraphProto", i: int) -> list[int]:
        return sorted({self.producer[v] for v in used_values(graph.node[i]) if v in self.producer})


def used_values(node: "onnx.NodeProto") -> list[str]:
    """Inputs of a node, including values its subgraphs (If/Loop/Scan bodies) read from outside."""
    used = [value for value in node.input if value]
    for attribute in node.attribute:
        for subgraph in list(attribute.g.node and [attribute.g] or []) + list(attribute.graphs):
            produced = {o for n in subgraph.node for o in n.output} | {i.name for i in subgraph.input}
            produced |= {init.name for init in subgraph.initializer}
            for sub_node in subgraph.node:
                used.extend(v for v in used_values(sub_node) if v and v not in produced)
    return used


def fill_missing_modules(graph: "onnx.GraphProto", node_modules: dict[str, str]) -> dict[str, str]:
    """Give every node without a module the module its neighbours agree on.

    A node left out (an initializer Identity, a folded constant, a node the optimizer
    made) gets the deepest common module of the nodes that consume its outputs; a node
    with no tagged consumer gets that of its producers; a node with neither gets the
    root. Consumers are preferred because constants and shape arithmetic exist to serve
    the node that reads them. Returns a new mapping with every node of ``graph``.
    """
    keys = [node.name or f"{node.op_type}#{i}" for i, node in enumerate(graph.node)]
    try:  # the usual case: nothing to fill, no index to build
        return {key: node_modules[key] for key in keys}
    except KeyError:
        pass
    index = GraphIndex.of(graph)
    result = {key: node_modules[key] for key in index.keys if key in node_modules}
    missing = [i for i, key in enumerate(index.keys) if key not in result]
    for neighbours in (index.node_consumers, index.node_producers):
        changed = True
        while missing and changed:
            changed = False
            still_missing = []
            # consumers come after a node, so walk backwards for them and forwards for producers
            order = reversed(missing) if neighbours is index.node_consumers else missing
            for i in order:
                known = [result[index.keys[j]] for j in neighbours(graph, i) if index.keys[j] in result]
                if known:
                    result[index.keys[i]] = common_ancestor(known)
                    changed = True
                else:
                    still_missing.append(i)
            missing = sorted(still_missing)
    for i in missing:
        result[index.keys[i]] = ""
    return result


def _unwrapped_names(names: set[str]) -> dict[str, str]:
    """Each name that carries the export wrapper's prefix, as old -> new: the name a plain export of the user's
    model gives (``/model/encoder/X`` -> ``/encoder/X``, ``model.encoder.w`` -> ``encoder.w``)."""
    scope_prefix = f"/{WRAPPER_ATTRIBUTE}/"
    attribute_prefix = f"{WRAPPER_ATTRIBUTE}."
    keep = len(scope_prefix) - 1  # the scope keeps its leading "/"
    cut = len(attribute_prefix)
    return {name: name[keep:] if name.startswith(scope_prefix) else name[cut:]
            for name in names if name.startswith((scope_prefix, attribute_prefix))}


def _graphs(graph: "onnx.GraphProto") -> list["onnx.GraphProto"]:
    """A graph and every subgraph of its nodes (If/Loop/Scan bodies), depth first."""
    found = [graph]
    for node in graph.node:
        if not node.attribute:
            continue
        for attribute in node.attribute:
            if attribute.type not in (5, 10):  # AttributeProto.GRAPH, GRAPHS
                continue
            subgraphs = ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs)
            for subgraph in subgraphs:
                found.extend(_graphs(subgraph))
    return found


def strip_wrapper_names(graph: "onnx.GraphProto") -> dict[str, str]:
    """Rename nodes and values as a plain export of the user's model names them; returns old -> new node names.

    Exporters name nodes by module scope (``/model/encoder/...``) and weights by attribute
    path (``model.encoder.weight``); the export wrapper holds the user's model as
    ``model``, a prefix a plain export does not have. A name whose stripped form is
    already taken is left as it is.
    """
    graphs = _graphs(graph)
    names_by_graph = [[node.name for node in g.node] for g in graphs]
    node_names = set(chain.from_iterable(names_by_graph))
    node_map = {name: new for name, new in _unwrapped_names(node_names).items() if new not in node_names}
    values = {name for g in graphs for name in _defined_values(g)}
    value_map = _unwrapped_names(values)
    value_map = {old: new for old, new in value_map.items() if new not in values or new in value_map}
    if not value_map and not node_map:
        return node_map
    if node_map:
        for g, names in zip(graphs, names_by_graph):
            for node, name in zip(g.node, names):
                new = node_map.get(name)
                if new is not None:
                    node.name = new
    _rename_values(graphs, value_map)
    return node_map


def name_outputs(graph: "onnx.GraphProto", names: list[str]) -> bool:
    """Give the graph's outputs ``names``, in order, where the exporter named them its own way; whether it did.

    Nothing is renamed unless there is one name per output; an output that is also a graph
    input or an initializer keeps its name, and so does one whose new name another value holds.
    """
    if len(names) != len(graph.output) or len({output.name for output in graph.output}) != len(names):
        return False
    graphs = _graphs(graph)
    values = {name for g in graphs for name in _defined_values(g)}
    fixed = {value.name for value in (*graph.input, *graph.initializer)}
    value_map = {output.name: new for output, new in zip(graph.output, names)
                 if output.name != new and output.name not in fixed and new not in values}
    if len(set(value_map.values())) != len(value_map):
        return False
    _rename_values(graphs, value_map)
    # the TorchScript exporter names an output's symbolic sizes after the value (``Add<name>_dim_0``)
    sizes = re.compile(f"(.*?)({'|'.join(map(re.escape, value_map))})(_dim_[0-9]+)") if value_map else None
    for holder in (*graph.output, *graph.value_info):
        for dim in holder.type.tensor_type.shape.dim:
            match = sizes.fullmatch(dim.dim_param) if sizes and dim.dim_param else None
            if match:
                dim.dim_param = match[1] + value_map[match[2]] + match[3]
    return True


def _rename_values(graphs: list["onnx.GraphProto"], value_map: dict[str, str]) -> None:
    """Rename values (old -> new) wherever a graph or subgraph names them."""
    if not value_map:
        return
    for g in graphs:
        for node in g.node:
            for i, value in enumerate(node.input):
                if value in value_map:
                    node.input[i] = value_map[value]
            for i, value in enumerate(node.output):
                if value in value_map:
                    node.output[i] = value_map[value]
        for holder in (*g.input, *g.output, *g.value_info, *g.initializer):
            holder.name = value_map.get(holder.name, holder.name)
        for sparse in g.sparse_initializer:
            sparse.values.name = value_map.get(sparse.values.name, sparse.values.name)


def _defined_values(graph: "onnx.GraphProto") -> set[str]:
    """The values a graph defines: node outputs, inputs, initializers (and the names its value_info and
    outputs give). A node input names one of these, here or in an enclosing graph, so its inputs need no walk."""
    names: set[str] = set()
    for node in graph.node:
        names.update(node.output)
    names.discard("")
    names |= {holder.name for holder in (*graph.input, *graph.output, *graph.value_info, *graph.initializer)}
    names |= {sparse.values.name for sparse in graph.sparse_initializer}
    return names
