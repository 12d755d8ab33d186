"""Parameter-free helper layers (activations, poolings) take the stretch of graph they compute.

A helper is a leaf child holding no parameters that computes something (``ModuleTree.parameter_free_helpers``).
It runs on the value of the child registered before it that computes (modules are most often registered in
the order they run): a layer with parameter nodes, the layer a norm registered there was folded into, or
the helper before it. Its stretch starts at that value, or at its parent's own result (the activation after
a residual add), reads nothing else (no shape or setting computed for it), holds at most the ops the helper
exports to alone, and there are as many stretches per call of the parent as the helper ran per call of it.
A stretch that does not come out as exactly the helper's ops is refused and the claims are made again
without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelexport_core.sdk import is_ancestor, parent_qualname

from .contexts import Placement
from .data_flow import DataGraph
from .helper_sizes import HelperExport
from .module_tree import ModuleTree

if TYPE_CHECKING:
    import onnx

MAX_HELPER_ROUNDS = 4
"""How many times the claims are made again after refusing stretches that are not what a helper exports."""


@dataclass(frozen=True)
class Helpers:
    """Each module's helpers and the child whose value each one runs on."""

    of: dict[str, tuple[str, ...]]
    """Module to its helpers, in registration order."""
    feeding: dict[str, str]
    """Helper to the module whose value it runs on (a sibling before it, or the layer a norm was folded into)."""
    exports: dict[str, HelperExport]
    on_folded: dict[str, tuple[str, ...]]
    """A layer that norms were folded into, to the helpers of those norms (they run on its result)."""

    def may_compute(self, helper: str, op_type: str) -> bool:
        """Whether ``helper`` can have made a node of ``op_type``: it exports to that op, or its export is unknown."""
        export = self.exports.get(helper)
        return export is None or op_type in export.ops

    def fitting(self, module: str, op_type: str) -> list[str]:
        return [helper for helper in self.of.get(module, ()) if self.may_compute(helper, op_type)]

    def fed_from(self, module: str, value_module: str) -> list[str]:
        """The helpers of ``module`` that run on a value computed in ``value_module``."""
        return [h for h in self.of.get(module, ()) if h in self.feeding and is_ancestor(self.feeding[h], value_module)]


def find_helpers(
    tree: ModuleTree, seeded: set[str], exports: dict[str, HelperExport], folded_into: dict[str, str]
) -> Helpers:
    """Every module's helpers, each with the nearest earlier sibling that computes (``seeded``: modules
    holding parameter nodes; ``folded_into``: a norm folded away and the layer holding it)."""
    of: dict[str, tuple[str, ...]] = {}
    feeding: dict[str, str] = {}
    for name in tree.names:
        helpers = tuple(tree.parameter_free_helpers(name))
        if not helpers:
            continue
        of[name] = helpers
        siblings = list(tree.children.get(name, ()))
        for helper in helpers:
            for child in reversed(siblings[: siblings.index(helper)]):
                if child in helpers or any(is_ancestor(child, tag) for tag in seeded):
                    feeding[helper] = child
                    break
                if child in folded_into:
                    feeding[helper] = folded_into[child]
                    break
    on_folded: dict[str, tuple[str, ...]] = {}
    for norm, layer in folded_into.items():  # a folded norm's own helper runs on the layer's result
        for helper in of.get(norm, ()):
            feeding.setdefault(helper, layer)
            on_folded[layer] = (*on_folded.get(layer, ()), helper)
    return Helpers(of, feeding, exports, on_folded)


