"""The facts about the model's module tree that bound propagation.

Leaves, torch layers, parameter-free helpers (activations), modules that pass their
input through unchanged (dropout in eval mode), and containers that are never called
(``ModuleList``, ``ModuleDict``): computation never happens in a container, so it is
transparent when modules are compared.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from modelexport_core.sdk import common_ancestor, parent_qualname

if TYPE_CHECKING:
    import torch

PROBE_SHAPE = (2, 3, 8)


@dataclass(frozen=True)
class ModuleTree:
    """Module qualnames of a model with what propagation needs to know about each."""

    names: tuple[str, ...]
    children: dict[str, tuple[str, ...]]
    torch_classes: frozenset[str]
    """Modules whose class is a torch layer (``torch.nn``)."""
    torch_layer_subclasses: frozenset[str]
    """Modules of a class derived from a torch layer (a linear layer with its own forward): they compute alike."""
    own_forward: frozenset[str]
    """Modules of a class derived from a torch layer that define a forward of their own (a scaled lookup)."""
    without_parameters: frozenset[str]
    """Modules with no parameter and no buffer anywhere below them."""
    pass_through: frozenset[str]
    """Parameter-free leaves that return their input unchanged in eval mode: they make no nodes."""
    containers: frozenset[str]
    """Modules without a forward of their own (``ModuleList``, ``ModuleDict``), or one that only chains
    its children (``Sequential``): no computation happens in them."""
    classes: dict[str, str]
    """Each module's class (defining module and name): modules of one class compute alike."""

    @classmethod
    def of(cls, model: "torch.nn.Module") -> "ModuleTree":
        import torch

        names: list[str] = []
        children: dict[str, list[str]] = defaultdict(list)
        torch_classes: set[str] = set()
        subclasses: set[str] = set()
        own_forward: set[str] = set()
        without: set[str] = set()
        pass_through: set[str] = set()
        containers: set[str] = set()
        classes: dict[str, str] = {}
        for qualname, module in model.named_modules():
            names.append(qualname)
            classes[qualname] = f"{type(module).__module__}.{type(module).__qualname__}#{id(type(module))}"
            parent = parent_qualname(qualname)
            if parent is not None:
                children[parent].append(qualname)
            class_module = type(module).__module__
            if class_module == "torch" or class_module.startswith("torch."):
                torch_classes.add(qualname)
            elif any(_is_torch_layer(base) for base in type(module).__mro__[1:]):
                subclasses.add(qualname)
                if not _is_torch_code(type(module).forward):
                    own_forward.add(qualname)
            if qualname and type(module).forward in (torch.nn.Module.forward, torch.nn.Sequential.forward):
                containers.add(qualname)  # a sequential only chains its children: it computes nothing itself
            elif next(module.parameters(), None) is None and next(module.buffers(), None) is None:
                without.add(qualname)
                if next(module.children(), None) is None and _returns_its_input(module):
                    pass_through.add(qualname)
        return cls(
            tuple(names),
            {name: tuple(kids) for name, kids in children.items()},
            frozenset(torch_classes),
            frozenset(subclasses),
            frozenset(own_forward),
            frozenset(without),
            frozenset(pass_through),
            frozenset(containers),
            classes,
        )

    def is_leaf(self, qualname: str) -> bool:
        return qualname != "" and not self.children.get(qualname)

    def called(self, qualname: str) -> str:
        """The module itself, or for a container its nearest called ancestor."""
        while qualname in self.containers:
            qualname = parent_qualname(qualname) or ""
        return qualname

    def common(self, qualnames: Iterable[str]) -> str:
        """The deepest called module that contains all of ``qualnames``."""
        return self.called(common_ancestor(qualnames))

    def depth(self, qualname: str) -> int:
        """How many called modules lie below the root on the way to ``qualname``."""
        count = 0
        current = qualname
        while current:
            if current not in self.containers:
                count += 1
            current = parent_qualname(current) or ""
        return count

    def distance(self, a: str, b: str) -> int:
        """Steps between two modules in the tree of called modules (2 for siblings, containers skipped)."""
        return self.depth(a) + self.depth(b) - 2 * self.depth(self.common([a, b]))

    def span(self, qualnames: Iterable[str]) -> int:
        """Edges of the smallest subtree of called modules joining all of ``qualnames``.

        This counts the module boundaries a value crosses to reach every module that reads it.
        """
        called = {self.called(name) for name in qualnames}
        top = self.common(called)
        edges: set[str] = set()
        for name in called:
            current = name
            while current != top and current not in edges:
                if current not in self.containers:
                    edges.add(current)
                current = parent_qualname(current) or ""
        return len(edges)

    def caller(self, qualname: str) -> str:
        """The called module a module's call returns to (the root for itself)."""
        return self.called(parent_qualname(qualname) or "")

    def closing_context(self, qualname: str) -> str:
        """Where computation continues after a node of ``qualname``: a leaf returns to its caller."""
        return self.caller(qualname) if self.is_leaf(qualname) else qualname

    def parameter_free_helpers(self, qualname: str) -> list[str]:
        """Leaf children of a module that hold no parameters and compute something (activations and the like)."""
        return [
            child
            for child in self.children.get(qualname, ())
            if child in self.without_parameters and child not in self.pass_through and self.is_leaf(child)
        ]


def _is_torch_layer(cls: type) -> bool:
    """Whether a class is one of torch's layers (not ``Module`` itself, nor a container)."""
    import torch

    module = cls.__module__
    return (
        (module == "torch" or module.startswith("torch."))
        and issubclass(cls, torch.nn.Module)
        and cls not in (torch.nn.Module, torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)
    )


def _is_torch_code(function: object) -> bool:
    """Whether a function is defined in torch itself."""
    module = getattr(function, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def _returns_its_input(module: "torch.nn.Module") -> bool:
    """Whether a parameter-free module hands a tensor back unchanged (so it exports to no node at all).

    Probed by calling it on a small random tensor; a module that rejects the probe is
    taken to compute something.
    """
    import torch

    original = torch.randn(*PROBE_SHAPE, generator=torch.Generator().manual_seed(0))
    probe = original.clone()  # an in-place module (ReLU(inplace=True)) returns its input object, changed
    try:
        with torch.no_grad():
            output = module(probe)
    except Exception:  # a module that needs other inputs computes something
        return False
    return isinstance(output, torch.Tensor) and output.shape == original.shape and torch.equal(output, original)
