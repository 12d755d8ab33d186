"""Tagging the nodes no recorded call was matched to, from the nodes they serve.

What remains after the projection are pieces of a call the exporter split into several
nodes, constants, shape arithmetic and the Identity nodes the exporter puts in front of
merged initializers. Each gets the module of the nodes consuming it. A node serving one
module belongs to it, unless it computes a tensor written before every node of that module's
call: then its caller made it and handed it over. Scalars and shapes serving several belong to the first of them
to run: the exporter merges equal small computations (shape reads, scale factors) into
their first occurrence. A bigger value serving several was computed before being
handed to them, so it belongs to their deepest common module that ran, unless the exporter wrote
it amid one call that was running throughout (nodes are written in the order they ran) holding its
first consumer: then it ran in that call (an equal computation of each layer merged into the first). Either way the
other modules are listed as further contexts. Where a later module repeats a small
computation of an earlier sibling from merged shape reads, the wrappers built for the
repeat follow the first occurrence, as the exporter builds them there. The Identity of an initializer belongs
to the module owning the parameter its consumer read. In a dynamo file, size arithmetic written apart from its
first reader (a matched node between them) ran in the call running where it is written: torch.export writes a
size expression where it is first used, and every later use reads it there, even where that first use left no
node of its own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

from modelexport_core.sdk import (
    GraphIndex,
    common_ancestor,
    fill_missing_modules,
    in_sibling_elements,
    is_ancestor,
    same_values,
)

from .project import SHAPE_OP, SMALL_SIZE, Projection
from .trace import Trace

if TYPE_CHECKING:
    import onnx



def _small(value: "np.ndarray | None") -> bool:
    return value is not None and getattr(value, "size", SMALL_SIZE + 1) <= SMALL_SIZE


def _size_arithmetic(node: "onnx.NodeProto", values: dict[str, "np.ndarray"]) -> bool:
    """A node computing sizes: it reads something and every value it writes is a small integer."""
    outputs = [values.get(name) for name in node.output if name]
    return bool(node.input) and bool(outputs) and all(
        _small(value) and getattr(value, "dtype", None) is not None and value.dtype.kind in "iu" for value in outputs
    )


def _written_apart(node_index: int, readers: list[int], matched: list[int]) -> bool:
    """Whether a matched node is written between the node and the first of its readers (``matched``: in order)."""
    at = bisect_left(matched, node_index + 1)
    return at < len(matched) and matched[at] < min(readers)


def _first_node_recorded_from(position: int, after: int, projection: Projection, nodes: int) -> int:
    """The first node after node ``after`` (in the order the exporter wrote them, the order they ran) matched to
    a call recorded at ``position`` or later; ``nodes`` where there is none."""
    return min((node for node, record in projection.matched.items() if node > after and record >= position),
               default=nodes)


def _shape_like(value: "np.ndarray | None") -> bool:
    """A scalar or a shape: a small integer value of at most one axis."""
    dtype = getattr(value, "dtype", None)
    return _small(value) and getattr(value, "ndim", 2) <= 1 and dtype is not None and dtype.kind in "iu"


def executed_ancestor(qualname: str, executed: set[str]) -> str:
    """The nearest module at or above ``qualname`` whose forward ran (containers never run)."""
    while qualname and qualname not in executed:
        qualname = qualname.rpartition(".")[0]
    return qualname


def _absorbed_calls(projection: Projection, trace: Trace) -> dict[int, int]:
    """The last call of the chain each matched node performs, where it performs more than its match.

    A call with parameters that reads only the matched call's output, whose output equals the
    node's too and which no node matched, was folded into the node (a normalisation at its
    initial statistics changes nothing, so the node's value equals both); so was the next such
    call after it.
    """
    readers: dict[int, list[int]] = {}
    for record in trace.records:
        for source in set(record.inputs):
            readers.setdefault(source, []).append(record.index)
    taken = set(projection.matched.values())
    absorbed: dict[int, int] = {}
    for node_index, record_index in projection.matched.items():
        equal = set(projection.equal_calls.get(node_index, ()))
        current = record_index
        while True:
            after = [r for r in readers.get(current, ()) if r in equal and r not in taken
                     and trace.records[r].params and trace.records[r].inputs == (current,)]
            if len(after) != 1 or len(readers.get(current, ())) != 1:
                break
            current = after[0]
        if current != record_index:
            absorbed[node_index] = current
    return absorbed


SIZE_ELEMENT_OPS = frozenset({"Squeeze", "Gather", "Slice"})
"""Ops that take one extent out of a shape (how a dynamo file writes the size of one axis)."""


def _input_sizes(graph: "onnx.GraphProto") -> list[int]:
    """The nodes of the graph's opening run that read a graph input's shape or take one extent out of it.

    The run ends at the first node doing anything else; Constant nodes (an index, an axis) pass.
    """
    initializers = {tensor.name for tensor in graph.initializer}
    inputs = {value.name for value in graph.input} - initializers
    sizes: set[str] = set()
    constants: set[str] = set(initializers)
    found: list[int] = []
    for node_index, node in enumerate(graph.node):
        first, rest = (node.input[0], list(node.input[1:])) if node.input else ("", [])
        if node.op_type == "Constant":
            constants.update(node.output)
            continue
        if node.op_type == SHAPE_OP and first in inputs:
            pass
        elif node.op_type in SIZE_ELEMENT_OPS and first in sizes and all(not n or n in constants for n in rest):
            pass
        else:
            break
        found.append(node_index)
        sizes.update(node.output)
    return found


def tag_nodes(
    onnx_model: "onnx.ModelProto",
    projection: Projection,
    trace: Trace,
    values: dict[str, "np.ndarray"],
    exporter: str = "torchscript",
) -> tuple[dict[str, str], dict[str, list[str]], dict[str, str]]:
    """Module of every node, further modules served by shared nodes, and how each node was tagged.

    Two things a node's values cannot say are the exporter's conventions (``exporter``):

    - A node that performs several calls (a convolution with the normalisation after it folded
      in: ``projection.folded``) is given the call its exporter records it under. The TorchScript
      exporter folds the later calls into the first one and keeps its scope; the dynamo
      exporter's optimizer replaces the chain by a node that takes the record of the node whose
      output it replaces, the last call (``_absorbed_calls``).
    - The dynamo exporter reads the size of every dynamic axis of a graph input once, at the top
      of the graph and outside every module, and every use of that size reads it there
      (``_input_sizes``): those nodes are the root's, whichever module read the size first.
    - The dynamo exporter writes a size expression where it is first used (``_size_arithmetic``); where a matched
      node lies between it and its first reader (``_written_apart``), it ran in the call running there, provided
      that call and the reader's module lie on one line of the module tree.
    """
    graph = onnx_model.graph
    index = GraphIndex.of(graph)
    keys = index.keys
    executed = set(trace.execution_trace) | {""}
    order = {name: i for i, name in enumerate(dict.fromkeys(trace.execution_trace))}
    modules: dict[int, str] = {}
    time: dict[int, float] = {}
    how: dict[str, str] = {}
    also: dict[str, list[str]] = {}

    folds_into_first = exporter != "dynamo"
    absorbed = {} if folds_into_first else _absorbed_calls(projection, trace)
    for node_index, record_index in projection.matched.items():
        performed = projection.folded.get(node_index, record_index) if folds_into_first else \
            absorbed.get(node_index, record_index)
        modules[node_index] = executed_ancestor(trace.records[performed].module, executed)
        time[node_index] = record_index
        how[keys[node_index]] = "matched"
    if exporter == "dynamo":
        for node_index in _input_sizes(graph):
            modules[node_index] = ""
            time[node_index] = -1
            how[keys[node_index]] = "input size"

    element_reads: dict[int, tuple[str, int, int]] = {}
    """Nodes taken as elements of a value read into Python: the module that read it, when, and the value's node."""
    for node_index in range(len(keys)):
        if node_index in modules or not all(_small(values.get(v)) for v in graph.node[node_index].output if v):
            continue
        producers = index.node_producers(graph, node_index)
        reads = [p for p in producers if p in projection.matched and trace.records[projection.matched[p]].shape_read]
        if graph.node[node_index].op_type == "Squeeze":
            # ``x.size(d)`` is written as a Slice of one extent, then a Squeeze of it: one read
            reads += [p for p in producers if graph.node[p].op_type == "Slice" and how.get(keys[p]) == "shape element"]
        if reads and all(p in reads or not index.node_producers(graph, p) for p in producers):
            # an element of a read shape (``height = x.shape[2]``) is taken where the shape was read
            modules[node_index] = modules[reads[0]]
            time[node_index] = time[reads[0]]
            how[keys[node_index]] = "shape element"
            continue
        read_into_python = [p for p in producers if p in element_reads
                            or (p in projection.matched and projection.matched[p] in trace.value_reads)]
        if read_into_python and all(p in read_into_python or not index.node_producers(graph, p) for p in producers):
            # an element of a value read into Python (``sizes = counts.tolist()``), and what is computed from such
            # elements alone, is taken where the value was read while it is written before anything recorded
            # after the read (the next call's use of the elements is its own)
            source = read_into_python[0]
            module, position, read = element_reads.get(source) or (*trace.value_reads[projection.matched[source]], source)
            if node_index < _first_node_recorded_from(position, read, projection, len(keys)):
                modules[node_index] = executed_ancestor(module, executed)
                time[node_index] = time.get(source, float("inf"))
                how[keys[node_index]] = "value element"
                element_reads[node_index] = (module, position, read)

    consumers = [index.node_consumers(graph, i) for i in range(len(keys))]
    param_reads: dict[str, set[str]] = defaultdict(set)  # each parameter: the modules whose calls read it
    for record in trace.records:
        for name in record.params:
            param_reads[name].add(record.module)
    matched = sorted(projection.matched)  # matched nodes in the order they were written
    running_call = _running_calls(matched, projection, trace, modules)
    ran_before = _made_before_the_call(graph, index, values, matched, projection, trace, running_call, executed)
    for node_index in reversed(range(len(keys))):
        node = graph.node[node_index]
        if node_index in modules:
            continue
        served = [c for c in consumers[node_index] if c in modules]
        if not served:
            continue
        owner = _initializer_owner(node, served, projection, trace) or _read_only_in(node, projection, trace, param_reads)
        served_modules = list(dict.fromkeys(modules[c] for c in served))
        first = min(served, key=lambda c: (time.get(c, float("inf")), order.get(modules[c], 0)))
        time[node_index] = time.get(first, float("inf"))
        if owner is not None:
            modules[node_index] = owner
            how[keys[node_index]] = "parameter owner"
        elif not folds_into_first and _size_arithmetic(node, values) and _written_apart(node_index, served, matched) \
                and (running := running_call(node_index)) \
                and (is_ancestor(running, modules[min(served)]) or is_ancestor(modules[min(served)], running)):
            modules[node_index] = running
            how[keys[node_index]] = "running call"
        elif len(served_modules) == 1 and (caller := ran_before(node_index, served_modules[0])) is not None:
            modules[node_index] = caller
            how[keys[node_index]] = "before the call"
        elif len(served_modules) == 1:
            modules[node_index] = served_modules[0]
            how[keys[node_index]] = "consumer"
        elif all(_small(values.get(v)) for v in node.output if v):
            modules[node_index] = modules[first]
            how[keys[node_index]] = "first consumer"
        elif (running := running_call(node_index)) and is_ancestor(running, modules[first]) \
                and not is_ancestor(running, common_ancestor(served_modules)):
            modules[node_index] = running
            how[keys[node_index]] = "running call"
        elif (maker := _handed_in(node, values, served_modules, trace, executed)) is not None:
            modules[node_index] = maker
            how[keys[node_index]] = "handed in"
        else:
            modules[node_index] = executed_ancestor(common_ancestor(served_modules), executed)
            how[keys[node_index]] = "common consumer"
        others = _outermost(m for m in served_modules if not is_ancestor(modules[node_index], m))
        if others:
            also[keys[node_index]] = others

    pooled = _made_for_earlier_calls(graph, matched, modules, consumers, [how.get(key) for key in keys]) \
        if folds_into_first else {}
    for node_index, module in pooled.items():  # after the readers' own tags: a constant decides no reader's
        modules[node_index] = module
        how[keys[node_index]] = "written before"
        also.pop(keys[node_index], None)
    _follow_first_occurrences(graph, index, projection, values, modules, order, how, also)
    partial = {keys[i]: m for i, m in modules.items()}
    result = fill_missing_modules(graph, partial)
    for key, module in result.items():
        if key not in how:
            how[key] = "neighbours"
            result[key] = executed_ancestor(module, executed)
    for node_index, module in modules.items():
        if node_index not in projection.matched:
            continue
        outside = _outermost(
            modules[c] for c in consumers[node_index] if c in modules and not is_ancestor(module, modules[c])
        )
        if len(outside) > 1:
            also[keys[node_index]] = outside
    return result, also, how


