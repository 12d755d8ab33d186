"""Each capture method of fx, forced by a small model only it can capture, and the exporter gaps worked around."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from modelexport_core import StrategyFailed, export_module, make_context
from modelexport_core.format.reference import dynamo_node_modules
from modelexport_fx.capture import CAPTURE_METHODS
from modelexport_fx.strategy import FxStrategy


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(torch.relu(self.proj(x)))


class ThroughNumpy(Plain):
    """NumPy on an input: fake tensors have no data for it, TorchDynamo translates it to torch ops (strict)."""

    def forward(self, x):
        return super().forward(torch.from_numpy(np.tanh(x.numpy())))


class ValueBranch(Plain):
    """A branch on a tensor's value: torch.export refuses it; draft_export answers it from the example."""

    def forward(self, x):
        h = self.proj(x)
        if h.abs().sum() >= 0:  # true for every input
            h = torch.relu(h)
        return self.head(h)


class NotForCompilers(Plain):
    """Refuses every torch.export method (no compiled path), but a plain FX trace of it is fine."""

    def forward(self, x):
        if torch.compiler.is_compiling():
            raise RuntimeError("no compiled path")
        return super().forward(x)


class ReflectedMask(torch.nn.Module):
    """``1.0 - integer_mask``: the dynamo exporter's decomposition and type promotion have no overload for it."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, mask):
        keep = 1.0 - mask  # float from an integer mask
        return self.proj(x) * keep[..., None] - 10000.0 * mask[..., None]


@pytest.mark.parametrize(
    "model_class, method",
    [(Plain, "non_strict"), (ThroughNumpy, "strict"), (ValueBranch, "draft_export"), (NotForCompilers, "symbolic_trace")],
)
def test_each_capture_method_is_used_when_the_earlier_ones_fail_and_is_recorded(tmp_path, model_class, method):
    torch.manual_seed(0)
    model = model_class().eval()
    report = export_module(model, (torch.randn(3, 4),), tmp_path / "m.onnx", strategies=["fx"])
    details = report.sidecar["details"]
    assert details["capture_method"] == method
    earlier = list(CAPTURE_METHODS[: CAPTURE_METHODS.index(method)])
    assert list(details["capture_failures"]) == earlier
    assert all("\n" not in reason for reason in details["capture_failures"].values())
    assert report.verification.passed and len(report.verification.checks) == 2
    # tags are PyTorch's own records, whichever method captured
    graph = onnx.load(str(report.onnx_path), load_external_data=False)
    reference = {n: m for n, m in dynamo_node_modules(graph).items() if m is not None}
    nodes, modules = report.sidecar["nodes"], report.sidecar["modules"]
    assert {"proj", "head"} <= set(reference.values())
    assert [n for n, m in reference.items() if not modules[m]["tag"].startswith(nodes[n]["tag"])] == []
    if method == "draft_export":
        assert any("draft_export" in note for note in report.notes)


def test_the_capture_option_limits_the_methods_and_every_reason_is_kept(tmp_path):
    ctx = make_context(ValueBranch().eval(), {"x": torch.randn(3, 4)}, options={"capture": "non_strict,strict"})
    with pytest.raises(StrategyFailed) as failure:
        FxStrategy().export(ctx, tmp_path / "m.onnx")
    reason = str(failure.value)
    assert "\n" not in reason and reason.startswith("torch.export could not capture the model")
    assert "also tried: strict" in reason
    assert failure.value.__cause__.failures.keys() == {"non_strict", "strict"}


def test_a_number_minus_an_integer_mask_exports_through_fx(tmp_path):
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0]])
    report = export_module(ReflectedMask().eval(), {"x": torch.randn(2, 4, 4), "mask": mask}, tmp_path / "m.onnx",
                           strategies=["fx"])
    assert report.sidecar["details"]["rewrites"]["reflected_subtractions"] == 1
    assert report.verification.passed
    assert len(report.verification.checks) == 2  # the mask's batch and sequence sizes changed too
    graph = onnx.load(str(report.onnx_path), load_external_data=False)
    reference = {n: m for n, m in dynamo_node_modules(graph).items() if m is not None}
    nodes, modules = report.sidecar["nodes"], report.sidecar["modules"]
    assert reference and [n for n, m in reference.items() if not modules[m]["tag"].startswith(nodes[n]["tag"])] == []
