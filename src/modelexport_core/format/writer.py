"""Writing hierarchy tags into an ONNX model: node metadata and, optionally, doc strings.

Besides its own keys, a tagged node carries the keys other tools read: ``namespace`` (the
tag path; Model Explorer's ONNX adapter builds its collapsible layers from it, split on
``/``) and ``layer_ann`` (the tag with a trailing ``/``; onnxruntime's
``session.layer_assignment_settings`` matches it by prefix, so ``.../Layer.1/`` takes a
module with its descendants and never ``.../Layer.10``). A ``namespace`` PyTorch wrote
before is kept under ``pkg.torch.onnx.namespace``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from modelexport_core.format.graph import node_key

if TYPE_CHECKING:
    import onnx

TAG_KEY = "modelexport.tag"
MODULE_KEY = "modelexport.module"
NAMESPACE_KEY = "namespace"
LAYER_KEY = "layer_ann"
TORCH_NAMESPACE_KEY = "pkg.torch.onnx.namespace"


_OWN_KEYS = frozenset({TAG_KEY, MODULE_KEY, NAMESPACE_KEY, LAYER_KEY, TORCH_NAMESPACE_KEY})


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


def node_property(node: "onnx.NodeProto", key: str) -> str | None:
    return next((prop.value for prop in node.metadata_props if prop.key == key), None)


def layer_annotation(tag: str) -> str:
    """The ``layer_ann`` value of a tag: a prefix that holds the module and its descendants only."""
    return tag.rstrip("/") + "/"


def write_viewer_keys(node: "onnx.NodeProto", tag: str) -> None:
    """``namespace`` and ``layer_ann`` from ``tag``; PyTorch's own ``namespace`` moves aside, kept."""
    previous = node_property(node, NAMESPACE_KEY)
    if previous is not None and previous != tag and node_property(node, TORCH_NAMESPACE_KEY) is None:
        _set_property(node, TORCH_NAMESPACE_KEY, previous)
    _set_property(node, NAMESPACE_KEY, tag)
    _set_property(node, LAYER_KEY, layer_annotation(tag))


def _fresh_node_fields(tag: NodeTag, doc_string: bool, strategy: str, viewer_keys: bool) -> bytes:
    """What tagging adds to a node that carries none of the keys yet, as serialized node fields.

    Merged into a node, the metadata entries append after its own and the doc string is set: the
    same node as four ``metadata_props.add`` calls give, in one call into protobuf instead of four.
    A graph has far fewer distinct tags than nodes, so each is built once.
    """
    import onnx

    fields = onnx.NodeProto()
    props = fields.metadata_props
    props.add(key=TAG_KEY, value=tag.tag)
    props.add(key=MODULE_KEY, value=tag.module)
    if viewer_keys and tag.tag:
        props.add(key=NAMESPACE_KEY, value=tag.tag)
        props.add(key=LAYER_KEY, value=layer_annotation(tag.tag))
    if doc_string:
        fields.doc_string = _doc_string(tag, strategy)
    return fields.SerializeToString()


def _retag_node(node: "onnx.NodeProto", tag: NodeTag, doc_string: bool, strategy: str, viewer_keys: bool) -> None:
    """Tag a node tagged before, or one whose ``namespace`` PyTorch wrote: each key is set where it is."""
    _set_property(node, TAG_KEY, tag.tag)
    _set_property(node, MODULE_KEY, tag.module)
    if viewer_keys and tag.tag:
        write_viewer_keys(node, tag.tag)
    if doc_string:
        node.doc_string = _doc_string(tag, strategy)


class _NodeTagger:
    """Tags nodes, their subgraphs' nodes with them; the fields of each distinct tag are built once."""

    def __init__(self, doc_string: bool, strategy: str, viewer_keys: bool) -> None:
        self.doc_string = doc_string
        self.strategy = strategy
        self.viewer_keys = viewer_keys
        self.fields: dict[int, bytes] = {}  # by id: NodeTags are shared between the nodes of a module
        self.held: list[NodeTag] = []  # keeps each id's NodeTag alive, so an id is never reused

    def tag(self, node: "onnx.NodeProto", tag: NodeTag) -> None:
        props = node.metadata_props
        if props and any(prop.key in _OWN_KEYS for prop in props):
            _retag_node(node, tag, self.doc_string, self.strategy, self.viewer_keys)
        else:  # the common case: no search, one merge
            fields = self.fields.get(id(tag))
            if fields is None:
                fields = self.fields[id(tag)] = _fresh_node_fields(tag, self.doc_string, self.strategy,
                                                                   self.viewer_keys)
                self.held.append(tag)
            node.MergeFromString(fields)
        if node.attribute:
            for subgraph in subgraphs_of(node):  # nodes inside If/Loop/Scan bodies belong to the node that owns them
                for sub_node in subgraph.node:
                    self.tag(sub_node, tag)


def subgraphs_of(node: "onnx.NodeProto") -> list["onnx.GraphProto"]:
    """The bodies of an If/Loop/Scan node (empty for other nodes)."""
    found = []
    for attribute in node.attribute:
        found.extend(([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs))
    return found


def write_tags(
    model: "onnx.ModelProto",
    node_tags: dict[str, NodeTag],
    *,
    doc_string: bool = False,
    strategy: str = "",
    viewer_keys: bool = True,
) -> None:
    """Tag every node of ``model`` in place. Other metadata, names and topology are left as they are.

    ``viewer_keys`` also writes ``namespace`` and ``layer_ann`` (see the module docstring).
    """
    tagger = _NodeTagger(doc_string, strategy, viewer_keys)
    for i, node in enumerate(model.graph.node):
        key = node.name or node_key(node, i)
        tag = node_tags.get(key)
        if tag is None:
            raise KeyError(f"no tag for node {key!r}")
        tagger.tag(node, tag)


def read_tags(model: "onnx.ModelProto") -> dict[str, str]:
    """The ``modelexport.tag`` of every top-level node that has one."""
    tags = {}
    for i, node in enumerate(model.graph.node):
        for prop in node.metadata_props:
            if prop.key == TAG_KEY:
                tags[node_key(node, i)] = prop.value
    return tags
