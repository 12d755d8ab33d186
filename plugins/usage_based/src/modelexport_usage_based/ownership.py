"""Ownership: one module for each seed whose tensor several modules own equally.

A node next to a node of one of its candidates takes that candidate (a bias added to
the product of its own weight). The readers of equal tensors still undecided share the
owners out, each owner serving one reader while there are enough: the sharing that puts
readers nearest (in the module tree) to their seeded neighbours wins, and among equally
near ones, readers in graph order take owners in call order, which is how the identical
blocks of a stack follow one another.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from modelexport_core.sdk import common_ancestor

from .assignment import min_cost_assignment
from .data_flow import DataGraph
from .order import innermost_spans, seed_spans, within_span
from .seeds import ParameterUsers

SEARCH_DISTANCE = 16
"""How far (in nodes) an ambiguous seed looks for unambiguous seeds on either side."""
DISTANCE_COST = 0.001
"""Score a nearer seed is worth over one a node farther away."""
OUTSIDE_SPAN_COST = 10.0
"""Score an owner loses for lying outside the call a reader is written amid (see ``order.within_span``)."""
READ_AGAIN_COST = 1.0
"""Score an owner loses for having read the same tensor in a node already resolved (a second call of it)."""
ORDER_WEIGHT = 0.1
"""Score a reader gives up to take owners in call order (per rank out of place, ranks scaled to 0..1)."""


def _depth(qualname: str) -> int:
    """How deep a module sits: the number of atoms of its qualified name (0 for the root)."""
    return qualname.count(".") + 1 if qualname else 0


def resolve_owners(
    users: ParameterUsers,
    data: DataGraph,
    readers_of: list[list[int]],
    module_order: dict[str, int],
    torch_layers: frozenset[str] = frozenset(),
) -> dict[int, str]:
    """One owning module per parameter-reading node: unambiguous ones as read, the others by the graph.

    Copies of a parameter that no data reaches (an ``Identity`` of an initializer) follow
    their readers (``readers_of``: every consumer of each node); ``module_order`` is the
    registration order of the modules, the last word between owners nothing tells apart;
    ``torch_layers`` are modules of torch's own classes, exported as one node a call.
    """
    resolved = {i: next(iter(found.modules)) for i, found in users.candidates.items() if len(found.modules) == 1}
    copies = [i for i in users.candidates if i not in resolved and not (data.producers[i] or data.consumers[i])]
    pending = sorted(i for i in users.candidates if i not in resolved and i not in copies)
    # a bias is added to the product of its own weight: what a node reads tells its owner first, then what reads it
    for sides in ((data.producers,), (data.producers, data.consumers)):
        changed = True
        while pending and changed:
            changed = False
            for i in pending:
                adjacent = {resolved[j] for side in sides for j in side[i] if j in resolved}
                matches = adjacent & users.candidates[i].modules
                if len(matches) > 1:  # before the next layer reads it
                    matches = {resolved[j] for j in data.producers[i] if j in resolved} & users.candidates[i].modules
                if len(matches) == 1:
                    resolved[i] = next(iter(matches))
                    changed = True
            pending = [i for i in pending if i not in resolved]

    around = innermost_spans(pending, seed_spans(resolved))
    # an owner whose node reading this very tensor is known would need a second call to read it again; so would
    # one whose node reading its own weight in another form is (a layer's weight scaled by the norm after it, and
    # by the norm before it: two foldings the values allow, where a norm scales by zero)
    read_already = {(module, users.tensors.get(i)) for i, module in resolved.items()}
    own_read = {(module, digest) for i, module in resolved.items()
                for digest in users.candidates[i].covers & users.own_values.get(module, frozenset())}
    groups: dict[frozenset[str], list[int]] = defaultdict(list)
    for i in pending:
        groups[users.candidates[i].modules].append(i)
    call_order = CallOrder(resolved, module_order)
    for owners, readers in groups.items():
        whole_calls = owners <= torch_layers
        scores = {i: _neighbour_scores(i, owners, data, resolved, whole_calls) for i in readers}
        for i in readers:  # a node written amid the parameter nodes of one call belongs to a module inside it
            inside = within_span(i, owners, around)
            for owner in owners:
                if owner not in inside:
                    scores[i][owner] -= OUTSIDE_SPAN_COST
                if (owner, users.tensors.get(i)) in read_already or any(
                        (owner, digest) in own_read
                        for digest in users.candidates[i].covers & users.own_values.get(owner, frozenset())):
                    scores[i][owner] -= READ_AGAIN_COST
        resolved.update(_share_out(sorted(readers), sorted(owners, key=call_order.key), scores))

    for i in sorted(copies, reverse=True):  # readers come later in the graph
        found = users.candidates[i]
        readers = {resolved[j] for j in readers_of[i] if j in resolved} & found.modules
        if len(readers) == 1:
            resolved[i] = next(iter(readers))
        else:
            resolved[i] = found.named or min(found.modules, key=lambda m: (module_order.get(m, len(module_order)), m))
    return resolved


def _neighbour_scores(
    start: int, candidates: frozenset[str], data: DataGraph, resolved: dict[int, str], whole_call: bool = False
) -> dict[str, float]:
    """For each candidate, how much of its module path it shares with the nearest resolved seeds around.

    The share is a fraction (common ancestor depth over the candidate's depth), so a deep
    candidate is not favoured for being deep, nor a shallow one for sitting next to other
    shallow modules. A node that is a whole call of its module (``whole_call``) looks to one
    side only where its values show which (see ``_sides``).
    """
    scores = {candidate: 0.0 for candidate in candidates}
    for step in _sides(start, data) if whole_call else (data.producers, data.consumers):
        for module, distance in _nearest_resolved(start, step, resolved):
            for candidate in candidates:
                shared = _depth(common_ancestor([candidate, module])) / max(1, _depth(candidate))
                scores[candidate] = max(scores[candidate], shared - DISTANCE_COST * distance)
    return scores


def _sides(i: int, data: DataGraph) -> tuple[list[list[int]], ...]:
    """Which neighbours tell the module of a node that is a whole call: the side of the value that stays within it.

    A value read in several places (a layer's input, read by its first node and by its
    residual add) crosses a call boundary; one read by a single node stays where it was made.
    A node that turns a private value into a published one closes a call (a norm after the
    residual add of a post-norm layer) and is known by its producers; one that turns a
    published value into a private one opens a call and is known by its consumers.
    """
    written = {value for k in data.consumers[i] for value in data.inputs[k] if data.producer.get(value) == i}
    reads_published = any(data.is_published(value) for value in data.inputs[i])
    writes_published = any(data.is_published(value) for value in written)
    if writes_published and not reads_published and data.producers[i]:
        return (data.producers,)
    if reads_published and not writes_published and data.consumers[i]:
        return (data.consumers,)
    return (data.producers, data.consumers)


def _nearest_resolved(start: int, step: list[list[int]], resolved: dict[int, str]) -> list[tuple[str, int]]:
    """Resolved seeds reached from ``start`` along ``step`` without passing another resolved seed."""
    found: list[tuple[str, int]] = []
    seen = {start}
    frontier = [start]
    for distance in range(1, SEARCH_DISTANCE + 1):
        next_frontier = []
        for i in frontier:
            for j in step[i]:
                if j in seen:
                    continue
                seen.add(j)
                if j in resolved:
                    found.append((resolved[j], distance))
                else:
                    next_frontier.append(j)
        if not next_frontier:
            break
        frontier = next_frontier
    return found


def run_order(names: Sequence[str], first_call: dict[str, int]) -> dict[str, int]:
    """Each module's position in the order the modules first ran (``first_call``: when each module's first call
    began), a module never called itself (a container of layers) where its first descendant ran, and those that
    never ran after all others; registration order (``names``) among equals.

    Registration order is not run order: a model may register its final norm before its layers.
    """
    began: dict[str, float] = {}
    for name in names:
        if name in first_call:
            atoms = name.split(".") if name else []
            for cut in range(len(atoms) + 1):
                prefix = ".".join(atoms[:cut])
                began[prefix] = min(began.get(prefix, float("inf")), first_call[name])
    registered = {name: position for position, name in enumerate(names)}
    ordered = sorted(names, key=lambda name: (began.get(name, float("inf")), registered[name]))
    return {name: position for position, name in enumerate(ordered)}


class CallOrder:
    """Where each module is called, estimated from the seeds: to order owners that have no seed of their own.

    A module with seeds below it is called at its first seed; one without is called right
    after the last call of the siblings registered before it that have seeds, or where its parent starts.
    """

    def __init__(self, resolved: dict[int, str], module_order: dict[str, int]):
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        for i, module in sorted(resolved.items()):
            atoms = module.split(".") if module else []
            for cut in range(len(atoms) + 1):
                prefix = ".".join(atoms[:cut])
                self.first.setdefault(prefix, i)
                self.last[prefix] = i
        self.module_order = module_order
        self.siblings: dict[str, list[str]] = defaultdict(list)
        for name in sorted(module_order, key=module_order.__getitem__):
            if name:
                self.siblings[name.rpartition(".")[0]].append(name)

    def position(self, module: str) -> float:
        if module in self.first:
            return float(self.first[module])
        if not module:
            return 0.0
        parent = module.rpartition(".")[0]
        earlier = self.siblings.get(parent, [])
        cut = earlier.index(module) if module in earlier else 0
        ends = [self.last[sibling] for sibling in earlier[:cut] if sibling in self.last]
        if ends:  # after every earlier sibling: one registered between may be called first (a helper of the caller)
            return max(ends) + 0.5
        return self.position(parent)

    def key(self, module: str) -> tuple[float, int, str]:
        return self.position(module), self.module_order.get(module, len(self.module_order)), module


def _share_out(readers: list[int], owners: list[str], scores: dict[int, dict[str, float]]) -> dict[int, str]:
    """Give each reader (in graph order) an owner (in call order): best total score, then least out of order.

    Each owner serves one reader, or as many more as needed when there are more readers
    than owners (a module called several times).
    """
    copies = -(-len(readers) // len(owners))
    columns = [owner for owner in owners for _ in range(copies)]

    def cost(r: int, c: int) -> float:
        score = scores.get(readers[r], {}).get(columns[c], 0.0)
        out_of_order = abs(r / max(1, len(readers) - 1) - (c // copies) / max(1, len(owners) - 1))
        return -score + ORDER_WEIGHT * out_of_order

    assignment = min_cost_assignment(len(readers), len(columns), cost)
    return {readers[r]: columns[c] for r, c in enumerate(assignment)}
