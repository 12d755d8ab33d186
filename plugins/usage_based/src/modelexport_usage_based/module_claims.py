"""What particular kinds of module claim beyond their parameter ops, all told apart by the module tree.

- A custom leaf (not a torch layer) that flattens its input for its parameter op and
  restores the shape afterwards owns both views.
- A custom leaf owns the computation that exists only to feed its parameter op (the
  statistics a norm computes from its input).
- A parameter-free helper child (an activation) owns the stretch of its parent's
  computation that transforms one other child's output.
- A conversion to the type its value already has is an alias: every later use of the
  value reads it, so it belongs to the custom leaf that converted it (its first reader).
- A call ends with the last node that still reads something of its own: what only
  post-processes its result on the way to the graph outputs belongs to the caller.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING

from modelexport_core.sdk import is_ancestor

from .contexts import Placement
from .data_flow import SHAPE_OPS, DataGraph, NodeKind, NodeKinds
from .helper_sizes import HelperExport
from .module_tree import ModuleTree

if TYPE_CHECKING:
    import onnx

RESTORING_VIEWS = frozenset({"Reshape"})
"""Ops by which a module flattens its input and restores the shape afterwards."""


def claim_restoring_views(
    graph: "onnx.GraphProto",
    kinds: NodeKinds,
    tree: ModuleTree,
    data: DataGraph,
    shapes: dict[str, tuple],
    modules: dict[int, str],
    static_values: set[str],
) -> None:
    """Give a custom leaf module the reshape of its input and the reshape that restores that shape.

    The restored shape is recognised by its shape arithmetic reading the input's shape, or,
    with static shapes, by the leading dimensions the first view folds being unfolded again.
    """
    for i, owner in list(modules.items()):
        if not tree.is_leaf(owner) or owner in tree.torch_classes:
            continue
        before = [j for j in data.producers[i] if _is_view(graph, j, modules) and data.consumers[j] == [i]]
        after = [k for k in data.consumers[i] if _is_view(graph, k, modules) and data.producers[k] == [i]]
        for j in before:
            source = kinds.data_inputs(graph.node[j], static_values)
            for k in after:
                if _restores(graph.node[j], graph.node[k], source, kinds, shapes):
                    modules[j] = owner
                    modules[k] = owner


def _is_view(graph: "onnx.GraphProto", j: int, modules: dict[int, str]) -> bool:
    return j not in modules and graph.node[j].op_type in RESTORING_VIEWS


def _restores(
    flatten: "onnx.NodeProto", restore: "onnx.NodeProto", source: list[str], kinds: NodeKinds, shapes: dict[str, tuple]
) -> bool:
    """Whether ``restore`` unflattens what ``flatten`` flattened: its shape is read from the input, or
    (static shapes) both views fold the same leading dimensions into one."""
    if kinds.shape_inputs_from(restore) & set(source):
        return True
    before = shapes.get(source[0]) if len(source) == 1 else None
    flat = shapes.get(flatten.output[0])
    after = shapes.get(restore.output[0])
    if not before or not flat or not after or not all(isinstance(d, int) and d > 0 for d in before + flat + after):
        return False
    return len(flat) < len(before) and len(after) > len(flat) and math.prod(after[:-1]) == math.prod(flat[:-1])


def return_tails(
    free: list[int], data: DataGraph, tree: ModuleTree, heading_out: list[bool], placement: Placement
) -> None:
    """Hand back to the caller the nodes after a call's last own read that only lead to graph outputs.

    A node stays in its module while it reads a value computed by a child of the module
    or a value passed into the module (read by a node inside it too); one that only
    transforms the module's own last value on its way out of the graph (``heading_out``:
    it reaches a graph output and no parameter node) is the caller's.
    """
    modules = placement.modules
    for i in free:
        module = modules[i]
        if not heading_out[i] or not module or tree.is_leaf(module):
            continue
        call = placement.call_of(i)
        own = False
        for value in data.inputs[i]:
            j = data.producer.get(value)
            if j is not None and placement.inside(j, module, call):
                own = True
            elif any(k != i and placement.inside(k, module, call) for k in data.readers.get(value, ())):
                own = True
        if not own:
            modules[i] = tree.caller(module)


def align_tails(
    free: list[int], data: DataGraph, tree: ModuleTree, fixed: set[int], placement: Placement, read_as_data: list[bool]
) -> None:
    """Calls of one class end alike: if one call's last parameter op ends it, so does every call's.

    Nodes after the last parameter op of a call (reaching no parameter node of that call)
    are its tail. Where one call of a class has no tail, its modules return right after
    their last parameter op, and the tails seen in other calls are their callers' work
    (a transpose applied to one block's output, not the other's). A node whose result is
    read only for its shape is no tail: it was computed for the module's own use; nor is a
    residual add of the call's own, nor what is computed from it alone.
    """
    modules = placement.modules
    instances: dict[tuple[str, int], list[int]] = {}
    for i in fixed:
        tag = modules[i]
        atoms = tag.split(".") if tag else []
        for cut in range(1, len(atoms) + (0 if tree.is_leaf(tag) else 1)):
            module = ".".join(atoms[:cut])
            if module not in tree.containers:
                instances.setdefault((module, placement.call_of(i)), []).append(i)
    running: dict[tuple[str, int], list[int]] = {}
    for i in free:
        running.setdefault((modules[i], placement.call_of(i)), []).append(i)
    tails: dict[tuple[str, int], list[int]] = {}
    for key, own in instances.items():
        reaching = _reaching(own, data)
        tails[key] = [i for i in running.get(key, ()) if i not in reaching and read_as_data[i]]
    ends_clean = {tree.classes[module] for (module, _), tail in tails.items() if not tail}
    for (module, call), tail in tails.items():
        if tail and tree.classes[module] in ends_clean:
            kept: set[int] = set()
            for i in sorted(tail):
                if _adds_passed_value(i, module, call, data, placement) or (
                    data.producers[i] and all(j in kept for j in data.producers[i])
                ):
                    kept.add(i)
                else:
                    modules[i] = tree.caller(module)


def _adds_passed_value(i: int, module: str, call: int, data: DataGraph, placement: Placement) -> bool:
    """Whether a node combines a value passed into the call (read inside it too) with one the call computed.

    That is a residual connection of the call's own: some calls of a class have one and
    others not (a block that changes the width skips it), so it says nothing of other calls.
    """
    inside = [j for j in data.producers[i] if placement.within(j, module, call)]
    passed = [
        j
        for j in data.producers[i]
        if j not in inside and any(k != i and placement.within(k, module, call) for k in data.consumers[j])
    ]
    return bool(inside) and bool(passed)


def _reaching(targets: list[int], data: DataGraph) -> set[int]:
    """Nodes from which some target node can be reached through data."""
    seen = set(targets)
    pending = list(targets)
    while pending:
        for j in data.producers[pending.pop()]:
            if j not in seen:
                seen.add(j)
                pending.append(j)
    return seen


def hand_to_helper_chains(
    free: list[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    tree: ModuleTree,
    modules: dict[int, str],
    exports: dict[str, HelperExport],
) -> None:
    """Give each of a module's several parameter-free helpers (a padding trim, then an activation) its stretch.

    The helpers run one after another, in the order they are registered, on what the
    child registered before the first of them returned: each takes, from the result of the
    one before, a stretch of exactly the ops it exports to alone. Where any helper's export
    is unknown, or the stretches do not come out whole, nothing is given.
    """
    free_set = set(free)
    for name in tree.names:
        helpers = tree.parameter_free_helpers(name)
        if len(helpers) < 2 or not all(helper in exports for helper in helpers):
            continue
        siblings = list(tree.children.get(name, ()))
        earlier = [c for c in siblings[: siblings.index(helpers[0])] if c not in tree.without_parameters]
        if not earlier:
            continue
        feeding = earlier[-1]
        for source in sorted(i for i, tag in modules.items() if is_ancestor(feeding, tag)):
            stretches = []
            start = source
            for helper in helpers:
                stretch = _whole_stretch(start, exports[helper], free_set, graph, data, modules, name, feeding,
                                         tuple(helpers))
                if stretch is None:
                    break
                stretches.append((helper, stretch))
                start = stretch[-1]
            if len(stretches) == len(helpers):
                for helper, stretch in stretches:
                    for i in stretch:
                        modules[i] = helper


def _whole_stretch(
    source: int,
    export: HelperExport,
    free: set[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    modules: dict[int, str],
    owner: str,
    feeding: str,
    helpers: tuple[str, ...] = (),
) -> list[int] | None:
    """The free nodes after ``source`` computing from it alone, one helper's exported ops exactly; None if they do not.

    A node counts while it is guessed in ``owner``, inside ``feeding``, or already given to one of ``helpers``."""
    stretch: list[int] = []
    taken = {source}
    frontier = sorted(k for k in data.consumers[source] if k in free)
    while frontier and len(stretch) < export.size:
        i = frontier.pop(0)
        if i in taken or graph.node[i].op_type not in export.ops:
            continue
        tag = modules.get(i, "")
        if not (tag == owner or tag in helpers or is_ancestor(feeding, tag)) or not all(j in taken for j in data.producers[i]):
            continue
        stretch.append(i)
        taken.add(i)
        frontier = sorted(set(frontier) | {k for k in data.consumers[i] if k in free and k not in taken})
    if sorted(graph.node[i].op_type for i in stretch) != sorted(export.ops_in_order):
        return None
    return stretch


def claim_wrapper_heads(
    free: list[int], seeds: dict[int, str], data: DataGraph, tree: ModuleTree, modules: dict[int, str]
) -> None:
    """Give a module wrapping one layer the views that lay its input out for that layer.

    A module of the model's own whose only child with parameters is one layer exists to
    adapt what it is given around that layer (tokens laid out as an image for a
    convolution and back). The views right before the layer's parameter op, each read by
    the next alone, guessed in the caller (not the tail of a sibling's call), are the wrapper's.
    """
    free_set = set(free)
    for s, leaf in seeds.items():
        wrapper = leaf.rpartition(".")[0]
        if not wrapper or not tree.is_leaf(leaf) or wrapper in tree.torch_classes or wrapper in tree.containers:
            continue
        with_parameters = [c for c in tree.children.get(wrapper, ()) if c not in tree.without_parameters]
        if with_parameters != [leaf]:
            continue
        caller = tree.caller(wrapper)
        chain = []
        current = s
        while True:
            producers = [j for j in data.producers[current] if j in free_set]
            if len(producers) != 1 or len(data.producers[current]) != 1:
                break
            (j,) = producers
            if data.op_types[j] not in VIEW_OPS or len(data.consumers[j]) != 1 or modules[j] != caller:
                break
            chain.append(j)
            current = j
        for j in chain:
            modules[j] = wrapper


def hand_results_to_next_call(
    free: list[int], data: DataGraph, tree: ModuleTree, fixed: set[int], modules: dict[int, str]
) -> None:
    """Give the next call the computation between one call's result and its own first parameter op.

    A value computed in a call (not a leaf) and read by nothing but a piece of computation
    guessed to continue that call, whose results go to the parameter ops of one module
    beside it alone, was that call's result, handed to the other module, which prepared it
    (a stage's last block returns its tokens; the downsampling after it regroups them).
    A piece of views only is the call laying its result out before it returns it.
    """
    free_set = set(free)
    for source in sorted({j for i in free for j in data.producers[i]}):
        first = modules.get(source, "")
        if not first or tree.is_leaf(first):
            continue
        found = _piece_after(source, first, data, tree, fixed, free_set, modules)
        if found is None:
            continue
        piece, target = found
        if is_ancestor(first, target) or is_ancestor(target, first):
            continue
        if all(data.op_types[k] in VIEW_OPS for k in piece):
            continue  # a call lays its result out before it returns it
        for k in piece:
            modules[k] = target


def _piece_after(
    source: int,
    module: str,
    data: DataGraph,
    tree: ModuleTree,
    fixed: set[int],
    free: set[int],
    modules: dict[int, str],
) -> tuple[set[int], str] | None:
    """The free nodes guessed in ``module`` computing from ``source`` alone, and the one module their results reach."""
    piece: set[int] = set()
    targets: set[str] = set()
    frontier = list(data.consumers[source])
    if not frontier:
        return None
    while frontier:
        k = frontier.pop()
        if k in piece:
            continue
        if k in fixed:
            targets.add(tree.closing_context(modules[k]) if tree.is_leaf(modules[k]) else modules[k])
            continue
        if k not in free or modules[k] != module:
            return None
        piece.add(k)
        frontier.extend(data.consumers[k])
    if not piece or len(targets) != 1:
        return None
    if any(data.reads_graph_input[k] or not all(j == source or j in piece for j in data.producers[k]) for k in piece):
        return None
    return piece, next(iter(targets))


def absorb_private_feeders(
    free: list[int], seeds: dict[int, str], data: DataGraph, tree: ModuleTree, modules: dict[int, str]
) -> None:
    """Give a custom leaf module the computation that exists only to feed its parameter op.

    A norm written as a module of its own computes statistics of its input before the
    op that reads its weight. Walking back from the leaf's seeds, a node joins the leaf
    when everything it writes is read inside the leaf; the earliest nodes are left out
    until the joined nodes read one value from outside, the one the leaf was called with.
    Torch layers (and classes derived from them) are exported as their parameter ops alone and take nothing; an
    activation already given to a helper module stays with it.
    """
    free_set = set(free)
    helpers = {helper for name in tree.names for helper in tree.parameter_free_helpers(name)}
    for seed, owner in seeds.items():
        if not tree.is_leaf(owner) or owner in tree.torch_classes or owner in tree.torch_layer_subclasses:
            continue
        leaf = {k for k, tag in modules.items() if tag == owner}
        region: set[int] = set()
        pending = [-j for j in data.producers[seed]]
        heapq.heapify(pending)
        while pending:  # latest first, so a node's readers are decided before it
            j = -heapq.heappop(pending)
            if j in region or j in leaf or j not in free_set or modules[j] in helpers:
                continue
            if all(k in region or k in leaf for k in data.consumers[j]):
                region.add(j)
                for producer in data.producers[j]:
                    heapq.heappush(pending, -producer)
        ordered = sorted(region)
        while ordered and len(_outside_inputs(ordered, leaf, data)) > 1:
            ordered.pop(0)  # the earliest node merges what the leaf was called with
        for j in ordered:
            modules[j] = owner


def _outside_inputs(region: list[int], leaf: set[int], data: DataGraph) -> set[str]:
    inside = set(region) | leaf
    return {value for j in region for value in data.inputs[j] if data.producer.get(value) not in inside}


def join_first_reader(
    free: list[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    tree: ModuleTree,
    types: dict[str, int],
    modules: dict[int, str],
) -> None:
    """Give a custom leaf module the conversion it made of its input when that conversion changed nothing.

    Converting a tensor to the type it has returns the tensor itself, so the exporter reads
    the conversion's result wherever the tensor is used afterwards, the caller's residual
    included. The conversion ran where its result is first read: in a custom leaf that
    computes from it (a norm's statistics).
    """
    for i in free:
        node = graph.node[i]
        if node.op_type != "Cast" or not data.consumers[i] or tree.is_leaf(modules.get(i, "")):
            continue
        target = next((attribute.i for attribute in node.attribute if attribute.name == "to"), None)
        if target is None or types.get(node.input[0]) != target:
            continue
        first = modules.get(min(data.consumers[i]), "")
        if tree.is_leaf(first) and first not in tree.torch_classes:
            modules[i] = first


def claim_leaf_tails(
    free: list[int],
    seeds: dict[int, str],
    graph: "onnx.GraphProto",
    data: DataGraph,
    tree: ModuleTree,
    static_values: set[str],
    modules: dict[int, str],
) -> None:
    """Give a custom leaf module the computation that directly follows its parameter op and reads only its own values.

    Nodes are written in the order they run, and a call is one stretch of them. After a
    custom leaf's parameter op (a frequency buffer, a scaled lookup), the data nodes that
    follow it in the graph and read nothing but what the leaf computed and constants (a view
    sized at run time may be the caller's) are the rest of its forward: the first node that
    reads anything else, or that a helper module (an activation of the caller) computes, ends
    the call. Torch layers export as their parameter ops alone and take nothing, unless a
    subclass defines its own forward.
    """
    free_set = set(free)
    helpers = {helper for name in tree.names for helper in tree.parameter_free_helpers(name)}
    order = sorted(free_set | set(seeds))
    position = {i: p for p, i in enumerate(order)}
    for seed, owner in sorted(seeds.items()):
        if not tree.is_leaf(owner) or owner in tree.torch_classes:
            continue
        subclass = owner in tree.torch_layer_subclasses
        if subclass and owner not in tree.own_forward:
            continue
        members = {seed}
        for j in order[position[seed] + 1 :]:
            if seeds.get(j) == owner and not data.reads_graph_input[j]:
                members.add(j)
                continue
            producers = data.producers[j]
            if j not in free_set or data.reads_graph_input[j] or not producers or modules.get(j) in helpers:
                break
            if not all(k in members for k in producers):
                break
            node = graph.node[j]
            if any(value and value not in static_values and value not in data.inputs[j] for value in node.input):
                break
            if subclass and node.op_type == "Cast":  # a lookup's result converted for the caller's use
                break
            modules[j] = owner
            members.add(j)


VIEW_OPS = frozenset({"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
"""Ops that only rearrange a tensor: a stretch of them after a call's last parameter op may be its caller's."""


def return_sized_views(
    free: list[int],
    graph: "onnx.GraphProto",
    kinds: NodeKinds,
    data: DataGraph,
    tree: ModuleTree,
    fixed: set[int],
    modules: dict[int, str],
) -> None:
    """Hand to the caller the views after a call's last parameter op that are sized from what only the caller sees.

    A node reading the shape of a value runs where that value is visible: computed there,
    or read as data there. A view after the last parameter op of a module's call, sized
    from a value the module never reads that its caller computed, or measured before the call
    began (restoring the layout the caller had before it split its input into windows),
    ran in the caller, after the call returned; so did the views between the parameter op
    and it. A module that measured its input itself, amid its own nodes, restores it itself.
    """
    after: list[frozenset[str]] = [frozenset()] * len(graph.node)
    for i in reversed(range(len(graph.node))):
        after[i] = frozenset({modules[i]}) if i in fixed else frozenset().union(*(after[k] for k in data.consumers[i]))

    def tail_view(i: int) -> bool:
        module = modules[i]
        return (
            graph.node[i].op_type in VIEW_OPS
            and bool(module)
            and not tree.is_leaf(module)
            and not any(is_ancestor(module, m) for m in after[i])
        )

    def visible(value: str, module: str, reader: int) -> bool:
        j = data.producer.get(value)
        if j is not None and (j not in modules or is_ancestor(module, modules[j])):
            return True
        readers = data.readers.get(value, ())
        return any(k != reader and k in modules and is_ancestor(module, modules[k]) for k in readers)

    def made_in(value: str, module: str) -> bool:
        j = data.producer.get(value)
        return j is not None and j not in fixed and modules.get(j) == module

    producer = {value: j for j, node in enumerate(graph.node) for value in node.output if value}

    def measured_at(i: int) -> list[int]:
        """Where the ``Shape`` nodes that size node ``i`` are written."""
        found: list[int] = []
        stack = [producer[v] for v in graph.node[i].input if v in producer and v not in data.inputs[i]]
        seen: set[int] = set()
        while stack:
            j = stack.pop()
            if j in seen or kinds.kinds[j] is not NodeKind.SHAPE:
                continue
            seen.add(j)
            if graph.node[j].op_type in SHAPE_OPS:
                found.append(j)
            else:
                stack.extend(producer[v] for v in graph.node[j].input if v in producer)
        return found

    start: dict[str, int] = {}  # where each module's call is first seen at work
    for j in sorted(modules):
        if data.producers[j] or data.consumers[j]:
            tag = modules[j]
            while tag and tag not in start:
                start[tag] = j
                tag = tag.rpartition(".")[0]

    working = sorted(j for j in modules if data.producers[j] or data.consumers[j])

    def measured_before(i: int, module: str) -> bool:
        """Whether every size node ``i`` reads was taken before the call of ``module`` began, by its caller.

        The caller computed data between the measurement and the call: a call may begin by
        measuring what it was given.
        """
        positions = measured_at(i)
        began = start.get(module, -1)
        if not positions or not all(j < began for j in positions):
            return False
        between = working[bisect_right(working, max(positions)) : bisect_left(working, began)]
        return any(not is_ancestor(module, modules[j]) for j in between)

    moved: set[int] = set()
    left: dict[int, str] = {}  # the module each moved node was taken out of
    for i in free:
        if not tail_view(i):
            continue
        module = modules[i]
        caller = tree.caller(module)
        sources = [value for value in kinds.shape_inputs_from(graph.node[i]) if value not in data.inputs[i]]
        if any(
            (made_in(value, caller) or measured_before(i, module)) and not visible(value, module, i)
            for value in sources
        ):
            left[i] = module
            modules[i] = caller
            moved.add(i)
    for i in reversed(free):
        if i in moved or not tail_view(i) or not data.consumers[i]:
            continue
        module = modules[i]
        if all(k in moved and not is_ancestor(module, modules[k]) for k in data.consumers[i]):
            modules[i] = tree.caller(module)
            moved.add(i)
            left[i] = module
    # what computes only from values made after the call returned runs after it too (a roll of the restored windows)
    for i in free:
        if i in moved or not data.producers[i] or not all(j in left for j in data.producers[i]):
            continue
        outer = tree.common(modules[j] for j in data.producers[i])
        module = modules[i]
        if module != outer and is_ancestor(outer, module) and all(is_ancestor(left[j], module) for j in data.producers[i]):
            left[i] = module
            modules[i] = outer
            moved.add(i)
