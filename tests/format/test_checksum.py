"""Exact value look-ups: filed under a fingerprint of a few spread elements, confirmed element by element."""

from __future__ import annotations

import numpy as np
import pytest

from modelexport_core.format.checksum import ExactValues, value_checksum, value_fingerprint

pytestmark = pytest.mark.unit  # the fast tier, run first


def test_a_checksum_is_shared_by_every_order_of_the_elements():
    weight = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    assert value_checksum(np.ascontiguousarray(weight.T)) == value_checksum(weight)
    assert value_checksum(np.ascontiguousarray(weight[::-1])) == value_checksum(weight)
    assert value_checksum(weight + 1) != value_checksum(weight)


def test_a_matrix_is_found_as_stored_and_through_a_view_of_its_transpose_and_a_reordering_is_not():
    weight = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    values: ExactValues[str] = ExactValues()
    values.add("weight", weight)
    values.add("shifted", weight + 1)
    stored_transposed = np.ascontiguousarray(weight.T)
    assert values.find(weight) == ["weight"]
    assert value_fingerprint(stored_transposed.T) == value_fingerprint(weight)  # read where it lies
    assert values.find(stored_transposed.T) == ["weight"]  # a view, as a graph holding W.T is looked up
    assert values.find(stored_transposed) == []  # another shape
    assert values.find(np.ascontiguousarray(weight[::-1])) == []  # the same elements in another order
    small = np.arange(12, dtype=np.int64).reshape(3, 4)  # a value of few elements is fingerprinted whole
    values.add("small", small)
    assert values.find(small.copy()) == ["small"] and values.find(small[::-1].copy()) == []


def test_values_sharing_a_fingerprint_are_confirmed_in_full():
    """The fingerprint holds 64 spread elements; equal there is not enough: every element must agree."""
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((96, 80)).astype(np.float32)
    values: ExactValues[str] = ExactValues()
    values.add("weight", weight)
    swapped = weight.copy()
    swapped[0, 1], swapped[0, 2] = weight[0, 2], weight[0, 1]  # the fingerprint misses this corner
    assert value_fingerprint(swapped) == value_fingerprint(weight)
    assert values.filed(swapped) == 1 and values.find(swapped) == []
    assert values.find(np.ascontiguousarray(weight.T).T) == ["weight"]  # a transposed view, compared in full
    square = rng.standard_normal((90, 90)).astype(np.float32)
    values.add("square", square)
    assert values.find(square.T) == []  # another matrix
    symmetric = np.ascontiguousarray(square + square.T)
    values.add("symmetric", symmetric)
    assert values.find(symmetric.T) == ["symmetric"]
