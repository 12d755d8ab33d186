"""The tagging-strategy interface: what a strategy receives, what it returns.

A strategy exports the model to ONNX with whatever exporter it likes and says, for
every ONNX node it wrote, which module of the user's model produced it. It does not
build tags or write metadata: the core does that, the same way for every strategy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

if TYPE_CHECKING:  # torch and onnx are imported lazily so that listing strategies stays fast
    import onnx
    import torch

    from modelexport_core.format.onnx_file import StreamedModel

WRAPPER_ATTRIBUTE = "model"
"""Attribute under which the export wrapper holds the user's model."""


class StrategyUnavailable(Exception):
    """Raised by a strategy that cannot handle this model; the next strategy is tried."""


class StrategyFailed(Exception):
    """Raised by a strategy that tried and failed; the next strategy is tried."""


@dataclass(frozen=True)
class StrategyOption:
    """A strategy-specific option, set on the CLI as ``-O <strategy>.<name>=<value>``."""

    name: str
    type: type
    default: Any
    help: str


@dataclass
class ExportContext:
    """Everything a strategy needs to export and tag one model.

    ``module`` is what gets exported: a wrapper that takes ``args`` positionally (in
    ``input_names`` order), calls the user's model with caches off and returns a flat
    tuple of tensors named ``output_names`` (empty where the model has not run before the
    capture: the exporter then names them, and the core renames the file's outputs to the
    names the capture's own run recorded). The user's model sits in it as the
    attribute ``model``, so module names seen inside an export carry the prefix
    ``model.``; :meth:`model_qualname` strips it.

    ``args`` are what a strategy captures and exports with: the user's example, widened
    to size 2 on every dynamic axis where the example has size 0 or 1 (torch.export
    specialises those sizes, and a trace at batch 1 may bake the 1 in). ``example_args``
    are the user's own example, which verification runs. An axis the model cannot take
    at another size is not in ``dynamic_axes``; ``notes`` says which and why.
    """

    model: "torch.nn.Module"
    module: "torch.nn.Module"
    args: tuple["torch.Tensor", ...]
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)
    opset: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    example_args: tuple["torch.Tensor", ...] = ()
    notes: tuple[str, ...] = ()
    example_outputs: tuple["torch.Tensor", ...] = ()
    """The wrapper's outputs on :attr:`user_args` where the core has them already (verification
    compares with them rather than running the model again); empty otherwise."""
    may_leave_unwritten: bool = False
    """Whether a strategy may hand its file back unwritten (:attr:`TaggingResult.unwritten`) for the core
    to tag and write once; the core sets it, and a direct caller of :meth:`TaggingStrategy.export` gets a file."""

    def model_qualname(self, exported_qualname: str) -> str:
        """Map a module name inside ``module`` to its name in the user's model ('' is the root)."""
        if exported_qualname == WRAPPER_ATTRIBUTE:
            return ""
        prefix = WRAPPER_ATTRIBUTE + "."
        if exported_qualname.startswith(prefix):
            return exported_qualname[len(prefix):]
        return ""  # the wrapper itself and anything outside the model belong to the root

    @property
    def is_dynamic(self) -> bool:
        return bool(self.dynamic_axes)

    @property
    def user_args(self) -> tuple["torch.Tensor", ...]:
        """The user's example inputs (``args`` before widening)."""
        return self.example_args or self.args

    def with_static_axes(self, pinned: Mapping[str, set[int]], reason: str) -> "ExportContext":
        """This context with ``pinned`` axes exported static at the user's example size.

        For a strategy that finds, while capturing, that the model fixes an axis: the
        axis leaves ``dynamic_axes``, takes the user's size again in ``args``, and a note
        names it with ``reason``.
        """
        from dataclasses import replace

        from modelexport_core.plugin.widening import static_axes_note, widen

        axes = {
            name: {axis: dim for axis, dim in dims.items() if axis not in pinned.get(name, set())}
            for name, dims in self.dynamic_axes.items()
        }
        axes = {name: dims for name, dims in axes.items() if dims}
        notes = [static_axes_note(self, name, axis, reason) for name, pinned_axes in pinned.items()
                 for axis in sorted(pinned_axes) if axis in self.dynamic_axes.get(name, {})]
        args = widen(self.user_args, self.input_names, axes)
        return replace(self, args=args, dynamic_axes=axes, notes=self.notes + tuple(notes))


EVIDENCE = {
    "record": "the exporter's own record of the module that ran the op (FX module stack, tracer scope, name scope)",
    "parameter": "the node reads a parameter of the module",
    "value": "its output holds the values a recorded call of the module returned",
    "boundary": "it lies between the values a call of the module took and the values it returned",
    "propagation": "carried along the data flow from tagged nodes, within the bounds of their modules",
    "neighbours": "the module its producers and consumers agree on",
}
"""The kinds of evidence a strategy names for a node (``TaggingResult.evidence``); the first is PyTorch's
own account, the others are inferred."""