KNOWN_KINDS = ("matched", "parameter owner", "shape element")
"""Ways of tagging a node (``tag_nodes``) that say where it ran, not what it serves."""


def known_places(graph: "onnx.GraphProto", projection: Projection, trace: Trace, how: dict[str, str]) -> list[str]:
    """The nodes whose module the order checks may take as known (``hold_causality``'s anchors).

    A node matched to a value, holding a parameter or an element of a read shape says where it ran; one matched
    to a call that read no recorded tensor (a factory: ``arange``, ``zeros``) was matched by time alone, and an
    equal value an exporter computes elsewhere (indices of a scatter) matches it as well as the call does.
    """
    keys = GraphIndex.of(graph).keys
    timed = {keys[i] for i, record in projection.matched.items() if not trace.records[record].inputs}
    return [key for key, kind in how.items() if kind in KNOWN_KINDS and key not in timed]


def structural_ids(
    graph: "onnx.GraphProto", values: dict[str, "np.ndarray"], constants: dict[str, "np.ndarray"]
) -> list[int | None]:
    """For each node with small outputs, an id shared by the nodes computing the same thing.

    Same thing means the same operation, attributes and inputs, where constants count by
    value (``constants``: the small initializers' values) and computed inputs by their own
    ids. Nodes with bigger outputs get ``None``.
    """
    keys: dict[str, tuple] = {}
    for position, value in enumerate(graph.input):
        keys[value.name] = ("input", position)
    for initializer in graph.initializer:
        array = constants.get(initializer.name)
        small = array is not None
        keys[initializer.name] = ("constant", array.dtype.str, array.shape, array.tobytes()) if small else ("large",)
    interned: dict[tuple, int] = {}
    result: list[int | None] = []
    for node_index, node in enumerate(graph.node):
        inputs = tuple(keys.get(name, ("absent", name)) if name else ("",) for name in node.input)
        if not all(_small(values.get(v)) for v in node.output if v) or any(k == ("large",) for k in inputs):
            result.append(None)
            for position, output in enumerate(node.output):
                keys[output] = ("node", -1 - node_index, position)
            continue
        attributes = tuple(sorted((a.name, a.SerializeToString()) for a in node.attribute))
        identity = interned.setdefault((node.domain, node.op_type, attributes, inputs), len(interned))
        result.append(identity)
        for position, output in enumerate(node.output):
            keys[output] = ("node", identity, position)
    return result


