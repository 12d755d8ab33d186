"""Exports that work on what people bring: batch 1, pinned axes, a chain that goes on, op holes, dtypes."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from modelexport_core import export_module
from modelexport_core.errors import ModelRunError, VerificationError
from modelexport_core.export.pipeline import export_model
from modelexport_core.format.reference import dynamo_node_modules, torchscript_node_modules
from modelexport_core.prepare.models import LoadedModel, load_model
from modelexport_core.testing import HARD_CASES

STRATEGIES = ["fx", "builtin_tracking", "htp", "usage_based"]


def _graph_input_dims(path) -> dict[str, list]:
    model = onnx.load(str(path), load_external_data=False)
    return {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}


def _bert_at_batch_one():
    loaded = load_model("preset:bert")
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(0))
    return LoadedModel(loaded.model, "bert", "factory", inputs={"input_ids": ids}, by_keyword=True)


def test_batch_one_exports_through_fx_with_dynamic_batch_and_tags_that_match_pytorch(tmp_path):
    report = export_model(_bert_at_batch_one(), tmp_path / "b.onnx")
    assert report.strategy == "fx" and [a.strategy for a in report.attempts] == ["fx"]
    assert report.notes == []
    assert report.sidecar["export"]["dynamic_axes"] == {"input_ids": {"0": "batch", "1": "sequence"}}
    assert _graph_input_dims(report.onnx_path)["input_ids"] == ["batch", "sequence"]
    # verification ran the user's batch-1 example and a second shape
    assert [check.shapes["input_ids"] for check in report.verification.checks] == [[1, 8], [2, 11]]
    assert report.sidecar["model"]["inputs"] == {"input_ids": [1, 8]}
    model = onnx.load(str(report.onnx_path), load_external_data=False)
    reference = {n: m for n, m in dynamo_node_modules(model).items() if m is not None}
    modules, nodes = report.sidecar["modules"], report.sidecar["nodes"]
    assert len(reference) > 50
    # every node's tag is the tag of the (kept) module PyTorch recorded for it
    disagreeing = [name for name, module in reference.items()
                   if not modules[module]["tag"].startswith(nodes[name]["tag"])]
    assert disagreeing == []


class _Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.rnn = torch.nn.LSTM(16, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, tokens):
        hidden, _ = self.rnn(self.embed(tokens))
        return self.head(hidden)


def test_an_axis_torch_export_pins_is_exported_static_with_one_note(tmp_path):
    torch.manual_seed(0)
    report = export_module(_Tagger().eval(), (torch.randint(0, 50, (1, 7)),), tmp_path / "t.onnx", strategies=["fx"])
    assert len(report.notes) == 1
    assert "'tokens' axis 1 ('sequence') is exported static at size 7" in report.notes[0]
    assert report.sidecar["export"]["dynamic_axes"] == {"tokens": {"0": "batch"}}
    assert report.sidecar["export"]["notes"] == report.notes
    assert _graph_input_dims(report.onnx_path)["tokens"] == ["batch", 7]
    assert report.verification.passed and len(report.verification.checks) == 2


class _FlattensBatch(torch.nn.Module):
    """Works at batch 1 only: its code folds the batch into the features."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.proj(x.reshape(1, 8))


def test_an_axis_the_model_fails_at_size_two_stays_static_and_says_why(tmp_path):
    report = export_module(_FlattensBatch().eval(), (torch.randn(1, 8),), tmp_path / "f.onnx",
                           strategies=["builtin_tracking"])
    assert len(report.notes) == 1 and "'x' axis 0 ('batch') is exported static at size 1" in report.notes[0]
    assert "fails at size 2" in report.notes[0]
    assert report.sidecar["export"]["dynamic_axes"] == {}
    assert report.verification.passed


def test_a_model_that_fails_on_its_own_example_is_a_one_line_error(tmp_path):
    with pytest.raises(ModelRunError, match="failed on its example inputs"):
        export_module(_FlattensBatch().eval(), (torch.randn(2, 8),), tmp_path / "f.onnx")
    assert list(tmp_path.iterdir()) == []


