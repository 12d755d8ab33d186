"""Size arguments the TorchScript path must make constants: a normalized shape read from the input, negative permute dims."""

from __future__ import annotations

import onnx
import pytest
import torch
import torch.nn.functional as F

from modelexport_core import export_module
from modelexport_core.format.reference import dynamo_node_modules, torchscript_node_modules

STRATEGIES = ["fx", "builtin_tracking", "htp", "usage_based"]


class ShapeReadingNorm(torch.nn.Module):
    def __init__(self, width: int, affine: bool = True):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, width)) if affine else None
        self.bias = torch.nn.Parameter(torch.linspace(-0.1, 0.1, width)) if affine else None

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)


class Block(torch.nn.Module):
    def __init__(self, width: int = 16, affine: bool = True):
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.norm = ShapeReadingNorm(width, affine)
        self.out = torch.nn.Linear(width, 4)

    def forward(self, x):
        return self.out(self.norm(self.proj(x)))


def _reference(path, model: torch.nn.Module, exporter: str) -> dict[str, str]:
    graph = onnx.load(str(path), load_external_data=False)
    if exporter == "dynamo":
        found = dynamo_node_modules(graph)
    else:
        found = torchscript_node_modules(graph, [name for name, _ in model.named_modules()], wrapped=False)
    return {node: module for node, module in found.items() if module is not None}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_of_the_inputs_own_shape_exports_with_dynamic_axes_and_tags_that_match_pytorch(
    tmp_path, strategy, affine
):
    torch.manual_seed(0)
    model = Block(affine=affine).eval()
    report = export_module(model, (torch.randn(2, 5, 16),), tmp_path / "m.onnx", strategies=[strategy])
    assert report.strategy == strategy
    assert report.sidecar["export"]["dynamic_axes"] == {"x": {"0": "batch"}}
    assert report.verification.passed and len(report.verification.checks) == 2  # the second batch size ran
    nodes, modules = report.sidecar["nodes"], report.sidecar["modules"]
    norm_nodes = [n for n, entry in nodes.items() if entry["op_type"] in ("LayerNormalization", "ReduceMean")]
    assert norm_nodes and all(nodes[n]["module"] == "norm" for n in norm_nodes)
    reference = _reference(report.onnx_path, model, report.sidecar["export"]["exporter"])
    assert len(reference) >= 3
    disagreeing = [n for n, module in reference.items() if not modules[module]["tag"].startswith(nodes[n]["tag"])]
    assert disagreeing == []



class NegativePermute(torch.nn.Module):
    """``permute`` with negative dims, as chunked scans write it."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):  # (batch, a, b, 4)
        return self.proj(x).permute(0, -2, -1, 1)


@pytest.mark.parametrize("strategy", ["builtin_tracking", "usage_based"])
def test_permute_with_negative_dims_exports_with_the_torchscript_strategies(tmp_path, strategy):
    torch.manual_seed(0)
    report = export_module(NegativePermute().eval(), (torch.randn(2, 3, 5, 4),), tmp_path / "p.onnx",
                           strategies=[strategy])
    graph = onnx.load(str(report.onnx_path), load_external_data=False)
    perms = [list(a.ints) for n in graph.graph.node if n.op_type == "Transpose" for a in n.attribute if a.name == "perm"]
    assert perms == [[0, 2, 3, 1]]
    assert report.verification.passed and len(report.verification.checks) == 2
