"""Unit tests of the projection's passes on tiny hand-made traces and nodes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit  # the fast tier, run first


def test_a_node_adding_a_weight_its_input_call_never_read_does_not_continue_that_call() -> None:
    """A call's value plus a zero bias the call read (a Linear's own bias, through a transpose of it) goes on with
    the call; plus a bias its caller expanded from a parameter the call never read, it does not."""
    from onnx import helper

    from modelexport_htp.project import _adds_others_weight, _weights_read
    from modelexport_htp.trace import OpRecord, Trace

    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "t", ("block.dense",), (), ("block.dense.bias",)),
               OpRecord(2, "linear", ("block.dense",), (0, 1), ("block.dense.weight",)),
               OpRecord(3, "expand_as", ("",), (0,), ("block.dense_bias",)), OpRecord(4, "add", ("",), (2, 3), ())]
    trace = Trace(records=records, execution_trace=["", "block", "block.dense"], param_owners={}, param_values={})
    read_by = _weights_read(trace, trace.input_dependent())
    assert read_by(2) == {"block.dense.weight", "block.dense.bias"}
    params_of = {"bias": frozenset({"block.dense.bias", "block.dense_bias"}), "caller_bias": frozenset({"block.dense_bias"})}
    own = helper.make_node("Add", ["product", "bias"], ["sum"])
    assert not _adds_others_weight(own, 2, read_by, params_of, {})  # one of its candidates is the call's
    others = helper.make_node("Add", ["product", "expanded"], ["sum"])
    assert _adds_others_weight(others, 2, read_by, params_of, {"expanded": frozenset({"block.dense_bias"})})
    assert not _adds_others_weight(others, 2, read_by, params_of, {})  # nothing says what it holds


def test_a_node_matched_to_an_earlier_factory_by_time_alone_goes_back_in_time_and_is_left_unmatched() -> None:
    """Node 1 holds 0, 1, 2, ... equal to an ``arange`` the root ran first (record 1), but it is written after node 0,
    matched to a layer's call recorded later (record 3): exporters write nodes in the order they ran, and a factory
    reads no recorded tensor, so only time could tell, and time says it is not the root's arange (a range an
    exporter wrote for a scatter's indices). A node matched so to a call that read a tensor is kept: data flow
    matched it."""
    from modelexport_htp.project import Projection, _amid_another_call
    from modelexport_htp.trace import OpRecord, Trace

    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "arange", ("",), (), ()),
               OpRecord(2, "mul", ("",), (0,), ()), OpRecord(3, "linear", ("", "layers.0"), (0,), ("layers.0.weight",))]
    trace = Trace(records=records, execution_trace=["", "layers.0"], param_owners={}, param_values={})
    projection = Projection(matched={0: 3, 1: 1, 2: 2})
    _amid_another_call(projection, trace)
    assert projection.matched == {0: 3, 2: 2}


def test_a_call_reached_through_calls_reading_weights_the_node_does_not_hold_is_not_the_node_s() -> None:
    """A sigmoid of a convolution's faded result (0.5 everywhere, as a later gate's is) reads record 1's value. The
    gate (record 4) reads it only through a second convolution (record 3) and an activation: the node would have
    performed that convolution, whose weight neither it nor the unmatched nodes before it hold, so the gate is
    not its value's call. Where they hold that weight (or, not tracked, may), the gate is."""
    from modelexport_htp.project import NOTHING_KNOWN, Held, _direct_readers
    from modelexport_htp.trace import OpRecord, Trace

    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "conv2d", ("", "block.conv"), (0,), ("block.conv.weight",)),
               OpRecord(2, "silu", ("", "block.act"), (1,), ()),
               OpRecord(3, "conv2d", ("", "block.se.conv"), (2,), ("block.se.conv.weight",)),
               OpRecord(4, "sigmoid", ("", "block.se.gate"), (3,), ())]
    trace = Trace(records=records, execution_trace=["", "block"], param_owners={}, param_values={})
    frontier = {frozenset([1])}
    nothing = Held(frozenset(), False)
    assert _direct_readers([4], frontier, trace, set(), [], set(), holds=nothing) == []
    assert _direct_readers([4], frontier, trace, set(), [], set(), holds=Held(frozenset({"block.se.conv.weight"}), False))
    assert _direct_readers([4], frontier, trace, set(), [], set(), holds=NOTHING_KNOWN) == [(4, 1, 0, 0)]
    assert _direct_readers([2], frontier, trace, set(), [], set(), holds=nothing) == [(2, 1, 0, 0)]  # read directly