def _perturbing_strategy():
    from modelexport_builtin_tracking.strategy import BuiltinTrackingStrategy

    class Perturbing(BuiltinTrackingStrategy):
        """Writes a file whose weights are off: it passes the checker and fails verification."""

        name = "perturbing"

        def export(self, ctx, onnx_path):
            from dataclasses import replace

            result = super().export(replace(ctx, may_leave_unwritten=False), onnx_path)  # a file, to rewrite
            model = onnx.load(str(onnx_path))
            weight = next(i for i in model.graph.initializer if len(i.dims) == 2)
            values = onnx.numpy_helper.to_array(weight) + 1.0
            weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
            onnx.save(model, str(onnx_path))
            return result

    return Perturbing


@pytest.fixture
def with_perturbing(monkeypatch):
    from modelexport_core.export import pipeline as export_pipeline
    from modelexport_core.plugin.discovery import StrategyInfo, get_strategy

    def lookup(name):
        return StrategyInfo(_perturbing_strategy(), "test", "0") if name == "perturbing" else get_strategy(name)

    monkeypatch.setattr(export_pipeline, "get_strategy", lookup)


def test_a_strategy_whose_file_fails_verification_is_a_failed_attempt_and_the_chain_goes_on(tmp_path, with_perturbing):
    model, inputs = HARD_CASES["stacked_blocks"]()
    report = export_module(model, inputs, tmp_path / "m.onnx", strategies=["perturbing", "builtin_tracking"])
    assert report.strategy == "builtin_tracking" and report.verification.passed
    first = report.sidecar["attempted"][0]
    assert first["strategy"] == "perturbing" and first["status"] == "failed"
    assert "differs from PyTorch" in first["reason"] and first["max_abs_diff"] > 1e-2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.hierarchy.json", "m.onnx"]


def test_a_named_strategy_that_fails_verification_is_the_error(tmp_path, with_perturbing):
    model, inputs = HARD_CASES["stacked_blocks"]()
    with pytest.raises(VerificationError, match="perturbing: onnxruntime differs from PyTorch .* --no-verify"):
        export_module(model, inputs, tmp_path / "m.onnx", strategies=["perturbing"])
    assert list(tmp_path.iterdir()) == []


class _NoSubmodules(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(6, 6))

    def forward(self, x):
        return torch.tanh(x @ self.weight) * 2.0 + x


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_model_without_submodules_is_tagged_to_its_root_by_every_strategy(strategy, tmp_path):
    torch.manual_seed(0)
    report = export_module(_NoSubmodules(), (torch.randn(1, 6),), tmp_path / "m.onnx", strategies=[strategy])
    assert report.strategy == strategy and report.verification.passed
    assert {entry["tag"] for entry in report.sidecar["nodes"].values()} == {"/_NoSubmodules"}
    assert {entry["module"] for entry in report.sidecar["nodes"].values()} == {""}


