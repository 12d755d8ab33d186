"""Which modules of the model own a tensor found in an ONNX graph, by value and by name.

Exporters rename, transpose and merge parameters (TorchScript folds ``W.T`` of a Linear into ``onnx::MatMul_N``;
both exporters keep one copy of identical tensors), so a graph tensor is matched to the model's parameters and
buffers by exact value, directly, transposed, or viewed with axes of one added or removed (a scale folded as
``scale.reshape(-1, 1, 1)``); where none equals it, as a run of one parameter's positions along one axis (a
slice with constant bounds, folded). Its name, when it spells a parameter, is kept as a hint only: after merging
it may name just one of several equal tensors.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelexport_core.sdk import WRAPPER_ATTRIBUTE, ExactValues, value_fingerprint

from .transforms import derived_tensors

if TYPE_CHECKING:
    import numpy as np
    import torch

MIN_MATCH_ELEMENTS = 2
"""Smaller tensors (scalars) are matched by name only: by value they would match any constant."""
RELATIVE_TOLERANCE = 1e-4
ABSOLUTE_TOLERANCE = 1e-6
"""How near a computed tensor (a folded norm) must be to what the exporter computed in its own arithmetic."""


@dataclass(frozen=True)
class TensorOwners:
    """The modules that own a graph tensor: every module holding an equal parameter or buffer."""

    modules: frozenset[str]
    named: str | None = None
    """The module whose parameter the tensor's name spells, when it does and the value agrees."""
    value: str = ""
    """The tensor's value as a digest, the same for a tensor and its transpose: equal tensors read twice are one."""
    covers: frozenset[str] = frozenset()
    """Digests (as ``value``) of the model's tensors this one stands for: itself, or those it was derived from."""
    absorbed: frozenset[str] = frozenset()
    """Modules whose parameters went into this tensor (a batch norm folded into a convolution): they make no node."""
    folds: tuple[tuple[str, frozenset[str]], ...] = ()
    """Each owner whose layer this tensor may be with norms folded in, with those norms (``absorbed``, by owner)."""


def owner_module(tensor_qualname: str) -> str:
    """The module a parameter or buffer belongs to: its qualified name without the last atom."""
    return tensor_qualname.rpartition(".")[0]


class _ValueKeys:
    """One key per distinct value, (dtype, shape, fingerprint, n): the n-th distinct value filed with that
    :func:`~modelexport_core.sdk.value_fingerprint`."""

    def __init__(self) -> None:
        self._values: ExactValues[tuple] = ExactValues()

    def key(self, array: "np.ndarray", file: bool = True) -> tuple:
        """The key of ``array`` (which may be a transposed view). A value not filed yet is filed when ``file``;
        else (a graph's tensor, not kept) its key ends in -1."""
        bucket = value_fingerprint(array)
        found = self._values.find(array, bucket)
        if found:
            return found[0]
        if not file:
            return (*bucket, -1)
        key = (*bucket, self._values.filed(array, bucket))
        self._values.add(key, array, bucket)
        return key


