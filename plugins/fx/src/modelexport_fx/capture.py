"""Capture methods: the model as an explicit graph whose every node records its module stack.

They are tried in order, as torch.onnx's own exporter tries its capture strategies:
``torch.export`` non-strict (runs the model's Python on fake tensors), strict (TorchDynamo
reads the bytecode), ``draft_export`` (non-strict, but data-dependent questions are
answered from the example's values and reported instead of failing), and a graph traced
by ``torch.fx.symbolic_trace`` handed to torch.export (for plain models the others refuse).
Every method records on each node the ``nn_module_stack`` of module calls it sits in, and
each ends in an ExportedProgram the dynamo ONNX exporter takes. A method's failure is its
one-line reason; the next is tried. Verification of the file catches a draft export whose
answers from the example do not hold for other inputs.
"""

from __future__ import annotations

import contextlib
import io
import keyword
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core.sdk import ExportContext

from .shapes import export_dynamic_shapes

if TYPE_CHECKING:
    import torch

TORCH_EXPORT = "torch.export"
SYMBOLIC_TRACE = "torch.fx.symbolic_trace"

NON_STRICT = "non_strict"
STRICT = "strict"
DRAFT_EXPORT = "draft_export"
TRACED_GRAPH = "symbolic_trace"
CAPTURE_METHODS = (NON_STRICT, STRICT, DRAFT_EXPORT, TRACED_GRAPH)
"""The capture methods in the order they are tried."""


@dataclass
class Capture:
    """An ExportedProgram of the context's module, the method that made it and why earlier methods failed."""

    program: "torch.export.ExportedProgram"
    front_end: str
    method: str = NON_STRICT
    failures: dict[str, str] = field(default_factory=dict)  # method -> one-line reason, in the order tried


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


def export_program(ctx: ExportContext, strict: bool = False) -> "torch.export.ExportedProgram":
    """``torch.export.export`` of the context's wrapper with its dynamic axes (non-strict unless ``strict``)."""
    import torch

    with exporter_gaps_patched(), torch.fx.experimental._config.patch(backed_size_oblivious=True):
        return torch.export.export(
            ctx.module, tuple(ctx.args), dynamic_shapes=export_dynamic_shapes(ctx, varargs=True), strict=strict
        )


def strict_program(ctx: ExportContext) -> "torch.export.ExportedProgram":
    """``torch.export.export(strict=True)``: TorchDynamo reads the model's bytecode."""
    return export_program(ctx, strict=True)


def draft_program(ctx: ExportContext) -> "torch.export.ExportedProgram":
    """``torch.export.draft_export``: data-dependent questions answered from the example's values."""
    import torch

    with exporter_gaps_patched():
        return torch.export.draft_export(
            ctx.module, tuple(ctx.args), dynamic_shapes=export_dynamic_shapes(ctx, varargs=True)
        )


def capture_program(ctx: ExportContext, methods: tuple[str, ...]) -> Capture:
    """The first program one of ``methods`` makes, in order; raises :class:`CaptureFailed` with every reason."""
    from .reasons import one_line_reason

    makers = {NON_STRICT: export_program, STRICT: strict_program, DRAFT_EXPORT: draft_program,
              TRACED_GRAPH: symbolic_trace_program}
    failures: dict[str, str] = {}
    for method in methods:
        try:
            with _quiet_capture():
                program = makers[method](ctx)
        except Exception as error:  # each method's failure is a reason; the next method is tried
            failures[method] = one_line_reason(error)
            continue
        return Capture(program, SYMBOLIC_TRACE if method == TRACED_GRAPH else TORCH_EXPORT, method, failures)
    raise CaptureFailed(failures)


@contextlib.contextmanager
def _quiet_capture() -> Iterator[None]:
    """Keep torch's warnings and printouts (a failed capture's partial graph, draft_export's report) off the
    terminal while capturing; the failure's reason is kept."""
    import logging
    import warnings

    names = [name for name in logging.root.manager.loggerDict if name == "torch" or name.startswith("torch.")]
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        # torch.export prints the partial graph of a failed capture to sys.stderr itself
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


class CaptureFailed(Exception):
    """No capture method made a program; ``failures`` holds each method's one-line reason."""

    def __init__(self, failures: dict[str, str]):
        self.failures = failures
        super().__init__("; ".join(f"{method}: {reason}" for method, reason in failures.items()))


@contextlib.contextmanager
def exporter_gaps_patched() -> Iterator[None]:
    """Work around gaps of torch.export that stop common model code, for the length of a capture.

    - ``module.to(dtype)`` called inside ``forward`` (a router casting its own classifier) makes
      ``nn.Module._apply`` swap each parameter for its converted copy; under torch.export the
      parameters are fake tensors that torch holds weak references to, and the swap fails
      ("Cannot swap t1 because it has weakref"). A conversion that changes nothing (every
      tensor already has the dtype and device asked for) returns the module as it is.
    - ``torch.jit.isinstance`` (used by library code) is plain ``isinstance``, as torch.onnx does.
    """
    import torch

    module_to = torch.nn.Module.to
    jit_isinstance = torch.jit.isinstance

    def to(self: "torch.nn.Module", *args: Any, **kwargs: Any) -> "torch.nn.Module":
        if _conversion_changes_nothing(self, args, kwargs):
            return self
        return module_to(self, *args, **kwargs)

    try:
        torch.nn.Module.to = to  # type: ignore[method-assign]
        torch.jit.isinstance = isinstance  # type: ignore[assignment]
        yield
    finally:
        torch.nn.Module.to = module_to  # type: ignore[method-assign]
        torch.jit.isinstance = jit_isinstance


def _conversion_changes_nothing(module: "torch.nn.Module", args: tuple, kwargs: dict) -> bool:
    """Whether ``module.to(*args, **kwargs)`` leaves every parameter and buffer as it is."""
    import torch

    try:
        device, dtype, _non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    except Exception:  # noqa: BLE001 - arguments torch itself rejects: let the real call say so
        return False
    if memory_format is not None:
        return False
    for tensor in [*module.parameters(), *module.buffers()]:
        if device is not None and tensor.device != torch.device(device):
            return False
        if dtype is not None and (tensor.is_floating_point() or tensor.is_complex()) and tensor.dtype != dtype:
            return False
    return True


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

    from modelexport_core.sdk import WRAPPER_ATTRIBUTE, fixed_keywords, takes_keywords

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
    with exporter_gaps_patched():
        graph = tracer.trace(root)
        traced = torch.fx.GraphModule(tracer.root, graph)
        return torch.export.export(
            traced, tuple(ctx.args), dynamic_shapes=export_dynamic_shapes(ctx, varargs=False), strict=False
        )
