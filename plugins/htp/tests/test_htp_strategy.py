"""The htp strategy as a plugin: discovery, options, failures, the sidecar section, and its rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
import torch
from htp_support import build

from modelexport_core import StrategyFailed, StrategyUnavailable, TaggingStrategy, get_strategy, make_context
from modelexport_core.format.graph import node_key
from modelexport_core.format.tags import is_ancestor
from modelexport_htp.strategy import HTPStrategy, export_plain

SOURCE = Path(__file__).parents[1] / "src" / "modelexport_htp"


def test_discovered_through_its_entry_point():
    info = get_strategy("htp")
    assert info.distribution == "modelexport-htp"
    assert info.strategy is HTPStrategy
    assert issubclass(HTPStrategy, TaggingStrategy)
    assert HTPStrategy.name == "htp" and HTPStrategy.priority == 100


def test_source_names_no_model():
    banned = re.compile(
        r"\b(bert|gpt|gpt2|llama|vit|resnet|t5|roberta|qwen|embeddings?|encoder|decoder|pooler|attention)\b",
        re.IGNORECASE,
    )
    hits = [f"{p.name}: {m.group(0)}" for p in SOURCE.glob("*.py") for m in banned.finditer(p.read_text())]
    assert hits == []


def test_source_never_reads_the_exporters_scope_records():
    """Node names and metadata are PyTorch's record of the hierarchy: htp may not decide tags from them."""
    forbidden = ["metadata_props", "name_scopes", "_trace_module_map", "node.name", ".name.startswith"]
    hits = [f"{p.name}: {word}" for p in SOURCE.glob("*.py") for word in forbidden if word in p.read_text()]
    assert hits == []


def test_tags_do_not_change_when_every_name_is_erased(tmp_path):
    """Rename all nodes, values and initializers: the projection reads values and data flow only."""
    model, inputs = build("stacked_blocks")
    ctx = make_context(model, inputs)
    path = tmp_path / "plain.onnx"
    export_plain(ctx, path, "torchscript")
    original = onnx.load(str(path))
    renamed = onnx.load(str(path))
    graph = renamed.graph
    keep = {i.name for i in graph.input}
    mapping: dict[str, str] = {}

    def rename(value: str) -> str:
        if not value or value in keep:
            return value
        return mapping.setdefault(value, f"v{len(mapping)}")

    for tensor in graph.initializer:
        tensor.name = rename(tensor.name)
    for node in graph.node:
        node.name = ""
        node.doc_string = ""
        del node.metadata_props[:]
        node.input[:] = [rename(v) for v in node.input]
        node.output[:] = [rename(v) for v in node.output]
    for output in graph.output:
        output.name = rename(output.name)
    del graph.value_info[:]
    strategy = HTPStrategy()
    before = strategy.tag_onnx(ctx, original).node_modules
    after = strategy.tag_onnx(ctx, renamed).node_modules
    keys_before = [node_key(n, i) for i, n in enumerate(original.graph.node)]
    keys_after = [node_key(n, i) for i, n in enumerate(renamed.graph.node)]
    assert [before[k] for k in keys_before] == [after[k] for k in keys_after]


def test_sidecar_details_hold_the_execution_trace(measured):
    m = measured("reused_module")
    details = m.result.details
    json.dumps(details)
    trace = details["execution_trace"]
    assert trace[0] == ""
    assert trace.count("shared") == 3 and trace.count("gate") == 2
    assert trace.index("shared") < trace.index("gate") < trace.index("out")
    assert details["tagged_by"]["matched"] > 0
    assert details["exporter"] == "torchscript"
    assert "blocks" in measured("stacked_blocks").result.details["modules_never_called"]


@pytest.mark.parametrize("name", ["bert", "stacked_blocks", "tied_weights", "reused_module"])
def test_also_lists_other_real_modules_beside_the_primary(measured, name):
    m = measured(name)
    modules = {n for n, _ in m.ctx.model.named_modules()}
    for key, others in m.result.also.items():
        primary = m.result.node_modules[key]
        assert others and set(others) <= modules
        assert all(not is_ancestor(primary, other) for other in others)


def test_shared_constants_list_the_modules_they_serve(measured):
    m = measured("bert")
    assert m.result.also, "shared nodes (residual sources, merged initializers) should list further modules"


