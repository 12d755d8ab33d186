"""Model Explorer on a tagged file: its ONNX adapter draws one collapsible group per module (from the
``namespace`` key the export writes), with time or error per node as a node-data overlay.

Model Explorer (``ai-edge-model-explorer``) and its ONNX adapter (``model-explorer-onnx``) are the
optional extra ``modelexport-core[viewer]``; without them :func:`require_model_explorer` says what to install.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.errors import ViewerNotInstalledError
from modelexport_core.format.graph import node_key

if TYPE_CHECKING:
    from modelexport_core.format.tagged import TaggedFile
    from modelexport_core.measure.numerics import NumericsReport

INSTALL = 'pip install "modelexport-core[viewer]"'
ONNX_ADAPTER = "model_explorer_onnx"
OVERLAYS = ("time", "error")


def require_model_explorer() -> None:
    """Raise :class:`ViewerNotInstalledError`, naming what to install, unless Model Explorer can run ONNX files."""
    import importlib.util

    for module, distribution in (("model_explorer", "ai-edge-model-explorer"), (ONNX_ADAPTER, "model-explorer-onnx")):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ViewerNotInstalledError(f"modelexport view needs Model Explorer ({distribution} is missing): {INSTALL}")


def error_node_data(tagged: "TaggedFile", report: "NumericsReport") -> dict[str, Any]:
    """Model Explorer's per-node data: each node gets the largest absolute difference at the edge of its
    module (or of the nearest enclosing module that was compared)."""
    by_tag = {row.tag: row.max_abs for row in report.modules if row.max_abs is not None}
    results = {}
    for i, node in enumerate(tagged.graph.node):
        tag = tagged.node_tags.get(node_key(node, i))
        while tag and tag not in by_tag:
            tag = tag.rsplit("/", 1)[0]
        if tag and node.name:
            results[node.name] = {"value": by_tag[tag]}
    return {
        "name": f"max abs difference of the node's module, PyTorch against onnxruntime (atol {report.atol:g})",
        "results": results,
        "gradient": [
            {"stop": 0, "bgColor": "#ffffff"},
            {"stop": 0.5, "bgColor": "#ffd27f"},
            {"stop": 1, "bgColor": "#e0483e"},
        ],
    }


def explorer_config(onnx_path: Path, node_data: dict[str, Any] | None = None):
    """Model Explorer's config for the file, with ``node_data`` (GraphNodeData JSON) as an overlay."""
    import model_explorer

    config = model_explorer.config()
    config.add_model_from_path(str(Path(onnx_path).expanduser().resolve()))
    if node_data is not None:
        config.add_node_data(node_data["name"], json.dumps(node_data))
    return config


def serve(onnx_path: Path, node_data: dict[str, Any] | None, host: str, port: int, open_browser: bool) -> None:
    """Start Model Explorer's server on the file (blocks until interrupted) and print its address."""
    from model_explorer import server

    server.start(host=host, port=port, config=explorer_config(onnx_path, node_data),
                 extensions=[ONNX_ADAPTER], no_open_in_browser=not open_browser)