def _follow_first_occurrences(
    graph: "onnx.GraphProto",
    index: GraphIndex,
    projection: Projection,
    values: dict[str, "np.ndarray"],
    modules: dict[int, str],
    order: dict[str, int],
    how: dict[str, str],
    also: dict[str, list[str]],
) -> None:
    """Give the wrappers of a repeated small computation to the module where it first ran.

    When a later module repeats a shape computation made in an earlier sibling from the
    same shape reads (several blocks reading the shape of one shared tensor), the exporter
    merges the reads into their first occurrence and builds the repeat's wrappers (the
    scalars unsqueezed and constants listed for it) there too; only the repeated node
    itself stays with the module using it. This applies only where the repeat reads
    nothing its own module computed, and moves only unmatched small nodes serving nothing
    but the repeat.
    """
    keys = index.keys
    structure = structural_ids(graph, values, projection.small_initializers)
    first: dict[int, int] = {}
    repeats: list[int] = []
    for node_index, identity in enumerate(structure):
        if identity is None:
            continue
        if identity in first:
            repeats.append(node_index)
        else:
            first[identity] = node_index
    matched = projection.matched
    graph_inputs = {value.name for value in graph.input}
    dependent = [False] * len(graph.node)
    for node_index, node in enumerate(graph.node):
        dependent[node_index] = any(name in graph_inputs for name in node.input) or any(
            dependent[p] for p in index.node_producers(graph, node_index)
        )
    for node_index in reversed(repeats):
        origin = first[structure[node_index]]
        if node_index in matched or node_index not in modules or origin not in modules:
            continue
        own, target = modules[node_index], modules[origin]
        if is_ancestor(own, target) or is_ancestor(target, own):
            continue
        if order.get(target, len(order)) >= order.get(own, len(order)):
            continue
        group = {node_index}
        moved: list[int] = []
        pending = set(index.node_producers(graph, node_index))
        while pending:
            producer = max(pending)
            pending.discard(producer)
            # only wrappers of merged reads move: their inputs are constants or values computed outside
            # the module; a computation on the wrappers (the list they are gathered into) stays
            wraps_reads = all(
                not index.node_producers(graph, q) or (q in modules and not is_ancestor(own, modules[q]))
                for q in index.node_producers(graph, producer)
            )
            if (
                producer in matched
                or not wraps_reads
                or how.get(keys[producer]) != "consumer"
                or not all(_small(values.get(v)) for v in graph.node[producer].output if v)
                or not set(index.node_consumers(graph, producer)) <= group
            ):
                continue
            group.add(producer)
            moved.append(producer)
            pending.update(index.node_producers(graph, producer))
        outside = {p for member in group for p in index.node_producers(graph, member)} - group
        if not any(index.node_producers(graph, m) for m in moved):
            continue  # only constants to move: no wrapper of a merged read
        if not outside or not all(dependent[p] for p in outside):
            continue  # a merged read depends on the inputs; constant arithmetic is not merged across modules
        if any(p not in modules or is_ancestor(own, modules[p]) for p in outside):
            continue  # the repeat reads something its own module computed
        if not all(_shape_like(values.get(v)) for p in outside for v in graph.node[p].output if v):
            continue  # only merged scalars and shapes are read: a read of a tensor (a mask of two rows) is not merged
        for producer in moved:
            modules[producer] = target
            how[keys[producer]] = "first occurrence"
            also[keys[producer]] = [own]


