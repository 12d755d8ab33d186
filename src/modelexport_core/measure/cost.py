"""What an export costs against a plain ``torch.onnx.export``: time and peak memory, each run in its own process.

A child process (``cost_child``) loads the model again from its source (a preset, factory or model
directory), runs one thing and reports as JSON: either one strategy's export with the
core's tag writing (and the strategy's comparison with PyTorch's records, see
``compare.py``), or a plain export of the same wrapped model with one of PyTorch's
exporters, as a user without modelexport would call it. The peak resident memory is the
child's own (``ru_maxrss``), taken right after the export, so the attempts do not share one.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.errors import ModelExportError
from modelexport_core.prepare.models import LoadedModel, _is_factory_spec

if TYPE_CHECKING:
    from modelexport_core.plugin.strategy import ExportContext

PLAIN_DYNAMO_OPSET = 18


def can_reload(loaded: LoadedModel) -> bool:
    """Whether a child process can load the same model from ``loaded.source``."""
    if loaded.kind == "preset":
        return True
    if loaded.kind == "factory":
        return _is_factory_spec(loaded.source)
    if loaded.kind == "huggingface":
        return Path(loaded.source).expanduser().is_dir()
    return False


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def plain_export(ctx: "ExportContext", onnx_path: Path, exporter: str) -> None:
    """``torch.onnx.export`` of the wrapped model with the context's inputs and axes, nothing else."""
    import torch

    from modelexport_core.export.exporters import export_torchscript

    if exporter == "torchscript":
        export_torchscript(ctx, onnx_path)
        return
    from torch.export import Dim

    specs = tuple({axis: Dim.AUTO for axis in ctx.dynamic_axes.get(name, {})} or None for name in ctx.input_names)
    torch.onnx.export(
        ctx.module, tuple(ctx.args), str(onnx_path), input_names=ctx.input_names,
        dynamic_shapes=None if all(s is None for s in specs) else (specs,),
        opset_version=ctx.opset or PLAIN_DYNAMO_OPSET, dynamo=True, verbose=False,
    )


def run_child(request: dict[str, Any]) -> dict[str, Any]:
    """Run ``request`` in a fresh process (``python -m modelexport_core.measure.cost_child``); its JSON answer."""
    completed = subprocess.run(
        [sys.executable, "-m", "modelexport_core.measure.cost_child"], input=json.dumps(request), capture_output=True, text=True,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode or not lines:
        error = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelExportError(f"the measuring process failed: {error}")
    return json.loads(lines[-1])
