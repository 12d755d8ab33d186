"""builtin_tracking against PyTorch's own scope records, node by node."""

from __future__ import annotations

import onnx
import pytest

from modelexport_builtin_tracking.strategy import BuiltinTrackingStrategy
from modelexport_core import get_strategy, make_context
from modelexport_core.format.reference import torchscript_node_modules
from modelexport_core.prepare.inputs import inputs_from_config
from modelexport_core.prepare.presets import build_preset
from modelexport_core.testing import HARD_CASES, sibling_contamination


def _preset_case(name):
    def build():
        model = build_preset(name)
        return model, inputs_from_config(model)

    return build


CASES = {**{name: _preset_case(name) for name in ("bert", "gpt2", "vit", "llama", "t5")}, **HARD_CASES}


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request, tmp_path_factory):
    model, inputs = CASES[request.param]()
    ctx = make_context(model, inputs)
    path = tmp_path_factory.mktemp(request.param) / "model.onnx"
    result = BuiltinTrackingStrategy().export(ctx, path)
    onnx_model = onnx.load(str(path))
    reference = torchscript_node_modules(onnx_model, [name for name, _ in ctx.module.named_modules()])
    return request.param, ctx, onnx_model, result, reference


def test_every_node_is_tagged_with_a_real_module(exported):
    _, ctx, onnx_model, result, _ = exported
    modules = {name for name, _ in ctx.model.named_modules()}
    assert sorted(n.name for n in onnx_model.graph.node) == sorted(result.node_modules)
    assert set(result.node_modules.values()) <= modules


def test_scoped_nodes_agree_with_the_scope_in_their_names(exported):
    name, _, _, result, reference = exported
    scoped = {node: module for node, module in reference.items() if module is not None}
    assert len(scoped) > 0.8 * len(reference)
    disagreements = {node: (result.node_modules[node], module) for node, module in scoped.items()
                     if result.node_modules[node] != module}
    assert disagreements == {}, f"{name}: {len(disagreements)} of {len(scoped)} nodes differ"


def test_no_node_is_given_to_a_sibling_layer(exported):
    _, _, _, result, reference = exported
    assert sibling_contamination(result.node_modules, reference) == []


def test_unscoped_initializer_nodes_get_the_owner_or_a_consumer(exported):
    _, ctx, onnx_model, result, reference = exported
    parameter_owner = {name.rpartition(".")[0]: name for name, _ in ctx.module.named_parameters(remove_duplicate=False)}
    consumers = {}
    for node in onnx_model.graph.node:
        for value in node.input:
            consumers.setdefault(value, []).append(node.name)
    for node in onnx_model.graph.node:
        if reference[node.name] is not None:
            continue
        module = result.node_modules[node.name]
        owners = {ctx.model_qualname(name.rpartition(".")[0]) for name in list(node.output) + list(node.input)
                  if name.rpartition(".")[0] in parameter_owner}
        consumer_modules = {result.node_modules[c] for v in node.output for c in consumers.get(v, [])}
        assert module in owners or any(c == module or c.startswith(module + ".") or module == "" for c in consumer_modules), (
            node.name, module, owners, consumer_modules)


def test_identity_of_a_deduplicated_parameter_goes_to_its_owner():
    model = build_preset("bert")
    ctx = make_context(model, inputs_from_config(model))
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "m.onnx"
    result = BuiltinTrackingStrategy().export(ctx, path)
    graph = onnx.load(str(path)).graph
    identities = [n for n in graph.node if n.op_type == "Identity" and n.output[0].startswith("model.")]
    assert identities, "random-init BERT has merged initializers behind Identity nodes"
    for node in identities:
        owner = node.output[0][len("model."):].rpartition(".")[0]
        assert result.node_modules[node.name] == owner


def test_reused_module_keeps_one_tag():
    model, inputs = HARD_CASES["reused_module"]()
    ctx = make_context(model, inputs)
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "m.onnx"
    result = BuiltinTrackingStrategy().export(ctx, path)
    graph = onnx.load(str(path)).graph
    repeated = [n.name for n in graph.node if n.name.startswith(("/shared_1/", "/shared_2/", "/shared/lin_1"))
                or "/shared_1/" in n.name or "/shared_2/" in n.name]
    assert repeated, "the shared block is called three times"
    assert {result.node_modules[name].split(".")[0] for name in repeated} == {"shared"}


def test_discovered_through_its_entry_point():
    info = get_strategy("builtin_tracking")
    assert info.distribution == "modelexport-builtin-tracking"
    assert info.strategy is BuiltinTrackingStrategy