class _MaskCounting(torch.nn.Module):
    """Ops the TorchScript exporter lacked (diff, histc) or mistranslated (cumsum of a boolean)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 6)
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, positions):
        steps = torch.diff(positions, prepend=positions[:, :1] - 1, dim=-1)
        running = (steps != 1).cumsum(-1)
        hidden = self.proj(self.embed(positions))
        counts = torch.histc(hidden.flatten().float(), bins=4, min=-1.0, max=1.0)
        return hidden * running.unsqueeze(-1).float(), counts


def test_diff_histc_and_boolean_cumsum_export_through_torchscript(tmp_path):
    torch.manual_seed(0)
    positions = torch.tensor([[0, 1, 2, 0, 1, 2]])
    report = export_module(_MaskCounting().eval(), (positions,), tmp_path / "m.onnx", strategies=["builtin_tracking"])
    assert report.verification.passed and report.verification.max_abs_diff < 1e-5
    assert len(report.verification.checks) == 2
    ops = {n.op_type for n in onnx.load(str(report.onnx_path)).graph.node}
    assert {"CumSum", "Sub", "ReduceSum"} <= ops


@torch.library.custom_op("modelexport_test::scaled_add", mutates_args=())
def _scaled_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + y


@_scaled_add.register_fake
def _(x, y):
    return torch.empty_like(x)


class _UsesCustomOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        return _scaled_add(self.proj(x), x)


def test_fx_decomposes_a_custom_op_without_an_onnx_function(tmp_path):
    torch.manual_seed(0)
    report = export_module(_UsesCustomOp().eval(), (torch.randn(1, 4),), tmp_path / "m.onnx", strategies=["fx"])
    assert report.verification.passed
    assert "Mul" in {n.op_type for n in onnx.load(str(report.onnx_path)).graph.node}


def _tiny_mixture_of_experts():
    import transformers

    config = transformers.MixtralConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=32,
    )
    torch.manual_seed(0)
    return transformers.MixtralModel(config).eval()


def test_a_mixture_of_experts_exports_and_its_kernel_setting_is_restored(tmp_path):
    model = _tiny_mixture_of_experts()
    before = model.config._experts_implementation
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(0))
    report = export_module(model, {"input_ids": ids}, tmp_path / "moe.onnx", strategies=["builtin_tracking"])
    assert report.verification.passed
    assert model.config._experts_implementation == before
    tagged = onnx.load(str(report.onnx_path))
    names = [n for n, _ in model.named_modules()]
    reference = {k: v for k, v in torchscript_node_modules(tagged, names, wrapped=False).items() if v is not None}
    expert_nodes = [n for n, m in reference.items() if m.endswith("experts")]
    assert expert_nodes and all(report.sidecar["nodes"][n]["module"].startswith("layers.0.mlp") for n in expert_nodes)


def test_float16_exports_in_its_dtype_and_verifies_with_the_half_precision_tolerance(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8)).half().eval()
    report = export_module(model, (torch.randn(1, 16).half(),), tmp_path / "h.onnx", strategies=["builtin_tracking"])
    graph = onnx.load(str(report.onnx_path)).graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert report.verification.passed and not report.verification.skipped
    assert next(p for p in model.parameters()).dtype == torch.float16  # left as it was


def test_bfloat16_inputs_say_in_one_line_why_they_are_not_verified(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4).to(torch.bfloat16).eval()
    report = export_module(model, (torch.randn(1, 4).to(torch.bfloat16),), tmp_path / "b.onnx",
                           strategies=["builtin_tracking"])
    assert "bfloat16" in report.verification.skipped and "\n" not in report.verification.skipped
    assert report.sidecar["export"]["verification"]["skipped"] == report.verification.skipped


def test_verification_reads_outputs_through_cpu_copies():
    from modelexport_core.export.verify import to_numpy

    value = torch.ones(2, 2, requires_grad=True) * 3
    assert np.array_equal(to_numpy(value), np.full((2, 2), 3.0, dtype=np.float32))


def test_generated_inputs_follow_the_model_dtype_and_device():
    from modelexport_core.prepare.inputs import on_model_device

    model = torch.nn.Linear(2, 2).half()
    moved = on_model_device({"x": torch.randn(1, 2), "ids": torch.ones(1, 2, dtype=torch.long)}, model)
    assert moved["x"].dtype == torch.float16 and moved["ids"].dtype == torch.long
    assert moved["x"].device == next(model.parameters()).device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_model_exports_verifies_and_stays_on_its_device(tmp_path):
    model, inputs = HARD_CASES["stacked_blocks"]()
    model = model.cuda()
    inputs = {name: tensor.cuda() for name, tensor in inputs.items()}
    for strategy in STRATEGIES:
        report = export_module(model, inputs, tmp_path / f"{strategy}.onnx", strategies=[strategy])
        assert report.verification.passed, strategy
        assert next(model.parameters()).is_cuda


def test_two_exports_of_one_model_are_byte_identical(tmp_path):
    model, inputs = HARD_CASES["stacked_blocks"]()
    for name in ("a", "b"):
        export_module(model, inputs, tmp_path / name / "m.onnx", strategies=["builtin_tracking"])
    assert (tmp_path / "a" / "m.onnx").read_bytes() == (tmp_path / "b" / "m.onnx").read_bytes()
    assert (tmp_path / "a" / "m.hierarchy.json").read_bytes() == (tmp_path / "b" / "m.hierarchy.json").read_bytes()
    assert "seconds" not in json.loads((tmp_path / "a" / "m.hierarchy.json").read_text())["attempted"][0]


def test_the_python_api_takes_a_module_and_its_args_like_torch_onnx_export(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    model.train()
    report = export_module(model, torch.randn(1, 3, 8, 8), tmp_path / "cnn.onnx")
    assert report.strategy == "fx" and report.coverage == 1.0 and report.verification.passed
    assert [i.name for i in onnx.load(str(report.onnx_path)).graph.input] == ["input"]
    assert model.training  # left as it was
    with pytest.raises(ModelRunError, match="expected input"):
        export_module(model, torch.randn(1, 5, 8, 8), tmp_path / "bad.onnx", strategies=["builtin_tracking"])


def test_graph_inputs_are_named_after_forward_parameters(tmp_path):
    model, inputs = HARD_CASES["stacked_blocks"]()
    report = export_module(model, tuple(inputs.values()), tmp_path / "m.onnx", strategies=["builtin_tracking"])
    session = onnxruntime.InferenceSession(str(report.onnx_path), providers=["CPUExecutionProvider"])
    import inspect

    assert [i.name for i in session.get_inputs()] == list(inspect.signature(model.forward).parameters)[:len(inputs)]


class _LazyTable(torch.nn.Module):
    """Builds a table the first time it runs and keeps it, as some position encodings do."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.table = None

    def forward(self, x):
        if self.table is None:
            self.table = torch.arange(x.shape[-1], dtype=x.dtype)
        return self.proj(x) + self.table


