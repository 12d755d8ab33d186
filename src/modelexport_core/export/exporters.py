"""PyTorch's two ONNX exporters, called the way every strategy needs them, failing in one line."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core.errors import first_line, full_text
from modelexport_core.plugin.strategy import ExportContext, StrategyFailed

if TYPE_CHECKING:
    import torch

    from modelexport_core.format.onnx_file import StreamedModel

__all__ = ["DYNAMO_DEFAULT_OPSET", "TORCHSCRIPT_DEFAULT_OPSET", "as_exported", "export_dynamo", "export_torchscript", "failure",
           "first_line", "full_text"]

TORCHSCRIPT_DEFAULT_OPSET = 17
DYNAMO_DEFAULT_OPSET = 18
"""Below opset 18 the dynamo exporter drops the node metadata PyTorch's records live in."""


def failure(message: str, error: BaseException, log: str = "") -> StrategyFailed:
    """A one-line :class:`StrategyFailed` whose ``detail`` keeps the exporter's full message and log."""
    failed = StrategyFailed(message)
    failed.detail = full_text(error) + (f"\n{log}" if log else "")  # type: ignore[attr-defined]
    return failed


@contextlib.contextmanager
def torchscript_log() -> Iterator[list[str]]:
    """Collect what the TorchScript exporter logs on failure (its whole IR graph) instead of printing it."""
    import torch

    lines: list[str] = []
    original = torch._C._jit_onnx_log

    def collect(*parts: object) -> None:
        lines.append("".join(str(part) for part in parts))

    torch._C._jit_onnx_log = collect
    try:
        yield lines
    finally:
        torch._C._jit_onnx_log = original


@contextlib.contextmanager
def repeats_kept(keep: bool = True) -> Iterator[None]:
    """With ``keep``, the TorchScript exporter skips its common-subexpression pass: a value two pieces of code
    computed alike (two modules each reading the same input's size) stays two nodes, each written where its code
    ran, instead of one node the records name after the first. The file computes the same outputs."""
    import torch

    original = getattr(torch._C, "_jit_pass_cse", None)
    if not keep or original is None:
        yield
        return

    def skipped(graph: Any) -> bool:
        return False  # nothing merged, as the pass reports when it finds nothing to merge

    setattr(torch._C, "_jit_pass_cse", skipped)  # noqa: B010 (its stub names the argument otherwise)
    try:
        yield
    finally:
        setattr(torch._C, "_jit_pass_cse", original)  # noqa: B010


IN_MEMORY_LIMIT = 1 << 30
"""Models whose weights take fewer bytes are exported into memory; larger ones go to a file (a file over
2 GB keeps its weights in external data, which the TorchScript exporter writes only beside a named file)."""


class _Captured:
    """What the TorchScript exporter writes, held as the bytes objects it hands over (no copy is made)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(data)
        return len(data)

    def flush(self) -> None:
        pass


def export_torchscript(ctx: ExportContext, onnx_path: Path, in_memory: bool = False,
                       keep_repeats: bool = False) -> "StreamedModel | None":
    """A plain TorchScript export of ``ctx.module`` (dynamic axes and opset as the context says); with
    ``keep_repeats``, equal values computed twice are not merged into one node (:func:`repeats_kept`).

    Written to ``onnx_path``; with ``in_memory``, a model under :data:`IN_MEMORY_LIMIT` is handed back
    unwritten instead (a :class:`StreamedModel` over the exporter's own bytes): a strategy whose file the
    core tags then has it written once, as a plain export writes it, rather than written, copied and removed.
    """
    import torch

    from modelexport_core.export.symbolics import register_missing_symbolics
    from modelexport_core.format.onnx_file import streamed_from_bytes

    register_missing_symbolics()
    captured = _Captured() if in_memory and _weight_bytes(ctx.module) < IN_MEMORY_LIMIT else None
    with warnings.catch_warnings(), torchscript_log() as log, repeats_kept(keep_repeats):
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                ctx.module,
                ctx.args,
                captured if captured is not None else str(onnx_path),  # type: ignore[arg-type]
                input_names=ctx.input_names,
                output_names=ctx.output_names,
                dynamic_axes=ctx.dynamic_axes or None,
                opset_version=ctx.opset or TORCHSCRIPT_DEFAULT_OPSET,
                dynamo=False,
            )
        except Exception as error:
            raise failure(f"TorchScript export failed: {first_line(error)}", error, "\n".join(log)) from error
    if captured is None:
        return None
    if len(captured.chunks) != 1:  # not what this torch writes: fall back to a file
        Path(onnx_path).write_bytes(b"".join(captured.chunks))
        return None
    return streamed_from_bytes(captured.chunks[0])


def export_dynamo(ctx: ExportContext, onnx_path: Path) -> None:
    """A plain dynamo export of ``ctx.module`` to ``onnx_path`` (``Dim.AUTO`` on every dynamic axis, opset 18 or
    the context's if higher), untouched: no tags, no renaming."""
    import logging

    import torch

    onnx_logger = logging.getLogger("torch.onnx")  # the dynamo exporter's notices of missing torchvision ops
    level = onnx_logger.level
    onnx_logger.setLevel(max(level, logging.ERROR))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                ctx.module,
                tuple(ctx.args),
                input_names=ctx.input_names,
                output_names=ctx.output_names or None,
                dynamic_shapes=_dynamic_shapes(ctx),
                opset_version=max(ctx.opset or DYNAMO_DEFAULT_OPSET, DYNAMO_DEFAULT_OPSET),
                dynamo=True,
                verbose=False,
            )
            if program is None:  # the dynamo exporter returns its program whenever no file is named
                raise StrategyFailed("dynamo export returned no program")
            program.save(str(onnx_path))
    except StrategyFailed:
        raise
    except Exception as error:
        raise failure(f"dynamo export failed: {first_line(error)}", error) from error
    finally:
        onnx_logger.setLevel(level)


def _dynamic_shapes(ctx: ExportContext) -> tuple | None:
    """torch.export's ``dynamic_shapes`` for the wrapper's ``*tensors``: ``Dim.AUTO`` on every dynamic axis."""
    from torch.export import Dim

    specs = tuple({axis: Dim.AUTO for axis in ctx.dynamic_axes.get(name, {})} or None for name in ctx.input_names)
    return None if all(spec is None for spec in specs) else (specs,)


def _weight_bytes(module: "torch.nn.Module") -> int:
    tensors = {id(t): t for t in (*module.parameters(), *module.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values())


@contextlib.contextmanager
def as_exported(exporter: str | None) -> Iterator[None]:
    """Answer a model's "am I being exported?" as the named exporter does while it runs the model.

    Models take another path under an exporter (a mask built as a tensor instead of left
    to a fused kernel, a check skipped): the TorchScript exporter runs them with
    ``torch.jit.is_tracing()`` true, the dynamo exporter with ``torch.compiler.is_exporting()``
    and ``is_compiling()`` true, and both with ``torch.onnx.is_in_onnx_export()`` true. The
    trace runs the path the file was made from.
    """
    import torch

    def yes() -> bool:
        return True

    patched: list[tuple[Any, str]] = []
    if exporter == "torchscript":
        patched = [(torch.jit, "is_tracing"), (torch.onnx, "is_in_onnx_export")]
    elif exporter == "dynamo":
        patched = [(torch.compiler, "is_exporting"), (torch.compiler, "is_compiling"), (torch.onnx, "is_in_onnx_export")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in patched]
    try:
        for owner, name in patched:
            setattr(owner, name, yes)
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