def hand_to_helpers(
    free: list[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    tree: ModuleTree,
    placement: Placement,
    configured: list[bool],
    exports: dict[str, HelperExport],
    folded: dict[str, frozenset[str]] | None = None,
) -> None:
    """Give each parameter-free helper the stretches it computes (see the module's description).

    ``configured``: nodes reading a shape or setting computed for them (an activation reads fixed
    constants only); ``folded``: the norms each layer's tensors may hold folded.
    """
    modules = placement.modules
    free_set = set(free)
    seeded = {tag for i, tag in modules.items() if i not in free_set}
    helpers = find_helpers(tree, seeded, exports, folded_into(folded or {}, tree))
    before = dict(modules)
    refused: set[tuple[str, int]] = set()
    for _ in range(MAX_HELPER_ROUNDS):
        stretches = _claim_stretches(free, graph, data, placement, configured, helpers, tree, refused)
        wrong = {
            (helper, source)
            for (helper, _, _), (source, nodes) in stretches.items()
            if helper in exports and sorted(graph.node[i].op_type for i in nodes) != sorted(exports[helper].ops_in_order)
        }
        if not wrong:
            return
        for i in free:
            modules[i] = before[i]
        refused |= wrong


def _claim_stretches(
    free: list[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    placement: Placement,
    configured: list[bool],
    helpers: Helpers,
    tree: ModuleTree,
    refused: set[tuple[str, int]],
) -> dict[tuple[str, int, int], tuple[int, list[int]]]:
    """One pass: each helper call's stretches (helper, call, which) with their source node and nodes."""
    modules = placement.modules
    stretch_source: dict[int, int] = {}
    stretches: dict[tuple[str, int, int], tuple[int, list[int]]] = {}
    sources_of: dict[tuple[str, int], list[int]] = {}  # each helper call's stretches, at most as many as it runs
    owner_of = {helper: module for module, held in helpers.of.items() for helper in held}
    # a stretch from the value a helper runs on first, then from the module's own result
    for own_result in (False, True):
        for i in free:
            if i in stretch_source or data.reads_graph_input[i] or configured[i]:
                continue
            op_type = graph.node[i].op_type
            if any(j in stretch_source and len(data.consumers[j]) > 1 for j in data.producers[i]):
                continue  # a stretch value read twice was returned: the helper's call ended there
            for helper in _candidates(i, op_type, own_result, modules, helpers, owner_of, tree, data):
                source = _stretch_start(i, helper, data, modules, stretch_source)
                if source is None or (helper, source) in refused:
                    continue
                owner = owner_of[helper]
                source_module = modules.get(source, "")
                fed = helper in helpers.fed_from(owner, source_module)
                if own_result and not fed and not is_ancestor(owner, source_module):
                    continue
                if not own_result and not fed:
                    continue
                if source in stretch_source and not fed:
                    continue  # a stretch starts after another helper's only where it runs on that helper
                export = helpers.exports.get(helper)
                started = sources_of.setdefault((helper, placement.call_of(source)), [])
                if source not in started:
                    if len(started) >= (export.per_call if export is not None else 1):
                        continue
                    started.append(source)
                key = (helper, placement.call_of(source), started.index(source))
                _, nodes = stretches.setdefault(key, (source, []))
                if len(nodes) >= (export.size if export is not None else len(free)):
                    continue
                nodes.append(i)
                modules[i] = helper
                stretch_source[i] = source
                break
    return stretches


def _candidates(
    i: int, op_type: str, own_result: bool, modules: dict[int, str], helpers: Helpers, owner_of: dict[str, str],
    tree: ModuleTree, data: DataGraph,
) -> list[str]:
    """The helpers that may have computed node ``i``, nearest first.

    Its value's own module's, where the node reads one value besides helper nodes: the helpers running on
    that value, found walking up from where it was computed (parents, not callers: a sequence computes
    nothing itself but its children run in its call), or with ``own_result`` the helpers of the module that
    computed it. Then those of the node's first guess and of the callers whose child it lies in. A helper's
    module is only ever inside the node's first guess or around it, never beside it.
    """
    guess = modules[i]
    found: list[str] = []
    values = {modules.get(j, "") for j in data.producers[i]}
    if len(values) > 1:  # an activation's later nodes read its first ones too
        values -= set(owner_of)
    if len(values) == 1:
        (value_module,) = values
        if own_result:
            found += helpers.fitting(value_module, op_type)
        module: str | None = value_module
        while module is not None:
            found += [h for h in helpers.fed_from(module, value_module) if helpers.may_compute(h, op_type)]
            module = parent_qualname(module) if module else None
        found += [h for h in helpers.on_folded.get(value_module, ()) if helpers.may_compute(h, op_type)]
    found += helpers.fitting(guess, op_type)
    module = tree.caller(guess) if guess else None
    while module is not None:
        found += [h for h in helpers.fed_from(module, guess) if helpers.may_compute(h, op_type)]
        module = tree.caller(module) if module else None
    return [h for h in dict.fromkeys(found) if is_ancestor(guess, owner_of[h]) or is_ancestor(owner_of[h], guess)]


def _stretch_start(
    i: int, helper: str, data: DataGraph, modules: dict[int, str], stretch_source: dict[int, int]
) -> int | None:
    """The one node a stretch of ``helper`` holding node ``i`` starts from, or None where it reads several."""
    sources = {stretch_source.get(j, j) if modules.get(j) == helper else j for j in data.producers[i]}
    return next(iter(sources)) if len(sources) == 1 else None


def folded_into(folded: dict[str, frozenset[str]], tree: ModuleTree) -> dict[str, str]:
    """Each norm folded into one layer: of the norms a layer's tensors may hold (equal norms are all candidates),
    the one nearest to it in the module tree and registered soonest after it, where no other layer is as near."""
    order = {name: position for position, name in enumerate(tree.names)}

    def closeness(layer: str, norm: str) -> tuple[int, int]:
        # nearest in the tree, then registered soonest after the layer (a norm follows the layer it is folded into)
        gap = order[norm] - order[layer]
        return tree.distance(layer, norm), gap if gap > 0 else len(order) - gap

    nearest: dict[str, list[tuple[tuple[int, int], str]]] = {}
    for layer, norms in folded.items():
        ranked = sorted((closeness(layer, norm), norm) for norm in norms if norm in order and layer in order)
        if ranked and (len(ranked) == 1 or ranked[0][0] < ranked[1][0]):
            rank, norm = ranked[0]
            nearest.setdefault(norm, []).append((rank, layer))
    found: dict[str, str] = {}
    for norm, layers in nearest.items():
        layers.sort()
        if len(layers) == 1 or layers[0][0] < layers[1][0]:
            found[norm] = layers[0][1]
    return found
