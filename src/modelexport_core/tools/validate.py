"""Checking a tagged ONNX file: the checker, every node tagged, tags well formed, sidecar in agreement."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from modelexport_core.errors import first_line
from modelexport_core.format.graph import node_key
from modelexport_core.format.sidecar import sidecar_path, validate_sidecar
from modelexport_core.format.tagged import load_tagged
from modelexport_core.format.writer import (
    LAYER_KEY,
    MODULE_KEY,
    NAMESPACE_KEY,
    TAG_KEY,
    layer_annotation,
    node_property,
)

# "/" then segments of one or more characters, none empty, no whitespace
_WELL_FORMED = re.compile(r"^(/[^/\s]+)+$")


@dataclass
class Validation:
    """The problems found in one file; none means it is valid."""

    path: Path
    nodes: int
    tagged: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _limited(problems: list[str], prefix: str, items: list[str], limit: int = 3) -> None:
    if items:
        more = f" and {len(items) - limit} more" if len(items) > limit else ""
        problems.append(f"{prefix}: {', '.join(items[:limit])}{more}")


def validate_file(onnx_path: Path) -> Validation:
    """Every problem of the tagged file ``onnx_path`` and its sidecar."""
    import onnx

    tagged = load_tagged(onnx_path, require_tags=False)
    graph = tagged.graph
    keys = [node_key(node, i) for i, node in enumerate(graph.node)]
    result = Validation(tagged.path, len(keys), len(tagged.node_tags))
    problems = result.problems
    try:
        onnx.checker.check_model(str(tagged.path))
    except Exception as error:
        problems.append(f"onnx.checker: {first_line(error)}")

    _limited(problems, f"{len(keys) - len(tagged.node_tags)} nodes carry no {TAG_KEY}",
             [k for k in keys if k not in tagged.node_tags])
    _limited(problems, "malformed tags", sorted({t for t in tagged.node_tags.values() if not _WELL_FORMED.match(t)}))
    _limited(problems, f"nodes without {MODULE_KEY}",
             [k for k, node in zip(keys, graph.node) if k in tagged.node_tags and node_property(node, MODULE_KEY) is None])
    mismatched_keys = []
    for key, node in zip(keys, graph.node):
        tag = tagged.node_tags.get(key)
        namespace, layer = node_property(node, NAMESPACE_KEY), node_property(node, LAYER_KEY)
        if tag and ((namespace is not None and namespace != tag) or (layer is not None and layer != layer_annotation(tag))):
            mismatched_keys.append(key)
    _limited(problems, f"{NAMESPACE_KEY}/{LAYER_KEY} disagree with {TAG_KEY}", mismatched_keys)

    sidecar = tagged.sidecar
    if sidecar is None:
        problems.append(f"no readable sidecar {sidecar_path(tagged.path).name} beside the file")
        return result
    for problem in validate_sidecar(sidecar, keys):
        problems.append(f"sidecar: {problem}")
    found_nodes = sidecar.get("nodes")
    nodes: dict = found_nodes if isinstance(found_nodes, dict) else {}
    _limited(problems, "sidecar and node metadata disagree on the tag of",
             [k for k in keys if k in nodes and k in tagged.node_tags and nodes[k].get("tag") != tagged.node_tags[k]])
    _limited(problems, "sidecar and node metadata disagree on the module of",
             [k for k in keys if k in nodes and k in tagged.node_modules
              and nodes[k].get("module") != tagged.node_modules[k]])
    _limited(problems, "sidecar lists nodes the graph lacks", [k for k in nodes if k not in set(keys)])
    found_modules = sidecar.get("modules")
    modules: dict = found_modules if isinstance(found_modules, dict) else {}
    module_tags = {entry.get("tag") for entry in modules.values() if isinstance(entry, dict)}
    _limited(problems, "tags that are no module of the sidecar",
             sorted({t for t in tagged.node_tags.values() if t not in module_tags}))
    return result
