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


def test_a_nan_on_one_side_only_fails_and_is_reported_as_unbounded():
    """onnxruntime gives NaN where PyTorch gives a number: the file fails, and the largest difference it reports is
    not the largest of the other elements (a failure said to differ by 3e-5 against a tolerance of 1e-4 misleads)."""
    outputs = [torch.tensor([1.0, 2.0, 3.0])]

    class Nan(_Session):
        def run(self, _names, _feed):
            return [np.array([1.0, np.nan, 3.00003], dtype=np.float32)]

    check = _compare(Nan(outputs, 0.0), SimpleNamespace(input_names=["x"], module=None), (torch.zeros(1),), 1e-4,
                     outputs, 1e-5)
    assert not check.passed and check.max_abs_diff == float("inf")


def test_an_output_missing_on_one_side_fails_and_is_reported_as_unbounded():
    outputs = [torch.tensor([1.0, 2.0]), torch.tensor([3.0])]

    class Fewer(_Session):
        def run(self, _names, _feed):
            return [np.array([1.0, 2.0], dtype=np.float32)]

    check = _compare(Fewer(outputs, 0.0), SimpleNamespace(input_names=["x"], module=None), (torch.zeros(1),), 1e-4,
                     outputs, 1e-5)
    assert not check.passed and check.max_abs_diff == float("inf")
