"""Removing source paths from an ONNX file: stack traces and doc strings that name files of the exporting machine.

The dynamo exporter writes ``pkg.torch.onnx.stack_trace`` on every node and the TorchScript
exporter writes stack traces into node doc strings; both name files (and so user names and
folders) of the machine that exported the model.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from modelexport_core.format.writer import subgraphs_of

if TYPE_CHECKING:
    import onnx

# A path to a source file: POSIX or Windows, ending in a Python/C++ source suffix, with an optional line.
_SOURCE_PATH = re.compile(r"(?:[A-Za-z]:)?[\w.~-]*[\\/][^\s\"'<>|]*\.(?:py|pyx|cpp|cc|c|h|hpp)\b")


def has_source_path(text: str) -> bool:
    """Whether ``text`` names a source file by path."""
    return bool(_SOURCE_PATH.search(text))


def _strip_node(node: "onnx.NodeProto") -> int:
    removed = 0
    kept = [p for p in node.metadata_props if not (p.key.endswith("stack_trace") or has_source_path(p.value))]
    if len(kept) != len(node.metadata_props):
        removed += len(node.metadata_props) - len(kept)
        entries = [(p.key, p.value) for p in kept]
        del node.metadata_props[:]
        for key, value in entries:
            entry = node.metadata_props.add()
            entry.key, entry.value = key, value
    if has_source_path(node.doc_string):
        node.doc_string = ""
        removed += 1
    for subgraph in subgraphs_of(node):
        removed += _strip_graph(subgraph)
    return removed


def _strip_graph(graph: "onnx.GraphProto") -> int:
    removed = sum(_strip_node(node) for node in graph.node)
    if has_source_path(graph.doc_string):
        graph.doc_string = ""
        removed += 1
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        if has_source_path(value.doc_string):
            value.doc_string = ""
            removed += 1
    return removed


def strip_source_paths(model: "onnx.ModelProto") -> int:
    """Remove every stack trace and every doc string or metadata value naming a source file, in place.

    Returns how many entries were removed.
    """
    removed = _strip_graph(model.graph)
    for function in model.functions:
        removed += sum(_strip_node(node) for node in function.node)
        if has_source_path(function.doc_string):
            function.doc_string = ""
            removed += 1
    if has_source_path(model.doc_string):
        model.doc_string = ""
        removed += 1
    kept = [(p.key, p.value) for p in model.metadata_props if not has_source_path(p.value)]
    if len(kept) != len(model.metadata_props):
        removed += len(model.metadata_props) - len(kept)
        del model.metadata_props[:]
        for key, value in kept:
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
    return removed
