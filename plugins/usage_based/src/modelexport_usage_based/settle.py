"""Refining first guesses: each node moves to where its values cross the fewest module boundaries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelexport_core.sdk import in_sibling_elements as repeated_siblings
from modelexport_core.sdk import is_ancestor

from .data_flow import DataGraph
from .module_tree import ModuleTree

if TYPE_CHECKING:
    import onnx

SETTLE_SWEEPS = 4
"""Rounds of moving nodes; each move lowers the total number of boundary crossings."""


def prepare_for_readers(
    free: list[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    tree: ModuleTree,
    bounds: list[str],
    modules: dict[int, str],
    configured: list[bool],
    static_settings: list[bool] | None = None,
) -> set[int]:
    """A node that only adapts a widely read value for one module belongs to that module.

    A mask built once and read by every layer is turned into an additive bias inside each
    layer; a final hidden state that the model returns and a head reads is sliced inside
    the head. Such a node reads one value that is read elsewhere too and feeds a single
    module. So does one set up by shapes or settings computed for it (``configured``: a pad
    sized from its input) that reads what a leaf returned (an activation) and feeds a single module.
    Returns the nodes so given to their reader.
    """

    def after_leaf(value: str) -> bool:
        j = data.producer.get(value)
        return j is not None and tree.is_leaf(modules.get(j, ""))

    movable = set(free)
    _prepare_chains(free, graph, data, tree, bounds, modules, {i for i in modules if i not in movable})
    prepared: set[int] = set()
    for i in reversed(free):
        if len(data.inputs[i]) != 1:
            continue
        published = data.is_published(data.inputs[i][0])
        if not (published or configured[i]):
            continue
        outputs = data.outputs(graph, i)
        if any(value in data.graph_outputs for value in outputs):
            continue
        readers = {
            tree.closing_context(modules[k]) if tree.is_leaf(modules[k]) else modules[k]
            for value in outputs
            for k in data.readers.get(value, ())
            if k in modules
        }
        outer = tree.common(readers) if readers else ""
        if len(readers) > 1 and outer in readers:  # read by a module and inside a child it calls: that module's
            readers = {outer}
        if len(readers) == 1:
            (reader,) = readers
            if not published and not after_leaf(data.inputs[i][0]):
                if not (static_settings and static_settings[i] and _from_other_branch(i, reader, data, tree, modules)):
                    continue
            if is_ancestor(bounds[i], reader):
                modules[i] = reader
                prepared.add(i)
    return prepared


def _prepare_chains(
    free: list[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    tree: ModuleTree,
    bounds: list[str],
    modules: dict[int, str],
    fixed: set[int],
) -> None:
    """A chain of views from a widely read value to one module's parameter op is that module's (a layout change).

    The chain starts at a node reading one published value and goes on through nodes that
    each read only the previous one and are its only reader; when its last result is read
    in one module alone, the module took the published value and prepared it for its own use.
    A chain from a graph input counts only where it ends at parameter ops (``fixed``): the
    model's inputs are prepared in the root for every layer (a mask) as often as in a module.
    """
    movable = set(free)
    after_parameters = [False] * len(data.producers)  # computed from a parameter op's result, not from inputs alone
    for i in range(len(data.producers)):
        after_parameters[i] = any(j in fixed or after_parameters[j] for j in data.producers[i])
    for i in free:
        if len(data.inputs[i]) != 1 or not data.is_published(data.inputs[i][0]):
            continue
        chain = [i]
        while True:
            last = chain[-1]
            outputs = data.outputs(graph, last)
            readers = [k for value in outputs for k in data.readers.get(value, ())]
            if len(outputs) != 1 or outputs[0] in data.graph_outputs or len(readers) != 1:
                break
            (k,) = readers
            if k not in movable or len(data.inputs[k]) != 1:
                break
            chain.append(k)
        if len(chain) < 2:
            continue
        last = chain[-1]
        readers = [k for value in data.outputs(graph, last) for k in data.readers.get(value, ()) if k in modules]
        if not after_parameters[i] and not all(k in fixed for k in readers):
            continue  # what a model input becomes is placed by the parameter ops that read it alone
        targets = {tree.closing_context(modules[k]) if tree.is_leaf(modules[k]) else modules[k] for k in readers}
        if len(targets) == 1:
            (target,) = targets
            if all(is_ancestor(bounds[j], target) for j in chain):
                for j in chain:
                    modules[j] = target


def _from_other_branch(i: int, reader: str, data: DataGraph, tree: ModuleTree, modules: dict[int, str]) -> bool:
    """Whether node ``i`` reads a value made in a call that encloses neither it nor its reader (a sibling's result)."""
    j = data.producer.get(data.inputs[i][0])
    if j is None or j not in modules:
        return False
    return not is_ancestor(tree.closing_context(modules[j]), reader)


def settle(
    free: list[int],
    graph: "onnx.GraphProto",
    data: DataGraph,
    tree: ModuleTree,
    bounds: list[str],
    modules: dict[int, str],
) -> None:
    """Move each free node to where its values cross the fewest module boundaries, within its bound.

    A value read in several modules crosses into each once, so the cost of a placement is,
    over the values a node reads and writes, the size of the module subtree joining the
    value's producer and all its readers (graph inputs and outputs sit at the root). A
    node only moves into a module that has children (a leaf holds its parameter ops, not
    its neighbours' work). Ties keep the current tag, unless they lie in different
    elements of a stack (the end of layer i or the start of layer i+1): then the module
    holding both, so that a node is never given to the wrong one of two identical layers.
    """

    def tag_of(j: int | None) -> str:
        return modules[j] if j is not None and j in modules else ""

    for _ in range(SETTLE_SWEEPS):
        changed = False
        for i in free:
            read = [
                [tag_of(data.producer.get(value))]
                + [modules[k] for k in data.readers[value] if k != i and k in modules]
                for value in data.inputs[i]
            ]
            written = [
                [modules[k] for k in data.readers.get(value, ()) if k in modules]
                + ([""] if value in data.graph_outputs else [])
                for value in data.outputs(graph, i)
            ]
            current = modules[i]
            options = {current}
            for tags in read + written:
                for tag in tags:
                    options.update(a for a in _ancestors_within(tag, bounds[i], tree) if not tree.is_leaf(a))

            def cost(option: str, around: list = read + written) -> int:
                return sum(tree.span(tags + [option]) for tags in around)

            costs = {option: cost(option) for option in options}
            lowest = min(costs.values())
            tied = [option for option, value in costs.items() if value == lowest]
            best = current if costs[current] == lowest else min(tied, key=lambda o: (-tree.depth(o), o))
            if any(repeated_siblings(o, best) and _alike_elements(o, best, tree) for o in tied):
                shared = tree.common(tied)  # torn between two layers of a stack: the stack's owner
                if costs.get(shared) == lowest:
                    best = shared
            if best != current:
                modules[i] = best
                changed = True
        if not changed:
            break


def _alike_elements(a: str, b: str, tree: ModuleTree) -> bool:
    """Whether the two elements of a container holding ``a`` and ``b`` are of one class (two identical layers).

    Between two different elements (a pooling transition and the block after it) the end of
    one cannot be mistaken for the same place in an identical neighbour, so no tie needs the owner.
    """
    first, second = a.split("."), b.split(".")
    for depth, (x, y) in enumerate(zip(first, second)):
        if x != y:
            return tree.classes.get(".".join(first[: depth + 1])) == tree.classes.get(".".join(second[: depth + 1]))
    return True


def _ancestors_within(qualname: str, bound: str, tree: ModuleTree) -> list[str]:
    """The called modules from ``qualname`` up to ``bound`` (none when it lies outside the bound)."""
    if not is_ancestor(bound, qualname):
        return []
    result = []
    current = qualname
    while True:
        if current not in tree.containers:
            result.append(current)
        if current == bound or not current:
            break
        current = current.rpartition(".")[0]
    return result


def join_first_sharer(
    free: list[int], graph: "onnx.GraphProto", data: DataGraph, tree: ModuleTree, modules: dict[int, str]
) -> None:
    """Give a node the exporter shared between the layers of a stack to the first layer, where it was written.

    The exporter computes an equal result once (the positions' cosines unsqueezed for every
    layer's scores) and lets every layer read it: the node is written where the first
    layer made it, amid that layer's own nodes. So a node read in several elements of one
    stack, whose previous data node in graph order runs in the module of its first reader,
    belongs to that module.
    """
    order = sorted(set(free) | {i for i in modules if data.producers[i] or data.consumers[i]})
    previous = {i: order[p - 1] for p, i in enumerate(order) if p}
    for i in free:
        ordered = sorted(
            (k, tree.closing_context(modules[k]) if tree.is_leaf(modules[k]) else modules[k])
            for value in data.outputs(graph, i)
            for k in data.readers.get(value, ())
            if k in modules
        )
        readers = {reader for _, reader in ordered}
        if len(readers) < 2 or not all(repeated_siblings(a, b) for a in readers for b in readers if a != b):
            continue
        first = ordered[0][1]
        before = previous.get(i)
        if before is not None and is_ancestor(first, modules.get(before, "")) and first != modules[i]:
            modules[i] = first
