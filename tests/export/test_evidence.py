"""Evidence per node: the sidecar says how each node's module was decided, and inspect and compare show the shares."""

from __future__ import annotations

import json

import onnx
import pytest
import torch
from onnx import TensorProto, helper
from torch import nn
from typer.testing import CliRunner

from modelexport_core import export_module
from modelexport_core.cli import app
from modelexport_core.export.pipeline import node_evidence
from modelexport_core.plugin.strategy import TaggingResult

runner = CliRunner()


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.proj(x)) * 2 + x


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([_Block(), _Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x.sum(-1)


def test_nodes_a_strategy_left_out_are_decided_by_neighbours():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"), helper.make_node("Relu", ["a"], ["b"], name="b"),
             helper.make_node("Relu", ["b"], ["c"], name="c")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1])])
    result = TaggingResult({"a": "m", "b": "m"}, "torchscript", evidence={"a": "record"})
    assert node_evidence(helper.make_model(graph), result) == {"a": "record", "b": "unstated", "c": "neighbours"}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("evidence")
    torch.manual_seed(0)
    model = _Net().eval()
    paths = {}
    for strategy in ("fx", "htp"):
        paths[strategy] = folder / f"{strategy}.onnx"
        export_module(model, torch.randn(2, 4, 8), paths[strategy], strategies=[strategy], verify=False)
    return paths


def _sidecar(path):
    return json.loads(path.with_name(path.stem + ".hierarchy.json").read_text())


def test_every_node_of_an_fx_export_is_decided_by_the_exporters_record(exports):
    document = _sidecar(exports["fx"])
    assert {entry["by"] for entry in document["nodes"].values()} <= {"record", "neighbours"}
    assert document["export"]["evidence"]["record"] >= len(document["nodes"]) - 3


def test_htp_says_which_nodes_it_matched_by_value_and_inspect_and_compare_show_the_shares(exports):
    document = _sidecar(exports["htp"])
    kinds = [entry["by"] for entry in document["nodes"].values()]
    assert "value" in kinds and "record" not in kinds
    assert sum(document["export"]["evidence"].values()) == len(document["nodes"]) == len(onnx.load(str(exports["htp"])).graph.node)
    inspected = json.loads(runner.invoke(app, ["inspect", str(exports["htp"]), "--json"]).stdout)
    assert inspected["evidence"]["value"] == pytest.approx(kinds.count("value") / len(kinds), abs=1e-4)
    human = runner.invoke(app, ["inspect", str(exports["htp"])]).stdout
    assert "decided by" in human and "value" in human
