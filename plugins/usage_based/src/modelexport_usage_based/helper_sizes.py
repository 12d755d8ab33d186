"""How many data nodes a torch helper layer (an activation, a pooling) exports to, found by exporting it alone.

A parameter-free torch layer exports to the same few ops wherever it is called (``ReLU``
to one, an erf ``GELU`` to five at opset 17, one at 20), so a stretch of the graph given to
it ends after that many nodes: the op after a ReLU is its caller's (a pooling), not the ReLU's.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING

from .module_tree import ModuleTree

if TYPE_CHECKING:
    import torch

PROBE_SHAPES = ((1, 4, 6, 6), (1, 4, 6), (2, 6))
"""Inputs tried in turn: image-like, sequence-like, flat."""


def torch_helper_sizes(model: "torch.nn.Module", tree: ModuleTree, opset: int) -> dict[str, int]:
    """The data-node count of each parameter-free torch helper of the model (those that export alone)."""
    helpers = {helper for name in tree.names for helper in tree.parameter_free_helpers(name)}
    sizes: dict[str, int] = {}
    for qualname, module in model.named_modules():
        if qualname in helpers and qualname in tree.torch_classes:
            size = _exported_size(type(module), repr(module), opset, module)
            if size:
                sizes[qualname] = size
    return sizes


def _exported_size(cls: type, description: str, opset: int, module: "torch.nn.Module") -> int | None:
    return _cached_size(cls, description, opset, _Held(module))


class _Held:
    """A module carried through the cache without being part of its key."""

    def __init__(self, module: "torch.nn.Module"):
        self.module = module

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Held)


@lru_cache(maxsize=256)
def _cached_size(cls: type, description: str, opset: int, held: _Held) -> int | None:
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
        count = 0
        for node in graph.node:
            if any(value in reached for value in node.input):
                reached.update(node.output)
                count += 1
        return count or None
    return None