def test_unknown_exporter_option_is_unavailable():
    model, inputs = build("stacked_blocks")
    ctx = make_context(model, inputs, options={"exporter": "nope"})
    with pytest.raises(StrategyUnavailable):
        HTPStrategy().check(ctx)


def test_export_failure_is_reported_with_its_reason(tmp_path):
    class Broken(torch.nn.Module):
        def forward(self, x):
            if torch.onnx.is_in_onnx_export() or torch.jit.is_tracing() or torch.compiler.is_compiling():
                raise RuntimeError("cannot be exported")
            return x * 2

    ctx = make_context(Broken().eval(), {"x": torch.ones(2, 3)})
    with pytest.raises(StrategyFailed, match="(?i)torchscript export failed.*cannot be exported"):
        HTPStrategy().export(ctx, tmp_path / "m.onnx")


def test_elements_read_into_python_stay_where_they_were_read(measured):
    """``counts.tolist()`` in a router: the dynamo file takes each count out (slice, squeeze) before the experts
    split by them; those nodes are the router's, the split sizes built from them the experts'."""
    m = measured("counted_moe", dynamic=False, exporter="dynamo")
    assert m.result.exporter == "dynamo"
    assert m.agreement == 1.0 and m.contaminated == [], m.report()  # 0.73 before the rule
    assert m.result.details["tagged_by"]["value element"] >= 8  # two nodes per count of four experts
    assert "value read" in m.result.evidence.values()


def test_dynamo_export_is_projected_too(measured):
    """The fallback exporter: the same projection on a dynamo export, measured against its name_scopes."""
    m = measured("stacked_blocks", dynamic=False, exporter="dynamo")
    assert m.result.exporter == "dynamo"
    assert m.coverage == 1.0
    assert m.agreement == 1.0, m.report()
    assert m.contaminated == []


@pytest.mark.parametrize("name", ["conv_net", "trained_conv_net"])
def test_a_fused_convolution_takes_the_call_its_exporter_records(measured, name):
    """The dynamo exporter's optimizer fuses a batch norm into the convolution before it and records the fused
    node under the norm (TorchScript: under the convolution); at the norm's initial statistics the node's value
    equals both calls' outputs, so the parameters cannot say it."""
    for exporter in ("dynamo", "torchscript"):
        m = measured(name, dynamic=False, exporter=exporter)
        assert m.result.exporter == exporter
        assert m.agreement == 1.0 and m.contaminated == [], m.report()


def test_a_dynamo_files_input_sizes_are_the_roots(measured):
    """The dynamo exporter reads each dynamic axis of a graph input once, before every module's nodes, and records
    those reads at the root; the module that first read the size is not where the file reads it."""
    m = measured("sized_towers", dynamic=True, exporter="dynamo")
    assert m.result.exporter == "dynamo"
    sizes = [k for k, kind in m.result.evidence.items() if kind == "exporter convention"]
    assert sizes and all(m.result.node_modules[k] == "" for k in sizes)
    assert m.agreement == 1.0 and m.contaminated == [], m.report()  # 0.90 before: the Shape went to the first tower


def test_end_to_end_through_the_core(tmp_path):
    from modelexport_core.export.pipeline import ExportOptions, export_model
    from modelexport_core.format.sidecar import validate_sidecar
    from modelexport_core.prepare.models import LoadedModel

    model, inputs = build("same_class_siblings")
    loaded = LoadedModel(model=model, source="test", kind="factory", inputs=inputs)
    report = export_model(loaded, tmp_path / "m.onnx", ExportOptions(strategies=["htp"]))
    assert report.strategy == "htp"
    assert report.coverage == 1.0 and report.verification.passed
    document = json.loads(report.sidecar_path.read_text())
    assert validate_sidecar(document, [n.name for n in onnx.load(str(report.onnx_path)).graph.node]) == []
    assert report.sidecar["details"]["execution_trace"][:2] == ["", "q_norm"]
    tags = {entry["tag"] for entry in report.sidecar["nodes"].values()}
    assert any("Scale.q_norm" in t for t in tags) and any("Scale.k_norm" in t for t in tags)


