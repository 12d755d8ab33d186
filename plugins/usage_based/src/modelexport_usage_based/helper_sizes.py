"""What a parameter-free helper layer (an activation, a pooling) exports to, found by exporting it alone.

A parameter-free layer exports to the same few ops wherever it is called (``ReLU`` to one,
an erf ``GELU`` to five at opset 17, one at 20), so a stretch of the graph given to it ends
after that many nodes and holds those ops only: the op after a ReLU is its caller's (a
pooling), not the ReLU's, and a view its caller made of a result is not an activation's.
Helpers of any class are probed (an activation a model library defines itself); one that
does not export alone on a plain tensor is left unknown.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Iterator

from .module_tree import ModuleTree

if TYPE_CHECKING:
    import torch

PROBE_SHAPES = ((1, 4, 6, 6), (1, 4, 6), (2, 6))
"""Inputs tried in turn: image-like, sequence-like, flat."""


@dataclass(frozen=True)
class HelperExport:
    """The data nodes a helper exports to on its own: how many, and which ops."""

    ops_in_order: tuple[str, ...]
    per_call: int = 1
    """How many times the helper runs in one call of its parent (a ReLU module a block applies twice: 2)."""

    @property
    def size(self) -> int:
        return len(self.ops_in_order)

    @property
    def ops(self) -> frozenset[str]:
        return frozenset(self.ops_in_order)


def helper_exports(
    model: "torch.nn.Module", tree: ModuleTree, opset: int, call_counts: dict[str, int] | None = None
) -> dict[str, HelperExport]:
    """What each parameter-free helper of the model exports to alone (those that export alone).

    ``call_counts``: how many times each module ran in one forward (``module_calls``); a helper
    that ran more often than its parent runs that many times per call of it.
    """
    helpers = {helper: name for name in tree.names for helper in tree.parameter_free_helpers(name)}
    counts = call_counts or {}
    found: dict[str, HelperExport] = {}
    for qualname, module in model.named_modules():
        if qualname in helpers:
            export = _cached_export(type(module), repr(module), opset, _Held(module))
            if export is not None:
                parent_calls = counts.get(helpers[qualname], 0)
                per_call = counts.get(qualname, 0) // parent_calls if parent_calls else 1
                found[qualname] = replace(export, per_call=max(per_call, 1))
    return found


@contextlib.contextmanager
def counting_calls(model: "torch.nn.Module") -> Iterator[tuple[dict[str, int], dict[str, int]]]:
    """While the block runs, how many times each module is called and when its first call began (its
    position among all calls): the dictionaries yielded fill as the model runs."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    handles = []
    for qualname, module in model.named_modules():
        def count(*_: object, name: str = qualname) -> None:
            first.setdefault(name, sum(counts.values()))
            counts[name] = counts.get(name, 0) + 1

        handles.append(module.register_forward_pre_hook(count))
    try:
        yield counts, first
    finally:
        for handle in handles:
            handle.remove()


def module_calls(model: "torch.nn.Module", run: "Callable[[], object]") -> tuple[dict[str, int], dict[str, int]]:
    """How many times each module is called while ``run()`` runs, and when its first call began (its position
    among all calls); both empty if it fails."""
    import torch

    with counting_calls(model) as (counts, first):
        try:
            with torch.no_grad():
                run()
        except Exception:  # noqa: BLE001 - without counts every helper is taken to run once per call
            return {}, {}
    return counts, first


class _Held:
    """A module carried through the cache without being part of its key."""

    def __init__(self, module: "torch.nn.Module"):
        self.module = module

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Held)


@lru_cache(maxsize=256)
def _cached_export(cls: type, description: str, opset: int, held: _Held) -> HelperExport | None:
    import onnx
    import torch

    for shape in PROBE_SHAPES:
        buffer = io.BytesIO()
        try:
            with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(held.module, (torch.randn(*shape),), buffer, dynamo=False, opset_version=opset)
        except Exception:  # a layer that rejects this probe shape may accept the next
            continue
        graph = onnx.load_from_string(buffer.getvalue()).graph
        reached = {value.name for value in graph.input}
        ops: list[str] = []
        for node in graph.node:
            if any(value in reached for value in node.input):
                reached.update(node.output)
                ops.append(node.op_type)
        return HelperExport(tuple(ops)) if ops else None
    return None
