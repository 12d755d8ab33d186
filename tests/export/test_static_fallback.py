"""The chain's last resort: every axis static at the user's example, verified there and on a second input."""

from __future__ import annotations

import json

import onnx
import pytest
import torch

from modelexport_core import export_module
from modelexport_core.errors import ModelExportError
from modelexport_core.format.reference import torchscript_node_modules
from modelexport_core.format.sidecar import validate_sidecar


class BatchBakingModel(torch.nn.Module):
    """Exports only static: no compiled path (every torch.export method refuses it), a branch on values (an FX
    trace cannot take it) and a size read as a Python int (a TorchScript trace bakes it, so a dynamic file
    fails at another batch size)."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.out = torch.nn.Linear(width, 3)

    def forward(self, x):
        if torch.compiler.is_compiling():
            raise RuntimeError("no compiled path")
        h = self.proj(x)
        if h.abs().sum() >= 0:  # always true, but only known from the values
            h = h * 2
        scale = torch.ones(int(x.shape[0]), 1) * 0.5
        return self.out(h * scale)


class Expert(torch.nn.Module):
    def __init__(self, width: int, factor: float):
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.factor = factor

    def forward(self, x):
        return self.proj(x) * self.factor


class RoutedModel(torch.nn.Module):
    """Top-1 routing of each token to an expert, tokens grouped by expert with sizes read from the route:
    a trace keeps the example's group sizes, right only for inputs that route as the example did."""

    def __init__(self, width: int = 8, experts: int = 3):
        super().__init__()
        self.router = torch.nn.Linear(width, experts)
        self.experts = torch.nn.ModuleList([Expert(width, i + 1.0) for i in range(experts)])

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        route = self.router(tokens).argmax(-1)
        order = route.argsort()
        counts = torch.bincount(route, minlength=len(self.experts)).tolist()
        groups = tokens[order].split(counts)
        mixed = torch.cat([expert(group) for expert, group in zip(self.experts, groups)])
        return mixed[order.argsort()].reshape(x.shape)


def test_a_model_that_cannot_export_dynamically_is_exported_static_with_one_warning(tmp_path):
    torch.manual_seed(0)
    model = BatchBakingModel().eval()
    report = export_module(model, (torch.randn(2, 8),), tmp_path / "m.onnx")
    sidecar = report.sidecar
    dynamic = [a for a in sidecar["attempted"] if not a.get("static")]
    static = [a for a in sidecar["attempted"] if a.get("static")]
    assert dynamic and all(a["status"] != "ok" for a in dynamic)
    assert static[-1] == {"strategy": report.strategy, "status": "ok", "reason": "", "static": True,
                          "max_abs_diff": static[-1]["max_abs_diff"]}
    fallback = sidecar["export"]["static_fallback"]
    assert fallback["axes"] == {"x": {"0": "batch"}} and fallback["reason"].startswith("no strategy exported")
    assert sidecar["export"]["dynamic_axes"] == {}
    graph = onnx.load(str(report.onnx_path))
    assert [d.dim_value for d in graph.graph.input[0].type.tensor_type.shape.dim] == [2, 8]
    # verified at the example and at random inputs of its shape
    assert [c.shapes["x"] for c in report.verification.checks] == [[2, 8], [2, 8]]
    assert report.verification.passed
    warnings = [n for n in report.notes if "static" in n]
    assert len(warnings) == 1 and "x axis 0 ('batch') = 2" in warnings[0] and "\n" not in warnings[0]
    assert validate_sidecar(json.loads(report.sidecar_path.read_text())) == []
    # tags: PyTorch's scope records of the TorchScript file agree with the sidecar
    names = [name for name, _ in model.named_modules()]
    reference = {n: m for n, m in torchscript_node_modules(graph, names, wrapped=False).items() if m is not None}
    modules, nodes = sidecar["modules"], sidecar["nodes"]
    assert reference and [n for n, m in reference.items() if not modules[m]["tag"].startswith(nodes[n]["tag"])] == []


def test_a_static_export_that_keeps_the_examples_route_is_caught_by_the_second_input_and_not_written(tmp_path):
    torch.manual_seed(0)
    model = RoutedModel().eval()
    with pytest.raises(ModelExportError) as caught:
        export_module(model, (torch.randn(2, 6, 8),), tmp_path / "m.onnx", strategies=["builtin_tracking"])
    message = str(caught.value)
    assert "with every axis static" in message and "random inputs of the same shape" in message
    assert "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_the_cli_prints_the_static_export_as_one_warning_line(tmp_path):
    import subprocess
    import sys

    factory = tmp_path / "f.py"
    factory.write_text(
        "import torch\n"
        "from tests.export.test_static_fallback import BatchBakingModel\n"
        "def make():\n    torch.manual_seed(0)\n    return BatchBakingModel(), (torch.randn(2, 8),)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-m", "modelexport_core.cli", "export", f"{factory}:make", str(tmp_path / "m.onnx"),
         "-s", "builtin_tracking"], capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    static_lines = [line for line in completed.stderr.splitlines() if "exported static" in line]
    assert len(static_lines) == 1 and static_lines[0].startswith("warning: every axis is exported static")