def test_falls_back_to_dynamo_when_torchscript_cannot_export(tmp_path):
    """``torch.special.erfcx`` has no TorchScript symbolic; the default ``auto`` projects a dynamo export."""
    from modelexport_core.format.reference import dynamo_node_modules

    class Differences(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Linear(6, 6)
            self.second = torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.second(torch.special.erfcx(self.first(x)))

    torch.manual_seed(0)
    ctx = make_context(Differences().eval(), {"x": torch.randn(2, 4, 6)}, dynamic=False)
    result = HTPStrategy().export(ctx, tmp_path / "m.onnx")
    assert result.exporter == "dynamo"
    assert "erfcx" in result.details["exporter_fallback"][0]
    reference = dynamo_node_modules(onnx.load(str(tmp_path / "m.onnx")))
    assert result.node_modules == reference


def test_a_file_of_other_weights_is_refused_as_another_models(tmp_path):
    """tag_onnx holds the file to the model: same inputs, some output equal; a file of other weights stops the chain."""
    from modelexport_core.errors import ModelMismatchError

    torch.manual_seed(0)
    first = make_context(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval(), {"x": torch.ones(2, 3)})
    path = tmp_path / "first.onnx"
    torch.onnx.export(first.module, first.args, str(path), input_names=["input.1"], dynamo=False)
    from modelexport_htp.strategy import HTPStrategy

    strategy = HTPStrategy()
    assert set(strategy.tag_onnx(first, onnx.load(str(path))).node_modules.values()) >= {"0"}
    other = make_context(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval(), {"x": torch.ones(2, 3)})
    with pytest.raises(ModelMismatchError, match="outputs differ from Sequential's"):
        strategy.tag_onnx(other, onnx.load(str(path)))


def test_inputs_holding_one_value_are_varied_for_the_trace():
    from modelexport_htp.inputs import informative_args

    mask, ids, types = torch.ones(2, 8, dtype=torch.long), torch.arange(16).reshape(2, 8), torch.zeros(2, 8, dtype=torch.long)
    varied = informative_args((ids, mask, types))
    assert varied is not None and varied[0] is ids and varied[2] is types  # varying values and zeros are kept
    assert varied[1][0].tolist() == [1] * 8 and varied[1][1].tolist() == [1] * 6 + [0, 0]
    assert informative_args((ids, types)) is None


def test_an_all_ones_mask_leaves_the_mask_the_model_builds_at_the_root(tmp_path):
    """With no padding every value built from the mask holds one number; htp still finds where it was built."""
    from modelexport_core.format.reference import torchscript_node_modules
    from modelexport_core.prepare.inputs import inputs_from_config
    from modelexport_core.prepare.presets import build_preset
    from modelexport_htp.strategy import HTPStrategy

    model = build_preset("bert")
    inputs = inputs_from_config(model)
    inputs["attention_mask"] = torch.ones_like(inputs["attention_mask"])
    ctx = make_context(model, inputs)
    result = HTPStrategy().export(ctx, tmp_path / "bert.onnx")
    reference = torchscript_node_modules(onnx.load(str(tmp_path / "bert.onnx")), [n for n, _ in ctx.module.named_modules()])
    scoped = [k for k, v in reference.items() if v is not None]
    wrong = [(k, result.node_modules[k], reference[k]) for k in scoped if result.node_modules[k] != reference[k]]
    assert len(wrong) <= 0.01 * len(scoped), wrong[:10]


def test_long_inputs_are_cut_to_a_prefix_along_their_dynamic_axes():
    from modelexport_htp.inputs import shorter_args

    ids, mask = torch.arange(8 * 128).reshape(8, 128), torch.ones(8, 128, dtype=torch.long)
    decoder, pixels = torch.arange(8 * 40).reshape(8, 40), torch.randn(8, 3, 4, 4)
    axes = {"ids": {0: "batch", 1: "sequence"}, "mask": {0: "batch", 1: "sequence"},
            "decoder": {0: "batch", 1: "decoder_sequence"}, "pixels": {0: "batch"}}
    cut = shorter_args((ids, mask, decoder, pixels), ["ids", "mask", "decoder", "pixels"], axes)
    assert cut is not None
    assert [list(t.shape) for t in cut] == [[2, 16], [2, 16], [2, 16], [2, 3, 4, 4]]
    assert cut[0].tolist() == ids[:2, :16].tolist() and cut[3].tolist() == pixels[:2].tolist()  # a prefix, values kept
    assert shorter_args((ids,), ["ids"], {}) is None  # nothing dynamic: the example itself
    assert shorter_args((ids[:2, :40],), ["ids"], {"ids": {0: "batch", 1: "sequence"}}) is None  # saves too little


def _reference_agreement(result, path: Path, ctx) -> list:
    from modelexport_core.format.reference import torchscript_node_modules

    reference = torchscript_node_modules(onnx.load(str(path)), [n for n, _ in ctx.module.named_modules()])
    return [(k, result.node_modules[k], v) for k, v in reference.items() if v is not None and result.node_modules[k] != v]


def test_a_long_example_is_analysed_on_a_prefix_with_the_same_tags(tmp_path, monkeypatch):
    """A 64-token example (the model's longest): htp traces and runs the file on 16 tokens (a fraction of the time)
    and tags every node as it does analysing the example itself."""
    from modelexport_core.prepare.inputs import inputs_from_config
    from modelexport_core.prepare.presets import build_preset

    model = build_preset("bert")
    inputs = inputs_from_config(model)
    inputs = {name: tensor[:1].repeat(2, 16)[:, :64] for name, tensor in inputs.items()}
    ctx = make_context(model, inputs)
    result = HTPStrategy().export(ctx, tmp_path / "bert.onnx")
    assert result.details["analysed_inputs"] == {name: [2, 16] for name in inputs}
    monkeypatch.setattr("modelexport_htp.inputs.SHORTER_AT_MOST", 0.0)
    whole = HTPStrategy().export(ctx, tmp_path / "whole.onnx")
    assert whole.details["analysed_inputs"] == {name: [2, 64] for name in inputs}
    assert result.node_modules == whole.node_modules
    assert len(_reference_agreement(result, tmp_path / "bert.onnx", ctx)) <= 1  # a shared Constant, either way


def test_a_file_that_differs_from_the_model_on_the_prefix_is_analysed_on_the_example(tmp_path):
    """The model chooses a path by the sequence's length; the file keeps the example's choice, so on 16 tokens file
    and model differ: htp analyses the example itself, and tags as PyTorch records."""

    class LengthBranch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(50, 8)
            self.short = torch.nn.Linear(8, 8)
            self.long = torch.nn.Linear(8, 8)

        def forward(self, ids):
            hidden = self.embed(ids)
            return self.long(hidden) if ids.shape[1] > 32 else self.short(hidden)

    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 80))
    ctx = make_context(LengthBranch().eval(), {"ids": ids})
    assert ctx.dynamic_axes == {"ids": {0: "batch", 1: "sequence"}}
    result = HTPStrategy().export(ctx, tmp_path / "m.onnx")
    assert result.details["analysed_inputs"] == {"ids": [2, 80]}
    assert _reference_agreement(result, tmp_path / "m.onnx", ctx) == []
    assert "long" in result.node_modules.values() and "short" not in result.node_modules.values()


