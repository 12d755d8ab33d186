"""Which modules of the model own a tensor found in an ONNX graph, by value and by name.

Exporters rename, transpose and merge parameters (TorchScript folds ``W.T`` of a Linear
into ``onnx::MatMul_N``; both exporters keep one copy of identical tensors), so a graph
tensor is matched to the model's parameters and buffers by exact value, directly or
transposed. Its name, when it spells a parameter, is kept as a hint only: after merging
it may name just one of several equal tensors.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelexport_core.strategy import WRAPPER_ATTRIBUTE

if TYPE_CHECKING:
    import numpy as np
    import torch

MIN_MATCH_ELEMENTS = 2
"""Smaller tensors (scalars) are matched by name only: by value they would match any constant."""


@dataclass(frozen=True)
class TensorOwners:
    """The modules that own a graph tensor: every module holding an equal parameter or buffer."""

    modules: frozenset[str]
    named: str | None = None
    """The module whose parameter the tensor's name spells, when it does and the value agrees."""
    value: str = ""
    """The tensor's value as a digest, the same for a tensor and its transpose: equal tensors read twice are one."""


def owner_module(tensor_qualname: str) -> str:
    """The module a parameter or buffer belongs to: its qualified name without the last atom."""
    return tensor_qualname.rpartition(".")[0]


def _value_key(array: "np.ndarray") -> tuple[str, tuple[int, ...], str]:
    import numpy as np

    data = np.ascontiguousarray(array)
    return data.dtype.str, tuple(data.shape), hashlib.blake2b(data.tobytes(), digest_size=16).hexdigest()


class ParameterIndex:
    """Parameters and buffers of a model, looked up by value (as is or transposed) and by name."""

    def __init__(self, model: "torch.nn.Module"):
        self._by_value: dict[tuple, set[str]] = defaultdict(set)
        self._by_name: dict[str, str] = {}
        self._values: dict[str, tuple] = {}
        self._distinctive: set[str] = set()
        modules = {name for name, _ in model.named_modules()}
        for qualname, tensor in _named_tensors(model):
            module = owner_module(qualname)
            if module not in modules:  # a module registered twice is known by its first name
                continue
            array = _as_array(tensor)
            key = _value_key(array)
            self._values[qualname] = key
            self._by_name[qualname] = qualname
            self._by_name[qualname.replace(".", "_")] = qualname
            if array.size < MIN_MATCH_ELEMENTS:
                continue
            self._by_value[key].add(module)
            keys = {key}
            if array.ndim == 2:
                keys.add(_value_key(array.T))
                self._by_value[_value_key(array.T)].add(module)
            if array.size and (array != array.flat[0]).any():
                self._distinctive.add(repr(min(keys)))

    def distinctive_values(self) -> set[str]:
        """Digests (as :class:`TensorOwners` gives them) of tensors holding more than one distinct value.

        Constant tensors (zero biases, unit norm weights) equal one another across any two
        models; the others identify the model's weights.
        """
        return set(self._distinctive)

    def param_for_name(self, name: str) -> str | None:
        """The parameter or buffer a graph name spells (with or without the export wrapper's prefix)."""
        for candidate in (name, _strip_wrapper(name)):
            if candidate in self._by_name:
                return self._by_name[candidate]
        return None

    def owners(self, array: "np.ndarray", name: str = "") -> TensorOwners | None:
        """Modules owning ``array``; None when no parameter or buffer equals it."""
        keys = {_value_key(array)}
        if array.ndim == 2:
            keys.add(_value_key(array.T))
        modules = set().union(*(self._by_value.get(key, set()) for key in keys))
        param = self.param_for_name(name) if name else None
        named = None
        if param is not None and self._values[param] in keys:
            named = owner_module(param)
            modules.add(named)
        if not modules:
            return None
        return TensorOwners(frozenset(modules), named, repr(min(keys)))


def _as_array(tensor: "torch.Tensor") -> "np.ndarray":
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: compared as float32, matching float32 copies only
        tensor = tensor.float()
    return tensor.numpy()


def _strip_wrapper(name: str) -> str:
    for prefix in (WRAPPER_ATTRIBUTE + ".", WRAPPER_ATTRIBUTE + "_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _named_tensors(model: "torch.nn.Module") -> list[tuple[str, "torch.Tensor"]]:
    """Every parameter and buffer under each name it has (tied tensors appear once per owner)."""
    named = list(model.named_parameters(remove_duplicate=False))
    named += [(name, buffer) for name, buffer in model.named_buffers(remove_duplicate=False) if buffer is not None]
    return named