READER_KINDS = ("consumer", "before the call", "first consumer", "common consumer", "running call")
"""How ``tag_nodes`` tags a node from the nodes reading it."""


def _made_for_earlier_calls(
    graph: "onnx.GraphProto", matched: list[int], modules: dict[int, str], consumers: list[list[int]],
    how: list[str | None],
) -> dict[int, str]:
    """Nodes reading nothing (constants), tagged by their readers, written before a matched node, every reader
    after that node: the node's module, where it encloses every reader or none (below).

    The TorchScript exporter writes a constant where the operation needing it was converted, just before it,
    and pools equal constants into the first one made. Where a matched node reading something else lies
    between the constant and every reader, the constant was made for an operation there (one later removed or
    folded), and the readers' own equal constants were merged into it: it is written, and recorded, where it
    was first made. That holds where the node lies in a module enclosing every reader (the readers ran inside its
    call), and where it lies in a module enclosing none of them: a call that ran before theirs (an earlier
    sibling), or within their caller. Not where the node and a reader lie in two elements of one list of
    layers: the next layer's own constant may have been pooled into the one the first layer made, and a tag in
    a sibling layer is the defect tags exist to end.
    ``matched``: the matched nodes' indices, in order; ``how``: how each node was tagged so far.
    """
    found: dict[int, str] = {}
    for node_index, node in enumerate(graph.node):
        if node.input or how[node_index] not in READER_KINDS or not consumers[node_index]:
            continue
        at = bisect_left(matched, node_index + 1)
        if at >= len(matched):
            continue
        after = matched[at]
        readers = consumers[node_index]
        inside = [modules.get(reader) for reader in readers]
        if after >= min(readers) or any(m is None for m in inside):
            continue
        there = modules[after]
        enclosed = [is_ancestor(there, m) for m in inside]  # (m is not None: checked above)
        if all(enclosed) and any(m != there for m in inside) \
                or not any(enclosed) and not any(in_sibling_elements(there, m) for m in inside):
            found[node_index] = there
    return found


