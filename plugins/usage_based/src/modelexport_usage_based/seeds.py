"""Seeding: the nodes that read a parameter or buffer, with every module owning an equal tensor.

A node that reads a tensor equal to a parameter (or to the transpose of one), stored in
the graph or copied, cast or transposed from a stored one, is a seed. Several modules
may own equal tensors (zero biases, unit norm weights, tied weights); ``ownership``
picks one. Each seed also gets a call number, to tell the calls of a reused module apart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .data_flow import DataGraph
from .graph_values import ArrayReader, constant_array, initializer_arrays
from .parameters import ParameterIndex, TensorOwners, one_number

if TYPE_CHECKING:
    import onnx

@dataclass
class ParameterUsers:
    """Every node that reads a parameter or buffer, with the modules owning an equal tensor."""

    candidates: dict[int, TensorOwners]
    static_values: set[str]
    """Values computed from initializers and constants alone (no graph input reaches them)."""
    tensors: dict[int, tuple[str, ...]]
    """The values (as digests) of the parameter tensors each reader reads."""
    covered: set[str]
    """The model's tensors (as digests) that some node reads, as stored or derived (a folded norm's statistics)."""
    folded: dict[str, frozenset[str]] = field(default_factory=dict)
    """Each layer whose tensors may hold a norm folded away: the norms they may hold (equal norms: several)."""
    folds: dict[int, dict[str, frozenset[str]]] = field(default_factory=dict)
    """For each reader of a tensor a norm may be folded into: each owner it may read that way, with those norms."""
    own_values: dict[str, frozenset[str]] = field(default_factory=dict)
    """Each module's own distinctive tensors (as digests): a node whose tensors cover one (as stored or derived)
    reads it."""


def find_parameter_users(
    graph: "onnx.GraphProto", params: ParameterIndex, read: ArrayReader | None = None
) -> ParameterUsers:
    """Find the nodes reading a parameter or buffer, directly or transposed, cast or copied first.

    ``read``: how to read an initializer's value (default: from the proto itself).
    """
    import numpy as np

    static_values = {init.name for init in graph.initializer}
    owners: dict[str, TensorOwners] = {}
    uniform: list[tuple[str, tuple[int, ...], "np.ndarray"]] = []  # tensors of one number: name, shape, the number
    for name, tensor in initializer_arrays(graph, read):
        found = params.owners(tensor, name)
        if found is not None:
            owners[name] = found
        if tensor.size >= 2 and one_number(tensor):
            uniform.append((name, tensor.shape, tensor.reshape(-1)[:1].copy()))
    present = set().union(*(found.covers for found in owners.values()))  # the model's tensors the file holds
    for name, shape, number in uniform:  # a tensor of one number may be one the file does not hold, plus a constant
        found = params.owners(np.broadcast_to(number, shape), name, present)
        if found is not None:
            owners[name] = found

    stored = set(owners)  # tensors stored in the graph, as opposed to computed from one
    folds: dict[int, dict[str, frozenset[str]]] = {}
    candidates: dict[int, TensorOwners] = {}
    tensors: dict[int, tuple[str, ...]] = {}
    covered: set[str] = set()
    for i, node in enumerate(graph.node):
        inputs = [value for value in node.input if value]
        if node.op_type == "Constant":
            static_values.update(node.output)
            array = constant_array(node)
            found = params.owners(array, node.output[0], present) if array is not None else None
            if found is not None:
                owners[node.output[0]] = found
                stored.add(node.output[0])
                candidates[i] = found
                tensors[i] = (found.value,)
                covered |= found.covers
            continue
        read = [value for value in inputs if value in owners]
        all_static = bool(inputs) and all(value in static_values for value in inputs)
        if all_static:
            static_values.update(value for value in node.output if value)
        if not read:
            continue
        # a parameter read as stored names its owner better than a tensor computed from a buffer
        direct = [value for value in read if value in stored] or read
        sets = [owners[value].modules for value in direct]
        modules = frozenset.intersection(*sets) or frozenset().union(*sets)
        named = next((owners[value].named for value in direct if owners[value].named in modules), None)
        candidates[i] = TensorOwners(modules, named, covers=frozenset().union(*(owners[v].covers for v in direct)))
        for value in direct:
            for module, norms in owners[value].folds:
                folds.setdefault(i, {})[module] = folds.get(i, {}).get(module, frozenset()) | norms
        tensors[i] = tuple(sorted(owners[value].value for value in direct))
        for value in read:
            covered |= owners[value].covers
        if all_static and len(read) == 1:  # a parameter transposed, cast or copied: its readers use it too
            source = owners[read[0]]
            for value in node.output:
                if value:
                    param = params.param_for_name(value)
                    hint = param.rpartition(".")[0] if param else None
                    if param is not None and node.op_type == "Identity" and params.holds(param, source.value):
                        # a copy named after a parameter it equals is that parameter, as stored: the exporter keeps
                        # one tensor of equal ones, named after the first, and copies it under each other's name
                        owners[value] = TensorOwners(frozenset({hint or ""}), hint, source.value, source.covers)
                        stored.add(value)
                        continue
                    owners[value] = TensorOwners(
                        modules, hint if hint in modules else named, source.value, source.covers
                    )
    absorbed = frozenset().union(*(found.absorbed for found in owners.values()))
    if absorbed:  # a norm folded into a layer makes no node of its own: equal tensors elsewhere are not its
        for i, found in candidates.items():
            kept = found.modules - absorbed
            if kept and kept != found.modules:
                candidates[i] = TensorOwners(kept, found.named if found.named in kept else None,
                                             covers=found.covers)
    folded: dict[str, frozenset[str]] = {}
    for found in owners.values():
        if len(found.modules) == 1 and found.absorbed:
            (layer,) = found.modules
            folded[layer] = folded.get(layer, frozenset()) | found.absorbed
    return ParameterUsers(candidates, static_values, tensors, covered, folded, folds, params.own_values())


def resolved_folds(users: ParameterUsers, resolved: dict[int, str]) -> dict[str, frozenset[str]]:
    """Each layer whose tensors may hold a norm folded away, with those norms: the layers seeded as the one owner
    of such a tensor (``users.folded``), and those whose readers of a tensor several layers may be, folded or
    not, were resolved to them (a layer's weight scaled by a norm's zero equals any layer's of its shape)."""
    folded = dict(users.folded)
    for i, module in resolved.items():
        norms = users.folds.get(i, {}).get(module)
        if norms:
            folded[module] = folded.get(module, frozenset()) | norms
    return folded


def call_numbers(users: ParameterUsers, resolved: dict[int, str], data: DataGraph) -> dict[int, int]:
    """Which call of its module each seed belongs to: the k-th node reading the same values for the same owner.

    A module called three times has each of its parameter ops three times in the graph
    (the exporter may even store the tensor three times). Copies of a parameter that
    no data reaches are not calls.
    """
    seen: dict[tuple[str, tuple[str, ...]], int] = defaultdict(int)
    numbers: dict[int, int] = {}
    for i in sorted(resolved):
        if not (data.producers[i] or data.consumers[i] or data.reads_graph_input[i]):
            continue
        key = (resolved[i], users.tensors.get(i, ()))
        numbers[i] = seen[key]
        seen[key] += 1
    return numbers
