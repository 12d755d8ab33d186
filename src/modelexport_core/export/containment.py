"""The invariant every inferring strategy holds before it writes: a node between two parts of one call is in it.

A module called once runs as one stretch of time. A node whose producers and consumers all ran
inside that call ran between them, so inside the call too: its module is that module or one of
its descendants. Exporters do not move a node out of such a stretch (a value merged with an equal
one of another module has that module's consumers too). A tag breaking the rule is a defect of
the inference, never a tag to write: the node is given the deepest module its neighbours share,
and the defect is counted so the sidecar says how often the inference needed the guard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Collection

from modelexport_core.format.graph import GraphIndex
from modelexport_core.format.tags import common_ancestor, is_ancestor

if TYPE_CHECKING:
    import onnx

EVIDENCE_KIND = "containment"
"""The evidence a node held to the invariant is recorded with (``TaggingResult.evidence``)."""


@dataclass
class Containment:
    """Module of every node after the check, and the nodes it had to move (name: the module it had)."""

    node_modules: dict[str, str]
    moved: dict[str, str] = field(default_factory=dict)


def hold_call_containment(
    graph: "onnx.GraphProto", node_modules: dict[str, str], called_more_than_once: Collection[str],
    called: Collection[str], *, index: GraphIndex | None = None,
) -> Containment:
    """Give every node whose producers and consumers all ran inside one call of a module that module (or keep
    a deeper one of its own).

    ``node_modules`` holds every node by name; ``called_more_than_once`` the modules whose calls the
    rule cannot tell apart (a reused module, and its descendants); ``called`` the modules that run at
    all: a container (a list of layers) never does, so nodes between two of its elements are its
    caller's business and the rule looks at the nearest ancestor that ran. Nodes are visited in graph
    order, so a node moved early counts as a neighbour of the later ones. ``index``: the graph's
    :class:`GraphIndex`, where the caller has built one (as for the order checks below).
    """
    index = index if index is not None else GraphIndex.of(graph)  # the caller's, where it has one
    keys = index.keys
    modules = dict(node_modules)
    moved: dict[str, str] = {}
    reused = tuple(called_more_than_once)
    ran = set(called)
    for i, key in enumerate(keys):
        producers = index.node_producers(graph, i)
        consumers = index.node_consumers(graph, i)
        if not producers or not consumers:
            continue
        around = common_ancestor(modules[keys[j]] for j in (*producers, *consumers))
        while around and around not in ran:
            around = around.rpartition(".")[0]
        if not around or any(is_ancestor(name, around) for name in reused if name):
            continue
        if not is_ancestor(around, modules[key]):
            moved[key] = modules[key]
            modules[key] = around
    return Containment(modules, moved)


def hold_causality(
    graph: "onnx.GraphProto", node_modules: dict[str, str], first_call: dict[str, int],
    called_more_than_once: Collection[str], anchored: Collection[str], *, index: GraphIndex | None = None,
) -> Containment:
    """Give no node a module whose call began after the calls of the nodes reading its value had ended.

    Two sibling modules called once run one after the other (``first_call``: each module's position in
    the order modules were called), so a node inside the later one cannot feed a node inside the earlier
    one: a value is made before it is read. A node breaking this (a small computation every layer repeats
    with the same numbers, matched to the wrong layer) is given the module of its reader whose call began
    first: the value was there when that call needed it (an exporter that merged equal computations of
    several layers keeps the first). Only readers whose module is known, not inferred (``anchored``: a
    parameter read, a value matched), count, so one wrong guess is not spread upstream; a node moved for
    them counts as known for the nodes feeding it (readers are visited first).

    Then the other way: no node is given a module whose call had ended before the call of a node whose
    value it reads began (a value is read after it is made). Such a node (the rest of that repeated
    computation, fed by the later layer's own sizes) is given the module of its known producer whose call
    began last: the value it reads was there only then. Producers are visited first, in graph order, and a node
    moved so counts as known for its readers, unless such a reader also reads a known value made in its own
    module (or below it): then the two makers disagree, the moved one's module is only derived, and the reader
    stays (one wrong maker, a computation two stacks share matched to the later one, is not carried through
    every node after it). A node
    whose module was inferred and whose readers all went to one module so (the constants and shape
    arithmetic feeding them) goes with them, as it would have had they been there at first.
    """
    index = index if index is not None else GraphIndex.of(graph)  # the caller's, where it has one
    keys = index.keys
    modules = dict(node_modules)
    moved: dict[str, str] = {}
    reused = tuple(name for name in called_more_than_once if name)
    known = set(anchored)
    for i in reversed(range(len(keys))):
        key = keys[i]
        readers = [modules[keys[j]] for j in index.node_consumers(graph, i) if keys[j] in known]
        if any(_runs_after(modules[key], reader, first_call, reused) for reader in readers):
            moved.setdefault(key, modules[key])
            modules[key] = min(readers, key=lambda reader: _began(reader, first_call))
            known.add(key)
    forward: set[int] = set()
    for i, key in enumerate(keys):
        producers = [j for j in index.node_producers(graph, i) if keys[j] in known]
        makers = [modules[keys[j]] for j in producers]
        late = [j for j in producers if _runs_after(modules[keys[j]], modules[key], first_call, reused)]
        if late and (any(j not in forward for j in late) or not any(
            j not in forward and is_ancestor(modules[key], modules[keys[j]]) for j in producers
        )):
            moved.setdefault(key, modules[key])
            modules[key] = max(makers, key=lambda maker: _began(maker, first_call))
            known.add(key)
            forward.add(i)
    for i in reversed(range(len(keys))):  # an inferred node whose readers all went there goes with them
        key = keys[i]
        reading = index.node_consumers(graph, i)
        if key in known or not reading or not forward.intersection(reading):
            continue
        there = {modules[keys[j]] for j in reading}
        if len(there) == 1 and modules[key] not in there:
            moved.setdefault(key, modules[key])
            modules[key] = there.pop()
            forward.add(i)
    return Containment(modules, moved)


def hold_lineage(
    graph: "onnx.GraphProto", node_modules: dict[str, str], first_call: dict[str, int],
    called_more_than_once: Collection[str], anchored: Collection[str], *, index: GraphIndex | None = None,
) -> Containment:
    """Give no node a module whose call had ended before the call of a node it is computed from began, however
    many nodes lie between them.

    A value exists once the node making it ran, and so does everything computed from it: a node computed
    (through any chain of nodes) from a node known to run in a call (``anchored``: a parameter read) ran after
    that call began. Where the node's own module (called once, as that call) ran before that call began and
    ended before it, the node ran in neither alone: it ran in a caller of both, and is given the deepest
    module holding the two (a caller adding its child's result to a scaled branch it computed after the child
    returned). Of the known calls a node is computed from, the one that began last decides. Nodes computed
    from weights, constants and sizes alone tell no time (an exporter computes them once, where it likes).
    Nodes are visited in graph order, which is topological.
    """
    from modelexport_core.export.boundaries import constant_nodes

    index = index if index is not None else GraphIndex.of(graph)  # the caller's, where it has one
    keys = index.keys
    modules = dict(node_modules)
    moved: dict[str, str] = {}
    reused = tuple(name for name in called_more_than_once if name)
    known = set(anchored)
    timeless = constant_nodes(graph, sizes=True)
    latest: list[str | None] = [None] * len(keys)  # the known module that began last among each node's makers
    for i, key in enumerate(keys):
        makers = [m for j in index.node_producers(graph, i) if j not in timeless
                  for m in ((modules[keys[j]] if keys[j] in known else None), latest[j]) if m is not None]
        last = max(makers, key=lambda maker: _began(maker, first_call)) if makers else None
        latest[i] = last
        if last is None or key in known:
            continue
        if _runs_after(last, modules[key], first_call, reused):
            moved[key] = modules[key]
            modules[key] = common_ancestor([modules[key], last])
    for i in sorted(timeless, reverse=True):  # what was made for moved nodes alone (their constants) goes with them
        key = keys[i]
        readers = index.node_consumers(graph, i)
        there = {modules[keys[j]] for j in readers}
        if key not in known and len(there) == 1 and any(keys[j] in moved for j in readers) \
                and modules[key] not in there:
            moved.setdefault(key, modules[key])
            modules[key] = there.pop()
    return Containment(modules, moved)


def _runs_after(module: str, other: str, first_call: dict[str, int], reused: tuple[str, ...]) -> bool:
    """Whether the call of ``module`` begins after the call of ``other`` has ended (both known to run once)."""
    around = common_ancestor([module, other])
    if around in (module, other):
        return False  # one holds the other: the outer call encloses the inner one
    depth = len(around.split(".")) if around else 0
    mine = ".".join(module.split(".")[: depth + 1])
    theirs = ".".join(other.split(".")[: depth + 1])
    if mine not in first_call or theirs not in first_call:
        return False
    if any(is_ancestor(name, module) or is_ancestor(name, other) for name in reused):
        return False  # a module called more than once (a shared activation) has no one place in time
    return first_call[mine] > first_call[theirs]


def _began(module: str, first_call: dict[str, int]) -> int:
    """When the call of ``module`` (or of its nearest ancestor that ran) began."""
    while module and module not in first_call:
        module = module.rpartition(".")[0]
    return first_call.get(module, 0)