def _made_before_the_call(
    graph: "onnx.GraphProto", index: GraphIndex, values: dict[str, "np.ndarray"], matched: list[int], projection: Projection,
    trace: Trace, running_call: "Callable[[int], str]", executed: set[str],
) -> "Callable[[int, str], str | None]":
    """For a node serving one module, the module it ran in where it ran before that module's call began, else None.

    Exporters write nodes in the order they ran, and every tensor operation is a recorded call. A node computing
    a tensor from others (not a constant, which exporters write where they please, nor size arithmetic, which
    Python does unrecorded with the sizes a call is handed) written before every node matched to a call recorded
    inside a module called once ran before that module's call began: the caller made the value and handed it
    over (a mask, positions). It ran in the call running at the time: the one running throughout between the
    matched nodes around it where that is known and outside the module, else the deepest enclosing module whose
    call had begun by the last matched node before it. The unmatched nodes feeding the nodes matched to the same
    call as that first node are not such nodes: they are pieces of it, split by the exporter. A node computing a
    value that call took, one no node was matched to, exactly (a value computed alike by both runs, a factory's, not
    one equal within rounding: a faint value equals its faint neighbours) is no piece: the value existed before the
    call (a tensor of zeros its caller made, which its value alone could not match).
    """
    calls = Counter(trace.execution_trace)
    first_record: dict[str, int] = {}  # the first call recorded inside each module
    for record in trace.records:
        _first_for_each_ancestor(first_record, record.module, record.index)
    earliest: dict[str, int] = {}  # the first node (as written) matched to a call recorded inside each module
    for node_index in matched:
        _first_for_each_ancestor(earliest, trace.records[projection.matched[node_index]].module, node_index)
    pieces: dict[int, set[int]] = {}
    nodes_of: dict[int, list[int]] = {}
    for node_index in matched:
        nodes_of.setdefault(projection.matched[node_index], []).append(node_index)

    def ran_before(node_index: int, module: str) -> str | None:
        node = graph.node[node_index]
        if not module or calls.get(module) != 1 or module not in earliest or node_index > earliest[module] \
                or not node.input or any(_shape_like(values.get(v)) for v in node.output):
            return None
        record = projection.matched[earliest[module]]
        if record not in pieces:
            found = set(projection.matched.values())  # a value the call took that a node was matched to stops there
            taken = [output for source in trace.records[record].inputs if source not in found
                     for output in trace.records[source].outputs if hasattr(output, "dtype")]
            pieces[record] = _unmatched_feeding(graph, index, nodes_of[record], projection, values, taken)
        if node_index in pieces[record]:
            return None  # a piece of the first call, which the exporter split into several nodes
        running = executed_ancestor(running_call(node_index), executed)
        if running and not is_ancestor(module, running):
            return running
        at = bisect_left(matched, node_index)
        began = projection.matched[matched[at - 1]] if at else -1
        caller = module.rpartition(".")[0]
        while caller and (calls.get(caller) is None or first_record.get(caller, began + 1) > began):
            caller = caller.rpartition(".")[0]
        return caller

    return ran_before


