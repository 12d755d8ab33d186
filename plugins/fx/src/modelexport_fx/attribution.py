"""From ONNX nodes to modules, through the FX graph they were translated from.

Every node the dynamo exporter writes carries ``pkg.torch.onnx.fx_node`` (the FX node
it came from, by name) and ``pkg.torch.onnx.name_scopes`` (the module path of that FX
node); both survive the exporter's optimizer. The FX node's own ``nn_module_stack`` is
the source: its innermost entry that names a real module of the export wrapper gives
the module. ``name_scopes`` is the fallback when the FX node cannot be found. Nodes
with neither (constants and splits the optimizer made) get the module their
neighbours agree on, else the root.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from modelexport_core.sdk import ExportContext, fill_missing_modules, node_key

if TYPE_CHECKING:
    import onnx
    import torch

FX_NODE_KEY = "pkg.torch.onnx.fx_node"
NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
EMPTY_STACK_MARKER = "_empty_nn_module_stack_from_metadata_hook"
"""What torch.export writes as the module stack of nodes its passes add with no module."""

_FX_NODE_NAME = re.compile(r"^\s*%([^\s:]+)")
_CALL_INDEX = re.compile(r"@\d+$")
_ROOT_PREFIX = re.compile(r"^(?:L__self__|(?:L\[['\"]self['\"]\]|self)(?=$|[.\[]))")
_SUBSCRIPT = re.compile(r"\[['\"]?([^\]'\"]+)['\"]?\]")
_GETATTR = re.compile(r"getattr\(([^()]*?),\s*['\"]([^'\"]+)['\"]\)")


def normalise_module_path(path: str) -> str:
    """A module path as the exporters spell it, as a plain qualified name.

    ``L['self'].model.layers[0]``, ``L__self__model.layers.0@2``, ``getattr(L['self'].model.h, '0')``
    and ``model.layers.0`` all become ``model.layers.0`` ('' is the exported module itself).
    """
    path = _CALL_INDEX.sub("", path.strip())
    while True:
        unwrapped = _GETATTR.sub(r"\1.\2", path)
        if unwrapped == path:
            break
        path = unwrapped
    path = _ROOT_PREFIX.sub("", path)
    path = _SUBSCRIPT.sub(r".\1", path)
    return re.sub(r"\.{2,}", ".", path).strip(".")


def module_from_stack(stack: Mapping[str, Any] | None, known: set[str]) -> str | None:
    """The innermost module of an ``nn_module_stack`` that exists in the exported module; None if none.

    Entries map a key (``L__self__model.shared@1`` for a second call) to ``(path, type)``.
    A reused module's every call gives the module's own path, so a call is never
    attributed to another instance. Returns the wrapper's name for it (``model.x``).
    A stack holding only torch.export's empty-stack marker is a record too: the node
    (a size read from an input, added by an export pass) sits outside every module,
    so it belongs to the exported module itself ('').
    """
    if not stack:
        return None
    only_markers = True
    for key, entry in reversed(list(stack.items())):
        path = entry[0] if isinstance(entry, (tuple, list)) and entry else entry
        for candidate in (path, key):
            if not isinstance(candidate, str) or EMPTY_STACK_MARKER in candidate:
                continue
            only_markers = False
            name = normalise_module_path(candidate)
            if name in known:
                return name
    return "" if only_markers else None


def fx_node_modules(program: "torch.export.ExportedProgram", known: set[str]) -> dict[str, str | None]:
    """FX node name -> module (wrapper names) for every node of ``program``'s graphs.

    Nodes of nested graphs (control-flow bodies) are included unless their name is taken
    by another graph's node, in which case the name is ambiguous and maps to None.
    """
    result: dict[str, str | None] = {}
    ambiguous: set[str] = set()
    for index, graph_module in enumerate(program.graph_module.modules()):
        graph = getattr(graph_module, "graph", None)
        if graph is None:
            continue
        for node in graph.nodes:
            module = module_from_stack(node.meta.get("nn_module_stack"), known)
            if index > 0 and node.name in result:
                ambiguous.add(node.name)
                continue
            result[node.name] = module
    for name in ambiguous:
        result[name] = None
    return result


def _metadata(node: "onnx.NodeProto") -> dict[str, str]:
    return {prop.key: prop.value for prop in node.metadata_props}


def module_from_name_scopes(scopes: str | None, known: set[str]) -> str | None:
    """The innermost known module of a ``name_scopes`` record (its last entry is the FX node, not a module)."""
    if not scopes:
        return None
    try:
        names = ast.literal_eval(scopes)
    except (ValueError, SyntaxError):
        return None
    modules = [name for name in list(names)[:-1] if isinstance(name, str)]
    for name in reversed(modules):
        if EMPTY_STACK_MARKER not in name:
            path = normalise_module_path(name)
            if path in known:
                return path
    return "" if modules and all(EMPTY_STACK_MARKER in name for name in modules) else None


@dataclass
class Attribution:
    """The module of every ONNX node (user-model names) and where each came from."""

    node_modules: dict[str, str]
    sources: Counter = field(default_factory=Counter)
    evidence: dict[str, str] = field(default_factory=dict)


def attribute_nodes(
    onnx_model: "onnx.ModelProto", fx_modules: Mapping[str, str | None], ctx: ExportContext, known: set[str]
) -> Attribution:
    """Give every node of ``onnx_model`` the innermost module of the user's model that produced it."""
    found: dict[str, str] = {}
    sources: Counter = Counter()
    for index, node in enumerate(onnx_model.graph.node):
        key = node_key(node, index)
        props = _metadata(node)
        match = _FX_NODE_NAME.match(props.get(FX_NODE_KEY, ""))
        module = None
        if match:
            module = fx_modules.get(match.group(1))
        if module is not None:
            sources["fx"] += 1
        else:
            module = module_from_name_scopes(props.get(NAME_SCOPES_KEY), known)
            if module is not None:
                sources["name_scopes"] += 1
        if module is not None:
            found[key] = ctx.model_qualname(module)
    complete = fill_missing_modules(onnx_model.graph, found)
    sources["neighbours"] = len(complete) - len(found)
    evidence = {key: "record" if key in found else "neighbours" for key in complete}
    return Attribution(complete, sources, evidence)


def known_module_names(module: "torch.nn.Module") -> set[str]:
    """Every name a module of the export wrapper is reachable by (shared and tied modules under each)."""
    return {name for name, _ in module.named_modules(remove_duplicate=False)}
