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