def _first_for_each_ancestor(first: dict[str, int], module: str, position: int) -> None:
    """Note ``position`` for ``module`` and each module above it that has none yet."""
    while module not in first:
        first[module] = position
        if not module:
            return
        module = module.rpartition(".")[0]


def _unmatched_feeding(
    graph: "onnx.GraphProto", index: GraphIndex, nodes: list[int], projection: Projection,
    values: dict[str, "np.ndarray"], taken: list["np.ndarray"],
) -> set[int]:
    """The unmatched nodes some of ``nodes`` read, directly or through other unmatched nodes, up to (not through) the
    nodes computing one of the values ``taken`` (the inputs of their call)."""
    found: set[int] = set()
    todo = list(nodes)
    while todo:
        for producer in index.node_producers(graph, todo.pop()):
            if producer in found or producer in projection.matched:
                continue
            outputs = [value for name in graph.node[producer].output if name and hasattr(value := values.get(name), "dtype")]
            if any(value.dtype.kind == input_value.dtype.kind and value.shape == input_value.shape
                   and np.array_equal(value, input_value) for value in outputs for input_value in taken):
                continue  # made before the call, which took it (of its kind: a mask of falses is no tensor of zeros)
            found.add(producer)
            todo.append(producer)
    return found


def _running_calls(
    matched: list[int], projection: Projection, trace: Trace, modules: dict[int, str],
) -> "Callable[[int], str]":
    """For a node, the module whose call was running when it ran ('' where that cannot be told).

    Exporters write nodes in the order they ran. A node written between two matched nodes ran
    between their calls; where every call recorded from the one to the other ran inside one module
    (the deepest holding both), that module's call was running throughout, so the node ran inside it.
    ``matched``: the matched nodes' indices, in order.
    """

    def running(node_index: int) -> str:
        at = bisect_left(matched, node_index)
        if at == 0 or at >= len(matched):
            return ""
        before, after = matched[at - 1], matched[at]
        module = common_ancestor([modules[before], modules[after]])
        first, last = sorted((projection.matched[before], projection.matched[after]))
        if not module or not all(is_ancestor(module, trace.records[r].module) for r in range(first, last + 1)):
            return ""
        return module

    return running


