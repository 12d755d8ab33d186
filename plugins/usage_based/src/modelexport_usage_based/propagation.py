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

Each step is one or more named passes of :data:`PASSES`, run in that order over one :class:`State`;
a pass can be run alone on a state built by hand (``State(...)``, then the passes before it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

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
    call_starts,
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


@dataclass
class State:
    """What the passes of :func:`propagate` read and what they write, in one place.

    The first group is given and never changes; the second is what passes work out for later ones; the
    tags themselves are ``placement.modules`` (with each node's call number in ``placement.calls``).
    """

    graph: "onnx.GraphProto"
    index: GraphIndex
    kinds: NodeKinds
    data: DataGraph
    tree: ModuleTree
    static_values: set[str]
    shapes: dict[str, tuple]
    types: dict[str, int]
    seeds: dict[int, str]
    calls: dict[int, int]
    helpers: dict[str, HelperExport] = field(default_factory=dict)
    folded: dict[str, frozenset[str]] = field(default_factory=dict)

    placement: Placement = field(init=False)
    spans: dict = field(init=False)
    fixed: set[int] = field(default_factory=set)
    """Nodes placed by parameters and leaf claims, before any guess."""
    limits: list[str] = field(default_factory=list)
    """Each node's bound: the deepest module holding a parameter node before it and one after it."""
    free: list[int] = field(default_factory=list)
    """The data nodes left to place."""
    pinned: set[int] = field(default_factory=set)
    """Free nodes whose first guess is final."""
    configured: list[bool] = field(default_factory=list)
    """Nodes set up by computed shapes or settings."""
    claimed: set[int] = field(default_factory=set)
    """Free nodes a leaf module claimed."""
    movable: list[int] = field(default_factory=list)
    """Free nodes neither pinned nor claimed: the ones refined."""
    static_settings: list[bool] = field(default_factory=list)
    data_nodes: list[int] = field(default_factory=list)
    reused: set[str] = field(default_factory=set)
    consumers: list[list[int]] = field(default_factory=list)
    also: dict[int, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.placement = Placement(dict(self.seeds), dict(self.calls))
        self.spans = call_spans(self.seeds, self.calls, self.tree)

    @property
    def modules(self) -> dict[int, str]:
        return self.placement.modules


def _claim_restoring_views(s: State) -> None:
    claim_restoring_views(s.graph, s.kinds, s.tree, s.data, s.shapes, s.modules, s.static_values)


def _bound(s: State) -> None:
    """Every node's bound, from the nodes placed so far; the data nodes still free."""
    s.fixed = set(s.modules)
    shapes_read = [
        s.kinds.shape_inputs_from(node) if s.kinds.kinds[i] is NodeKind.DATA else frozenset()
        for i, node in enumerate(s.graph.node)
    ]
    s.limits = bounds(len(s.graph.node), s.data, s.tree, s.fixed, s.modules, shapes_read)
    s.free = [i for i in range(len(s.graph.node)) if i not in s.fixed and s.kinds.kinds[i] is NodeKind.DATA]


def _first_guesses(s: State) -> None:
    """A first guess for every free node from the contexts its inputs were computed in, within its bound."""
    for i in s.free:
        module, call, final = context_of(i, s.data, s.tree, s.placement)
        s.modules[i] = module if is_ancestor(s.limits[i], module) and not _reads_results(i, s.data) else s.limits[i]
        s.placement.calls[i] = call
        if final:
            s.pinned.add(i)
    s.pinned |= _feed_from_inputs(s.free, s.data, s.tree, s.fixed, s.modules)
    # nodes set up by computed shapes or settings (a pad sized from its input) run where that input is
    # prepared for a parameter op, not in the activation before it
    s.configured = [
        any(
            (j := s.index.producer.get(value)) is not None and s.graph.node[j].op_type != "Constant"
            for value in node.input
            if value and value not in s.data.inputs[i]
        )
        for i, node in enumerate(s.graph.node)
    ]


def _helpers(s: State) -> None:
    hand_to_helpers(s.free, s.graph, s.data, s.tree, s.placement, s.configured, s.helpers, s.folded)
    hand_to_helper_chains(s.free, s.graph, s.data, s.tree, s.modules, s.helpers)


def _wrapper_heads(s: State) -> None:
    claim_wrapper_heads(s.free, s.seeds, s.data, s.tree, s.modules)


def _private_feeders(s: State) -> None:
    absorb_private_feeders(s.free, s.seeds, s.data, s.tree, s.modules)


def _leaf_tails(s: State) -> None:
    claim_leaf_tails(s.free, s.seeds, s.graph, s.data, s.tree, s.static_values, s.modules)


def _first_reader(s: State) -> None:
    join_first_reader(s.free, s.graph, s.data, s.tree, s.types, s.modules)


def _movable(s: State) -> None:
    """The free nodes left to refine: neither pinned by their first guess nor claimed by a leaf."""
    s.claimed = {i for i in s.free if s.tree.is_leaf(s.modules[i])}
    s.movable = [i for i in s.free if i not in s.pinned and i not in s.claimed]
    s.static_settings = [
        all(value in s.static_values for value in node.input if value and value not in s.data.inputs[i])
        for i, node in enumerate(s.graph.node)
    ]


def _prepare_and_settle(s: State) -> None:
    prepared = prepare_for_readers(s.movable, s.graph, s.data, s.tree, s.limits, s.modules, s.configured,
                                   s.static_settings)
    # a node that adapts a value for its one reader stays there: settling would weigh where the value came from
    settle([i for i in s.movable if i not in prepared], s.graph, s.data, s.tree, s.limits, s.modules)


def _first_sharer(s: State) -> None:
    join_first_sharer(s.movable, s.graph, s.data, s.tree, s.modules)


def _deepen_joins(s: State) -> None:
    deepened = _deepen([i for i in s.movable if len(s.data.producers[i]) > 1], s.data, s.tree, s.limits, s.placement)
    if deepened:  # what they feed may now be seen to prepare a value for another call
        movable = set(s.movable)
        readers = sorted({k for i in deepened for k in s.data.consumers[i] if k in movable})
        prepare_for_readers(readers, s.graph, s.data, s.tree, s.limits, s.modules, s.configured, s.static_settings)


def _results_to_next_call(s: State) -> None:
    hand_results_to_next_call(s.movable, s.data, s.tree, s.fixed, s.modules)


def _tails(s: State) -> None:
    fed = feeds_fixed(len(s.graph.node), s.data, s.fixed)
    heading_out = [out and not fed[i] for i, out in enumerate(reaches_outputs(s.graph, s.data))]
    return_tails(s.free, s.data, s.tree, heading_out, s.placement)
    read_as_data = [bool(s.data.outputs(s.graph, i)) for i in range(len(s.graph.node))]
    align_tails(s.free, s.data, s.tree, s.fixed, s.placement, read_as_data)


def _sized_views(s: State) -> None:
    return_sized_views([i for i in s.free if i not in s.claimed], s.graph, s.kinds, s.data, s.tree, s.fixed,
                       s.modules)


def _within_spans(s: State) -> None:
    keep_within_spans(s.free, s.spans, s.tree, s.modules)


def _call_gaps(s: State) -> None:
    s.data_nodes = [  # copies of a weight that no data reaches are written wherever the exporter put them
        i
        for i in range(len(s.graph.node))
        if s.kinds.kinds[i] is NodeKind.DATA and i in s.modules and (s.data.producers[i] or s.data.consumers[i])
    ]
    s.reused = reused_modules(s.seeds, s.calls)
    fill_call_gaps(s.data_nodes, s.reused, s.tree, s.modules, set(s.free))


def _serving_several(s: State) -> None:
    for i in s.free:  # a node joining streams from several modules (a residual add) serves them too
        contexts = {s.tree.closing_context(s.modules[j]) for j in s.data.producers[i] if j in s.modules}
        others = sorted(c for c in contexts if not is_ancestor(c, s.modules[i]))
        if len(contexts) > 1 and others:
            s.also[i] = others


def _readers(s: State) -> None:
    _tag_readers_of(s.graph, s.index, s.kinds, s.data, s.tree, s.modules, s.also, s.fixed)


def _hoisted(s: State) -> None:
    _lift_hoisted(s.kinds, s.tree, s.modules)


def _settings(s: State) -> None:
    s.consumers = [s.index.node_consumers(s.graph, i) for i in range(len(s.graph.node))]
    _place_settings(s.graph, s.index, s.kinds, s.data, s.tree, s.modules, s.static_values, s.data_nodes, s.consumers)
    settings = sorted((i for i in s.modules if s.kinds.kinds[i] is not NodeKind.DATA), reverse=True)
    keep_within_spans(settings, s.spans, s.tree, s.modules, s.consumers)
    fill_call_gaps(s.data_nodes, s.reused, s.tree, s.modules, set(), settings, s.consumers)


def _drop_own_module(s: State) -> None:
    s.also = {i: kept for i, others in s.also.items() if (kept := [m for m in others if m != s.modules[i]])}


Pass = Callable[[State], None]

PASSES: tuple[tuple[str, Pass], ...] = (
    ("claim restoring views", _claim_restoring_views),
    ("bound", _bound),
    ("first guesses", _first_guesses),
    ("hand to helpers", _helpers),
    ("claim wrapper heads", _wrapper_heads),
    ("absorb private feeders", _private_feeders),
    ("claim leaf tails", _leaf_tails),
    ("join first reader", _first_reader),
    ("movable", _movable),
    ("prepare for readers, settle", _prepare_and_settle),
    ("join first sharer", _first_sharer),
    ("deepen joins", _deepen_joins),
    ("hand results to next call", _results_to_next_call),
    ("return and align tails", _tails),
    ("return sized views", _sized_views),
    ("keep within call spans", _within_spans),
    ("fill call gaps", _call_gaps),
    ("note nodes serving several modules", _serving_several),
    ("tag readers", _readers),
    ("lift hoisted", _hoisted),
    ("place settings", _settings),
    ("drop a node's own module from the others it serves", _drop_own_module),
)
"""The passes of :func:`propagate`, in the order they run, each named; each reads and writes one :class:`State`."""


def propagate(state: State, passes: tuple[tuple[str, Pass], ...] | None = None) -> Propagation:
    """Tag every node from the seeds (node index to owning module) and their call numbers, running ``passes``
    (by default :data:`PASSES`) over ``state`` in order."""
    for _, run in PASSES if passes is None else passes:
        run(state)
    return Propagation(state.modules, state.also)


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
        call_starts(data_nodes, modules),
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
    began = call_starts([i for i, kind in enumerate(kinds.kinds) if kind is NodeKind.DATA and i in modules], modules)
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
        ) or began.get(readers[0], i) < i:
            # (arithmetic several elements of a stack read, written after the first reader's call began: it ran
            # there, and the exporter shared it with the elements after, which would compute the same)
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
