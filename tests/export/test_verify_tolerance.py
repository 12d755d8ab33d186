"""Verification's rule is numpy.allclose's: |onnxruntime - PyTorch| <= atol + rtol * |PyTorch|, value by value."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from modelexport_core.export.verify import _compare

pytestmark = pytest.mark.unit


class _Session:
    """onnxruntime's interface, answering with PyTorch's outputs shifted by ``shift``."""

    def __init__(self, outputs: list[torch.Tensor], shift: float):
        self.outputs, self.shift = outputs, shift

    def get_inputs(self):
        return [SimpleNamespace(name="x")]

    def run(self, _names, _feed):
        return [t.numpy() + np.float32(self.shift) for t in self.outputs]


def _check(values: list[float], shift: float, atol: float = 1e-4, rtol: float = 1e-5):
    outputs = [torch.tensor(values, dtype=torch.float32)]
    ctx = SimpleNamespace(input_names=["x"], module=None)
    return _compare(_Session(outputs, shift), ctx, (torch.zeros(1),), atol, outputs, rtol)


def test_a_rounding_difference_on_large_values_passes():
    """Outputs near 3e6 carry float32 steps of 0.25: a difference of 1.5 is 5e-7 of the value."""
    check = _check([3.0e6, -2.5e6], 1.5)
    assert check.passed and check.max_abs_diff == pytest.approx(1.5, abs=0.3)


def test_the_same_difference_on_small_values_fails():
    assert not _check([3.0, -2.5, 3.0e6], 1.5).passed


def test_without_rtol_only_the_absolute_tolerance_counts():
    assert not _check([3.0e6], 1.5, rtol=0.0).passed
    assert _check([3.0], 5e-5, rtol=0.0).passed
