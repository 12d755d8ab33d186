"""Bounded propagation: from the parameter seeds to every other node of the graph.

1. Custom leaf modules claim the views around their parameter ops.
2. Every other data node gets a first guess from the contexts its inputs were computed
   in, never outside its bound (the deepest module holding a parameter node before it
   and one after it: what keeps layer i out of layer j).
3. Helper activations and custom leaves claim their own computation.
4. The other guesses are refined: nodes adapting a shared value for one module move into
   it, then each node moves to where its values cross the fewest module boundaries.
5. Calls end where they stop reading their own values.
6. Shape arithmetic and constants follow the nodes that read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from modelexport_core.sdk import GraphIndex, is_ancestor

from .contexts import Placement, bounds, context_of, feeds_fixed, reaches_outputs
from .data_flow import SHAPE_OPS, DataGraph, NodeKind, NodeKinds
from .helper_claims import hand_to_helpers
from .helper_sizes import HelperExport
from .module_claims import (
    absorb_private_feeders,
    align_tails,
    claim_leaf_tails,
    claim_restoring_views,
    claim_wrapper_heads,
    hand_results_to_next_call,
    hand_to_helper_chains,
    join_first_reader,
    return_sized_views,
    return_tails,
)
from .module_tree import ModuleTree
from .order import (
    call_spans,
    fill_call_gaps,
    keep_within_spans,
    reused_modules,
    settings_before_calls,
    settings_where_measured,
)
from .settle import join_first_sharer, prepare_for_readers, repeated_siblings, settle

if TYPE_CHECKING:
    import onnx


@dataclass
class Propagation:
    """The module of every node and, for nodes serving several modules, the others."""

    modules: dict[int, str]
    also: dict[int, list[str]] = field(default_factory=dict)


def propagate(
    graph: "onnx.GraphProto",
    index: GraphIndex,
    seeds: dict[int, str],
    calls: dict[int, int],
    kinds: NodeKinds,
    data: DataGraph,
    tree: ModuleTree,
    static_values: set[str],
    shapes: dict[str, tuple],
    types: dict[str, int],
    helpers: dict[str, HelperExport] | None = None,
    folded: dict[str, frozenset[str]] | None = None,
) -> Propagation:
    """Tag every node, from the seeds (node index to owning module) and their call numbers.

    ``helpers``: what each parameter-free helper layer exports to alone, where known; ``folded``: the
    norms each layer's tensors may hold folded.
    """
    placement = Placement(dict(seeds), dict(calls))
    spans = call_spans(seeds, calls, tree)
    modules = placement.modules
    claim_restoring_views(graph, kinds, tree, data, shapes, modules, static_values)
    fixed = set(modules)
    shapes_read = [
        kinds.shape_inputs_from(node) if kinds.kinds[i] is NodeKind.DATA else frozenset()
        for i, node in enumerate(graph.node)
    ]
    limits = bounds(len(graph.node), data, tree, fixed, modules, shapes_read)
    free = [i for i in range(len(graph.node)) if i not in fixed and kinds.kinds[i] is NodeKind.DATA]
    pinned: set[int] = set()
    for i in free:
        module, call, final = context_of(i, data, tree, placement)
        modules[i] = module if is_ancestor(limits[i], module) and not _reads_results(i, data) else limits[i]
        placement.calls[i] = call
        if final:
            pinned.add(i)
    pinned |= _feed_from_inputs(free, data, tree, fixed, modules)
    # nodes set up by computed shapes or settings (a pad sized from its input) run where that input is
    # prepared for a parameter op, not in the activation before it
    configured = [
        any(
            (j := index.producer.get(value)) is not None and graph.node[j].op_type != "Constant"
            for value in node.input
            if value and value not in data.inputs[i]
        )
        for i, node in enumerate(graph.node)
    ]
    hand_to_helpers(free, graph, data, tree, placement, configured, helpers or {}, folded or {})
    hand_to_helper_chains(free, graph, data, tree, modules, helpers or {})
    claim_wrapper_heads(free, seeds, data, tree, modules)
    absorb_private_feeders(free, seeds, data, tree, modules)
    claim_leaf_tails(free, seeds, graph, data, tree, static_values, modules)
    join_first_reader(free, graph, data, tree, types, modules)
    claimed = {i for i in free if tree.is_leaf(modules[i])}
    movable = [i for i in free if i not in pinned and i not in claimed]
    static_settings = [
        all(value in static_values for value in node.input if value and value not in data.inputs[i])
        for i, node in enumerate(graph.node)
    ]
    prepared = prepare_for_readers(movable, graph, data, tree, limits, modules, configured, static_settings)
    # a node that adapts a value for its one reader stays there: settling would weigh where the value came from
    settle([i for i in movable if i not in prepared], graph, data, tree, limits, modules)
    join_first_sharer(movable, graph, data, tree, modules)
    deepened = _deepen([i for i in movable if len(data.producers[i]) > 1], data, tree, limits, placement)
    if deepened:  # what they feed may now be seen to prepare a value for another call
        readers = sorted({k for i in deepened for k in data.consumers[i] if k in set(movable)})
        prepare_for_readers(readers, graph, data, tree, limits, modules, configured, static_settings)
    hand_results_to_next_call(movable, data, tree, fixed, modules)
    fed = feeds_fixed(len(graph.node), data, fixed)
    heading_out = [out and not fed[i] for i, out in enumerate(reaches_outputs(graph, data))]
    return_tails(free, data, tree, heading_out, placement)
    read_as_data = [bool(data.outputs(graph, i)) for i in range(len(graph.node))]
    align_tails(free, data, tree, fixed, placement, read_as_data)
    return_sized_views([i for i in free if i not in claimed], graph, kinds, data, tree, fixed, modules)
    keep_within_spans(free, spans, tree, modules)
    data_nodes = [  # copies of a weight that no data reaches are written wherever the exporter put them
        i
        for i in range(len(graph.node))
        if kinds.kinds[i] is NodeKind.DATA and i in modules and (data.producers[i] or data.consumers[i])
    ]
    reused = reused_modules(seeds, calls)
    fill_call_gaps(data_nodes, reused, tree, modules, set(free))
    also: dict[int, list[str]] = {}
    for i in free:  # a node joining streams from several modules (a residual add) serves them too
        contexts = {tree.closing_context(modules[j]) for j in data.producers[i] if j in modules}
        others = sorted(c for c in contexts if not is_ancestor(c, modules[i]))
        if len(contexts) > 1 and others:
            also[i] = others
    _tag_readers_of(graph, index, kinds, data, tree, modules, also, fixed)
    _lift_hoisted(kinds, tree, modules)
    consumers = [index.node_consumers(graph, i) for i in range(len(graph.node))]
    _place_settings(graph, index, kinds, data, tree, modules, static_values, data_nodes, consumers)
    settings = sorted((i for i in modules if kinds.kinds[i] is not NodeKind.DATA), reverse=True)
    keep_within_spans(settings, spans, tree, modules, consumers)
    fill_call_gaps(data_nodes, reused, tree, modules, set(), settings, consumers)
    also = {i: kept for i, others in also.items() if (kept := [m for m in others if m != modules[i]])}
    return Propagation(modules, also)


def _place_settings(
    graph: "onnx.GraphProto",
    index: GraphIndex,
    kinds: NodeKinds,
    data: DataGraph,
    tree: ModuleTree,
    modules: dict[int, str],
    static_values: set[str],
    data_nodes: list[int],
    consumers: list[list[int]],
) -> None:
    """Settle shape arithmetic and constants by when they ran and what they measure, after their readers placed them."""
    placed = dict(modules)
    measured = [
        kinds.shape_inputs_from(node)
        | (frozenset(kinds.data_inputs(node, static_values)) if node.op_type in SHAPE_OPS else frozenset())
        for node in graph.node
    ]
    settings_where_measured(
        [i for i in modules if kinds.kinds[i] is NodeKind.SHAPE],
        measured,
        [[j for value in node.input if (j := index.producer.get(value)) is not None] for node in graph.node],
        {i for i, node in enumerate(graph.node) if node.op_type in SHAPE_OPS},
        data,
        tree,
        modules,
    )
    activity = [i for i in sorted(modules) if kinds.kinds[i] is not NodeKind.CONSTANT]
    settings_before_calls(
        data_nodes, [i for i in modules if kinds.kinds[i] is not NodeKind.DATA], tree, modules, activity
    )
    for i, kind in enumerate(kinds.kinds):  # a constant goes with the reader it was made for, wherever that went
        first = next((j for j in consumers[i] if j in modules), None)
        if kind is NodeKind.CONSTANT and first is not None and modules[first] != placed[first]:
            modules[i] = modules[first]


def _feed_from_inputs(
    free: list[int], data: DataGraph, tree: ModuleTree, fixed: set[int], modules: dict[int, str]
) -> set[int]:
    """Give the module of a parameter op what is computed from graph inputs for it alone (position ids from token ids).

    A node computed from graph inputs only (and buffers: no computation on data before it)
    whose results reach parameter ops of one module only, through such nodes, was computed by that module:
    its caller would pass the inputs, not a value made for one child's lookup. Values that
    meet other computation (a mask added to scores) stay where they are. Returns the nodes so placed.
    """
    fed = set(free)
    from_inputs: set[int] = set()
    constant_seeds = {j for j in fixed if not data.producers[j] and not data.reads_graph_input[j]}
    for i in free:  # graph order: producers first
        if all(j in from_inputs or j in constant_seeds for j in data.producers[i]) and (
            any(j in from_inputs for j in data.producers[i]) or data.reads_graph_input[i]
        ):
            from_inputs.add(i)
    targets: dict[int, set[str] | None] = {}
    for i in reversed(free):
        if i not in from_inputs:
            continue
        found: set[str] | None = set()
        for k in data.consumers[i]:
            if k in fixed:
                found.add(tree.closing_context(modules[k]))
            elif k in from_inputs and targets.get(k) is not None:
                found |= targets[k]
            else:
                found = None
                break
        targets[i] = found
    placed = set()
    for i, found in targets.items():
        if found is not None and len(found) == 1 and i in fed:
            modules[i] = next(iter(found))
            placed.add(i)
    return placed


def _reads_results(i: int, data: DataGraph) -> bool:
    """Whether a node reads only values the model returns: they were returned by their modules, so it runs after.

    Its first guess is then its bound, not the module that made its inputs.
    """
    inputs = data.inputs[i]
    return bool(inputs) and not data.reads_graph_input[i] and all(value in data.graph_outputs for value in inputs)


def _deepen(
    movable: list[int], data: DataGraph, tree: ModuleTree, limits: list[str], placement: Placement
) -> list[int]:
    """Guess again, from the refined contexts of their inputs, where joining nodes run; keep guesses that go deeper.

    A first guess reads the first guesses of the inputs; once those moved into the module
    they prepare values for (the pooling a gate computes from), a node combining them with
    what the module was called with (the gate's product) is seen to run in that module too.
    Only a guess into which every input from outside was passed (a node of that call reads
    it too) is taken: one that merely continues where an input was computed is not, since
    whether that call goes on or has returned, contexts cannot tell (a residual add).
    """
    modules = placement.modules
    moved = []
    for i in movable:
        module, call, _ = context_of(i, data, tree, placement)
        current = modules[i]
        outside = [j for j in data.producers[i] if not placement.within(j, module, call)]
        if not all(any(k != i and placement.within(k, module, call) for k in data.consumers[j]) for j in outside):
            continue
        if module != current and is_ancestor(current, module) and is_ancestor(limits[i], module):
            modules[i] = module
            placement.calls[i] = call
            moved.append(i)
    return moved


def _caller_if_layer(qualname: str, tree: ModuleTree, parameter_node: bool = False) -> str:
    """A torch layer with parameters is exported as its parameter ops alone: what it reads besides was its caller's.

    So are the indices a parameter op of a layer derived from a torch layer reads when they
    are numbered along a value the model computes and goes on computing with (positions
    counted along what the caller's other child returned): the caller holds that value. A
    value made only to be measured (or a model input) was handed to the lookup, which
    numbers the positions itself.
    """
    if not tree.is_leaf(qualname) or qualname in tree.without_parameters:
        return qualname
    if qualname in tree.torch_classes or (parameter_node and qualname in tree.torch_layer_subclasses):
        return tree.closing_context(qualname)
    return qualname


def _tag_readers_of(
    graph: "onnx.GraphProto",
    index: GraphIndex,
    kinds: NodeKinds,
    data: DataGraph,
    tree: ModuleTree,
    modules: dict[int, str],
    also: dict[int, list[str]],
    fixed: set[int],
) -> None:
    """Shape arithmetic takes its readers' common module; a constant its first reader's.

    Exporters share one constant or one ``Shape`` between modules; the first reader is
    the one it was made for, the others are listed as further modules it serves. What a
    torch layer reads besides its parameters (indices, shapes) was computed by its caller.
    """
    for i in reversed(range(len(graph.node))):
        if i in modules or kinds.kinds[i] is NodeKind.DATA:
            continue
        # indices numbered along a value the model computes and goes on computing with
        from_computed = any(
            index.producer.get(v) is not None and v in data.readers for v in kinds.shape_inputs_from(graph.node[i])
        )
        readers = [
            _caller_if_layer(modules[j], tree, j in fixed and from_computed)
            for j in index.node_consumers(graph, i)
            if j in modules
        ]
        if not readers:
            continue
        if kinds.kinds[i] is NodeKind.CONSTANT or not any(
            repeated_siblings(a, b) for a in readers for b in readers
        ):
            modules[i] = readers[0]
        else:
            modules[i] = tree.common(readers)
        others = sorted(set(readers) - {modules[i]})
        if len(set(readers)) > 1 and others:
            also[i] = others


def _lift_hoisted(kinds: NodeKinds, tree: ModuleTree, modules: dict[int, str]) -> None:
    """Give the stack's owner the shape arithmetic an exporter hoisted into another element of the stack.

    Nodes are written in the order they run. Shape arithmetic or a constant read in one
    element of a stack (layer i+1) but written amid the computation of another (between
    two data nodes of layer i) was moved or shared there by the exporter: which layer it
    was made for cannot be told, so it gets the module holding both.
    """
    data_nodes = [i for i, kind in enumerate(kinds.kinds) if kind is NodeKind.DATA and i in modules]
    position = 0
    for i, kind in enumerate(kinds.kinds):
        while position < len(data_nodes) and data_nodes[position] < i:
            position += 1
        if kind is NodeKind.DATA or i not in modules or position == 0 or position == len(data_nodes):
            continue
        tag = modules[i]
        previous, following = modules[data_nodes[position - 1]], modules[data_nodes[position]]
        if repeated_siblings(tag, previous) and repeated_siblings(tag, following):
            modules[i] = tree.common([tag, previous, following])
