"""Reading the TorchScript tracer's scope record for every ONNX node it writes.

The TorchScript exporter fills ``torch.jit._trace._trace_module_map`` with a scope name
for every module (``<class path>::<short name>``) and the tracer pushes that scope while
the module's forward runs. Short names are ambiguous (a ModuleDict entry ``d.a`` is just
``a``), so while recording, each scope's class part also carries the module's full
qualified name (``<class path>#<qualname>::<short name>``). Node names are built from the
short name alone, so the ONNX file is exactly what a plain export writes.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from modelexport_core.sdk import StrategyUnavailable

QUALNAME_MARK = "#"


def innermost_qualname(scope_name: str) -> str | None:
    """The qualified name recorded in the innermost scope of a scope string; None if unscoped."""
    if not scope_name:
        return None
    innermost = scope_name.rsplit("/", 1)[-1]
    class_part = innermost.split("::", 1)[0]
    if QUALNAME_MARK not in class_part:
        return None
    return class_part.rpartition(QUALNAME_MARK)[2]


@contextmanager
def recording_scopes() -> Iterator[dict[str, str | None]]:
    """Within the block, TorchScript ONNX exports record ``{node name: module qualname}``.

    The qualified names are those of the exported module (``named_modules()`` of what
    was passed to ``torch.onnx.export``).
    """
    import torch

    try:
        from torch.onnx._internal.torchscript_exporter import utils as exporter_utils
    except ImportError as error:
        raise StrategyUnavailable(f"this torch has no TorchScript ONNX exporter ({error})") from error
    setup = getattr(exporter_utils, "_setup_trace_module_map", None)
    name_pass = getattr(torch._C, "_jit_pass_onnx_assign_scoped_names_for_node_and_value", None)
    if setup is None or name_pass is None:
        raise StrategyUnavailable(f"torch {torch.__version__} does not expose the tracer's module scopes")

    records: dict[str, str | None] = {}

    def setup_with_qualnames(model, *args, **kwargs):
        result = setup(model, *args, **kwargs)
        qualnames = {module: name for name, module in model.named_modules()}
        module_map = torch.jit._trace._trace_module_map or {}
        for module, scope in list(module_map.items()):
            class_part, sep, short_name = scope.partition("::")
            if sep and module in qualnames:
                module_map[module] = f"{class_part}{QUALNAME_MARK}{qualnames[module]}::{short_name}"
        return result

    def naming_pass_that_records(graph):
        name_pass(graph)
        for node in graph.nodes():
            if node.hasAttribute("onnx_name"):
                records[node.s("onnx_name")] = innermost_qualname(node.scopeName())

    exporter_utils._setup_trace_module_map = setup_with_qualnames
    torch._C._jit_pass_onnx_assign_scoped_names_for_node_and_value = naming_pass_that_records
    try:
        yield records
    finally:
        exporter_utils._setup_trace_module_map = setup
        torch._C._jit_pass_onnx_assign_scoped_names_for_node_and_value = name_pass
