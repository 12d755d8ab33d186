"""Reading tags back from a tagged ONNX file: a tree of hierarchy tags with their nodes."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from modelexport_core.format.writer import TAG_KEY

if TYPE_CHECKING:
    import onnx


@dataclass
class TagNode:
    """One tag in the tree: its nodes (by op type) and its child tags."""

    tag: str
    op_types: Counter[str] = field(default_factory=Counter)
    children: dict[str, "TagNode"] = field(default_factory=dict)

    @property
    def own_nodes(self) -> int:
        return sum(self.op_types.values())

    @property
    def total_nodes(self) -> int:
        return self.own_nodes + sum(child.total_nodes for child in self.children.values())


def tag_tree(onnx_path: Path) -> tuple[TagNode, int, int]:
    """The tree of tags in a tagged ONNX file, its node count and how many nodes carry no tag."""
    from modelexport_core.format.onnx_file import load_graph

    return tag_tree_of(load_graph(onnx_path))


def tag_tree_of(model: "onnx.ModelProto") -> tuple[TagNode, int, int]:
    """The tree of tags of a loaded model's top-level nodes, its node count and how many carry no tag."""
    by_tag: dict[str, Counter[str]] = defaultdict(Counter)
    untagged = 0
    for node in model.graph.node:
        tag = next((p.value for p in node.metadata_props if p.key == TAG_KEY), None)
        if tag is None:
            untagged += 1
            continue
        by_tag[tag][node.op_type] += 1
    roots: dict[str, TagNode] = {}
    for tag in sorted(by_tag):
        parts = tag.split("/")[1:]
        level = roots
        path = ""
        current = None
        for part in parts:
            path += "/" + part
            current = level.setdefault(part, TagNode(path))
            level = current.children
        if current is not None:
            current.op_types.update(by_tag[tag])
    root = next(iter(roots.values())) if len(roots) == 1 else TagNode("", children=roots)
    return root, len(model.graph.node), untagged


def recorded_evidence(onnx_path: Path) -> dict[str, float] | None:
    """The share of nodes each kind of evidence decided, from the sidecar beside the file; None without one."""
    import json

    from modelexport_core.format.sidecar import sidecar_path

    path = sidecar_path(onnx_path)
    try:
        counts = json.loads(path.read_text()).get("export", {}).get("evidence")
    except (OSError, ValueError):
        return None
    if not counts:
        return None
    total = sum(counts.values()) or 1
    return {kind: round(count / total, 4) for kind, count in counts.items()}
