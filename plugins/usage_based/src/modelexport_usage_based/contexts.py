"""Where a node's computation runs: its bound and its first guess, from the contexts of its inputs.

A context is a module together with which call of it (a module used three times runs
in three calls). Each tagged node has a module and a call number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelexport_core.sdk import is_ancestor

from .data_flow import DataGraph
from .module_tree import ModuleTree

if TYPE_CHECKING:
    import onnx


SUM_OPS = frozenset({"Add", "Sum"})
"""Ops that add a residual back (a concatenation a block returns is not one)."""


@dataclass
class Placement:
    """The module and call number of every tagged node, as propagation goes."""

    modules: dict[int, str]
    calls: dict[int, int]

    def call_of(self, i: int) -> int:
        return self.calls.get(i, 0)

    def inside(self, i: int, module: str, call: int) -> bool:
        """Whether node ``i`` runs strictly inside the given call of ``module``."""
        tag = self.modules.get(i)
        return tag is not None and tag != module and is_ancestor(module, tag) and self.call_of(i) == call

    def within(self, i: int, module: str, call: int) -> bool:
        """Whether node ``i`` runs in the given call of ``module``, in its own code or inside a child."""
        tag = self.modules.get(i)
        return tag is not None and is_ancestor(module, tag) and self.call_of(i) == call


def bounds(
    count: int,
    data: DataGraph,
    tree: ModuleTree,
    fixed: set[int],
    modules: dict[int, str],
    shapes_read: list[frozenset[str]],
) -> list[str]:
    """For each node, the deepest called module containing a fixed node before it and one after it.

    A module call is one stretch of computation, so a node on a path between two nodes of
    one module runs inside that module; where it lies between nodes of each of two modules of
    one depth, inside their common ancestor (whichever ran it, the bound holds, and it does not
    hang on the order sets are read in). Two nodes of the same leaf are two calls of it
    (a reused layer), which bound nothing below the leaf's caller. Reading the shape of a
    value (``shapes_read``: data values whose shapes a node's inputs are computed from)
    places a node after it, inside the module where the value is seen (see ``_seen_in``).
    """
    before: list[frozenset[str]] = [frozenset()] * count
    after: list[frozenset[str]] = [frozenset()] * count
    for i in reversed(range(count)):
        if i in fixed:
            after[i] = frozenset({modules[i]})
        else:
            after[i] = frozenset().union(*(after[j] for j in data.consumers[i]))
    reached: list[frozenset[str]] = [frozenset()] * count  # the parameter nodes' modules alone
    seen: list[frozenset[str]] = [frozenset()] * count
    for i in range(count):
        if i in fixed:
            before[i] = reached[i] = frozenset({modules[i]})
            continue
        reached[i] = frozenset().union(*(reached[j] for j in data.producers[i]))
        seen[i] = frozenset(
            module
            for value in shapes_read[i]
            if (module := _seen_in(value, data, tree, reached, after)) is not None
        )
        before[i] = frozenset().union(seen[i], *(before[j] for j in data.producers[i]))
    result = [""] * count
    for i in range(count):
        if i in fixed:
            continue
        preceding = {m for j in data.producers[i] for m in before[j]} | seen[i]
        following = {m for j in data.consumers[i] for m in after[j]}
        candidates = {""} | {tree.closing_context(c) if tree.is_leaf(c := tree.common([a, b])) else c
                             for a in preceding for b in following}
        top = max(tree.depth(c) for c in candidates)
        deepest = sorted(c for c in candidates if tree.depth(c) == top)
        # between nodes of two modules of one depth (two calls of a module reused around it): within both callers
        result[i] = deepest[0] if len(deepest) == 1 else tree.common(deepest)
    return result


def _seen_in(
    value: str, data: DataGraph, tree: ModuleTree, before: list[frozenset[str]], after: list[frozenset[str]]
) -> str | None:
    """The deepest module a value is visible in: the one holding the parameter nodes before it and after its readers.

    A value computed and read inside one call (a projection reshaped for heads) is seen
    only there; one returned to the caller (a stack's first hidden states) is seen in the
    caller. None for values computed from graph inputs alone.
    """
    j = data.producer.get(value)
    if j is None or not before[j]:
        return None
    around = set(before[j]).union(*(after[k] for k in data.readers.get(value, ())))
    module = tree.common(around)
    return tree.closing_context(module) if tree.is_leaf(module) else module


def feeds_fixed(count: int, data: DataGraph, fixed: set[int]) -> list[bool]:
    """Whether each node's result reaches a fixed (parameter) node, rather than only graph outputs."""
    result = [False] * count
    for i in reversed(range(count)):
        result[i] = any(j in fixed or result[j] for j in data.consumers[i])
    return result


def reaches_outputs(graph: "onnx.GraphProto", data: DataGraph) -> list[bool]:
    """Whether each node's result reaches a graph output through data (not only shapes read elsewhere)."""
    result = [False] * len(graph.node)
    for i in reversed(range(len(graph.node))):
        result[i] = any(value in data.graph_outputs for value in graph.node[i].output) or any(
            result[j] for j in data.consumers[i]
        )
    return result


def context_of(i: int, data: DataGraph, tree: ModuleTree, placement: Placement) -> tuple[str, int, bool]:
    """The context node ``i`` runs in, from the contexts its inputs were computed in.

    After a leaf module the computation continues in its caller. Values from enclosing
    contexts are passed into inner calls as arguments, so when the contexts nest the node
    runs in the innermost. Otherwise it runs where its latest input was computed if every
    other input was passed into that call too (a node inside it reads the same value, as
    a gate multiplies its input by a function of it), else in the common module, and
    never inside a module whose two different calls it combines. Returns the module, the
    call number, and whether the guess is final: two calls of one module were combined, or
    a value passed into the innermost call meets what the call computed from it.
    """
    modules = placement.modules
    producers = [j for j in data.producers[i] if j in modules]
    if not producers:
        return "", 0, False
    context = {j: tree.closing_context(modules[j]) for j in producers}
    calls_by_module: dict[str, set[int]] = {}
    for j in producers:
        calls_by_module.setdefault(context[j], set()).add(placement.call_of(j))
    deepest = max(calls_by_module, key=lambda c: (tree.depth(c), c))
    if all(is_ancestor(c, deepest) for c in calls_by_module) and len(calls_by_module[deepest]) == 1:
        call = next(iter(calls_by_module[deepest]))
        outer = [j for j in producers if context[j] != deepest]
        # a value from outside that a node of this call reads too was passed into it: the node
        # combining it with the call's own result (a residual) is the call's, settled for good
        passed = bool(outer) and all(
            any(k != i and placement.inside(k, deepest, call) for k in data.consumers[j]) for j in outer
        )
        if outer and _read_by_caller_layer(i, deepest, data, tree, placement):
            return tree.caller(deepest), call, False
        return deepest, call, passed
    latest = max(producers)
    module, call = context[latest], placement.call_of(latest)

    def passed_in(j: int) -> bool:
        if context[j] != module and is_ancestor(context[j], module):
            return True
        return any(k != i and placement.within(k, module, call) for k in data.consumers[j])

    if all(passed_in(j) for j in producers if j != latest):
        if _read_by_caller_layer(i, module, data, tree, placement):
            return tree.caller(module), call, False
        return module, call, False
    common = tree.common(calls_by_module)
    # the deepest call around the latest input that the others were passed into (a block adding
    # its input to what its sublayers made of it)
    enclosing = tree.caller(module)
    while enclosing != common and tree.depth(enclosing) > tree.depth(common):
        if all(
            is_ancestor(enclosing, context[j])
            or any(k != i and placement.inside(k, enclosing, call) for k in data.consumers[j])
            for j in producers
            if j != latest
        ):
            return enclosing, call, False
        enclosing = tree.caller(enclosing)
    merged = False
    while common and len(calls_by_module.get(common, ())) > 1:
        common = tree.caller(common)
        merged = True
    return common, 0 if not common else call, merged


def _read_by_caller_layer(i: int, module: str, data: DataGraph, tree: ModuleTree, placement: Placement) -> bool:
    """Whether node ``i``, a sum, feeds a layer of the caller of ``module`` beside it, and nothing inside ``module``.

    The sum of a call's result and the value the call was given, read next by a norm or
    projection of the caller (a post-norm layer adding its sublayer's result to the
    sublayer's input), was made by the caller after the call returned. Not so for an
    element of a stack, whose last block's own residual sum feeds the stack owner's final norm.
    """
    if i >= len(data.op_types) or data.op_types[i] not in SUM_OPS:
        return False
    caller = tree.caller(module)
    if module.rpartition(".")[0] != caller:
        return False  # an element of a stack: the stack's last block may end with its own residual
    seeded = [k for k in data.consumers[i] if k in placement.calls and k in placement.modules]
    return bool(seeded) and all(
        not is_ancestor(module, placement.modules[k]) and is_ancestor(caller, placement.modules[k])
        and tree.caller(placement.modules[k]) == caller
        for k in seeded
    )
