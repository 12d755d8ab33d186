"""The export pipeline end to end: tags in node metadata, the sidecar, topology, atomic writes."""

from __future__ import annotations

import json

import onnx
import pytest
import torch

from modelexport_core import export_module
from modelexport_core.errors import ModelExportError, OutputPathError, VerificationError
from modelexport_core.export.pipeline import ExportOptions, export_model
from modelexport_core.format.sidecar import SCHEMA, validate_sidecar
from modelexport_core.format.tags import HierarchyTags
from modelexport_core.format.writer import MODULE_KEY, TAG_KEY
from modelexport_core.prepare.models import load_model


@pytest.fixture(scope="module")
def bert_export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    loaded = load_model("preset:bert")
    report = export_model(loaded, folder / "bert.onnx", ExportOptions(strategies=["builtin_tracking"], doc_string=True))
    return loaded, report


def _props(node):
    return {p.key: p.value for p in node.metadata_props}


def test_every_node_has_a_tag_and_module_that_agree_with_the_tree(bert_export):
    loaded, report = bert_export
    model = onnx.load(str(report.onnx_path))
    tags = HierarchyTags.from_model(loaded.model)
    modules = dict(loaded.model.named_modules())
    assert report.coverage == 1.0
    for node in model.graph.node:
        props = _props(node)
        assert props[TAG_KEY].startswith("/BertModel")
        assert props[MODULE_KEY] in modules
        assert tags.tag_of(props[MODULE_KEY]) == props[TAG_KEY]


def test_query_matmul_is_tagged_with_its_self_attention_layer(bert_export):
    _, report = bert_export
    model = onnx.load(str(report.onnx_path))
    node = next(n for n in model.graph.node if n.name == "/encoder/layer.1/attention/self/query/MatMul")
    assert _props(node)[TAG_KEY] == "/BertModel/BertEncoder/BertLayer.1/BertAttention/BertSelfAttention"
    assert _props(node)[MODULE_KEY] == "encoder.layer.1.attention.self"


def test_doc_string_carries_the_seed_json(bert_export):
    _, report = bert_export
    node = onnx.load(str(report.onnx_path)).graph.node[-1]
    doc = json.loads(node.doc_string)
    assert doc["hierarchy_path"] == _props(node)[TAG_KEY]
    assert doc["hierarchy_tags"][0] == doc["hierarchy_path"]
    assert doc["hierarchy_count"] == len(doc["hierarchy_tags"])
    assert doc["hierarchy_method"] == "builtin_tracking"


def test_tagging_changes_no_name_topology_or_value(bert_export, tmp_path):
    import torch

    from modelexport_core.prepare.context import make_context
    from modelexport_core.prepare.inputs import inputs_from_config

    loaded, report = bert_export
    tagged = onnx.load(str(report.onnx_path))
    ctx = make_context(loaded.model, inputs_from_config(loaded.model))
    plain_path = tmp_path / "plain.onnx"
    torch.onnx.export(ctx.module, ctx.args, str(plain_path), input_names=ctx.input_names,
                      output_names=ctx.output_names, dynamic_axes=ctx.dynamic_axes, opset_version=17, dynamo=False)
    plain = onnx.load(str(plain_path))

    def unwrapped(name):  # the export wrapper's attribute is not part of the user's names
        return "/" + name[len("/model/"):] if name.startswith("/model/") else name.removeprefix("model.")

    assert [(unwrapped(n.name), n.op_type, [unwrapped(v) for v in n.input], [unwrapped(v) for v in n.output])
            for n in plain.graph.node] == [
        (n.name, n.op_type, list(n.input), list(n.output)) for n in tagged.graph.node
    ]
    assert {unwrapped(i.name) for i in plain.graph.initializer} == {i.name for i in tagged.graph.initializer}


def test_node_and_weight_names_match_a_plain_export_of_the_users_model(tmp_path):
    import torch

    from modelexport_core.prepare.models import LoadedModel
    from modelexport_core.testing import HARD_CASES

    model, inputs = HARD_CASES["stacked_blocks"]()
    report = export_model(LoadedModel(model, "stacked_blocks", "factory", inputs=inputs), tmp_path / "m.onnx",
                          ExportOptions(strategies=["builtin_tracking"], verify=False))
    plain_path = tmp_path / "plain.onnx"
    torch.onnx.export(model, tuple(inputs.values()), str(plain_path), input_names=list(inputs),
                      dynamic_axes={name: {0: "batch"} for name in inputs}, opset_version=17, dynamo=False)
    plain, tagged = onnx.load(str(plain_path)), onnx.load(str(report.onnx_path))
    assert [n.name for n in tagged.graph.node] == [n.name for n in plain.graph.node]
    assert any(n.name.startswith("/blocks.1/") for n in tagged.graph.node)
    assert [i.name for i in tagged.graph.initializer] == [i.name for i in plain.graph.initializer]