class ParameterIndex:
    """Parameters and buffers of a model, looked up by value (as is or transposed) and by name.

    Tensors the exporter derives from them (:mod:`.transforms`) are looked up by value too:
    rearranged ones exactly, computed ones within a tolerance.
    """

    def __init__(self, model: "torch.nn.Module"):
        self._by_value: dict[tuple, set[str]] = defaultdict(set)
        self._covers: dict[tuple, set[str]] = defaultdict(set)
        self._approximate: dict[tuple[int, ...], list[tuple["np.ndarray", str, frozenset[str], frozenset[str]]]] = (
            defaultdict(list)
        )
        self._by_name: dict[str, str] = {}
        self._values: dict[str, tuple] = {}
        self._digests: dict[str, str] = {}
        self._distinctive: set[str] = set()
        self._by_shape: dict[tuple[int, ...], list[tuple["np.ndarray", str, str]]] = defaultdict(list)
        self._squeezed: dict[int, list[tuple["np.ndarray", str]]] = defaultdict(list)  # by number of axes
        self._keys = _ValueKeys()
        modules = {name for name, _ in model.named_modules()}
        for qualname, tensor in _named_tensors(model):
            module = owner_module(qualname)
            if module not in modules:  # a module registered twice is known by its first name
                continue
            array = _as_array(tensor)
            key = self._keys.key(array)
            self._values[qualname] = key
            self._by_name[qualname] = qualname
            self._by_name[qualname.replace(".", "_")] = qualname
            if array.size < MIN_MATCH_ELEMENTS:
                continue
            # filed as it is only: a graph tensor holding it transposed is looked up both ways
            self._by_value[key].add(module)
            digest = repr(key)
            self._digests[qualname] = digest
            squeezed_array = _squeezed(array)
            if 1 in array.shape:  # filed without its axes of one too: a graph tensor may hold it viewed otherwise
                squeezed = self._keys.key(squeezed_array)
                self._by_value[squeezed].add(module)
                self._covers[squeezed].add(digest)
            if array.dtype.kind == "f" and array.ndim == 1:
                self._by_shape[array.shape].append((array, module, digest))
            self._covers[key].add(digest)
            self._squeezed[squeezed_array.ndim].append((squeezed_array, module))
            if array.size and (array != array.flat[0]).any():
                self._distinctive.add(digest)
        self._add_derived(model)

    def _add_derived(self, model: "torch.nn.Module") -> None:
        for derived in derived_tensors(model):
            covers = frozenset(self._digests[name] for name in derived.sources if name in self._digests)
            if derived.exact:
                key = self._keys.key(derived.array)
                self._by_value[key].add(derived.module)
                self._covers[key] |= covers
            else:
                absorbed = frozenset(owner_module(name) for name in derived.sources) - {derived.module}
                self._approximate[derived.array.shape].append((derived.array, derived.module, covers, absorbed))

    def own_values(self) -> dict[str, frozenset[str]]:
        """Each module's own parameters and buffers that hold more than one distinct value, as digests."""
        own: dict[str, set[str]] = defaultdict(set)
        for qualname, digest in self._digests.items():
            if digest in self._distinctive:
                own[owner_module(qualname)].add(digest)
        return {module: frozenset(digests) for module, digests in own.items()}

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

    def holds(self, param: str, value: str) -> bool:
        """Whether parameter or buffer ``param`` (a qualified name) holds the value ``value`` (a digest, as
        :attr:`TensorOwners.value` gives it)."""
        return param in self._values and repr(self._values[param]) == value

    def owners(self, array: "np.ndarray", name: str = "", present: set[str] | None = None) -> TensorOwners | None:
        """Modules owning ``array``; None when no parameter or buffer equals it.

        ``present``: digests of the model's tensors the file holds as they are (:attr:`TensorOwners.covers` of its
        stored tensors). Given, a tensor of one number that names no parameter may also be a parameter of one number
        the file does not hold, plus a constant (``1 + weight`` of a weight of zeros, folded): its value does not
        say which.
        """
        keys = [self._keys.key(array, file=False)]
        if array.ndim == 2:  # the transpose, as a view
            keys.append(self._keys.key(array.T, file=False))
        if 1 in array.shape and array.ndim > 1:  # a view adding axes of one (a scale unsqueezed to broadcast)
            keys.append(self._keys.key(_squeezed(array), file=False))
        modules = set().union(*(self._by_value.get(key, set()) for key in keys))
        covers = set().union(*(self._covers.get(key, set()) for key in keys))
        absorbed: set[str] = set()
        folds: dict[str, set[str]] = defaultdict(set)
        param = self.param_for_name(name) if name else None
        named = None
        if param is not None and self._values[param] in keys:
            named = owner_module(param)
            modules.add(named)
            covers.add(self._digests.get(param, repr(keys[0])))
        if array.size >= MIN_MATCH_ELEMENTS:  # a folded bias of zeros equals every zero bias too
            for _candidate, module, sources, folded in self._near(array):
                modules.add(module)
                covers |= sources
                absorbed |= folded
                if folded:
                    folds[module] |= folded
        if array.size >= MIN_MATCH_ELEMENTS and not modules:
            for module, digest in self._offset(array):
                modules.add(module)
                covers.add(digest)
            if not modules:
                modules.update(self._part_of(array))
        elif present is not None and named is None and array.size >= MIN_MATCH_ELEMENTS and one_number(array):
            for module, digest in self._offset(array):
                if digest in present:
                    continue
                modules.add(module)
                covers.add(digest)
        if not modules:
            return None
        # the value as the model holds it: a tensor and its transpose read twice are one value
        value = next((key for key in keys if key in self._by_value), min(keys))
        return TensorOwners(frozenset(modules), named, repr(value), frozenset(covers), frozenset(absorbed),
                            tuple(sorted((module, frozenset(norms)) for module, norms in folds.items())))

    def _offset(self, array: "np.ndarray") -> list[tuple[str, str]]:
        """Vectors equal to a parameter plus a constant (``1 + weight`` folded by the exporter): owner and digest.

        Only when the parameter varies as the tensor does: a vector of one value matches only a
        parameter of one value.
        """
        import numpy as np

        if array.dtype.kind != "f" or array.ndim != 1:
            return []
        found = []
        for candidate, module, digest in self._by_shape.get(array.shape, ()):
            difference = array.astype(np.float64) - candidate.astype(np.float64)
            tolerance = ABSOLUTE_TOLERANCE + RELATIVE_TOLERANCE * abs(difference[0])
            if np.allclose(difference, difference[0], rtol=0.0, atol=tolerance):
                found.append((module, digest))
        return found

    def _part_of(self, array: "np.ndarray") -> set[str]:
        """Owners of the parameters ``array`` is a part of: equal to a run of one parameter's positions along one
        axis, every other axis whole (axes of one aside). An exporter folds a parameter sliced by constant bounds
        (``table[:, 1:]``, a run of its rows) into a tensor of its own."""
        import numpy as np

        part = _squeezed(array)
        found = set()
        for whole, module in self._squeezed.get(part.ndim, ()):
            if whole.dtype != part.dtype or whole.shape == part.shape:
                continue
            differing = [axis for axis, (a, b) in enumerate(zip(part.shape, whole.shape)) if a != b]
            if len(differing) != 1 or part.shape[differing[0]] > whole.shape[differing[0]]:
                continue
            axis, length = differing[0], part.shape[differing[0]]
            moved = np.moveaxis(whole, axis, 0)
            wanted = np.moveaxis(part, axis, 0)
            starts = moved[:whole.shape[axis] - length + 1]
            firsts = np.flatnonzero((starts == wanted[0]).reshape(len(starts), -1).all(axis=1))  # one pass
            if any(np.array_equal(moved[start:start + length], wanted) for start in firsts):
                found.add(module)
        return found

    def _near(self, array: "np.ndarray") -> list[tuple["np.ndarray", str, frozenset[str], frozenset[str]]]:
        """Computed tensors equal to ``array`` within the tolerance of float arithmetic."""
        import numpy as np

        if array.dtype.kind != "f":
            return []
        return [
            entry
            for entry in self._approximate.get(array.shape, ())
            if entry[0].dtype.kind == "f"
            and np.allclose(array, entry[0], rtol=RELATIVE_TOLERANCE, atol=ABSOLUTE_TOLERANCE)
        ]


def _squeezed(array: "np.ndarray") -> "np.ndarray":
    """``array`` viewed without its axes of one."""
    return array.reshape(tuple(n for n in array.shape if n != 1))


def one_number(array: "np.ndarray") -> bool:
    """Whether every element of ``array`` is the same number."""
    flat = array.reshape(-1)
    return bool((flat == flat[0]).all())


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
