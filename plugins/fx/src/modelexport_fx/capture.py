"""FX front ends: the model as an explicit graph whose every node records its module stack.

The main front end is ``torch.export`` in non-strict mode: it runs the model's Python
with fake tensors and records, on each node, the ``nn_module_stack`` of module calls
it sits in. The second front end, for plain models torch.export cannot capture, is
``torch.fx.symbolic_trace`` (its tracer records the same ``nn_module_stack``); the
traced GraphModule is then handed to torch.export, which keeps those records, so both
front ends end in an ExportedProgram the dynamo ONNX exporter takes.
"""

from __future__ import annotations

import contextlib
import keyword
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core import ExportContext

from .shapes import export_dynamic_shapes

if TYPE_CHECKING:
    import torch

TORCH_EXPORT = "torch.export"
SYMBOLIC_TRACE = "torch.fx.symbolic_trace"


@dataclass
class Capture:
    """An ExportedProgram of the context's module and the front end that made it."""

    program: "torch.export.ExportedProgram"
    front_end: str


@contextlib.contextmanager
def math_sdpa(enabled: bool) -> Iterator[None]:
    """Pin scaled-dot-product kernels to the math one while capturing and converting.

    Which SDPA kernel runs decides the strides of its output. torch.export may record
    the strides of one kernel (math) while the exporter's decomposition retraces with
    another (the fused CPU one), so a ``.contiguous()`` judged a no-op at capture turns
    a later ``view`` invalid ("Cannot view a tensor ... with strides"). One kernel for
    both passes keeps them consistent. The switches live in ``torch.backends.cuda`` but
    are the process-wide kernel choice, CPU included; they are restored on exit.
    """
    if not enabled:
        yield
        return
    import torch.backends.cuda as kernels

    switches = {
        "math": (kernels.math_sdp_enabled, kernels.enable_math_sdp),
        "flash": (kernels.flash_sdp_enabled, kernels.enable_flash_sdp),
        "mem_efficient": (kernels.mem_efficient_sdp_enabled, kernels.enable_mem_efficient_sdp),
        "cudnn": (kernels.cudnn_sdp_enabled, kernels.enable_cudnn_sdp),
    }
    saved = {name: is_enabled() for name, (is_enabled, _) in switches.items()}
    try:
        for name, (_, enable) in switches.items():
            enable(name == "math")
        yield
    finally:
        for name, (_, enable) in switches.items():
            enable(saved[name])


def export_program(ctx: ExportContext) -> "torch.export.ExportedProgram":
    """``torch.export.export`` (non-strict) of the context's wrapper with its dynamic axes."""
    import torch

    return torch.export.export(
        ctx.module, tuple(ctx.args), dynamic_shapes=export_dynamic_shapes(ctx, varargs=True), strict=False
    )


def _flat_outputs(output: Any) -> list[Any]:
    """Tensors (or their FX proxies) of a traced output, in the order the core's wrapper flattens them."""
    import torch
    import torch.fx

    if isinstance(output, (torch.Tensor, torch.fx.Proxy)):
        return [output]
    if isinstance(output, dict):
        return [leaf for value in output.values() for leaf in _flat_outputs(value)]
    if isinstance(output, (tuple, list)):
        return [leaf for value in output for leaf in _flat_outputs(value)]
    return []


def _placeholder_names(input_names: list[str]) -> list[str]:
    """Input names made into distinct Python identifiers, for the traced forward's parameters."""
    names: list[str] = []
    for name in input_names:
        clean = re.sub(r"\W", "_", name) or "input"
        if clean[0].isdigit() or keyword.iskeyword(clean):
            clean = "_" + clean
        while clean in names:
            clean += "_"
        names.append(clean)
    return names


def _tracing_root(ctx: ExportContext) -> "torch.nn.Module":
    """A module like the core's wrapper (user model under the same attribute) that FX proxies can pass."""
    import torch
    from modelexport_core.context import takes_keywords
    from modelexport_core.strategy import WRAPPER_ATTRIBUTE
    from modelexport_core.wrapper import fixed_keywords

    by_keyword = getattr(ctx.module, "by_keyword", None)
    if by_keyword is None:
        by_keyword = takes_keywords(ctx.model, ctx.input_names)
    keywords = dict(getattr(ctx.module, "keywords", fixed_keywords(ctx.model)))

    class TracingRoot(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            setattr(self, WRAPPER_ATTRIBUTE, ctx.model)

        def forward(self, *tensors: Any) -> tuple[Any, ...]:
            model = getattr(self, WRAPPER_ATTRIBUTE)
            if by_keyword:
                output = model(**dict(zip(ctx.input_names, tensors)), **keywords)
            else:
                output = model(*tensors, **keywords)
            return tuple(_flat_outputs(output))

    return TracingRoot()


def symbolic_trace_program(ctx: ExportContext) -> "torch.export.ExportedProgram":
    """``torch.fx.symbolic_trace`` of the model, then torch.export of the traced GraphModule.

    The tracer gives one placeholder per input (the wrapper's ``*tensors`` would be one
    un-iterable proxy) and records ``nn_module_stack`` on every node; torch.export of a
    GraphModule carries those records over to the nodes of its program.
    """
    import torch
    import torch.fx

    names = _placeholder_names(ctx.input_names)

    class Tracer(torch.fx.Tracer):
        def create_args_for_root(self, root_fn, is_module, concrete_args=None):  # noqa: ANN001
            return root_fn, [self.root] + [self.create_proxy("placeholder", name, (), {}) for name in names]

    tracer = Tracer()
    root = _tracing_root(ctx)
    graph = tracer.trace(root)
    traced = torch.fx.GraphModule(tracer.root, graph)
    return torch.export.export(
        traced, tuple(ctx.args), dynamic_shapes=export_dynamic_shapes(ctx, varargs=False), strict=False
    )
