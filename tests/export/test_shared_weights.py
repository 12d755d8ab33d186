"""Verification reads weights the model holds from the model's memory, and only where the file holds the same bytes."""

from __future__ import annotations

from pathlib import Path

import onnxruntime
import pytest
import torch

from modelexport_core.export.shared_weights import find_shared_weights, shared_weights_session
from modelexport_core.export.verify import verify
from modelexport_core.format.onnx_file import load_graph
from modelexport_core.prepare.context import make_context


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(64, 64)
        self.register_buffer("scale", torch.full((64,), 2.0))

    def forward(self, x):
        return self.linear(x) * self.scale


@pytest.fixture()
def exported(tmp_path) -> tuple[torch.nn.Module, Path]:
    torch.manual_seed(0)
    model = Scaled().eval()
    path = tmp_path / "scaled.onnx"
    torch.onnx.export(model, (torch.randn(2, 64),), str(path), input_names=["x"], dynamo=False,
                      do_constant_folding=False)
    return model, path


def test_the_weights_the_model_holds_as_stored_are_shared(exported):
    model, path = exported
    shared = find_shared_weights(load_graph(path), path.parent, model)
    assert shared.names == ["linear.weight"]  # the bias and scale are small enough to stay inline
    assert shared.nbytes == 64 * 64 * 4
    with shared_weights_session(path, model, onnxruntime.SessionOptions()) as (session, _):
        x = torch.randn(2, 64)
        (got,) = session.run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), model(x).detach())
    assert sorted(p.name for p in path.parent.iterdir()) == ["scaled.onnx"]  # the weightless copy is gone


def test_a_model_changed_after_export_fails_verification(exported):
    model, path = exported
    with torch.no_grad():
        model.linear.weight[0, 0] += 1.0  # the file still holds the old value
    assert "linear.weight" not in find_shared_weights(load_graph(path), path.parent, model).names
    verification = verify(path, make_context(model, {"x": torch.randn(2, 64)}, dynamic=False))
    assert not verification.passed and verification.max_abs_diff > 0.1
