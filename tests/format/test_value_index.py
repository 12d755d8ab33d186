"""Equality look-ups up to rounding: a caller that read a value's extremes once gets what each question gives alone."""

from __future__ import annotations

import numpy as np
import pytest

from modelexport_core.format.value_index import ValueIndex, extremes, informative, measure

pytestmark = pytest.mark.unit  # the fast tier, run first

RNG = np.random.default_rng(0)
VALUES = {
    "activations": RNG.standard_normal((2, 5, 7)).astype(np.float32),
    "positive": RNG.uniform(0.5, 2.0, (3, 8)).astype(np.float32),
    "negative": -RNG.uniform(0.5, 2.0, (3, 8)).astype(np.float32),
    "faded": (RNG.standard_normal((4, 4)) * 1e-30).astype(np.float32),
    "one number": np.full((3, 3), 0.25, dtype=np.float32),
    "with a mask": np.where(RNG.random((4, 6)) > 0.5, np.float32(-3.4e38), np.float32(1.5)),
    "with infinity": np.array([1.0, -np.inf, 2.0, 3.0], dtype=np.float32),
    "with nan": np.array([1.0, np.nan, 2.0, 3.0], dtype=np.float32),
    "double": RNG.standard_normal((5, 3)),
    "half": RNG.standard_normal((6, 2)).astype(np.float16),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_extremes_read_once_answer_as_each_question_alone(name):
    value = VALUES[name]
    ends = extremes(value)
    assert ends is not None
    assert informative(value, ends=ends) == informative(value)
    given, alone = measure(value, ends), measure(value)
    assert given[0] == alone[0] and given[1] == alone[1]
    assert given[2] == alone[2] or np.isnan(given[2]) and np.isnan(alone[2])


def test_a_value_filed_with_its_measure_is_found_as_one_filed_without():
    value = VALUES["activations"]
    with_measure: ValueIndex[str] = ValueIndex()
    with_measure.add("a", value, measure(value, extremes(value)))
    without: ValueIndex[str] = ValueIndex()
    without.add("a", value)
    rounded = value + np.float32(1e-7)
    assert with_measure.find(rounded) == without.find(rounded) == ["a"]
    assert with_measure.find(value + 1) == without.find(value + 1) == []


def test_only_float_values_have_extremes():
    assert extremes(np.arange(6).reshape(2, 3)) is None
    assert extremes(np.zeros((0, 3), dtype=np.float32)) is None


def test_a_value_all_one_number_within_the_matching_tolerance_is_told_from_one_that_varies():
    """Halves give or take a few units in the last place (a sigmoid of faded values) equal every value of halves
    of their shape within the tolerance values are matched with; halves give or take a hundredth do not."""
    from modelexport_core.format.value_index import one_number_within_tolerance, same_values

    rng = np.random.default_rng(0)
    nearly = (0.5 + rng.normal(0, 1e-7, (1, 64, 1, 1))).astype(np.float32)
    varying = (0.5 + rng.normal(0, 1e-2, (1, 64, 1, 1))).astype(np.float32)
    assert one_number_within_tolerance(nearly) and same_values(nearly, np.full_like(nearly, 0.5))
    assert not one_number_within_tolerance(varying) and not same_values(varying, np.full_like(varying, 0.5))
    assert one_number_within_tolerance(np.full(4, 3.0, dtype=np.float32))
    faded = rng.normal(0, 1e-6, 64).astype(np.float32)  # small, but its elements differ as much as they are large
    assert not one_number_within_tolerance(faded)
    assert not one_number_within_tolerance(np.arange(4))  # integers compare exactly
