"""The module records an ONNX file already carries, read as tags (``modelexport tag`` without ``-s``).

Three kinds of file carry them: one this tool tagged (``modelexport.module`` on each node), one
the dynamo exporter wrote (``pkg.torch.onnx.name_scopes``) and one the TorchScript exporter wrote
(the scope in each node's name, ``/encoder/layer.0/attention/self/query/MatMul``). They are
PyTorch's own account of which module ran each op, so where they are whole nothing needs to be
inferred. Whole means: every record names a module of the model, and most of the nodes
that compute from another node's output or a graph input have one (``MAX_UNRECORDED``). Nodes an
exporter leaves without a scope (an ``Identity`` of an initializer, a ``Constant``, a node its own
optimizer made) take the module of the nodes they feed (``graph.fill_missing_modules``). A file
whose nodes were renamed or rebuilt (an optimizer, a converter) fails the test, and the inferring
strategies tag it instead.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from modelexport_core.format.graph import node_key
from modelexport_core.format.reference import NAME_SCOPES_KEY, torchscript_node_modules, unqualified_name
from modelexport_core.format.writer import MODULE_KEY
from modelexport_core.plugin.strategy import TaggingResult

if TYPE_CHECKING:
    import onnx

RECORDS_STRATEGY = "records"
"""The name tags read from a file's own records go by in reports and the sidecar."""

SOURCES = ("modelexport", "dynamo", "torchscript")
"""Where records come from, in the order they are looked for."""

MAX_UNRECORDED = 0.5
"""Records stand for the file while fewer than this share of the nodes that compute from other nodes lack one.

Exporters make a few such nodes themselves (the dynamo exporter's ``Split`` fusions, the TorchScript
exporter's ``Unsqueeze`` around a recurrent layer); a file whose nodes were renamed or rebuilt lacks
records on nearly all."""

SOURCE_DESCRIPTIONS = {
    "modelexport": "this tool's own tags (modelexport.module)",
    "dynamo": "the dynamo exporter's name scopes (pkg.torch.onnx.name_scopes)",
    "torchscript": "the TorchScript exporter's scoped node names",
}


@dataclass(frozen=True)
class FileRecords:
    """The module of each node as the file records it.

    ``node_modules`` holds every recorded node (qualified names of the user's model, '' for the
    root); ``unrecorded`` counts the nodes without a record, ``computing_unrecorded`` those of them that
    read another node (made by the exporter's own graph optimizer, say).
    """

    source: str
    node_modules: dict[str, str]
    unrecorded: int
    computing_unrecorded: int = 0

    @property
    def description(self) -> str:
        return SOURCE_DESCRIPTIONS[self.source]


def records_result(records: FileRecords) -> TaggingResult:
    """The records as a strategy's result; the sidecar keeps where they came from and what was filled."""
    details = {
        "source": records.source,
        "description": records.description,
        "recorded_nodes": len(records.node_modules),
        "unrecorded_nodes": records.unrecorded,
        "unrecorded_computing_nodes": records.computing_unrecorded,
    }
    return TaggingResult(node_modules=dict(records.node_modules), exporter=records.source, details=details,
                         evidence=dict.fromkeys(records.node_modules, "record"))


def read_records(model: "onnx.ModelProto", module_names: Iterable[str]) -> FileRecords | None:
    """The file's own records if they are whole (see the module docstring), else None.

    ``module_names`` are the qualified names of the user's model (``named_modules()``, '' the root).
    """
    names = set(module_names) | {""}
    readers = {"modelexport": _own_tags, "dynamo": _dynamo_scopes, "torchscript": _torchscript_scopes}
    for source in SOURCES:
        recorded = readers[source](model, names)
        if recorded is None:
            continue
        whole = _whole(model, recorded, names)
        if whole is not None:
            node_modules, filled = whole
            return FileRecords(source, node_modules, len(model.graph.node) - len(node_modules), filled)
    return None


def _reads_no_node(node: "onnx.NodeProto", made_by_nodes: set[str]) -> bool:
    """A node that reads only initializers (or nothing): exporters may leave it unscoped."""
    return not any(name in made_by_nodes for name in node.input if name)


def _whole(model: "onnx.ModelProto", recorded: dict[str, str | None], names: set[str]) -> tuple[dict[str, str], int] | None:
    """The recorded modules and the count of computing nodes without a record, or None if not whole enough."""
    graph = model.graph
    initializers = {tensor.name for tensor in graph.initializer}
    made_by_nodes = {name for node in graph.node for name in node.output} | {
        value.name for value in graph.input if value.name not in initializers}
    result: dict[str, str] = {}
    computing = unrecorded_computing = 0
    for index, node in enumerate(graph.node):
        key = node_key(node, index)
        module = recorded.get(key)
        reads_nodes = not _reads_no_node(node, made_by_nodes)
        computing += reads_nodes
        if module is None:
            unrecorded_computing += reads_nodes
            continue
        if module not in names:
            return None
        result[key] = module
    if not result or unrecorded_computing > MAX_UNRECORDED * computing:
        return None
    return result, unrecorded_computing


def _own_tags(model: "onnx.ModelProto", names: set[str]) -> dict[str, str | None] | None:
    recorded: dict[str, str | None] = {}
    for index, node in enumerate(model.graph.node):
        module = next((p.value for p in node.metadata_props if p.key == MODULE_KEY), None)
        recorded[node_key(node, index)] = module
    return recorded if any(m is not None for m in recorded.values()) else None


def _dynamo_scopes(model: "onnx.ModelProto", names: set[str]) -> dict[str, str | None] | None:
    recorded: dict[str, str | None] = {}
    for index, node in enumerate(model.graph.node):
        scopes = next((p.value for p in node.metadata_props if p.key == NAME_SCOPES_KEY), None)
        module: str | None = None
        if scopes is not None:
            try:
                entries = ast.literal_eval(scopes)
            except (ValueError, SyntaxError):
                return None
            # the last entry is the FX node's own name; the ones before it are modules, outermost first
            module = entries[-2] if len(entries) > 1 else ""
        recorded[node_key(node, index)] = module
    return recorded if any(m is not None for m in recorded.values()) else None


def _torchscript_scopes(model: "onnx.ModelProto", names: set[str]) -> dict[str, str | None] | None:
    """Scopes from node names, where every scope of every name is a module of the model.

    A model exported inside a wrapper of the user's own (to pass keyword inputs, say) has one more
    outer scope on every name; where the names fit the model only without it, it is dropped.
    """
    scoped = [node.name[1:].split("/")[:-1] for node in model.graph.node if node.name.startswith("/")]
    if not scoped:
        return None
    known = {unqualified_name(name) for name in names if name}
    if _all_known(scoped, known):
        return torchscript_node_modules(model, names, wrapped=False)
    outer = {scopes[0] for scopes in scoped if scopes}
    if len(outer) != 1 or not _all_known([scopes[1:] for scopes in scoped], known):
        return None
    (wrapper,) = outer
    found = torchscript_node_modules(model, [wrapper] + [f"{wrapper}.{name}" for name in names if name], wrapped=False)
    prefix = wrapper + "."
    return {key: None if module is None else module[len(prefix):] if module.startswith(prefix) else ""
            for key, module in found.items()}


def _all_known(scoped: list[list[str]], known: set[str]) -> bool:
    """Every scope names a module (``name_1``, ``name_2`` are further calls of ``name``)."""
    return all(scope in known or scope.rsplit("_", 1)[0] in known for scopes in scoped for scope in scopes)
