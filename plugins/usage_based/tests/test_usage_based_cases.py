"""Behaviour on the hard cases, named: tied weights, identical blocks, reuse, residuals, foreign names."""

from __future__ import annotations

import contextlib
import copy
import io

import onnx
from usage_based_support import MIN_AGREEMENT, Measured

from modelexport_core import make_context
from modelexport_core.format import reference
from modelexport_core.format.graph import node_key
from modelexport_core.testing import build_case
from modelexport_usage_based.strategy import UsageBasedStrategy


def tags_by_op(measured, op_type: str) -> list[str]:
    """Tags of the nodes of one op type, in graph order."""
    graph = measured.onnx_model.graph
    tags = measured.result.node_modules
    return [tags[node_key(node, i)] for i, node in enumerate(graph.node) if node.op_type == op_type]


def test_tied_weight_readers_get_their_own_modules(exported):
    """The embedding and the output projection share one weight; each reader gets its own module."""
    measured = exported("tied_weights")
    assert tags_by_op(measured, "Gather") == ["tokens"]
    assert tags_by_op(measured, "MatMul")[-1] == "unembed"


def test_identical_blocks_keep_their_own_equal_parameters(exported):
    """Three blocks hold equal norm weights and equal scales; each block's nodes get its own."""
    measured = exported("stacked_blocks")
    assert tags_by_op(measured, "LayerNormalization") == ["blocks.0.norm", "blocks.1.norm", "blocks.2.norm"]
    scales = [tag for tag in tags_by_op(measured, "Mul") if tag.endswith(".scale")]
    assert scales == ["blocks.0.scale", "blocks.1.scale", "blocks.2.scale"]


def test_a_residual_skipping_a_block_belongs_to_the_caller(exported):
    """``h + skip`` between blocks 1 and 2 runs in the root forward, and lists the block it joins."""
    measured = exported("stacked_blocks")
    graph = measured.onnx_model.graph
    adds = [node_key(node, i) for i, node in enumerate(graph.node) if node.op_type == "Add" and node.name == "/model/Add"]
    assert len(adds) == 1
    assert measured.result.node_modules[adds[0]] == ""
    assert measured.result.also[adds[0]] == ["blocks.1"]


def test_every_call_of_a_reused_module_is_tagged_with_it(exported):
    measured = exported("reused_module")
    assert tags_by_op(measured, "LayerNormalization") == ["shared.norm"] * 3
    assert tags_by_op(measured, "Sigmoid") == ["gate"] * 2


def test_activation_modules_get_their_own_nodes(exported):
    """A parameter-free activation child (GELU in each block) owns its ops; dropout, exported as nothing, owns none."""
    measured = exported("bert")
    erf = tags_by_op(measured, "Erf")
    assert erf == [f"encoder.layer.{i}.intermediate.intermediate_act_fn" for i in range(2)]
    assert not any(tag.endswith("dropout") for tag in measured.result.node_modules.values())


def test_residual_adds_list_the_stream_they_join(exported):
    measured = exported("bert")
    tags = measured.result.node_modules
    residual = "/model/encoder/layer.0/attention/output/Add"
    assert tags[residual] == "encoder.layer.0.attention.output"
    assert measured.result.also[residual] == ["embeddings"]


def test_initializer_names_are_not_needed(exported):
    """A file exported elsewhere may name tensors anything: matching by value gives the same tags."""
    for name in ("gpt2", "stacked_blocks", "tied_weights"):
        measured = exported(name)
        anonymous = copy.deepcopy(measured.onnx_model)
        renamed = {init.name: f"tensor_{k}" for k, init in enumerate(anonymous.graph.initializer)}
        for node in anonymous.graph.node:
            for value in node.output:
                if value.startswith("model."):  # copies of initializers are named after parameters
                    renamed[value] = f"copy_{len(renamed)}"
        for init in anonymous.graph.initializer:
            init.name = renamed[init.name]
        for node in anonymous.graph.node:
            node.input[:] = [renamed.get(value, value) for value in node.input]
            node.output[:] = [renamed.get(value, value) for value in node.output]
        result = UsageBasedStrategy().tag_onnx(measured.ctx, anonymous)
        assert result.node_modules == measured.result.node_modules, name


def test_static_shapes_export_agrees_too(tmp_path):
    """With static shapes the exporter folds shape arithmetic away; views are recognised from inferred shapes."""
    ctx = make_context(*build_case("gpt2"), dynamic=False)
    with contextlib.redirect_stderr(io.StringIO()):
        result = UsageBasedStrategy().export(ctx, tmp_path / "gpt2_static.onnx")
    onnx_model = onnx.load(str(tmp_path / "gpt2_static.onnx"))
    names = [qualname for qualname, _ in ctx.module.named_modules()]
    measured = Measured("gpt2", ctx, onnx_model, result, reference.torchscript_node_modules(onnx_model, names))
    assert measured.agreement >= MIN_AGREEMENT, measured.disagreements()
    assert measured.contaminated == []


def test_a_norm_module_owns_the_statistics_it_computes(exported):
    """A norm written as its own module (not a torch layer) computes mean squares before reading its weight."""
    measured = exported("llama")
    norms = [f"layers.{i}.{name}" for i in range(2) for name in ("input_layernorm", "post_attention_layernorm")]
    assert tags_by_op(measured, "ReduceMean") == norms + ["norm"]


def test_a_custom_layer_owns_the_views_around_its_product(exported):
    """A custom linear layer flattens its input for Gemm and restores the shape after: all three are its own."""
    measured = exported("gpt2")
    graph = measured.onnx_model.graph
    tags = measured.result.node_modules
    producer = {value: i for i, node in enumerate(graph.node) for value in node.output}
    gemms = [i for i, node in enumerate(graph.node) if node.op_type == "Gemm"]
    assert len(gemms) == 8
    for i in gemms:
        owner = tags[node_key(graph.node[i], i)]
        flatten = producer[graph.node[i].input[0]]
        restore = next(j for j, node in enumerate(graph.node) if graph.node[i].output[0] in node.input)
        assert graph.node[flatten].op_type == graph.node[restore].op_type == "Reshape"
        assert tags[node_key(graph.node[flatten], flatten)] == tags[node_key(graph.node[restore], restore)] == owner
