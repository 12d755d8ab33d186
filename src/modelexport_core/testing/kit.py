"""Measuring a strategy the way a user would judge it: each node's tag against PyTorch's own record of it.

``build_case`` makes a test model by name (a hard case, a preset, or one of the caller's own builders);
``measure_export`` runs a strategy's own export of it, ``measure_tagging`` has the strategy tag a graph the
dynamo exporter wrote; both return a :class:`Measured` with agreement, coverage and contamination.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.format.graph import node_key
from modelexport_core.format.reference import inlined_nodes
from modelexport_core.format.tags import HierarchyTags, is_ancestor
from modelexport_core.measure.agreement import reference_modules, sibling_contamination
from modelexport_core.plugin.discovery import get_strategy
from modelexport_core.plugin.strategy import ExportContext, TaggingResult, TaggingStrategy
from modelexport_core.testing.cases import HARD_CASES

if TYPE_CHECKING:
    import onnx
    import torch

Builder = Callable[[], "tuple[torch.nn.Module, dict[str, torch.Tensor]]"]


def build_case(name: str, builders: Mapping[str, Builder] | None = None) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``(model, inputs)`` of the caller's builder ``name``, else a hard case, else a preset (``bert``, ``t5``...)."""
    if builders and name in builders:
        return builders[name]()
    if name in HARD_CASES:
        return HARD_CASES[name]()
    from modelexport_core.prepare.inputs import inputs_from_config
    from modelexport_core.prepare.presets import build_preset

    model = build_preset(name)
    return model, inputs_from_config(model)


def strategy_instance(strategy: str | TaggingStrategy | type[TaggingStrategy]) -> TaggingStrategy:
    """An installed strategy by name, a strategy class, or an instance as given."""
    if isinstance(strategy, str):
        return get_strategy(strategy).strategy()
    if isinstance(strategy, type):
        return strategy()
    return strategy


@dataclass
class Measured:
    """One tagged graph, PyTorch's record of the same graph, and how the two compare."""

    name: str
    ctx: ExportContext
    onnx_model: onnx.ModelProto
    result: TaggingResult
    reference: dict[str, str | None]
    path: Path | None = None
    inlined: frozenset[str] = frozenset()
    """Nodes whose record names only the module they ran inside (:func:`~modelexport_core.format.reference.inlined_nodes`):
    a module at or below the recorded one agrees, as ``modelexport compare`` judges them."""

    @property
    def node_keys(self) -> list[str]:
        return [node_key(node, i) for i, node in enumerate(self.onnx_model.graph.node)]

    @property
    def scoped(self) -> list[str]:
        """Nodes PyTorch recorded a module for."""
        return [node for node, module in self.reference.items() if module is not None]

    @property
    def disagreeing(self) -> list[str]:
        """Recorded nodes given a module other than the recorded one (for :attr:`inlined` nodes: not inside it)."""
        modules = self.result.node_modules
        return [node for node in self.scoped if modules.get(node) != self.reference[node]
                and not (node in self.inlined and node in modules and is_ancestor(str(self.reference[node]), modules[node]))]

    @property
    def agreement(self) -> float:
        """Share of recorded nodes given exactly the module PyTorch recorded."""
        return 1 - len(self.disagreeing) / len(self.scoped) if self.scoped else 1.0

    @property
    def tag_agreement(self) -> float:
        """Share of recorded nodes given the recorded module's hierarchy tag (torch.nn modules folded as by default)."""
        tags = HierarchyTags.from_model(self.ctx.model)
        modules = self.result.node_modules
        same = sum(node in modules and (tags.tag_of(modules[node]) == tags.tag_of(str(self.reference[node]))
                                        or node in self.inlined and is_ancestor(str(self.reference[node]), modules[node]))
                   for node in self.scoped)
        return same / len(self.scoped) if self.scoped else 1.0

    @property
    def coverage(self) -> float:
        """Share of the graph's nodes the strategy gave a module."""
        keys = self.node_keys
        return sum(1 for key in keys if key in self.result.node_modules) / max(len(keys), 1)

    @property
    def contaminated(self) -> list[str]:
        """Nodes of layer i given to a sibling layer j."""
        return sibling_contamination(self.result.node_modules, self.reference)

    def disagreements(self, limit: int = 10) -> list[tuple[str, str | None, str | None]]:
        """A few ``(node, recorded, given)`` rows where the two differ, for failure messages."""
        return [(node, self.reference[node], self.result.node_modules.get(node)) for node in self.disagreeing[:limit]]

    def report(self, limit: int = 20) -> str:
        lines = [f"{self.name}: agreement {self.agreement:.4f}, contaminated {len(self.contaminated)}"]
        lines += [f"  {node}: tagged {given!r}, PyTorch {recorded!r}" for node, recorded, given in self.disagreements(limit)]
        return "\n".join(lines)


