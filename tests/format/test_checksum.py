"""Exact value look-ups: a checksum any order of the elements shares, confirmed element by element."""

from __future__ import annotations

import numpy as np
import pytest

from modelexport_core.format.checksum import ExactValues, value_checksum

pytestmark = pytest.mark.unit  # the fast tier, run first


def test_a_matrix_is_found_as_stored_and_through_a_view_of_its_transpose_and_a_reordering_is_not():
    weight = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    values: ExactValues[str] = ExactValues()
    values.add("weight", weight)
    values.add("shifted", weight + 1)
    stored_transposed = np.ascontiguousarray(weight.T)
    assert value_checksum(stored_transposed) == value_checksum(weight)
    assert values.find(weight) == ["weight"]
    assert values.find(stored_transposed.T) == ["weight"]  # a view, as a graph holding W.T is looked up
    reordered = np.ascontiguousarray(weight[::-1])  # the same elements, so the same checksum: another value
    assert value_checksum(reordered) == value_checksum(weight) and values.find(reordered) == []
    assert values.filed(reordered) == 1


def test_large_values_are_confirmed_in_full_after_the_probed_elements_agree():
    """Sixteen spread elements are compared first; equal there is not enough: every element must agree."""
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((96, 80)).astype(np.float32)
    values: ExactValues[str] = ExactValues()
    values.add("weight", weight)
    swapped = weight.copy()
    swapped[0, 1], swapped[0, 2] = weight[0, 2], weight[0, 1]  # same checksum; the probes miss this corner
    assert value_checksum(swapped) == value_checksum(weight) and values.find(swapped) == []
    assert values.find(np.ascontiguousarray(weight.T).T) == ["weight"]  # a transposed view, compared in full
    square = rng.standard_normal((90, 90)).astype(np.float32)
    values.add("square", square)
    assert values.find(square.T) == []  # the same checksum as itself, another matrix
    symmetric = np.ascontiguousarray(square + square.T)
    values.add("symmetric", symmetric)
    assert values.find(symmetric.T) == ["symmetric"]
