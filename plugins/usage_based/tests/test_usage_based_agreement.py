"""usage_based against PyTorch's own records: its TorchScript export, and a dynamo graph via ``tag_onnx``."""

from __future__ import annotations

import pytest
from usage_based_support import ALL_MODELS, EXPORTED_MODELS, MIN_AGREEMENT, Measured

from modelexport_core.format.graph import GraphIndex, node_key
from modelexport_core.format.tags import is_ancestor


def assert_complete(measured: Measured) -> None:
    """Every node has a tag, every tag and every further module named is a real module of the model."""
    graph = measured.onnx_model.graph
    nodes = {node_key(node, i) for i, node in enumerate(graph.node)}
    modules = {qualname for qualname, _ in measured.ctx.model.named_modules()}
    assert set(measured.result.node_modules) == nodes
    assert set(measured.result.node_modules.values()) <= modules
    for node, others in measured.result.also.items():
        assert node in nodes
        assert others and set(others) <= modules
        assert measured.result.node_modules[node] not in others


@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_export_tags_every_node_with_a_real_module(exported, name):
    measured = exported(name)
    assert_complete(measured)
    assert measured.result.exporter == "torchscript"


@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_export_agrees_with_torchscript_scopes(exported, name):
    measured = exported(name)
    assert measured.agreement >= MIN_AGREEMENT, measured.disagreements()
    assert measured.tag_agreement >= MIN_AGREEMENT, measured.disagreements()


@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_export_never_gives_a_node_to_a_sibling_layer(exported, name):
    assert exported(name).contaminated == []


@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_unscoped_nodes_serve_a_module_that_reads_them(exported, name):
    """Initializer copies and shared constants carry no scope; their tag is that of a reader (or its caller)."""
    measured = exported(name)
    graph = measured.onnx_model.graph
    index = GraphIndex.of(graph)
    tags = measured.result.node_modules
    unscoped = [i for i, key in enumerate(index.keys) if measured.reference[key] is None]
    for i in unscoped:
        readers = [tags[index.keys[j]] for j in index.node_consumers(graph, i)]
        assert not readers or any(is_ancestor(tags[index.keys[i]], reader) for reader in readers), index.keys[i]


@pytest.mark.parametrize("name", ALL_MODELS)
def test_tag_onnx_on_a_dynamo_graph_agrees_with_its_name_scopes(dynamo_tagged, name):
    measured = dynamo_tagged(name)
    assert_complete(measured)
    assert measured.result.exporter == "dynamo"
    assert measured.agreement >= MIN_AGREEMENT, measured.disagreements()
    assert measured.contaminated == []


def test_its_own_dynamo_export_agrees_with_the_dynamo_records(modelexport_measured):
    measured = modelexport_measured("usage_based", "bert", options={"exporter": "dynamo"})
    assert_complete(measured)
    assert measured.result.exporter == "dynamo"
    assert measured.agreement >= MIN_AGREEMENT, measured.disagreements()
    assert measured.contaminated == []


def test_auto_makes_its_file_with_dynamo_when_torchscript_fails(tmp_path, monkeypatch):
    from modelexport_core import make_context
    from modelexport_core.plugin.strategy import StrategyFailed
    from modelexport_core.testing import build_case
    from modelexport_usage_based import strategy

    def refuse(*args, **kwargs):
        raise StrategyFailed("TorchScript export failed: Invalid name: '0'")

    monkeypatch.setattr(strategy, "export_torchscript", refuse)
    result = strategy.UsageBasedStrategy().export(make_context(*build_case("stacked_blocks")), tmp_path / "m.onnx")
    assert result.exporter == "dynamo"
    assert result.details["exporter_fallback"] == ["TorchScript export failed: Invalid name: '0'"]
    assert set(result.node_modules.values()) >= {"blocks.0.proj", "blocks.1.proj", "blocks.2.proj"}
