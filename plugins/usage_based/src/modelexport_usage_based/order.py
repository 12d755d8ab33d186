"""Graph order as a bound: the nodes of one module call are written in one stretch.

Exporters write nodes in the order they ran, and a call runs from its start to its
return without anything of its caller in between. So a data node written between two
parameter nodes of one call of a module ran inside that call, whatever its data flow
says (a mask computed from an input of the whole model, but inside the module that uses
it). Only modules whose parameter nodes all belong to one call are used: the stretches of
a reused module's calls interleave with their caller's code.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping

from modelexport_core.sdk import is_ancestor

from .data_flow import DataGraph
from .module_tree import ModuleTree
from .settle import repeated_siblings


def reused_modules(seeds: dict[int, str], calls: dict[int, int]) -> set[str]:
    """Modules (and their ancestors up to the reused one, conservatively all) holding a seed of a later call."""
    reused: set[str] = set()
    for i, module in seeds.items():
        if calls.get(i):
            atoms = module.split(".") if module else []
            reused.update(".".join(atoms[:cut]) for cut in range(len(atoms) + 1))
    return reused


def call_spans(
    seeds: dict[int, str], calls: dict[int, int], tree: ModuleTree
) -> dict[str, tuple[int, int]]:
    """For each called module called once, the first and last graph position of the parameter nodes inside it.

    A module is taken as called once when no seed inside it has a later call number and no
    parameter node of a module outside it lies amid its stretch. A torch layer (one
    operation and its parameters) bounds nothing.

    ``calls``: the call number of each seed that data reaches (copies of a weight computed
    from the weight alone are written wherever the exporter put them, and have none).
    """
    spans: dict[str, tuple[int, int]] = {}
    reused: set[str] = set()
    for i, module in seeds.items():
        if i not in calls:
            continue
        current = module
        while True:
            if current not in tree.containers:
                if calls[i]:
                    reused.add(current)
                first, last = spans.get(current, (i, i))
                spans[current] = (min(first, i), max(last, i))
            if not current:
                break
            current = current.rpartition(".")[0]
    ordered = sorted(i for i in seeds if i in calls)
    result: dict[str, tuple[int, int]] = {}
    for module, (first, last) in spans.items():
        if module in reused or first == last or (tree.is_leaf(module) and module in tree.torch_classes):
            continue
        inside = ordered[bisect_left(ordered, first) : bisect_right(ordered, last)]
        # a parameter node of another module amid the stretch: two calls around it, not one
        if all(is_ancestor(module, seeds[j]) for j in inside):
            result[module] = (first, last)
    return result


def keep_within_spans(
    nodes: list[int],
    spans: dict[str, tuple[int, int]],
    tree: ModuleTree,
    modules: dict[int, str],
    readers: list[list[int]] | None = None,
) -> None:
    """Move each node written inside the stretch of a call, but tagged outside it, into the innermost such call.

    With ``readers`` (for shape arithmetic and constants, which exporters hoist to where
    their inputs are ready: a later layer's shape computed amid an earlier one), a node read
    in another element of the same stack stays where it is: it may have been made for that one.
    """
    around = innermost_spans(nodes, spans)
    for i in nodes:
        inner = around[i]
        if not inner or is_ancestor(inner, modules[i]):
            continue
        if readers is None or not any(repeated_siblings(modules.get(k, ""), inner) for k in readers[i]):
            modules[i] = inner


def seed_spans(resolved: dict[int, str]) -> dict[str, tuple[int, int]]:
    """The stretch of every module (and its ancestors) over resolved parameter nodes, where nothing else lies amid it.

    Used before call numbers exist: a stretch holding another module's parameter node
    spans two calls and is left out, as in ``call_spans``.
    """
    spans: dict[str, tuple[int, int]] = {}
    for i, module in resolved.items():
        atoms = module.split(".") if module else []
        for cut in range(len(atoms) + 1):
            prefix = ".".join(atoms[:cut])
            first, last = spans.get(prefix, (i, i))
            spans[prefix] = (min(first, i), max(last, i))
    ordered = sorted(resolved)
    result = {}
    for module, (first, last) in spans.items():
        inside = ordered[bisect_left(ordered, first) : bisect_right(ordered, last)]
        if last - first > 1 and all(is_ancestor(module, resolved[j]) for j in inside):
            result[module] = (first, last)
    return result


def within_span(i: int, candidates: frozenset[str], around: dict[int, str]) -> frozenset[str]:
    """The candidates lying inside the innermost stretch that node ``i`` is written amid (all of them if none does).

    ``around``: the innermost stretch around each node (``innermost_spans``).
    """
    inner = around.get(i, "")
    if not inner:
        return candidates
    kept = frozenset(c for c in candidates if is_ancestor(inner, c))
    return kept or candidates


def fill_call_gaps(
    nodes: list[int],
    reused: set[str],
    tree: ModuleTree,
    modules: dict[int, str],
    movable: set[int],
    settings: list[int] | None = None,
    readers: list[list[int]] | None = None,
) -> None:
    """Deepen the nodes lying between two nodes of one call but tagged to a module around it.

    ``nodes``: the data nodes in graph order. A stretch from the first to the last node
    placed inside a module called once, holding nothing placed beside it (only nodes
    inside it or around it), ran within that call: the nodes placed around it (``movable``
    ones) are moved in. Outer modules go first, so the innermost call has the last word.
    ``reused``: modules called more than once, whose stretches interleave with their caller's code.
    ``settings`` (shape arithmetic and constants, with their ``readers``) written in such a
    stretch move in too when a node inside the call reads them: an exporter writes a shared
    one where it first computed it, and the ends of a stretch placed from data alone may reach
    past the call, so a setting only its caller reads stays with its caller.
    """
    position = {i: p for p, i in enumerate(nodes)}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i in nodes:
        module = modules[i]
        while True:
            if module not in tree.containers:
                first.setdefault(module, i)
                last[module] = i
            if not module:
                break
            module = module.rpartition(".")[0]
    ordered_settings = sorted(settings or ())
    for module in sorted(first, key=tree.depth):
        if not module or module in reused or tree.is_leaf(module) or module in tree.containers:
            continue
        stretch = nodes[position[first[module]] : position[last[module]] + 1]
        if not all(is_ancestor(module, modules[i]) or is_ancestor(modules[i], module) for i in stretch):
            continue
        for i in stretch:
            if i in movable and modules[i] != module and is_ancestor(modules[i], module):
                modules[i] = module
        if readers is None:
            continue
        written = ordered_settings[bisect_left(ordered_settings, first[module]) : bisect_right(ordered_settings, last[module])]
        for i in reversed(written):  # readers first: a shape computed for a setting moves with it
            if modules[i] == module or not is_ancestor(modules[i], module):
                continue
            if any(is_ancestor(module, modules.get(k, "")) for k in readers[i]):
                modules[i] = module


def call_starts(nodes: list[int], modules: Mapping[int, str]) -> dict[str, int]:
    """Where each module's call began: the first of ``nodes`` (data nodes, in graph order) placed inside it."""
    start: dict[str, int] = {}
    for i in nodes:
        module = modules.get(i, "")
        while module and module not in start:
            start[module] = i
            module = module.rpartition(".")[0]
    return start


def settings_before_calls(
    nodes: list[int], settings: list[int], tree: ModuleTree, modules: dict[int, str], activity: list[int] | None = None
) -> None:
    """Give the caller the shape arithmetic and constants written before the call that reads them began.

    ``nodes``: the data nodes in graph order; a call begins at the first of them placed
    inside its module. A setting written earlier ran in a call already under way: the
    deepest module around its reader's that had begun (a mask a block builds before it
    calls the layer that reads it), when that call did other work between it and the call
    (``activity``: the nodes that count as work, data nodes and shape arithmetic, in graph
    order; by default the data nodes): a setting at the very start of a call is the call's.
    """
    work = activity if activity is not None else nodes
    start = call_starts(nodes, modules)
    for i in sorted(settings, reverse=True):  # the latest first: what it leaves to the caller counts as work
        module = modules[i]
        if not module or start.get(module, -1) < i:
            continue
        between = work[bisect_right(work, i) : bisect_left(work, start[module])]
        if not any(not is_ancestor(module, modules[j]) for j in between):
            continue
        outer = tree.caller(module)
        while outer and start.get(outer, len(nodes) + i + 1) > i:
            outer = tree.caller(outer)
        modules[i] = outer


def settings_where_measured(
    settings: list[int],
    sources: list[frozenset[str]],
    inputs_from: list[list[int]],
    measuring: set[int],
    data: DataGraph,
    tree: ModuleTree,
    modules: dict[int, str],
    began: Mapping[str, int] | None = None,
) -> None:
    """Move shape arithmetic out of a module that never sees the values it measures.

    ``sources``: for each node, the data values whose shapes it is computed from;
    ``inputs_from``: the nodes each reads; ``measuring``: the nodes reading a shape directly.
    A value (a model input too) is seen in a module that computes it or reads it as data; a
    module that does neither was not given it, so a node measuring it there ran in the caller that holds it
    (a mask a block builds from the size of its padded input, read only by the scoring layer it
    calls), and so did the arithmetic computed from such moved nodes. Arithmetic reading
    a size the caller computed and passed (positions handed to a rotary table) stays.
    A value made only to be measured (nothing computes with it) was handed over to be measured.
    But arithmetic that measures nothing itself, written after the call of its module began (``began``: where each
    call began), ran in that call: the sizes it computes from are the call's too (sizes an exporter computed once
    at the start of the graph, for every tensor of that size).
    """

    def seen_in(value: str, module: str) -> bool:
        j = data.producer.get(value)
        if j is not None and j in modules and is_ancestor(module, modules[j]):
            return True
        return any(k in modules and is_ancestor(module, modules[k]) for k in data.readers.get(value, ()))

    moved: set[int] = set()
    for i in sorted(settings):
        measured = sources[i]
        module = modules[i]
        if not measured or not module or any(seen_in(value, module) for value in measured):
            continue
        if any(value not in data.readers for value in measured):
            continue
        if i not in measuring and (not any(j in moved for j in inputs_from[i])
                                   or (began is not None and began.get(module, i) < i)):
            continue
        while module and not any(seen_in(value, module) for value in measured):
            module = tree.caller(module)
        modules[i] = module
        moved.add(i)


def innermost_spans(positions: list[int], spans: dict[str, tuple[int, int]]) -> dict[int, str]:
    """For each position, the innermost stretch strictly around it ("" where none is), in one sweep.

    The stretches of calls nest or lie apart (a stretch holds nothing of a module outside its own).
    """
    ordered = sorted(spans.items(), key=lambda item: (item[1][0], -item[1][1]))
    result: dict[int, str] = {}
    stack: list[tuple[str, int]] = []  # open stretches, innermost last: (module, last position)
    index = 0
    for i in sorted(positions):
        while index < len(ordered) and ordered[index][1][0] < i:
            module, (first, last) = ordered[index]
            while stack and stack[-1][1] <= first:
                stack.pop()
            stack.append((module, last))
            index += 1
        while stack and stack[-1][1] <= i:
            stack.pop()
        result[i] = stack[-1][0] if stack else ""
    return result
