"""``tag`` without ``-s``: the module records a file already carries, read as tags where they are whole."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
import torch
from onnx import TensorProto, helper
from torch import nn
from typer.testing import CliRunner

from modelexport_core.cli import app
from modelexport_core.format.records import read_records
from modelexport_core.format.reference import NAME_SCOPES_KEY, dynamo_node_modules, torchscript_node_modules
from modelexport_core.format.tags import HierarchyTags

runner = CliRunner()
HERE = Path(__file__).resolve().parent

MODULES = ["", "blocks", "blocks.0", "blocks.0.conv", "blocks.1", "blocks.1.conv", "head"]


def _graph(names: list[str], scopes: list[list[str]] | None = None) -> onnx.ModelProto:
    """A chain x -> Identity(weight) ... : node i reads node i-1; node 0 is an initializer's Identity."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    nodes = [helper.make_node("Identity", ["w"], ["t0"], name=names[0])]
    previous = "x"
    for i, name in enumerate(names[1:], start=1):
        nodes.append(helper.make_node("Add", [previous, "t0"], [f"v{i}"], name=name))
        previous = f"v{i}"
    if scopes is not None:
        for node, entries in zip(nodes, scopes):
            if entries is not None:
                node.metadata_props.add(key=NAME_SCOPES_KEY, value=repr(entries))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [1])], [weight])
    return helper.make_model(graph)


def test_torchscript_scopes_are_read_per_node_and_unscoped_constants_left_to_neighbours():
    model = _graph(["Identity_3", "/blocks/blocks.0/conv/Add", "/blocks/blocks.1/Add", "/head/Add", "/Add"])
    records = read_records(model, MODULES)
    assert records is not None and records.source == "torchscript"
    assert records.node_modules == {"/blocks/blocks.0/conv/Add": "blocks.0.conv", "/blocks/blocks.1/Add": "blocks.1",
                                    "/head/Add": "head", "/Add": ""}
    assert records.unrecorded == 1 and records.computing_unrecorded == 0


def test_names_that_only_look_scoped_are_not_records():
    # a scope that is no module of the model: the file was made from something else, or renamed
    assert read_records(_graph(["Identity_3", "/encoder/Add", "/head/Add"]), MODULES) is None
    # renamed nodes: nothing to read
    assert read_records(_graph(["n0", "n1", "n2", "n3"]), MODULES) is None


def test_one_outer_scope_of_the_users_own_wrapper_is_dropped():
    model = _graph(["Identity_3", "/wrap/blocks/blocks.0/conv/Add", "/wrap/head/Add", "/wrap/Add"])
    records = read_records(model, MODULES)
    assert records is not None
    assert records.node_modules == {"/wrap/blocks/blocks.0/conv/Add": "blocks.0.conv", "/wrap/head/Add": "head",
                                    "/wrap/Add": ""}


def test_dynamo_name_scopes_are_read_and_a_few_unscoped_computing_nodes_are_tolerated():
    names = ["w_identity"] + [f"node_Add_{i}" for i in range(1, 12)]
    scopes = [None] + [["blocks", "blocks.0", "blocks.0.conv", f"add_{i}"] for i in range(1, 11)] + [None]
    records = read_records(_graph(names, scopes), MODULES)
    assert records is not None and records.source == "dynamo"
    assert set(records.node_modules.values()) == {"blocks.0.conv"} and records.computing_unrecorded == 1
    # most computing nodes without scopes: not whole
    sparse = [None] + [["blocks", "blocks.0", f"add_{i}"] if i < 3 else None for i in range(1, 12)]
    assert read_records(_graph(names, sparse), MODULES) is None


class _Block(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x))) + x


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(_Block(8), _Block(8))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def make_net():
    torch.manual_seed(0)
    return _Net().eval(), (torch.randn(2, 3, 16, 16),)


FACTORY = f"{Path(__file__).resolve()}:make_net"


@pytest.fixture(scope="module")
def plain_files(tmp_path_factory):
    """The CNN exported the way a user would, by each exporter, and a copy whose node names were replaced."""
    folder = tmp_path_factory.mktemp("plain")
    model, args = make_net()
    torch.onnx.export(model, args, str(folder / "torchscript.onnx"), dynamo=False)
    torch.onnx.export(model, args, str(folder / "dynamo.onnx"), dynamo=True, opset_version=18)
    renamed = onnx.load(str(folder / "torchscript.onnx"))
    for i, node in enumerate(renamed.graph.node):
        node.name = f"n{i}"
    onnx.save(renamed, str(folder / "renamed.onnx"))
    return folder