def _outermost(qualnames: Iterable[str]) -> list[str]:
    """The given modules without those inside another one given, in first-seen order."""
    names = list(dict.fromkeys(qualnames))
    return [n for n in names if not any(o != n and is_ancestor(o, n) for o in names)]


def _read_only_in(
    node: "onnx.NodeProto", projection: Projection, trace: Trace, param_reads: dict[str, set[str]]
) -> str | None:
    """For a node reading weights no value matched (a lookup of a zero row): the one module whose calls read them.

    Each weight must be one parameter (its values equal no other's), and every recorded call reading those
    parameters ran in the same module: the node ran where they were read (a layer's own weight, or its
    caller's code reading a child's weight directly).
    """
    if node.op_type == "Identity":
        return None
    found: set[str] = set()
    for name in node.input:
        params = projection.initializer_params.get(name)
        if not params:
            continue
        if len(params) != 1:
            return None
        found |= param_reads.get(next(iter(params)), set())
    return next(iter(found)) if len(found) == 1 else None


def _handed_in(
    node: "onnx.NodeProto", values: dict[str, "np.ndarray"], served: list[str], trace: Trace, executed: set[str]
) -> str | None:
    """For an unmatched node read in several modules: the caller that made the value and handed it to them.

    Where the recorded calls holding the node's value (its shape, its values: a mask of zeros says nothing by
    itself) are read by calls running in every module the node serves, and all of them ran in one module that
    encloses those modules, the value was made there and handed in (a mask a model builds once for its layers):
    the node ran there, not in the modules reading it.
    """
    value = values.get(node.output[0]) if len(node.output) == 1 else None
    if value is None or getattr(value, "dtype", None) is None or value.size <= 1:
        return None
    makers = set()
    for record in trace.records:
        out = record.outputs[0] if len(record.outputs) == 1 else None
        if out is None or record.shape_read or getattr(out, "shape", None) != value.shape \
                or not same_values(value, out):
            continue
        reading = {trace.records[r].module for r in trace.reading(record.index, through_aliases=True)}
        if all(any(is_ancestor(m, r) for r in reading) for m in served):
            makers.add(executed_ancestor(record.module, executed))
    if len(makers) != 1:
        return None
    maker = next(iter(makers))
    return maker if is_ancestor(maker, common_ancestor(served)) and maker != common_ancestor(served) else None


def _initializer_owner(
    node: "onnx.NodeProto",
    served: list[int],
    projection: Projection,
    trace: Trace,
) -> str | None:
    """For the Identity of an initializer: the module owning the parameter its first consumer read."""
    if node.op_type != "Identity" or not node.output or node.output[0] not in projection.initializer_params:
        return None
    candidates = projection.initializer_params[node.output[0]]
    for consumer in sorted(served, key=lambda c: projection.matched.get(c, 1 << 62)):
        record_index = projection.matched.get(consumer)
        if record_index is None:
            continue
        for name in trace.records[record_index].params:
            if name in candidates:
                return trace.param_owners[name]
    return None
