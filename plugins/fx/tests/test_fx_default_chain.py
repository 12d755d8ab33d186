"""fx is first in the default chain: `modelexport export` without --strategy uses it, and falls back past it."""

from __future__ import annotations

import json

import onnx
import pytest
from typer.testing import CliRunner

from modelexport_core.cli import app
from modelexport_core.export.pipeline import ExportOptions, export_model
from modelexport_core.format.reference import dynamo_node_modules
from modelexport_core.format.sidecar import validate_sidecar
from modelexport_core.format.tags import HierarchyTags
from modelexport_core.prepare.models import load_model
from modelexport_core.testing import sibling_contamination

runner = CliRunner()


@pytest.mark.parametrize("preset", ["bert", "gpt2", "llama", "vit", "t5"])
def test_default_export_goes_through_fx(preset, tmp_path):
    loaded = load_model(f"preset:{preset}")
    report = export_model(loaded, tmp_path / f"{preset}.onnx", ExportOptions())
    document = json.loads(report.sidecar_path.read_text())
    graph = onnx.load(str(report.onnx_path)).graph
    assert document["strategy"] == "fx" and [a["strategy"] for a in document["attempted"]] == ["fx"]
    assert validate_sidecar(document, [n.name for n in graph.node]) == []
    assert report.coverage == 1.0 and report.verification.passed
    assert len(report.verification.checks) == 2  # dynamic shapes checked at a second shape
    tags = HierarchyTags.from_model(loaded.model)
    reference = dynamo_node_modules(onnx.load(str(report.onnx_path)))
    for node in graph.node:
        recorded = reference[node.name]
        if recorded is not None:
            assert document["nodes"][node.name]["tag"] == tags.tag_of(recorded), node.name
    assert sibling_contamination({n: e["module"] for n, e in document["nodes"].items()},
                                 {n: tags.kept_module(m) for n, m in reference.items() if m is not None}) == []


def test_a_model_torch_export_rejects_falls_back_to_the_next_strategy(tmp_path):
    factory = tmp_path / "branchy.py"
    factory.write_text(
        "import torch\n"
        "class Branchy(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        y = self.proj(x)\n"
        "        if y.sum() > 0:\n"
        "            return y * 2\n"
        "        return y - 1\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    return Branchy(), (torch.ones(2, 4),)\n"
    )
    # draft_export would capture it with the example's branch (see test_fx_capture_methods): torch.export's
    # own methods only, here
    result = runner.invoke(app, ["export", f"{factory}:make", str(tmp_path / "b.onnx"), "--static", "--json",
                                 "-O", "fx.capture=non_strict,strict,symbolic_trace"])
    assert result.exit_code == 0, result.output
    assert "strategy fx failed" in result.stderr and "torch.export" in result.stderr
    document = json.loads((tmp_path / "b.hierarchy.json").read_text())
    assert document["attempted"][0]["strategy"] == "fx" and document["attempted"][0]["status"] == "failed"
    assert "\n" not in document["attempted"][0]["reason"]
    assert document["strategy"] == document["attempted"][-1]["strategy"] != "fx"