class _ReadsValues(torch.nn.Module):
    """Reads a tensor's value in Python: it cannot run on fake tensors, only for real."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        return {"hidden": self.proj(x) * (2.0 if float(x.abs().max()) >= 0 else 1.0)}


def test_an_unverified_export_runs_the_model_only_in_its_capture_and_names_the_outputs_as_a_verified_one(tmp_path):
    from torch._subclasses.fake_tensor import FakeTensor

    x = torch.randn(2, 8)
    counted = _ReadsValues().eval()
    calls: list[int] = []
    counted.proj.register_forward_hook(lambda *_: calls.append(1))
    torch.onnx.export(counted, (x,), str(tmp_path / "plain.onnx"), dynamo=False)
    plain_calls, calls[:] = len(calls), []
    export_module(counted, (x,), tmp_path / "counted.onnx", strategies=["builtin_tracking"], verify=False)
    assert len(calls) == plain_calls  # the model runs as often as in a plain export: no run of its own first
    for strategy in ("builtin_tracking", "fx"):
        lazy = _LazyTable().eval()
        export_module(lazy, (x,), tmp_path / f"lazy-{strategy}.onnx", strategies=[strategy], verify=False)
        assert not isinstance(lazy.table, FakeTensor)  # a table cached while the capture ran is not a fake one
        session = onnxruntime.InferenceSession(str(tmp_path / f"lazy-{strategy}.onnx"))
        np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], lazy(x).detach().numpy(), atol=1e-5)

        reads = _ReadsValues().eval()
        export_module(reads, (x,), tmp_path / f"unverified-{strategy}.onnx", strategies=[strategy], verify=False)
        export_module(reads, (x,), tmp_path / f"verified-{strategy}.onnx", strategies=[strategy], verify=True)
        outputs = [[o.name for o in onnx.load(str(tmp_path / f"{kind}-{strategy}.onnx")).graph.output]
                   for kind in ("unverified", "verified")]
        assert outputs == [["hidden"], ["hidden"]], strategy


def test_an_unverified_export_of_a_model_that_fails_on_its_example_is_one_error(tmp_path):
    class Broken(torch.nn.Module):
        def forward(self, x):
            raise ValueError("the model's own bug")

    with pytest.raises(ModelRunError, match="the model's own bug"):
        export_module(Broken(), (torch.randn(2, 8),), tmp_path / "broken.onnx", verify=False)
    assert not list(tmp_path.iterdir())