def test_sidecar_follows_the_schema_and_lists_every_node(bert_export):
    loaded, report = bert_export
    document = json.loads(report.sidecar_path.read_text())
    graph = onnx.load(str(report.onnx_path)).graph
    assert report.sidecar_path.name == "bert.hierarchy.json"
    assert document["schema"] == SCHEMA
    assert validate_sidecar(document, [n.name for n in graph.node]) == []
    assert document["strategy"] == "builtin_tracking"
    assert document["attempted"][0]["status"] == "ok"
    assert document["model"]["class"] == "BertModel"
    for node in graph.node:
        assert document["nodes"][node.name]["tag"] == _props(node)[TAG_KEY]
        assert document["nodes"][node.name]["op_type"] == node.op_type
    assert document["export"]["verification"]["passed"] is True


def test_validator_rejects_broken_documents(bert_export):
    _, report = bert_export
    document = json.loads(report.sidecar_path.read_text())
    first = next(iter(document["nodes"]))
    broken = json.loads(json.dumps(document))
    broken["nodes"][first]["tag"] = "BertModel"
    assert validate_sidecar(broken)
    missing = json.loads(json.dumps(document))
    del missing["nodes"][first]
    assert validate_sidecar(missing, list(document["nodes"]))
    assert validate_sidecar({**document, "schema": "other@2"})


def test_verification_is_reported_and_uses_a_second_shape(bert_export):
    _, report = bert_export
    checks = report.verification.checks
    assert report.verification.passed and report.verification.max_abs_diff < 1e-4
    assert [c.shapes["input_ids"] for c in checks] == [[2, 8], [3, 11]]


def test_failed_verification_writes_nothing(tmp_path):
    output = tmp_path / "out" / "model.onnx"
    with pytest.raises(VerificationError):
        export_model(load_model("preset:bert"), output, ExportOptions(strategies=["builtin_tracking"], atol=-1.0, rtol=-1.0))
    assert list((tmp_path / "out").iterdir()) == []


def test_output_that_is_a_directory_is_refused(tmp_path):
    with pytest.raises(OutputPathError):
        export_model(load_model("preset:bert"), tmp_path, ExportOptions(strategies=["builtin_tracking"]))


def test_torch_module_option_keeps_torch_nn_in_tags(tmp_path):
    report = export_model(
        load_model("preset:bert"), tmp_path / "m.onnx",
        ExportOptions(strategies=["builtin_tracking"], keep_torch_modules=True, verify=False),
    )
    model = onnx.load(str(report.onnx_path))
    node = next(n for n in model.graph.node if n.name == "/encoder/layer.0/attention/self/query/MatMul")
    assert _props(node)[TAG_KEY].endswith("/BertSelfAttention/Linear.query")
    assert _props(node)[MODULE_KEY] == "encoder.layer.0.attention.self.query"


def test_external_data_models_are_tagged_without_loading_their_weights(tmp_path, monkeypatch):
    """Models over 2 GB are stored with external data; the tagger must only touch the graph."""
    import onnx.external_data_helper

    from modelexport_builtin_tracking.strategy import BuiltinTrackingStrategy
    from modelexport_core.export import pipeline as export_module
    from modelexport_core.plugin.discovery import StrategyInfo

    class ExternalDataStrategy(BuiltinTrackingStrategy):
        name = "external_data"

        def export(self, ctx, onnx_path):
            from dataclasses import replace

            result = super().export(replace(ctx, may_leave_unwritten=False), onnx_path)  # as a file, to rewrite
            model = onnx.load(str(onnx_path), load_external_data=False)  # this small file has its weights inline
            onnx.save(model, str(onnx_path), save_as_external_data=True, all_tensors_to_one_file=True,
                      location=onnx_path.name + ".data", size_threshold=0)
            return result

    monkeypatch.setattr(export_module, "get_strategy", lambda name: StrategyInfo(ExternalDataStrategy, "test", "0"))

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded into memory")

    monkeypatch.setattr(onnx.external_data_helper, "load_external_data_for_model", refuse)
    monkeypatch.setattr(onnx, "load_external_data_for_model", refuse, raising=False)
    report = export_model(load_model("preset:bert"), tmp_path / "big.onnx", ExportOptions(strategies=["external_data"]))
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.hierarchy.json", "big.onnx", "big.onnx.data"]
    assert report.verification.passed
    graph_only = onnx.load(str(report.onnx_path), load_external_data=False)
    assert all(init.data_location == onnx.TensorProto.EXTERNAL for init in graph_only.graph.initializer if init.dims)
    assert all(TAG_KEY in _props(node) for node in graph_only.graph.node)


def test_a_model_that_draws_random_numbers_in_forward_is_told_so(tmp_path):
    """Verification cannot judge a file against a model that disagrees with itself: the error says which it is."""

    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.proj(x) + torch.rand_like(x)

    with pytest.raises(ModelExportError, match="draws random numbers in forward"):
        export_module(Noisy().eval(), torch.randn(2, 8), tmp_path / "noisy.onnx", strategies=["builtin_tracking"])
    assert not (tmp_path / "noisy.onnx").exists()