def _written_tags(path: Path) -> dict[str, str]:
    return {n.name: next(p.value for p in n.metadata_props if p.key == "modelexport.tag") for n in onnx.load(str(path)).graph.node}


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_tag_without_a_strategy_gives_every_recorded_node_its_recorded_module(plain_files, exporter, tmp_path):
    source = plain_files / f"{exporter}.onnx"
    result = runner.invoke(app, ["tag", str(source), "--model", FACTORY, "-o", str(tmp_path / "t.onnx"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["strategy"] == "records"
    model, _ = make_net()
    tags = HierarchyTags.from_model(model)
    names = [name for name, _ in model.named_modules()]
    original = onnx.load(str(source), load_external_data=False)
    recorded = (torchscript_node_modules(original, names, wrapped=False) if exporter == "torchscript"
                else dynamo_node_modules(original, wrapped=False))
    judged = {name: module for name, module in recorded.items() if module is not None}
    written = _written_tags(tmp_path / "t.onnx")
    assert len(judged) >= 8 and {n: written[n] for n in judged} == {n: tags.tag_of(m) for n, m in judged.items()}
    assert {"/_Net/_Block.0", "/_Net/_Block.1"} <= set(written.values())


def test_a_file_without_its_records_is_inferred_and_says_so(plain_files, tmp_path):
    result = runner.invoke(app, ["tag", str(plain_files / "renamed.onnx"), "--model", FACTORY, "-o", str(tmp_path / "t.onnx"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["strategy"] == "htp"  # the first strategy that tags a file made elsewhere
    assert summary["attempts"][0]["strategy"] == "records" and summary["attempts"][0]["status"] == "unavailable"
    assert "no whole module records" in result.stderr
    # the inferred tags still put each block's convolution in its own block
    original = onnx.load(str(plain_files / "torchscript.onnx"))
    written = _written_tags(tmp_path / "t.onnx")
    by_position = {node.name: written[f"n{i}"] for i, node in enumerate(original.graph.node)}
    for name, module in torchscript_node_modules(original, [n for n, _ in make_net()[0].named_modules()], wrapped=False).items():
        if module and module.startswith("blocks.1"):
            assert by_position[name] == "/_Net/_Block.1"


def test_a_file_this_tool_tagged_keeps_its_tags(tmp_path):
    first = tmp_path / "first.onnx"
    assert runner.invoke(app, ["export", FACTORY, str(first), "--no-verify"]).exit_code == 0
    result = runner.invoke(app, ["tag", str(first), "--model", FACTORY, "-o", str(tmp_path / "again.onnx"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["strategy"] == "records"
    assert _written_tags(tmp_path / "again.onnx") == _written_tags(first)


class _Attend(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(4, 4)

    def forward(self, x):
        return torch.softmax(self.query(x), dim=-1) * x  # the attention's own ops: no parameter


class _Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = _Attend()

    def forward(self, x):
        return self.attention(x)


class _CallsForward(nn.Module):
    """Layers run through ``layer.forward(x)``, as SqueezeBERT's encoder does: the layer leaves no scope."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Layer() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x


def test_a_scope_that_fits_several_modules_is_no_record_unless_a_parameter_says_which(tmp_path):
    # names read /attention/query_1/Gemm and /attention_1/Softmax: every layer's attention fits them
    torch.manual_seed(0)
    model = _CallsForward().eval()
    torch.onnx.export(model, (torch.randn(2, 4),), str(tmp_path / "m.onnx"), dynamo=False)
    onnx_model = onnx.load(str(tmp_path / "m.onnx"))
    found = torchscript_node_modules(onnx_model, [n for n, _ in model.named_modules()], wrapped=False)
    by_node = {node.name: found[node.name] for node in onnx_model.graph.node if node.name in found}
    reading = {n.name: p for n in onnx_model.graph.node for p in n.input if p.endswith("query.weight")}
    assert len(reading) == 3
    for node, parameter in reading.items():  # each layer's projection: its own layer, by the weight it reads
        assert by_node[node] == parameter.rsplit(".", 1)[0]
    softmaxes = [n.name for n in onnx_model.graph.node if n.op_type == "Softmax"]
    assert len(softmaxes) == 3 and all(by_node[n] is None for n in softmaxes)  # no layer's record: not judged