def _module_names(ctx: ExportContext) -> list[str]:
    return [qualname for qualname, _ in ctx.module.named_modules()]


def measure_export(strategy: str | TaggingStrategy | type[TaggingStrategy], ctx: ExportContext, path: Path,
                   name: str | None = None) -> Measured:
    """The strategy's own export of ``ctx`` to ``path``, against the records of the exporter it used."""
    import onnx

    with contextlib.redirect_stderr(io.StringIO()):
        result = strategy_instance(strategy).export(ctx, path)
    onnx_model = onnx.load(str(path))
    reference = reference_modules(onnx_model, result.exporter, _module_names(ctx))
    inlined = frozenset(inlined_nodes(onnx_model)) if result.exporter == "dynamo" else frozenset()
    return Measured(name or path.stem, ctx, onnx_model, result, reference, path, inlined)


def measure_tagging(strategy: str | TaggingStrategy | type[TaggingStrategy], ctx: ExportContext, path: Path,
                    name: str | None = None) -> Measured:
    """A plain dynamo export of ``ctx`` to ``path``, tagged by the strategy's ``tag_onnx``, against its records."""
    import onnx
    import torch

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(ctx.module, ctx.args, str(path), dynamo=True)
    onnx_model = onnx.load(str(path))
    result = strategy_instance(strategy).tag_onnx(ctx, onnx_model)
    return Measured(name or path.stem, ctx, onnx_model, result, reference_modules(onnx_model, "dynamo", []), path,
                    frozenset(inlined_nodes(onnx_model)))


def assert_every_recorded_node(measured: Measured) -> None:
    """Every node PyTorch recorded gets the recorded module's tag, and none goes to a sibling layer."""
    assert measured.tag_agreement == 1.0, measured.report()
    assert measured.contaminated == [], measured.report()


class ExportCache:
    """Each (strategy, model, options) exported once and measured; what the ``modelexport_measured`` fixture hands out."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._cache: dict[tuple, Measured] = {}

    def __call__(self, strategy: str | TaggingStrategy | type[TaggingStrategy], name: str, *,
                 builders: Mapping[str, Builder] | None = None, retag_dynamo: bool = False,
                 **context: Any) -> Measured:
        """``strategy``'s export of model ``name`` (``retag_dynamo``: its tagging of a dynamo export) measured;
        ``context`` goes to ``make_context`` (``dynamic=False``, ``options={...}``)."""
        from modelexport_core.prepare.context import make_context

        label = strategy if isinstance(strategy, str) else strategy_instance(strategy).name
        key = (label, name, retag_dynamo, repr(sorted(context.items())))
        if key not in self._cache:
            ctx = make_context(*build_case(name, builders), **context)
            path = self.directory / f"{label}-{name}-{len(self._cache)}.onnx"
            measure = measure_tagging if retag_dynamo else measure_export
            self._cache[key] = measure(strategy, ctx, path, name)
        return self._cache[key]
