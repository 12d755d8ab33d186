"""What an export costs against a plain ``torch.onnx.export``: time and peak memory, each run in its own process.

A child process loads the model again from its source (a preset, factory or model
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
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ModelExportError
from .models import LoadedModel, _is_factory_spec

if TYPE_CHECKING:
    from .strategy import ExportContext

PLAIN_DYNAMO_OPSET = 18


@dataclass(frozen=True)
class ExportCost:
    """Seconds of one export (model loading excluded) and the peak resident memory of its process."""

    seconds: float
    peak_mb: float


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

    from .exporters import export_torchscript

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
    """Run ``request`` in a fresh process (``python -m modelexport_core.cost``); its JSON answer."""
    completed = subprocess.run(
        [sys.executable, "-m", "modelexport_core.cost"], input=json.dumps(request), capture_output=True, text=True,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode or not lines:
        error = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelExportError(f"the measuring process failed: {error}")
    return json.loads(lines[-1])


def _child(request: dict[str, Any]) -> dict[str, Any]:
    from dataclasses import replace

    from .compare import compare_one
    from .context import make_context
    from .export import ExportOptions, example_inputs
    from .models import load_model
    from .plugins import get_strategy
    from .tags import HierarchyTags
    from .wrapper import export_settings

    settings = dict(request["options"])
    settings["input_specs"] = Path(settings["input_specs"]) if settings.get("input_specs") else None
    options = ExportOptions(**settings)
    loaded = load_model(request["source"])
    with tempfile.TemporaryDirectory(prefix="modelexport-cost-") as tmp, export_settings(loaded.model):
        if request.get("strategy"):
            started = time.perf_counter()
            inputs = example_inputs(loaded, options.input_specs)
            ctx = make_context(loaded.model, inputs, dynamic=options.dynamic, opset=options.opset,
                               by_keyword=loaded.by_keyword)
            tags = HierarchyTags.from_model(loaded.model, options.keep_torch_modules)
            info = get_strategy(request["strategy"])
            comparison, finished, peak = compare_one(info, ctx, tags, options, Path(tmp), started)
            comparison = replace(comparison, peak_mb=round(peak, 1))
            return {"comparison": asdict(comparison), "seconds": finished - started, "peak_mb": peak}
        from .context import default_dynamic_axes, takes_keywords
        from .strategy import ExportContext
        from .wrapper import wrap_model

        inputs = example_inputs(loaded, options.input_specs)
        by_keyword = loaded.by_keyword if loaded.by_keyword is not None else takes_keywords(loaded.model, list(inputs))
        ctx = ExportContext(
            model=loaded.model, module=wrap_model(loaded.model.eval(), list(inputs), by_keyword).eval(),
            args=tuple(inputs.values()), input_names=list(inputs), output_names=[],
            dynamic_axes=default_dynamic_axes(inputs) if options.dynamic else {}, opset=options.opset,
        )
        started = time.perf_counter()
        plain_export(ctx, Path(tmp) / "plain.onnx", request["exporter"])
        return {"seconds": time.perf_counter() - started, "peak_mb": peak_mb()}


def main() -> int:
    warnings.simplefilter("ignore")
    import logging

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    request = json.loads(sys.stdin.read())
    answer = _child(request)
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
