"""The fx strategy's contract: discovery, options, one-line failures, front ends, static export, opsets."""

from __future__ import annotations

import pytest
import torch
from fx_support import export, module_names

from modelexport_core import StrategyFailed, get_strategy, make_context
from modelexport_core.format.reference import dynamo_node_modules
from modelexport_core.testing import HARD_CASES
from modelexport_fx import capture
from modelexport_fx.attribution import normalise_module_path
from modelexport_fx.reasons import one_line_reason
from modelexport_fx.strategy import FxStrategy


class DataDependent(torch.nn.Module):
    """Branches on a tensor's value: torch.export (and symbolic_trace) must refuse it."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 4)
        self.down = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.up(x)
        return self.down(x)


def _data_dependent_context(**options):
    return make_context(DataDependent().eval(), {"x": torch.randn(2, 4)}, options=options)


def test_discovered_through_its_entry_point():
    info = get_strategy("fx")
    assert info.distribution == "modelexport-fx"
    assert info.strategy is FxStrategy
    assert info.priority == 300
    assert info.strategy.requires and info.strategy.description
    assert {o.name for o in info.strategy.options} == {"optimize", "opset", "capture", "math_sdpa"}


def test_model_torch_export_rejects_fails_in_one_line(tmp_path):
    with pytest.raises(StrategyFailed) as failure:
        FxStrategy().export(_data_dependent_context(capture="non_strict"), tmp_path / "m.onnx")
    reason = str(failure.value)
    assert "\n" not in reason and len(reason) <= 500
    assert reason.startswith("torch.export could not capture the model")
    assert "data-dependent" in reason
    assert "x.sum() > 0" in reason  # the user's line PyTorch names
    assert not (tmp_path / "m.onnx").exists()


def test_capture_methods_that_all_fail_report_the_first_reason_and_the_others_tried(tmp_path):
    with pytest.raises(StrategyFailed) as failure:
        FxStrategy().export(_data_dependent_context(capture="non_strict,symbolic_trace"), tmp_path / "m.onnx")
    reason = str(failure.value)
    assert "\n" not in reason
    assert "torch.export" in reason and "symbolic_trace" in reason


def test_symbolic_trace_front_end_tags_like_pytorch(tmp_path, monkeypatch):
    def refuse(ctx):
        raise RuntimeError("refused for the test\nwith a second line")

    monkeypatch.setattr(capture, "export_program", refuse)
    model, inputs = HARD_CASES["reused_module"]()
    ctx = make_context(model, inputs, options={"capture": "non_strict,symbolic_trace"})
    result = FxStrategy().export(ctx, tmp_path / "m.onnx")
    assert result.details["front_end"] == "torch.fx.symbolic_trace"
    import onnx

    reference = dynamo_node_modules(onnx.load(str(tmp_path / "m.onnx")))
    assert set(result.node_modules) == set(reference)
    assert all(result.node_modules[n] == m for n, m in reference.items() if m is not None)
    assert {"shared.proj", "gate.gate", "out"} <= set(result.node_modules.values())


def test_opset_below_18_is_refused_with_the_reason(tmp_path):
    model, inputs = HARD_CASES["stacked_blocks"]()
    with pytest.raises(StrategyFailed, match="below 18.*metadata"):
        FxStrategy().export(make_context(model, inputs, opset=17), tmp_path / "m.onnx")
    with pytest.raises(StrategyFailed, match="below 18"):
        FxStrategy().export(make_context(model, inputs, options={"opset": 16}), tmp_path / "m.onnx")


def test_static_export_at_a_newer_opset_without_optimizer(tmp_path):
    e = export("same_class_siblings", tmp_path, dynamic=False, opset=20, options={"optimize": False})
    assert e.onnx_model.opset_import[0].version == 20
    assert all(d.dim_value for i in e.onnx_model.graph.input for d in i.type.tensor_type.shape.dim)
    assert e.result.details["dynamic_shapes"] == {} and e.result.details["optimize"] is False
    reference = e.reference
    assert set(e.result.node_modules) == set(e.node_keys)
    assert all(e.result.node_modules[n] == m for n, m in reference.items() if m is not None)
    assert {"q_norm", "k_norm", "left.proj", "right.proj"} <= set(e.result.node_modules.values())


def test_axis_pinned_to_its_example_size_is_exported_static_and_said(tmp_path):
    import onnx

    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.proj(x.reshape(2, 6))  # the batch of 2 is baked in

    ctx = make_context(Fixed(), {"x": torch.randn(2, 3, 2)})
    result = FxStrategy().export(ctx, tmp_path / "m.onnx")
    assert result.context is not None and result.context.dynamic_axes == {}
    assert result.context.notes == (
        "input 'x' axis 0 ('batch') is exported static at size 2: torch.export found that the model's code fixes this size",
    )
    graph_input = onnx.load(str(tmp_path / "m.onnx")).graph.input[0]
    assert [d.dim_value for d in graph_input.type.tensor_type.shape.dim] == [2, 3, 2]


def test_gpt2_with_cache_on_in_its_config_still_exports(tmp_path):
    import transformers

    from modelexport_core.prepare.inputs import inputs_from_config
    from modelexport_core.prepare.presets import PRESETS

    config = transformers.GPT2Config(**dict(PRESETS["gpt2"].config, use_cache=True))
    torch.manual_seed(0)
    model = transformers.GPT2Model(config).eval()
    ctx = make_context(model, inputs_from_config(model))
    result = FxStrategy().export(ctx, tmp_path / "m.onnx")
    assert len(ctx.output_names) == 1  # the cache is no output
    assert set(result.node_modules.values()) <= module_names(model)


@pytest.mark.parametrize(
    "path, expected",
    [
        ("model.layers.0", "model.layers.0"),
        ("L['self'].model.layers[0].mlp", "model.layers.0.mlp"),
        ("L__self__model.shared.proj@2", "model.shared.proj"),
        ("getattr(L['self'].model.h, '1').attn", "model.h.1.attn"),
        ("L['self'].model.heads['cls']", "model.heads.cls"),
        ("L['self']", ""),
        ("", ""),
    ],
)
def test_module_paths_are_normalised(path, expected):
    assert normalise_module_path(path) == expected


def test_one_line_reason_uses_the_root_cause():
    try:
        try:
            raise ValueError("Cannot view a tensor\n\nWhile executing %view_4")
        except ValueError as inner:
            raise RuntimeError("Failed to decompose\n- step 2/3") from inner
    except RuntimeError as error:
        assert one_line_reason(error) == "ValueError: Cannot view a tensor"
