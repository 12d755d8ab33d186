"""The node names of one module and its descendants, for tools that take node lists.

onnxruntime quantization's ``nodes_to_exclude``, partitioners and debuggers take node
names; a module's nodes are those whose tag is its tag or lies below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from modelexport_core.format.graph import node_key
from modelexport_core.format.tagged import load_tagged


@dataclass
class ModuleNodes:
    """The nodes of one module, in graph order."""

    module: str
    tag: str
    names: list[str]


def module_nodes(onnx_path: Path, name: str, op_types: set[str] | None = None) -> ModuleNodes:
    """Nodes of module ``name`` (``named_modules()`` name or tag) and its descendants, optionally of some op types."""
    tagged = load_tagged(onnx_path)
    tag, module = tagged.resolve(name)
    names = [node_key(tagged.graph.node[i], i) for i in tagged.node_indices(tag, op_types)]
    return ModuleNodes(module, tag, names)
