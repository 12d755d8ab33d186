"""The project half of HTP: map recorded torch calls onto ONNX nodes by data flow and values.

Walking the ONNX graph in topological order, each node output is compared with the
recorded call outputs of the same shape and kind; among the calls whose output has the
same values, the one that descends (in the recorded data flow) from the calls already
matched upstream of the node is chosen, nearest first. Identical values computed in
different layers are therefore told apart by where their inputs came from, never by
node order or names. Outputs that match nothing (pieces of an operation the exporter
split, constants, shape arithmetic) are left for :mod:`.fill`.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, NamedTuple

from modelexport_core.sdk import (
    TINY,
    GraphIndex,
    ValueIndex,
    faded,
    identical,
    informative,
    is_ancestor,
    may_be_same,
    measure,
    one_number_within_tolerance,
    same_values,
    transposed_measure,
)

from .trace import INPUT_PREFIX, OpRecord, Trace

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from modelexport_core.sdk import ExactValues


ROUNDED_SUBNORMALS = 2.0**24 * TINY
"""A float value no larger than this (2^24 times float32's smallest normal number, about 2e-31) that equals no call
has faded, though its numbers are normal: within float32's 24 bits of precision of the subnormals, it may be
computed from them (a norm's variance of such a value underflows, and the norm divides by the root of its epsilon),
and runtimes round and flush subnormals differently. Data flow decides its call, as for a faded value; one
that equals a call is that call's as any other value."""

SHAPE_OP = "Shape"
"""The ONNX operator reading a tensor's shape: the one node kind a recorded shape read can be."""


@dataclass
class Projection:
    """Which recorded call each ONNX node was matched to, and what was seen on the way."""

    matched: dict[int, int] = field(default_factory=dict)
    """ONNX node index to the index of the recorded call that produced its output."""
    unmatched_values: int = 0
    ambiguous: int = 0
    """Matches that had several candidates with equal values (decided by data flow)."""
    realigned: int = 0
    """Matches made or moved by walking back from matched nodes to their calls' inputs."""
    initializer_params: dict[str, frozenset[str]] = field(default_factory=dict)
    """Initializer (or Identity of one) to the parameters holding the same values."""
    folded: dict[int, int] = field(default_factory=dict)
    """ONNX node index to the first of several calls the exporter folded into it (where that differs)."""
    equal_calls: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """ONNX node index to every call whose output equals the value matched to its call."""
    small_initializers: dict[str, "np.ndarray"] = field(default_factory=dict)
    """The values of the initializers of at most ``SMALL_SIZE`` elements."""


def _candidates(trace: Trace) -> ValueIndex[int]:
    """Every recorded output, keyed by the index of its record."""
    index: ValueIndex[int] = ValueIndex()
    for record in trace.records:
        for output in record.outputs:
            index.add(record.index, output)
    return index


class _NearParameters:
    """Parameters and buffers looked up within tolerance, filed shape by shape when a look-up first needs one
    (most weights are found by their exact bytes, and their parameters need not be measured at all)."""

    def __init__(self, trace: Trace) -> None:
        self._by_shape: dict[tuple[int, ...], list[tuple[str, "np.ndarray"]]] = {}
        for name, value in trace.param_values.items():
            if hasattr(value, "shape"):
                self._by_shape.setdefault(tuple(value.shape), []).append((name, value))
                squeezed = _squeezed(value)
                if squeezed is not None:
                    self._by_shape.setdefault(tuple(squeezed.shape), []).append((name, squeezed))
        self._index: ValueIndex[str] = ValueIndex()

    def find(self, value: "np.ndarray", measured: tuple[tuple, float, float] | None) -> list[str]:
        for name, parameter in self._by_shape.pop(tuple(value.shape), []):
            self._index.add(name, parameter)
        return self._index.find(value, measured)


def _parameters(trace: Trace) -> tuple["ExactValues[str]", _NearParameters]:
    """Every parameter and buffer by qualified name: for exact look-ups, and for look-ups within tolerance."""
    from modelexport_core.sdk import ExactValues

    exact: ExactValues[str] = ExactValues()
    for name, value in trace.param_values.items():
        if hasattr(value, "dtype") and value.dtype.kind in "fciub" and value.size:
            exact.add(name, value)
            squeezed = _squeezed(value)
            if squeezed is not None:
                exact.add(name, squeezed)
    return exact, _NearParameters(trace)


def _squeezed(value: "np.ndarray") -> "np.ndarray | None":
    """``value`` without its axes of size 1 (a view), where it has some and at least two elements: a parameter
    the exporter reshaped to broadcast (a per-channel scale stored as ``(C, 1, 1)``) holds the same elements."""
    if not hasattr(value, "shape") or value.size < 2 or 1 not in value.shape:
        return None
    return value.reshape(tuple(size for size in value.shape if size != 1))


class Held(NamedTuple):
    """What a node, or a chain of nodes, holds of the model's weights."""

    params: frozenset[str]
    """The parameters whose values its initializers hold, where those values say which parameter they are."""
    computed: bool
    """Whether it also holds a tensor computed from weights (a folded norm): any parameter may be in it."""

    @staticmethod
    def union(own: Iterable[frozenset[str]], computed: bool, *others: "Held") -> "Held":
        """What a node holds itself (``own``, ``computed``) together with what ``others`` hold."""
        return Held(frozenset().union(*own, *(other.params for other in others)),
                    computed or any(other.computed for other in others))


NOTHING_KNOWN = Held(frozenset(), True)
"""What a caller that tracks no weights passes: anything may be held."""

def _reshaped_parameters(
    array: "np.ndarray", exact: "ExactValues[str]", near: "_NearParameters | None" = None
) -> tuple[set[str], bool]:
    """The parameters a value holds without its axes of size 1 (a parameter the exporter reshaped to
    broadcast), and whether exactly: exact bytes first, then, with ``near``, within tolerance."""
    squeezed = _squeezed(array)
    if squeezed is None:
        return set(), False
    found = set(exact.find(squeezed))
    if found or near is None:
        return found, bool(found)
    return set(near.find(squeezed, measure(squeezed))), False


ArrayReader = Callable[["onnx.TensorProto"], "np.ndarray"]
"""Reads an initializer's value (from the proto, or from the file a stub refers to)."""


@dataclass
class Initializers:
    """What the projection and the fill need to know of the graph's initializers, read once."""

    params: dict[str, frozenset[str]]
    """Initializer (or Identity of one) to the parameters holding the same values (a matrix maybe transposed)."""
    informative: set[str]
    """Initializers (and Identities of them) whose values say which parameter they are: not all one number."""
    small: dict[str, "np.ndarray"]
    """The values of initializers of at most ``SMALL_SIZE`` elements (scalars and shapes)."""
    computed: set[str] = field(default_factory=set)
    """Initializers (and Identities of them) equal to no parameter exactly: the exporter computed them
    (a convolution's weights with the normalisation after it folded in)."""


SMALL_SIZE = 8
"""Values with at most this many elements are taken for scalars and shapes."""


def read_initializers(onnx_model: "onnx.ModelProto", trace: Trace, read: ArrayReader | None = None) -> Initializers:
    """One pass over the initializers, each read and let go in turn (weights are never all held at once).

    A matrix may hold a parameter transposed (the exporter folds ``W.T``): it is looked up
    both ways, and a tensor with axes of size 1 also without them (a per-channel parameter
    reshaped to broadcast). An exporter stores weights as they are, so parameters holding exactly the
    initializer's bytes are looked for first; a value the exporter computed (a folded
    norm) is looked up within the tolerance of float arithmetic.
    """
    from onnx import numpy_helper

    read = read or numpy_helper.to_array
    exact, index = _parameters(trace)
    facts = Initializers({}, set(), {})
    for initializer in onnx_model.graph.initializer:
        array = read(initializer)
        usable = array.dtype.kind in "fciub" and array.size > 0
        measured = None
        found: set[str] = set()
        if usable:
            found.update(exact.find(array))
            if array.ndim == 2:
                found.update(exact.find(array.T))  # a view: nothing copied
        exactly = bool(found)
        if not found and usable:  # measured only where looked up within tolerance (most weights are exact)
            measured = measure(array)
            found.update(index.find(array, measured))
            if array.ndim == 2:
                found.update(index.find(array.T, transposed_measure(measured)))
        if not found and usable:
            found, exactly = _reshaped_parameters(array, exact, index)
        facts.params[initializer.name] = frozenset(found)
        if usable and not exactly:
            facts.computed.add(initializer.name)
        if informative(array, measured[2] if measured is not None else None):
            facts.informative.add(initializer.name)
        if array.size <= SMALL_SIZE:
            facts.small[initializer.name] = array
    for node in onnx_model.graph.node:
        if node.op_type == "Constant" and len(node.output) == 1:
            # a buffer the exporter wrote as a Constant node (position ids) is that buffer: only exact
            # copies of values that say which one count, so that no axis list or fill value is a weight
            tensor = next((a.t for a in node.attribute if a.name == "value" and a.HasField("t")), None)
            array = numpy_helper.to_array(tensor) if tensor is not None else None
            if array is not None and array.size > SMALL_SIZE and informative(array):
                found = set(exact.find(array)) or _reshaped_parameters(array, exact)[0]
                if found:
                    facts.params[node.output[0]] = frozenset(found)
                    facts.informative.add(node.output[0])
        if node.op_type == "Identity" and node.input and node.input[0] in facts.params:
            facts.params[node.output[0]] = facts.params[node.input[0]]
            if node.input[0] in facts.informative:
                facts.informative.add(node.output[0])
            if node.input[0] in facts.computed:
                facts.computed.add(node.output[0])
    return facts


def project(
    onnx_model: "onnx.ModelProto", values: dict[str, "np.ndarray"], trace: Trace, initializers: Initializers
) -> Projection:
    """Match ONNX nodes to recorded calls by comparing values and following data flow."""
    graph = onnx_model.graph
    ancestors = trace.ancestors()
    sized = trace.ancestors(sized=True)  # with the shape reads a factory may have taken its size from
    candidates = _candidates(trace)
    params_of = initializers.params
    dependent = trace.input_dependent()
    inputs = {r.op[len(INPUT_PREFIX):]: r.index for r in trace.records if r.op.startswith(INPUT_PREFIX)}

    # Each value's anchors: groups of recorded calls it was computed from, nearest first. A
    # group is one matched call, or every input-independent call holding the same value
    # (a constant the exporter folded may stand for any of them).
    anchors: dict[str, frozenset[frozenset[int]]] = {}
    for value in graph.input:
        if value.name in inputs:
            anchors[value.name] = frozenset([frozenset([inputs[value.name]])])
    used_records: set[int] = set()
    used_bits = 0  # the same, as a bit set
    # a call of several outputs (a chunk, a split) is used output by output: the exporter may write a node for
    # each, and the node of one output leaves the others to theirs (positions matched, per call)
    used_outputs: dict[int, set[int]] = {}
    param_calls = sum(1 << r.index for r in trace.records if r.params and dependent[r.index])
    projection = Projection(initializer_params=params_of, small_initializers=initializers.small)
    telling = initializers.informative
    shape_reads: dict[int, list[int]] = {}
    shapes = _initializer_shapes(onnx_model)
    derived = _parameter_derived(graph)
    computed = initializers.computed
    carried: dict[str, Held] = {}
    reach: dict[str, Held] = {}
    node_holds: dict[int, Held] = {}
    loose: set[int] = set()  # calls matched only to values holding their elements in another order
    produced: dict[str, int] = {}  # the call matched to the node making each value
    readers = GraphIndex.of(graph).consumers
    unread = trace.unread()  # calls whose value nothing used: of equal candidates, the exporter wrote the others
    continuing: dict[int, int] = {}  # nodes reading no weight matched to the call of an input they return unchanged
    weighed: dict[str, frozenset[str]] = {}  # the parameters unmatched nodes' values may hold (all candidates)
    read_by = _weights_read(trace, dependent)

    for node_index, node in enumerate(graph.node):
        frontier: set[frozenset[int]] = set()
        for name in node.input:
            frontier |= anchors.get(name, frozenset())
        latest = max((next(iter(g)) for g in frontier if len(g) == 1), default=-1)
        held = [params_of[name] for name in node.input if params_of.get(name)]
        folds = any(params_of.get(name) == frozenset() for name in node.input)
        may_hold = folds or any(name in derived for name in node.input)  # or a tensor computed from weights
        # what this node and the unmatched nodes feeding it since the frontier hold: the pieces of one
        # call the exporter split (an LSTM node, then the squeeze and transpose giving the call's value);
        # only weights whose values say which parameter they are count (a zero bias equals every zero bias)
        identifying = [params_of[name] for name in node.input if params_of.get(name) and name in telling]
        node_holds[node_index] = Held.union(identifying, may_hold, *(carried[n] for n in node.input if n in carried))
        # the same, with the matched nodes these start from: a call skipped on the way to a candidate may
        # have been folded into one of them (a batch norm into the convolution before it)
        around = Held.union(identifying, may_hold, *(reach[name] for name in node.input if name in reach))
        this_node: set[int] = set()  # calls matched to this node's earlier outputs
        for output in node.output:
            continued: set[int] = set()
            value = values.get(output)
            measured = measure(value) if value is not None and getattr(value, "dtype", None) is not None \
                and value.dtype.kind in "fciub" else None
            own_scale = measured[2] if measured is not None else None
            # near the subnormals, a value no call equals may be their rounding scaled up: taken for faded
            rounded = own_scale is not None and own_scale < ROUNDED_SUBNORMALS and value.dtype.kind == "f"
            by_elements = False
            found: list[tuple[int, int, int, int]] = []
            same: list[int] = []
            reordered = False
            if node.op_type == SHAPE_OP:
                shape_reads[node_index] = _shape_reads(
                    candidates.find(value, measured) if value is not None else [], frontier, trace, used_records,
                    ancestors,
                )
                found = [(shape_reads[node_index][0], 1, 0, 0)] if shape_reads[node_index] else []
            elif value is not None and informative(value, own_scale) and not one_number_within_tolerance(value):
                # (one number within the tolerance values are matched with equals every such value of its shape:
                # data flow decides, as for a value all one number exactly)
                by_elements = True
                # no value equal to it: one holding its elements in another order (a result whose
                # order is unspecified, and the values computed from it row by row)
                same = candidates.find(value, measured)
                if not same:
                    same = candidates.find_permuted(value, measured)
                    reordered = bool(same)
                continued = _continued(node, value, same, produced, values, anchors)
                continued = {call for call in continued if not _adds_others_weight(node, call, read_by,
                                                                                      params_of, weighed)}
                # where no call is causal, one computed from a factory sized by a shape read upstream is
                # (the trace does not follow sizes as Python numbers; the exporter writes them as nodes)
                for lineage in (ancestors, sized):
                    found = _plausible(
                        same, frontier, latest, held, trace, lineage, dependent, may_hold,
                        reads_shape=node.op_type == SHAPE_OP, skipped_params=param_calls & ~used_bits,
                        holds=node_holds[node_index], holds_around=around, telling=identifying,
                        again=loose | continued,
                    )
                    if found or not same:
                        break
                if len(found) > 1:
                    projection.ambiguous += 1
                elif not found:
                    projection.unmatched_values += 1
            if value is not None and getattr(value, "size", 1) != 1 and frontier and node.op_type != SHAPE_OP \
                    and (not by_elements or rounded and not same):
                # an empty or faded value (or one near the subnormals no call equals) may equal any output of its
                # shape: data flow and parameters decide (a value some call returned exactly is matched among
                # those calls first)
                fades = rounded or faded(value, own_scale)
                lookups = [candidates.of_shape] if value.size == 0 else \
                    [candidates.find, *([candidates.of_shape] if fades else [])]
                plausible = []
                for lookup in lookups:
                    same = lookup(value, measured)
                    plausible = _plausible(
                        same, frontier, latest, held, trace, ancestors, dependent, may_hold,
                        reads_shape=node.op_type == SHAPE_OP, holds=node_holds[node_index],
                    )
                    if plausible:
                        break
                folded_shapes = {
                    shapes[name] for name in node.input if params_of.get(name) == frozenset() and name in telling
                }
                found = _direct_readers([c[0] for c in plausible], frontier, trace, used_records, held, folded_shapes,
                                        telling=identifying, holds=node_holds[node_index])
            if not found:
                anchors[output] = frozenset(frontier)
                carried[output] = node_holds[node_index]
                weighed[output] = frozenset().union(
                    *(params_of.get(name, frozenset()) | weighed.get(name, frozenset()) for name in node.input))
                reach[output] = around
                continue
            reach[output] = Held.union(identifying, any(name in computed for name in node.input))
            # a call already matched stays eligible for the node reading its output and its parameters
            # (the bias added after a matrix product whose output already equalled the call's), and for
            # the other outputs of the node it was matched to (one call of several outputs is one node)
            # a call matched only to a reordered value (which may be one step of a call that reorders: a
            # roll written as slices and a concatenation) stays eligible for the node equal to it exactly
            chosen = min(found, key=lambda c: (
                -c[1], -c[2],
                c[0] in used_records and c[0] not in this_node and (reordered or c[0] not in loose)
                and not (c[2] > 0 and frozenset([c[0]]) in frontier)
                and not _positions(trace.records[c[0]], value, reordered) - used_outputs.get(c[0], set()),
                c[0] in unread,
                c[3],
            ))[0]
            this_node.add(chosen)
            produced[output] = chosen
            if chosen in continued and not held:
                continuing[node_index] = chosen
            if reordered:
                loose.add(chosen)
            else:
                loose.discard(chosen)
            if frontier:  # what reads this value reads the last call the node performed
                held_by_readers = [  # parameters the nodes reading the value may hold
                    params_of.get(name, frozenset()) for reader in readers.get(output, ())
                    for name in graph.node[reader].input
                ]
                anchors[output] = frozenset([frozenset([
                    _performed_last(chosen, found, trace, used_records, held_by_readers)
                ])])
            else:
                anchors[output] = frozenset([frozenset(c[0] for c in found)])
            used_records.add(chosen)
            used_bits |= 1 << chosen
            used_outputs.setdefault(chosen, set()).update(_positions(trace.records[chosen], value, reordered))
            if projection.matched.setdefault(node_index, chosen) == chosen and not reordered:
                projection.equal_calls[node_index] = tuple(same)
            if frontier and folds:
                first = _first_folded_call(chosen, frontier, used_records, trace)
                if first is not None:
                    projection.folded.setdefault(node_index, first)
    _align_backwards(graph, values, trace, projection, used_records, node_holds)
    _last_reads_before_use(graph, projection, shape_reads, trace, values)
    _lowered_shapes(graph, projection, trace)
    _pieces_of_a_reader(graph, projection, trace, continuing, readers)
    _amid_another_call(projection, trace)
    _constants_read_elsewhere(graph, projection, trace, readers)
    return projection


def _constants_read_elsewhere(graph: "onnx.GraphProto", projection: Projection, trace: Trace,
                              readers: dict[str, list[int]]) -> None:
    """Unmatch each Constant node matched to a call none of whose matched readers ran within it.

    A Constant node is a computation the exporter folded, written with the last operation folded into it. Where
    a reader ran inside the call its value equals, the computation was that call's (positions a layer builds
    from its buffers). Where none did, the value was handed out, and the operation folded last, written where
    it is read (a cast or a view of the table), was the reader's: equal values of other calls (each layer's
    child computing the same table) say nothing of which call's output it was, so the node goes with its
    readers.
    """
    for node_index, record_index in list(projection.matched.items()):
        node = graph.node[node_index]
        if node.op_type != "Constant" or not node.output:
            continue
        module = trace.records[record_index].module
        read_in = [trace.records[projection.matched[r]].module for r in readers.get(node.output[0], ())
                   if r in projection.matched]
        if read_in and not any(is_ancestor(module, reader) for reader in read_in):
            del projection.matched[node_index]
            projection.equal_calls.pop(node_index, None)


def _amid_another_call(projection: Projection, trace: Trace) -> None:
    """Match each node whose call went back in time to an equal call recorded where the node was written.

    Exporters write nodes in the order they ran. A node matched to a call recorded before the call of the matched
    node written before it went back in time; it ran between that call and the call of the next matched node
    going on from it. Where its value equals a call recorded in that stretch (every layer computing the same value
    from one input the exporter merged: each layer's computation then descends, in the graph, from the first
    layer's call, and was matched there), it is the first such call. Where none does and the call read no recorded
    tensor (a factory: ``arange``, ``zeros``), only time could tell, and time says it is not that call: the node is
    left unmatched (a range an exporter wrote for a scatter's indices, equal to an early ``arange``).
    """
    order = sorted(projection.matched)
    unmatched = []
    for at in range(1, len(order)):
        node = order[at]
        before = projection.matched[order[at - 1]]
        if projection.matched[node] >= before:
            continue
        after = next((projection.matched[later] for later in order[at + 1:] if projection.matched[later] > before),
                     len(trace.records))
        inside = [r for r in projection.equal_calls.get(node, ()) if before < r < after]
        if inside:
            projection.matched[node] = min(inside)
            projection.realigned += 1
        elif not trace.records[projection.matched[node]].inputs:
            unmatched.append(node)
    for node in unmatched:
        del projection.matched[node]


def _pieces_of_a_reader(
    graph: "onnx.GraphProto", projection: Projection, trace: Trace, continuing: dict[int, int],
    readers: dict[str, list[int]],
) -> None:
    """Unmatch a node that changes nothing in a handed-over value and that the value's call does not go on in.

    A node reading no weight matched to the call of an input it returns unchanged (:func:`_continued`) is taken
    back where that call's value was handed over (every recorded call reading it ran in another module,
    :meth:`Trace.handed_over`), no node reading the node is matched to that call, and nodes of later calls were
    written between the call's last node and this one: its module's work on the value was done, and the node is
    a piece of a reader's call (a scale of one the exporter writes for a fused ``baddbmm`` reading a table its
    caller made). Exporters write a call's pieces together: where none came between (a crop over two axes
    written as two slices, the second keeping everything), the node goes on with the call, as it does where a
    node reading it is matched to the same call (an ``addcmul`` written as a product, a times one and a sum).
    ``readers``: the nodes reading each value.
    """
    for node_index, call in continuing.items():
        if projection.matched.get(node_index) != call or not trace.handed_over(call):
            continue
        following = [projection.matched.get(r) for output in graph.node[node_index].output
                     for r in readers.get(output, ())]
        start = max((i for i in range(node_index) if projection.matched.get(i) == call), default=node_index)
        later = any(projection.matched.get(i, -1) > call for i in range(start + 1, node_index))
        if later and following and call not in following and all(f is not None for f in following):
            del projection.matched[node_index]
            projection.equal_calls.pop(node_index, None)


def _continued(
    node: "onnx.NodeProto",
    value: "np.ndarray",
    same: list[int],
    produced: dict[str, int],
    values: dict[str, "np.ndarray"],
    anchors: dict[str, frozenset[frozenset[int]]],
) -> set[int]:
    """The calls a node continues: those matched to an input it returns unchanged (an exporter's later pieces
    of a call change nothing), unless it combines that input with floats computed from the input's own value.

    Such a node computes: its result rounds to its input only because the values are small
    (``x * (1 + erf(x / sqrt 2))`` is ``x`` in float32 where ``x`` is near 1e-8, as random weights make it),
    whereas the pieces an exporter adds to a call take shapes, indices or constants beside the value.
    """
    continued = set()
    for name in node.input:
        call = produced.get(name)
        if call is None or call not in same or not identical(values.get(name), value):
            continue
        computes = any(
            other != name and getattr(values.get(other), "dtype", None) is not None
            and values[other].dtype.kind in "fc" and any(call in group for group in anchors.get(other, ()))
            for other in node.input
        )
        if not computes:
            continued.add(call)
    return continued


def _weights_read(trace: Trace, dependent: list[bool]) -> Callable[[int], frozenset[str]]:
    """For a call, the parameters it read: directly, or through calls computing from parameters alone (a weight
    transposed or unsqueezed before use). Computed on first use, for every call in one pass."""
    known: list[frozenset[str]] = []

    def read(index: int) -> frozenset[str]:
        if not known:
            for record in trace.records:
                known.append(frozenset(record.params).union(
                    *(known[source] for source in record.inputs if not dependent[source])))
        return known[index]

    return read


def _adds_others_weight(
    node: "onnx.NodeProto", call: int, read_by: Callable[[int], frozenset[str]],
    params_of: dict[str, frozenset[str]], weighed: dict[str, frozenset[str]],
) -> bool:
    """Whether ``node`` combines a call's value with a weight the call never read: a weight none of whose candidate
    parameters (``params_of`` for initializers, ``weighed`` for what unmatched nodes made of them) the call read.

    The exporter's later pieces of a call read the call's own weights (a Linear's zero bias); a node adding another
    module's weight (a zero bias the caller adds itself) is a call of its own, even where it changes no value.
    """
    read = read_by(call)
    for name in node.input:
        weights = params_of.get(name, frozenset()) | weighed.get(name, frozenset())
        if weights and not weights & read:
            return True
    return False


def _performed_last(
    chosen: int, found: list[tuple[int, int, int, int]], trace: Trace, used: set[int],
    held_by_readers: list[frozenset[str]],
) -> int:
    """The last call of the chain a node matched to ``chosen`` performed: a call no node was matched to yet
    that reads only the previous call's output, whose value the node's equals and whose parameters the node
    may hold (a norm the exporter folded into the convolution, at statistics that change no value), and that
    has no node of its own: no node reading the value holds its parameters (``held_by_readers``: a second
    norm at its initial weights, ones and zeros like every norm's, equals the first and is the next node).

    The node keeps the call its exporter records (the convolution), but its value is the chain's last, and
    what later calls read of it (its shape, say) they read from that call.
    """
    sharing = {c[0] for c in found if c[2] > 0 and c[0] not in used}
    if not sharing:
        return chosen
    held = frozenset().union(*held_by_readers)
    last = chosen
    while True:
        following = [index for index in sharing if index > last and trace.records[index].inputs == (last,)
                     and not held & set(trace.records[index].params)]
        if not following:
            return last
        last = min(following)


def _bits(bits: int) -> Iterator[int]:
    """The positions of the bits set in ``bits``, lowest first."""
    while bits:
        lowest = bits & -bits
        yield lowest.bit_length() - 1
        bits ^= lowest


def _parameter_derived(graph: "onnx.GraphProto") -> set[str]:
    """The values computed from initializers alone (a weight cast, transposed or reshaped by nodes of its own),
    none of them from a graph input."""
    initializers = {tensor.name for tensor in graph.initializer}
    dependent = {value.name for value in graph.input if value.name not in initializers}
    derived: set[str] = set()
    for node in graph.node:
        names = [name for name in node.input if name]
        if any(name in dependent for name in names):
            dependent.update(node.output)
        elif any(name in initializers or name in derived for name in names):
            derived.update(node.output)
    return derived


def _shape_reads(
    found: list[int], frontier: set[frozenset[int]], trace: Trace, used: set[int], ancestors: list[int]
) -> list[int]:
    """For a node reading a shape: the recorded reads of the very tensor the node reads, in order.

    Reads of other tensors of the same shape (later in the data flow) do not count, except
    tensors no node was matched to that hold the same values as the one read without being
    computed from it: the exporter merged their equal computations into one node. (A tensor
    computed from the one read that holds the same values, a block whose branch adds zeros,
    is a later value, not a copy.)
    """
    upstream = {record for group in frontier if len(group) == 1 for record in group}
    records = trace.records

    undropped = trace.unchanged_source  # through dropped calls, and ``x + 0``: one input, returned exactly
    upstream |= {undropped(record) for record in upstream}  # the node may hold a call returning its input as it is

    def same(a: int, b: int) -> bool:  # cached summaries first: most pairs differ in shape or in sum
        return (
            bool(records[a].outputs) and bool(records[b].outputs)
            and may_be_same(trace.output_summary(a), trace.output_scale(a), trace.output_summary(b))
            and same_values(records[a].outputs[0], records[b].outputs[0], trace.output_scale(a), trace.output_scale(b))
        )

    def merged_copy(record: int) -> bool:
        return record not in used and any(not ancestors[record] >> u & 1 and same(record, u) for u in upstream)

    return sorted(
        index for index in found
        if records[index].shape_read
        and (undropped(records[index].inputs[0]) in upstream or merged_copy(undropped(records[index].inputs[0])))
    )


def _depth(qualname: str) -> int:
    return qualname.count(".") + 1 if qualname else 0


ELEMENT_OPS = frozenset({"Gather", "Slice", "Squeeze", "Split", "GatherElements"})
"""Ops that take elements out of a value (an extent out of a shape)."""


def _lowered_shapes(graph: "onnx.GraphProto", projection: Projection, trace: Trace) -> None:
    """A Shape node that only an exporter's lowering of one call uses is that call's.

    Exporters write some single calls as several nodes that read the input's shape to restore
    it (a group norm: reshape into groups, normalise, reshape back to the input's shape). The
    value of such a Shape node equals any recorded read of the same tensor's shape, also one made
    by another module and then never used (a stage reading ``x.shape`` before its blocks). Where
    the whole shape, no extent taken out of it, flows through unmatched nodes only into the nodes
    of one call, a call that reads the tensor whose shape it is and runs in another module than the
    read, the node is that call's: a read in another module would have reached the call as numbers
    taken out of the shape.
    """
    index = GraphIndex.of(graph)
    producer, consumers = index.producer, index.consumers
    for node_index, record_index in list(projection.matched.items()):
        node = graph.node[node_index]
        read = trace.records[record_index]
        if node.op_type != SHAPE_OP or not read.shape_read or not node.input or node.input[0] not in producer:
            continue
        source = projection.matched.get(producer[node.input[0]])
        reached: set[int] = set()
        pending, seen = list(node.output), set()
        whole = True
        while pending and whole:
            for consumer in consumers.get(pending.pop(), []):
                if consumer in seen:
                    continue
                seen.add(consumer)
                if graph.node[consumer].op_type in ELEMENT_OPS:
                    whole = False
                elif consumer in projection.matched:
                    reached.add(projection.matched[consumer])
                else:
                    pending.extend(graph.node[consumer].output)
        if not whole or len(reached) != 1:
            continue
        (call,) = reached
        record = trace.records[call]
        if source is not None and source in record.inputs and not record.shape_read and record.module != read.module:
            projection.matched[node_index] = call


def _last_reads_before_use(
    graph: "onnx.GraphProto",
    projection: Projection,
    shape_reads: dict[int, list[int]],
    trace: Trace,
    values: dict[str, "np.ndarray"] | None = None,
) -> None:
    """Match each shape-reading node to the read of its tensor that the first call using it saw.

    The exporter keeps one node for the used reads of one tensor's shape (the first of them)
    and drops reads nothing used; the calls that use the shape are the matched nodes it
    flows into through unmatched arithmetic. Exporters write nodes in the order they ran: where
    reads were recorded between the calls of the matched nodes written around the node, it holds
    one of them (a module reading its input's sizes first, its child reading them again later: the
    exporter merged the child's read into the first). Of those reads, else of the reads before the
    first call using it, the first made in the innermost module around that call is taken (it was
    read there and used there), otherwise the last one (read by an earlier module and handed on). Where
    every use of the node takes one extent of the shape, the reads of that extent
    (``x.size(-1)``) are preferred, and a read of one extent written exactly as an earlier read
    of the same tensor (``x.size(-1)`` twice) is that earlier read: the exporter merges
    identical calls into the first (reads of the whole shape it writes anew where used).
    """
    consumers: dict[str, list[int]] = defaultdict(list)
    for i, node in enumerate(graph.node):
        for name in node.input:
            consumers[name].append(i)
    order = sorted(i for i, record in projection.matched.items() if not trace.records[record].shape_read)
    for node_index, reads in shape_reads.items():
        if len(reads) < 2:
            continue
        first_use = None
        pending, seen = list(graph.node[node_index].output), set()
        while pending:
            for consumer in consumers.get(pending.pop(), []):
                if consumer in seen:
                    continue
                seen.add(consumer)
                if consumer in projection.matched:
                    use = projection.matched[consumer]
                    first_use = use if first_use is None else min(first_use, use)
                else:
                    pending.extend(graph.node[consumer].output)
        dim = _extent_taken(graph, node_index, consumers, values or {})
        if dim is not None:
            extent = [read for read in reads if _normal_dim(trace.records[read].read_dim, dim[1]) == dim[0]]
            reads = extent or reads
        before = [read for read in reads if first_use is None or read < first_use]
        if not before:
            continue
        at = bisect_left(order, node_index)
        low = projection.matched[order[at - 1]] if at else -1
        high = projection.matched[order[at]] if at < len(order) else len(trace.records)
        before = [read for read in before if low < read < high] or before
        user = trace.records[first_use].module if first_use is not None else ""
        around = [read for read in before if is_ancestor(trace.records[read].module, user)]
        nearest = min(around, key=lambda read: (-_depth(trace.records[read].module), read), default=None)
        chosen = before[-1] if nearest is None else nearest
        written = trace.records[chosen].read_dim
        projection.matched[node_index] = chosen if written is None else next(
            read for read in reads if trace.records[read].read_dim == written
            and trace.records[read].inputs == trace.records[chosen].inputs
        )


def _normal_dim(dim: int | None, rank: int) -> int | None:
    return None if dim is None or rank == 0 else dim % rank


def _extent_taken(
    graph: "onnx.GraphProto", node_index: int, consumers: dict[str, list[int]], values: dict[str, "np.ndarray"]
) -> tuple[int, int] | None:
    """(dimension, rank) where every node using a Shape node's output takes that one extent (a Gather of one
    constant index, a Slice of one element), else ``None``."""
    output = graph.node[node_index].output[0]
    shape = values.get(output)
    rank = int(getattr(shape, "size", 0))
    if not rank:
        return None
    taken: set[int] = set()
    for consumer in consumers.get(output, []):
        node = graph.node[consumer]
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[0] == output:
            index = values.get(node.input[1])
            if index is None or getattr(index, "size", 0) != 1:
                return None
            taken.add(int(index.reshape(-1)[0]) % rank)
        elif node.op_type == "Slice" and len(node.input) > 2 and node.input[0] == output:
            starts, ends = values.get(node.input[1]), values.get(node.input[2])
            if starts is None or ends is None or getattr(starts, "size", 0) != 1:
                return None
            start = int(starts.reshape(-1)[0]) % rank
            end = int(ends.reshape(-1)[0])
            end = min(end % rank if end < 0 else end, rank)
            if end != start + 1:
                return None
            taken.add(start)
        else:
            return None
    return (taken.pop(), rank) if len(taken) == 1 else None


def _initializer_shapes(onnx_model: "onnx.ModelProto") -> dict[str, tuple[int, ...]]:
    """The shape of each initializer and of each Identity of one."""
    shapes = {t.name: tuple(t.dims) for t in onnx_model.graph.initializer}
    for node in onnx_model.graph.node:
        if node.op_type == "Identity" and node.input and node.input[0] in shapes:
            shapes[node.output[0]] = shapes[node.input[0]]
    return shapes


def _direct_readers(
    found: list[int],
    frontier: set[frozenset[int]],
    trace: Trace,
    used: set[int],
    held: list[frozenset[str]],
    folded_shapes: set[tuple[int, ...]],
    telling: list[frozenset[str]] | None = None,
    holds: Held = NOTHING_KNOWN,
) -> list[tuple[int, int, int, int]]:
    """For a value that says little by itself (all zeros, all one number): the call that holds it
    and reads, directly or through calls no node matched, a call the node's inputs came from.

    Random weights can make activations fade to exact zeros; then only the data flow, the
    parameters and the order of the calls tell where a node came from. Preferred, in turn:
    the calls reading a parameter the node holds; for a node holding tensors no parameter
    equals (``folded_shapes``: a convolution the next normalisation was folded into) the
    furthest of a chain of calls with parameters whose first call read a parameter of such a
    shape and the others only smaller ones (per-channel scales), otherwise the nearest call; the input's own call only when the node reads
    its parameters too (the bias added after a matrix product); where those weights say nothing of which
    parameter they are (``telling``, where known: a zero bias equals a zero weight), a call reading the
    input's call that shares as many of them comes first (the next call adds the zero bias as well).
    Outside a folded chain, a call the node would have performed on the way reads no parameter that neither
    the node nor the unmatched nodes before it hold (``holds``): the node computed its value without it (a
    sigmoid of faded values, 0.5 in every element, is not a later gate's, reached through two convolutions).
    """
    upstream = {record for group in frontier if len(group) == 1 for record in group}
    records = trace.records

    rank = max((len(shape) for shape in folded_shapes), default=0)

    def reads_folded_shape(index: int) -> bool:
        return any(
            name in trace.param_values and trace.param_values[name].shape in folded_shapes
            for name in records[index].params
        )

    def reads_as_large(index: int) -> bool:
        return any(
            name in trace.param_values and trace.param_values[name].ndim >= rank for name in records[index].params
        )

    readers: list[tuple[tuple, int]] = []
    for index in found:
        shared = sum(1 for names in held if names & set(records[index].params))
        if index in upstream:
            if shared and not folded_shapes:
                # through weights that say nothing (a zero bias), a reader sharing as many weights comes first
                told = telling is None or any(names & set(records[index].params) for names in telling)
                readers.append(((-shared, -1 if told else len(records), index), index))
            continue
        if index in used:
            continue
        chain = [index]
        while not upstream & set(records[chain[-1]].inputs):
            if len(records[chain[-1]].inputs) != 1 or records[chain[-1]].inputs[0] in used:
                break
            chain.append(records[chain[-1]].inputs[0])
        else:
            steps = len(chain) - 1
            if folded_shapes:
                first, rest = chain[-1], chain[:-1]
                if not all(records[c].params for c in chain):
                    continue
                if not reads_folded_shape(first) or any(reads_as_large(c) for c in rest):
                    continue
            if not folded_shapes and not holds.computed and any(
                records[c].params and not holds.params & set(records[c].params) for c in chain[1:]
            ):
                continue  # on the way, a call reading weights nothing the node computes from holds
            readers.append(((-shared, -steps if folded_shapes else steps, index), index))
    if not readers:
        return []
    chosen = min(readers)[1]
    return [(chosen, 1, 0, 0)]


def _first_folded_call(
    chosen: int, frontier: set[frozenset[int]], used: set[int], trace: Trace
) -> int | None:
    """The first call reading parameters among those the exporter folded into one node with ``chosen``.

    A node holding a tensor that equals no parameter (a convolution whose weights absorbed
    the normalisation after it) and whose output equals a call that ran several calls
    after the node's inputs stands for that whole chain; it is that chain's first call
    with parameters that the node performs. Only single-input calls no other node
    matched are walked.
    """
    upstream = {record for group in frontier for record in group}
    first = None
    current = chosen
    while len(trace.records[current].inputs) == 1:
        source = trace.records[current].inputs[0]
        if source in upstream or source in used:
            break
        if trace.records[source].params:
            first = source
        current = source
    return first


def _positions(record: "OpRecord", value: "np.ndarray | None", reordered: bool) -> set[int]:
    """Which outputs of a call of several outputs equal ``value`` (none for a call of one output); ``reordered``:
    hold its elements in another order."""
    if len(record.outputs) < 2 or value is None:
        return set()
    import numpy as np

    def ordered(array: "np.ndarray") -> "np.ndarray":
        return np.sort(array, axis=None) if reordered else array

    return {position for position, output in enumerate(record.outputs)
            if getattr(output, "shape", None) == value.shape and same_values(ordered(output), ordered(value))}


def _plausible(
    found: list[int],
    frontier: set[frozenset[int]],
    latest: int,
    held: list[frozenset[str]],
    trace: Trace,
    ancestors: list[int],
    dependent: list[bool],
    folds: bool = False,
    reads_shape: bool = False,
    skipped_params: int = 0,
    holds: Held = NOTHING_KNOWN,
    holds_around: Held = NOTHING_KNOWN,
    again: set[int] | frozenset[int] = frozenset(),
    telling: list[frozenset[str]] | None = None,
) -> list[tuple[int, int, int, int]]:
    """The calls that could have produced a node's output: (record, inputs covered, parameters shared, distance).

    Causality first: the call must have run after every call the node's inputs came
    from, or be one of them and one the node continues (``again``: an operation the exporter
    split into several nodes, the last ones changing nothing; it reads the same parameters as
    the node, or was matched to the node whose output the node returns exactly, or only to a value
    holding its elements in another order). If no candidate
    is causal (an upstream match was wrong), a call that descends from at least one of
    those calls is accepted. A call that read recorded tensors, none of them upstream of
    the node, never is. Among equals the nearest call after the covered inputs wins.
    A node that depends on no input (the exporter folded it into constants) matches the
    first call that depends on no input either. Calls exporters write no node for
    (dropout in eval, ``contiguous``) count only when nothing else holds the value. A call the
    node does not continue (``again``), reading parameters of which the node holds none, nor any
    tensor that could be their fold or is computed from initializers (``folds``), counts as sharing
    less than none: the exporter folded it into an earlier node; and where the unmatched nodes since the frontier (``holds``:
    the parameters they read, and whether one holds such a tensor) hold none of them either, it is
    not the node's at all: the node's value equals it only because the call changed little (a norm
    at its initial weights), unless the node depends on no input (a constant). So does a call
    the node could only stand for by having also performed, between its inputs' calls and it, a call
    that depends on the inputs, reads parameters and no node was matched to (``skipped_params``, a bit
    set): the node would hold those parameters; where neither it, nor the unmatched nodes before it,
    nor the matched nodes those start from hold them (``holds_around``), it is not the node's at all.
    Reads of a tensor's shape match only nodes reading a shape (``reads_shape``), and those nothing else.
    """
    eligible = [index for index in found if trace.records[index].shape_read == reads_shape]
    kept = [index for index in eligible if not trace.records[index].dropped]
    causal, descending = [], []
    for index in kept or eligible:
        record = trace.records[index]
        shared = sum(1 for names in held if names & set(record.params))
        if record.params and not shared and not folds and index not in again:
            if frontier and not holds.computed and not holds.params & set(record.params):
                continue  # neither the node nor the unmatched nodes before it hold its parameters
            shared = -1  # its parameters are nowhere in the node: most likely folded into another node
        if not frontier:
            if not dependent[index]:
                causal.append((index, 0, shared, index))
            continue
        # the node may also finish a call it continues (``again``): one reading parameters the node shares
        # (with ``telling``, weights whose values say which parameter they are: a norm's ones are every
        # norm's), one matched to the node whose output it reads and returns unchanged (an exporter's
        # later pieces of a call change nothing), or one matched so far only to a reordered value
        continued = index in again or (
            shared > 0 if telling is None else any(names & set(record.params) for names in telling)
        )
        covered = [
            max(f for f in group if f == index or ancestors[index] >> f & 1)
            for group in frontier
            if any((f == index and continued) or ancestors[index] >> f & 1 for f in group)
        ]
        if covered and shared == 0 and not folds and skipped_params:
            known = 0
            for call in covered:
                known |= ancestors[call] | 1 << call
            skipped = ancestors[index] & ~known & skipped_params
            if skipped:
                if not holds_around.computed and any(
                    not holds_around.params & set(trace.records[call].params) for call in _bits(skipped)
                ):
                    continue  # a call it skipped read parameters nothing before the node holds
                shared = -1
        distance = index - max(covered) if covered else index - latest
        entry = (index, len(covered), shared, distance)
        if covered and (index > latest or (frozenset([index]) in frontier and continued)):
            causal.append(entry)
        elif covered:
            descending.append(entry)
        elif not record.inputs and index > latest:
            causal.append(entry)  # a factory or a slice of a parameter: only time can tell
    return causal or descending


def _align_backwards(
    graph: "onnx.GraphProto",
    values: dict[str, "np.ndarray"],
    trace: Trace,
    projection: Projection,
    used: set[int],
    node_holds: dict[int, Held] | None = None,
) -> None:
    """Check and complete the matches of producers against the recorded inputs of their consumers' calls.

    The edge from a node to a matched consumer stands for an edge of the recorded data
    flow: the producer must be the call that the consumer's call read, holding the same
    value. Walking upwards from the outputs, this matches producers whose values said
    too little by themselves (all zeros, a broadcast index), moves a producer matched to
    an equal value computed independently elsewhere (the same mask built from the same
    input in two places) to the call actually read, and moves a node matched to one of a
    chain of calls that returned their input unchanged (dropout in eval, ``.to`` the
    same dtype) to the one its consumer read. A node matched here from its last consumer
    moves to the first of the equal computations its earlier consumers read
    (:func:`_first_of_equal_computations`).
    """
    records = trace.records
    ancestors = trace.ancestors()
    producer = {value: i for i, node in enumerate(graph.node) for value in node.output if value}
    consumers: dict[int, list[int]] = defaultdict(list)
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name in producer:
                consumers[producer[name]].append(i)

    def undropped(record: int) -> int:
        """The call a dropped call (dropout in eval, ``contiguous``) passed its value on from."""
        while records[record].dropped and len(records[record].inputs) == 1:
            record = records[record].inputs[0]
        return record

    def holds(record: int, value: "np.ndarray", source: int) -> bool:
        """The call holds the value, and the producer could have performed it: a call reading parameters
        needs a producer (or the unmatched nodes before it) holding them, or a tensor computed from weights."""
        if records[record].params and node_holds is not None and source in node_holds:
            held = node_holds[source]
            if not held.computed and not held.params & set(records[record].params):
                return False
        return any(same_values(value, out) for out in records[record].outputs)

    walked_to: set[int] = set()  # nodes matched here, from their last consumer
    pending = [-i for i in projection.matched]  # a max-heap of node indices: consumers before producers
    heapq.heapify(pending)
    while pending:
        node_index = -heapq.heappop(pending)
        record_index = projection.matched[node_index]
        for name in graph.node[node_index].input:
            source = producer.get(name)
            value = values.get(name)
            if source is None or value is None:
                continue
            current = projection.matched.get(source)
            if current == record_index:
                continue  # an earlier piece of the same call (an exporter's split of one call): no edge to check
            read = list(dict.fromkeys(undropped(s) for s in records[record_index].inputs))
            if current is None:
                options = [s for s in read if s not in used and holds(s, value, source)]
            else:
                options = []
                if records[current].alias:
                    options = [
                        s for s in read
                        if s != current and records[s].alias and ancestors[s] >> current & 1 and holds(s, value, source)
                    ]
                readers = [projection.matched[c] for c in consumers[source] if c in projection.matched]
                if not options and not any(current in records[r].inputs for r in readers):
                    options = [
                        s for s in read
                        if s != current and s not in used and not ancestors[s] >> current & 1 and holds(s, value, source)
                    ]
                if not options and source in walked_to:
                    earlier = [s for s in read if s < current and s not in used and holds(s, value, source)]
                    options = _first_of_equal_computations(earlier, current, records)
            if len(options) == 1:
                if current is None:
                    walked_to.add(source)
                projection.matched[source] = options[0]
                projection.realigned += 1
                used.add(options[0])
                heapq.heappush(pending, -source)


def _first_of_equal_computations(earlier: list[int], current: int, records: list) -> list[int]:
    """The call a node walked back to from its last reader stands for, seen from an earlier reader.

    ``earlier``: the calls, before ``current``, that an earlier reader's call read and that hold the node's value.
    One of the same operation (each layer, or each run of a block, computing the same value from equal inputs)
    shows the node, read by both, is their merged computation. Exporters merge equal computations into the
    first of them, where the record places it, so the node goes to the earliest; readers are walked from the
    last to the first.
    """
    same = [s for s in earlier if records[s].op == records[current].op]
    return [min(same)] if same else []
