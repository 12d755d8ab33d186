"""PyTorch's own per-node module records, read back from an exported ONNX file.

These are the references strategies are measured against (tests, ``modelexport
compare``): the dynamo exporter's ``pkg.torch.onnx.name_scopes`` metadata, and the
scopes the TorchScript exporter encodes in node names (``/blocks.0/mixer/proj/MatMul``,
with ``name_1``, ``name_2`` for repeated calls). Names here are of
the user's model: the export wrapper's ``model.`` prefix is removed.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from typing import TYPE_CHECKING, Iterable

from modelexport_core.format.graph import node_key
from modelexport_core.format.tags import is_ancestor
from modelexport_core.plugin.strategy import WRAPPER_ATTRIBUTE

if TYPE_CHECKING:
    import onnx

NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"
_GENERATED_SOURCE = 'File "<eval_with_key>'
_REPEAT_SUFFIX = re.compile(r"^(.*)_(\d+)$")


def _strip_wrapper(qualname: str, wrapped: bool) -> str:
    if not wrapped:
        return qualname
    if qualname == WRAPPER_ATTRIBUTE:
        return ""
    if qualname.startswith(WRAPPER_ATTRIBUTE + "."):
        return qualname[len(WRAPPER_ATTRIBUTE) + 1:]
    return ""


def dynamo_node_modules(model: "onnx.ModelProto", wrapped: bool = True) -> dict[str, str | None]:
    """Innermost module of each node from ``name_scopes`` metadata; None where a node has none."""
    result: dict[str, str | None] = {}
    for i, node in enumerate(model.graph.node):
        props = {p.key: p.value for p in node.metadata_props}
        scopes = props.get(NAME_SCOPES_KEY)
        if scopes is None:
            result[node_key(node, i)] = None
            continue
        names = ast.literal_eval(scopes)
        # the last entry is the FX node's own name; the ones before it are modules, outermost first
        modules = names[:-1]
        result[node_key(node, i)] = _strip_wrapper(modules[-1], wrapped) if modules else ""
    return result


def inlined_nodes(model: "onnx.ModelProto") -> set[str]:
    """Nodes the dynamo exporter took from a graph it generated and inlined (a forward run under ``torch.no_grad``
    is captured as such a graph): their source is the generated code, and their ``name_scopes`` stop at the module
    whose call entered it, the modules called inside unrecorded. Their record says "in this module", not "in this
    module itself"."""
    inlined = set()
    for i, node in enumerate(model.graph.node):
        props = {p.key: p.value for p in node.metadata_props}
        if NAME_SCOPES_KEY in props and props.get(STACK_TRACE_KEY, "").startswith(_GENERATED_SOURCE):
            inlined.add(node_key(node, i))
    return inlined


def unqualified_name(qualname: str) -> str:
    """The name the TorchScript exporter gives a module in scopes: its last non-numeric atom onwards."""
    atoms = qualname.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isdigit():
            return ".".join(atoms[i:])
    return qualname


def torchscript_node_modules(
    model: "onnx.ModelProto", module_names: Iterable[str], wrapped: bool = True
) -> dict[str, str | None]:
    """Innermost module of each node from the scope the TorchScript exporter put in its name.

    ``module_names`` are the qualified names of the exported module (with the wrapper, if
    any). Nodes the exporter left unscoped (initializer ``Identity`` nodes) map to None.

    Each scope in a name is a module called inside the one before it, so it names a child of
    that module. Where a model calls a module's ``forward`` directly (``layer.forward(x)``) the
    exporter records no scope for it, and the next scope names a deeper module: if several
    modules below fit that name (every layer's ``attention``), the name does not say which
    one ran. The parameters the node reads (initializers keep their ``state_dict`` names)
    say it where they belong to one of them; otherwise the node has no record (None).
    """
    by_unqualified: dict[str, list[str]] = defaultdict(list)
    for name in module_names:
        if name:
            by_unqualified[unqualified_name(name)].append(name)
    parameters = {tensor.name for tensor in model.graph.initializer}

    def candidates_of(component: str) -> list[str]:
        found = by_unqualified.get(component)
        if not found:
            match = _REPEAT_SUFFIX.match(component)
            found = by_unqualified.get(match.group(1)) if match else None
        return found or []

    def resolve(component: str, current: str, node: "onnx.NodeProto") -> str | None:
        """The module a scope names below ``current``; '' where the name does not say which."""
        candidates = candidates_of(component)
        if not candidates:
            return None
        inside = [c for c in candidates if is_ancestor(current, c) and c != current]
        if not inside:
            return min(candidates, key=lambda c: (c.count("."), c))
        children = [c for c in inside if _parent_of(c, current)]
        if len(children) == 1 or len(inside) == 1:
            return (children or inside)[0]
        owners = {c for c in inside for p in node.input if p in parameters and _owns(c, p, wrapped)}
        return owners.pop() if len(owners) == 1 else ""

    result: dict[str, str | None] = {}
    for i, node in enumerate(model.graph.node):
        key = node_key(node, i)
        if not node.name.startswith("/"):
            result[key] = None
            continue
        current: str | None = ""
        for component in node.name[1:].split("/")[:-1]:
            resolved = resolve(component, current or "", node)
            if resolved == "":
                current = None
                break
            if resolved is not None:
                current = resolved
        result[key] = None if current is None else _strip_wrapper(current, wrapped)
    return result


def _parent_of(child: str, parent: str) -> bool:
    """True when ``child`` is a direct child of ``parent`` (``layer.0`` counts as one name)."""
    rest = child[len(parent) + 1:] if parent else child
    return unqualified_name(child) == rest


def _owns(module: str, parameter: str, wrapped: bool) -> bool:
    """True when the initializer named ``parameter`` is a parameter or buffer of ``module`` or below."""
    names = {module, _strip_wrapper(module, wrapped)} if wrapped else {module}
    return any(name and parameter.startswith(name + ".") for name in names)