def test_weights_left_in_memory_give_the_tags_the_written_file_gives(tmp_path):
    """Where the core writes the file, htp's TorchScript export stays in memory: onnxruntime and the weight look-up
    take the exporter's bytes as they lie, and every node gets the tag it gets from the file."""
    from dataclasses import replace

    model, inputs = build("stacked_blocks")
    ctx = make_context(model, inputs)
    in_file = HTPStrategy().export(ctx, tmp_path / "file.onnx")
    in_memory = HTPStrategy().export(replace(ctx, may_leave_unwritten=True), tmp_path / "memory.onnx")
    assert in_file.unwritten is None and (tmp_path / "file.onnx").exists()
    assert in_memory.unwritten is not None and not (tmp_path / "memory.onnx").exists()
    assert in_memory.node_modules == in_file.node_modules and in_memory.evidence == in_file.evidence
    assert in_memory.details["tagged_by"].get("parameter owner")  # the weights were found in memory too


def test_without_onnxruntime_htp_is_unavailable(monkeypatch):
    """htp looks for onnxruntime without importing it (imported before the export, it slows the exporter)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    ctx = make_context(torch.nn.Linear(2, 2).eval(), {"x": torch.ones(2, 2)})
    with pytest.raises(StrategyUnavailable, match="needs onnxruntime"):
        HTPStrategy().check(ctx)