@dataclass
class TaggingResult:
    """What a strategy found: the module of the user's model behind each ONNX node.

    ``node_modules`` maps every node name of the written ONNX graph to the qualified
    name of the innermost module that produced it ('' for the root). torch.nn modules
    may appear: the core folds them into their nearest kept ancestor when it builds
    tags. ``also`` lists further modules a node serves (a shared constant, a residual
    add). ``details`` is a JSON-serialisable section the sidecar keeps for this
    strategy (an execution trace, statistics). ``context`` is the context the file was
    really exported with, when the strategy had to change it (an axis the model fixes,
    see :meth:`ExportContext.with_static_axes`); the core verifies and records that one.
    """

    node_modules: dict[str, str]
    exporter: str
    also: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    context: ExportContext | None = None
    value_dependent: bool = False
    """The capture answered questions the model's code asks of tensor values from the example's values (a
    draft export): the core then also verifies the file on random inputs of the example's shape."""
    evidence: dict[str, str] = field(default_factory=dict)
    """How each node's module was decided, by node name: one of :data:`EVIDENCE` or a word of the
    strategy's own. Nodes left out of ``node_modules`` are filled from their neighbours by the core."""
    unwritten: "StreamedModel | None" = None
    """The file, where the context allows (:attr:`ExportContext.may_leave_unwritten`) and the strategy leaves
    writing it to the core: ``onnx_path`` is not written yet, and the core tags this graph and writes the
    file once, instead of rewriting a written file with its tags."""


EXPORTER_OPTION = StrategyOption(
    "exporter", str, "auto", "torchscript, dynamo, or auto (TorchScript, and the dynamo exporter if TorchScript fails)"
)
"""The ``exporter`` option of a strategy that lists several :attr:`TaggingStrategy.exporters`: left alone by the
user, the core tries each exporter in turn (called directly, ``auto`` is the strategy's own order)."""


def export_in_turn(
    exporters: tuple[str, ...], choice: str, make: Callable[[str], TaggingResult]
) -> TaggingResult:
    """A strategy's own :data:`EXPORTER_OPTION` order: ``make(exporter)`` with the exporter chosen, or (``auto``)
    with each of ``exporters`` in turn until one succeeds; the reasons of those that failed are kept in
    ``details["exporter_fallback"]``. Each failure is a :class:`StrategyFailed` with a one-line reason."""
    failures: list[str] = []
    for exporter in exporters if choice == "auto" else (choice,):
        try:
            result = make(exporter)
        except StrategyFailed as error:
            failures.append(str(error))
            continue
        if failures:
            result.details["exporter_fallback"] = failures
        return result
    raise StrategyFailed("; ".join(failures))


class TaggingStrategy(ABC):
    """Base class of every tagging strategy.

    Subclasses set the class attributes and implement :meth:`export`. A plugin returns
    its subclasses from the ``modelexport_strategies`` hook.
    """

    name: ClassVar[str]
    """Unique lowercase name, used with ``--strategy``."""
    priority: ClassVar[int] = 0
    """Higher is tried first when the user names no strategy."""
    tag_priority: ClassVar[int | None] = None
    """Order among strategies tagging an existing file (``modelexport tag`` without ``-s``) where it
    differs from :attr:`priority`; only strategies that implement :meth:`tag_onnx` are tried there."""
    description: ClassVar[str] = ""
    requires: ClassVar[str] = ""
    """What the strategy needs of a model or of the environment, in a sentence."""
    options: ClassVar[tuple[StrategyOption, ...]] = ()
    exporters: ClassVar[tuple[str, ...]] = ()
    """The exporters the strategy can make its file with (``"torchscript"``, ``"dynamo"``), in the order to try
    them. Where it names more than one and declares an ``exporter`` option the user left alone, the core
    exports with each in turn (that option set to it) until a file exports, passes the checker and verifies."""

    def check(self, ctx: ExportContext) -> None:  # noqa: B027 - a hook: strategies override it where needed
        """Raise :class:`StrategyUnavailable` if this strategy cannot handle the model."""

    @abstractmethod
    def export(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        """Write the model as ONNX to ``onnx_path`` (or, where the context allows, hand it back unwritten:
        :attr:`TaggingResult.unwritten`) and say which module made each node.

        Raise :class:`StrategyFailed` with a one-line reason when the export fails.
        """

    def tag_onnx(self, ctx: ExportContext, onnx_model: "onnx.ModelProto") -> TaggingResult:
        """Tag an ONNX graph exported elsewhere (``modelexport tag``), without exporting.

        Strategies that need their own export keep this default, which declines.
        """
        raise StrategyUnavailable(f"strategy {self.name!r} cannot tag an existing ONNX file")
