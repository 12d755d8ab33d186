"""Reading a tagged ONNX file for the tools: its graph, its sidecar, and which nodes a module holds.

Shared by extract, nodes, profile, numerics, validate and tag --from. Only the graph is
read: weights in external data files stay on disk until a tool needs them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.errors import NotTaggedError, OnnxFileError, UnknownModuleError, first_line
from modelexport_core.format.graph import node_key
from modelexport_core.format.sidecar import sidecar_path
from modelexport_core.format.writer import MODULE_KEY, TAG_KEY, node_property

if TYPE_CHECKING:
    import onnx


@dataclass
class TaggedFile:
    """A tagged ONNX file: its graph (no external weights), its sidecar if present, each node's tag and module."""

    path: Path
    model: "onnx.ModelProto"
    sidecar: dict[str, Any] | None
    node_tags: dict[str, str]  # node key -> tag, top-level nodes that carry one
    node_modules: dict[str, str]  # node key -> named_modules() name

    @property
    def graph(self) -> "onnx.GraphProto":
        return self.model.graph

    def module_tags(self) -> dict[str, str]:
        """``named_modules()`` name -> tag of every module that owns nodes in its own tag (kept modules)."""
        if self.sidecar and isinstance(self.sidecar.get("modules"), dict):
            return {
                name: entry["tag"]
                for name, entry in self.sidecar["modules"].items()
                if entry.get("kept", True)
            }
        found: dict[str, str] = {}
        for key, module in self.node_modules.items():
            found.setdefault(module, self.node_tags[key])
        return found

    def resolve(self, name: str) -> tuple[str, str]:
        """The tag and ``named_modules()`` name of ``name``, given as either; a clear error if there is none."""
        tags = set(self.node_tags.values())
        by_name = self.module_tags()
        if name.startswith("/"):
            tag = name.rstrip("/")
            if not any(t == tag or t.startswith(tag + "/") for t in tags):
                raise UnknownModuleError(f"no node of {self.path.name} is tagged {tag} or below it{_hint(tags)}")
            module = next((m for m, t in by_name.items() if t == tag), "")
            return tag, module
        if name in by_name:
            return by_name[name], name
        modules = (self.sidecar or {}).get("modules", {})
        if name in modules:
            owner = modules[name]["tag"]
            raise UnknownModuleError(
                f"module {name!r} ({modules[name].get('class', '?')}) is left out of tags, its nodes are tagged "
                f"{owner}; name that module, or export with --torch-module to address {name!r} itself"
            )
        raise UnknownModuleError(f"{self.path.name} has no module {name!r}{_hint(tags)}")

    def node_indices(self, tag: str, op_types: set[str] | None = None) -> list[int]:
        """Indices of the top-level nodes of module ``tag`` and its descendants, in graph order."""
        prefix = tag + "/"
        indices = []
        for i, node in enumerate(self.graph.node):
            node_tag = self.node_tags.get(node_key(node, i))
            if node_tag is None or not (node_tag == tag or node_tag.startswith(prefix)):
                continue
            if op_types and node.op_type not in op_types:
                continue
            indices.append(i)
        return indices


def _hint(tags: set[str]) -> str:
    roots = sorted(tags, key=lambda t: (t.count("/"), t))[:3]
    return f" (tags look like {', '.join(roots)}; `modelexport inspect` lists them)" if roots else ""


def load_graph(path: Path) -> "onnx.ModelProto":
    """The model at ``path`` without its external weights; a one-line error if it cannot be read."""
    import onnx

    path = Path(path).expanduser()
    if not path.is_file():
        raise OnnxFileError(f"{path}: no such file")
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as error:
        raise OnnxFileError(f"{path} is not a readable ONNX file: {first_line(error)}") from error


def read_sidecar(onnx_path: Path) -> dict[str, Any] | None:
    """The sidecar beside ``onnx_path``, or None when there is none or it is not JSON."""
    path = sidecar_path(Path(onnx_path))
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def load_tagged(path: Path, *, require_tags: bool = True) -> TaggedFile:
    """Read a tagged ONNX file and its sidecar. With ``require_tags``, a file without tags is an error."""
    path = Path(path).expanduser()
    model = load_graph(path)
    node_tags: dict[str, str] = {}
    node_modules: dict[str, str] = {}
    for i, node in enumerate(model.graph.node):
        tag = node_property(node, TAG_KEY)
        if tag is not None:
            node_tags[node_key(node, i)] = tag
            node_modules[node_key(node, i)] = node_property(node, MODULE_KEY) or ""
    if require_tags and not node_tags:
        raise NotTaggedError(
            f"{path.name} carries no modelexport tags; export it with `modelexport export` or tag it with `modelexport tag`"
        )
    return TaggedFile(path, model, read_sidecar(path), node_tags, node_modules)


def load_external_tensors(model: "onnx.ModelProto", names: set[str], base_dir: Path) -> None:
    """Read the external data of the initializers named ``names`` only, in place."""
    from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

    for tensor in model.graph.initializer:
        if tensor.name in names and uses_external_data(tensor):
            load_external_data_for_tensor(tensor, str(base_dir))
            tensor.data_location = 0  # DEFAULT: the data now lives in the proto
            del tensor.external_data[:]

