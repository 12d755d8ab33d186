"""Writing hierarchy tags into an ONNX model: node metadata and, optionally, doc strings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .graph import node_key

if TYPE_CHECKING:
    import onnx

TAG_KEY = "modelexport.tag"
MODULE_KEY = "modelexport.module"


@dataclass(frozen=True)
class NodeTag:
    """What one node is tagged with."""

    tag: str
    module: str
    also: tuple[str, ...] = field(default_factory=tuple)


def _set_property(node: "onnx.NodeProto", key: str, value: str) -> None:
    for prop in node.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    entry = node.metadata_props.add()
    entry.key = key
    entry.value = value


def _doc_string(tag: NodeTag, strategy: str) -> str:
    tags = [tag.tag, *tag.also]
    return json.dumps(
        {"hierarchy_tags": tags, "hierarchy_path": tag.tag, "hierarchy_count": len(tags), "hierarchy_method": strategy}
    )


_GRAPH_ATTRIBUTE_TYPES = (5, 10)  # AttributeProto.GRAPH, AttributeProto.GRAPHS


def _tag_node(node: "onnx.NodeProto", tag: NodeTag, doc_string: str | None) -> None:
    props = node.metadata_props
    if props and any(prop.key == TAG_KEY or prop.key == MODULE_KEY for prop in props):  # tagged before: replace
        _set_property(node, TAG_KEY, tag.tag)
        _set_property(node, MODULE_KEY, tag.module)
    else:
        props.add(key=TAG_KEY, value=tag.tag)
        props.add(key=MODULE_KEY, value=tag.module)
    if doc_string is not None:
        node.doc_string = doc_string
    if not node.attribute:
        return
    for attribute in node.attribute:  # nodes inside If/Loop/Scan bodies belong to the node that owns them
        if attribute.type not in _GRAPH_ATTRIBUTE_TYPES:
            continue
        subgraphs = ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs)
        for subgraph in subgraphs:
            for sub_node in subgraph.node:
                _tag_node(sub_node, tag, doc_string)


def write_tags(
    model: "onnx.ModelProto", node_tags: dict[str, NodeTag], *, doc_string: bool = False, strategy: str = ""
) -> None:
    """Tag every node of ``model`` in place. Other metadata, names and topology are left as they are."""
    doc_strings: dict[NodeTag, str] = {}
    for i, node in enumerate(model.graph.node):
        key = node.name or f"{node.op_type}#{i}"  # graph.node_key, inlined: this loop runs once per node
        tag = node_tags.get(key)
        if tag is None:
            raise KeyError(f"no tag for node {key!r}")
        text = None
        if doc_string:
            text = doc_strings.get(tag)
            if text is None:
                text = doc_strings[tag] = _doc_string(tag, strategy)
        _tag_node(node, tag, text)


def read_tags(model: "onnx.ModelProto") -> dict[str, str]:
    """The ``modelexport.tag`` of every top-level node that has one."""
    tags = {}
    for i, node in enumerate(model.graph.node):
        for prop in node.metadata_props:
            if prop.key == TAG_KEY:
                tags[node_key(node, i)] = prop.value
    return tags
