"""Agreement with PyTorch's own records: the share of nodes whose tag is the recorded module's, and contamination.

This is the judgement ``modelexport compare``, the zoo sweep and the test kit all make.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelexport_core.format.reference import dynamo_node_modules, inlined_nodes, torchscript_node_modules
from modelexport_core.format.tags import HierarchyTags, in_sibling_elements, is_ancestor
from modelexport_core.format.writer import NodeTag


def reference_modules(
    onnx_model: Any, exporter: str, module_names: list[str], wrapped: bool = True
) -> dict[str, str | None]:
    """PyTorch's own record of each node's module, read the way the exporter wrote it.

    ``wrapped``: the node names carry the export wrapper's scope (a strategy's own file) and ``module_names``
    are the wrapper's; otherwise they are named as a plain export of the user's model names them (the file
    ``export`` publishes) and ``module_names`` are the model's own. Read the other way, a node in the
    forward of a child named like the wrapper's attribute (``model``, as in ``XForY.model``) reads as the root's.
    """
    if exporter == "dynamo":
        return dynamo_node_modules(onnx_model)  # scopes in metadata, which renaming leaves alone
    return torchscript_node_modules(onnx_model, module_names, wrapped=wrapped)


@dataclass
class Agreement:
    """How a graph's node tags match PyTorch's records of the same graph."""

    reference_nodes: int  # nodes for which PyTorch recorded a module
    agreement: float | None  # share of those whose tag matches the record
    contaminated: int  # nodes given to a sibling layer


def measure_agreement(
    onnx_model: Any, node_tags: dict[str, NodeTag], exporter: str, tags: HierarchyTags, module_names: list[str],
    wrapped: bool = True,
) -> Agreement:
    """Compare ``node_tags`` with PyTorch's records in ``onnx_model``; ``module_names`` and ``wrapped`` as
    :func:`reference_modules` takes them. Where the record names only the module a node ran inside
    (:func:`inlined_nodes`), a tag naming that module or one below it agrees."""
    reference = reference_modules(onnx_model, exporter, module_names, wrapped)
    known = {node: module for node, module in reference.items() if module is not None}
    inside = inlined_nodes(onnx_model) if exporter == "dynamo" else set()
    agreeing = sum(1 for node, module in known.items() if node_tags[node].tag == tags.tag_of(module)
                   or (node in inside and is_ancestor(module, node_tags[node].module)))
    contaminated = sibling_contamination({n: t.module for n, t in node_tags.items()},
                                         {n: tags.kept_module(m) for n, m in known.items()})
    return Agreement(len(known), agreeing / len(known) if known else None, len(contaminated))


def sibling_contamination(node_modules: dict[str, str], reference: dict[str, str | None]) -> list[str]:
    """Nodes whose module sits in a different element of a ModuleList/Sequential than the reference says.

    Two names conflict when, at the first position where they differ, both have an index
    atom (``layers.0`` against ``layers.1``, :func:`in_sibling_elements`): the node was given to a sibling layer.
    """
    return [node for node, expected in reference.items()
            if expected is not None and (got := node_modules.get(node)) is not None
            and in_sibling_elements(expected, got)]
