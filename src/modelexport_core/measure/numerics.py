"""Where numerical error comes in: each module's output in PyTorch against its boundary values in onnxruntime.

PyTorch runs with forward hooks on every module that has a tag; onnxruntime runs the file
with each module's boundary values (see :mod:`.boundary`) as extra outputs, on the same
inputs. A module's output is compared with the boundary value of the same shape that is
closest to it (a module can hand several values out: shapes, masks, its result). A module
is where the error enters when its output differs beyond the tolerance, its inputs do
not, and no module inside it is such a place.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.errors import ToolRunError, first_line
from modelexport_core.format.tagged import TaggedFile, load_tagged
from modelexport_core.tools.boundary import module_boundary

if TYPE_CHECKING:
    import numpy as np
    import torch

    from modelexport_core.prepare.models import LoadedModel


@dataclass
class ModuleDifference:
    """How far onnxruntime is from PyTorch at one module's edge."""

    module: str  # named_modules() name
    tag: str
    calls: int
    max_abs: float | None  # None when no output could be paired with a value of the graph
    max_rel: float | None
    input_max_abs: float | None
    diverges: bool = False
    error_enters: bool = False


@dataclass
class NumericsReport:
    """Every compared module in execution order (by call start), and where the error comes in."""

    path: Path
    atol: float
    rtol: float
    modules: list[ModuleDifference]
    first_divergent: list[str] = field(default_factory=list)


@dataclass
class _Call:
    inputs: list["np.ndarray"]
    outputs: list["np.ndarray"]


def _float_arrays(values: Any) -> list["np.ndarray"]:
    import torch

    from modelexport_core.prepare.wrapper import flatten_outputs

    found = []
    for _, tensor in flatten_outputs(values):
        if isinstance(tensor, torch.Tensor) and torch.is_floating_point(tensor):
            found.append(tensor.detach().to(torch.float64).cpu().numpy())
    return found


def _record_calls(model: "torch.nn.Module", module_names: list[str], run) -> tuple[dict[str, list[_Call]], list[str], list[str]]:
    """Run ``run()`` with hooks on ``module_names``; their calls, start order and completion order."""
    import torch

    calls: dict[str, list[_Call]] = {name: [] for name in module_names}
    started: list[str] = []
    finished: list[str] = []
    modules = dict(model.named_modules())
    handles = []
    for name in module_names:
        module = modules[name]

        def before(_module, _args, name=name):
            if name not in started:
                started.append(name)

        def after(_module, args, kwargs, output, name=name):
            calls[name].append(_Call(_float_arrays(list(args) + list(kwargs.values())), _float_arrays(output)))
            if name not in finished:
                finished.append(name)

        handles.append(module.register_forward_pre_hook(before))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        with torch.no_grad():
            run()
    finally:
        for handle in handles:
            handle.remove()
    return calls, started, finished


def _closest(reference: "np.ndarray", candidates: list["np.ndarray"]) -> float | None:
    import numpy as np

    diffs = [float(np.max(np.abs(c - reference))) if c.size else 0.0 for c in candidates if c.shape == reference.shape]
    return min(diffs) if diffs else None


def _session_with_outputs(tagged: TaggedFile, values: list[str]):
    """An onnxruntime session over the tagged file that also returns ``values``."""
    import onnx
    import onnxruntime as ort

    model = onnx.ModelProto()
    model.CopyFrom(tagged.model)
    present = {o.name for o in model.graph.output} | {i.name for i in model.graph.input}
    model.graph.output.extend(onnx.ValueInfoProto(name=v) for v in values if v not in present)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    handle, temporary = tempfile.mkstemp(prefix=".modelexport-numerics-", suffix=".onnx", dir=tagged.path.parent)
    os.close(handle)
    try:  # beside the original, so that external weights are found where the graph says
        onnx.save(model, temporary)
        return ort.InferenceSession(temporary, options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise ToolRunError(f"onnxruntime cannot run {tagged.path.name}: {first_line(error)}") from error
    finally:
        os.unlink(temporary)


def compare_numerics(
    loaded: "LoadedModel", onnx_path: Path, *, input_specs: Path | None = None, atol: float = 1e-4, rtol: float = 1e-3
) -> NumericsReport:
    """Compare each tagged module of ``loaded`` with the file at ``onnx_path`` on the export's example inputs."""
    import numpy as np

    from modelexport_core.export.pipeline import example_inputs
    from modelexport_core.prepare.context import make_context

    tagged = load_tagged(onnx_path)
    module_tags = tagged.module_tags()
    boundaries = {}
    for name, tag in module_tags.items():
        indices = tagged.node_indices(tag)
        if indices:
            boundaries[name] = module_boundary(tagged.graph, indices)
    wanted = sorted({v for b in boundaries.values() for v in b.inputs + b.outputs})

    inputs = example_inputs(loaded, input_specs)
    ctx = make_context(loaded.model, inputs, dynamic=False, by_keyword=loaded.by_keyword)
    present = dict(loaded.model.named_modules())
    names = [name for name in boundaries if name in present]
    calls, started, finished = _record_calls(loaded.model, names, lambda: ctx.module(*ctx.args))

    session = _session_with_outputs(tagged, wanted)
    feed = {}
    for meta in session.get_inputs():
        if meta.name not in inputs:
            raise ToolRunError(f"{tagged.path.name} takes an input {meta.name!r} that the model's example inputs lack")
        feed[meta.name] = inputs[meta.name].detach().cpu().numpy()
    output_names = [o.name for o in session.get_outputs()]
    try:
        results = dict(zip(output_names, session.run(None, feed)))
    except Exception as error:
        raise ToolRunError(f"onnxruntime failed on {tagged.path.name}: {first_line(error)}") from error
    values = {**feed, **results}

    def floats(names_: list[str]) -> list[np.ndarray]:
        return [np.asarray(values[n], dtype=np.float64) for n in names_
                if n in values and np.issubdtype(np.asarray(values[n]).dtype, np.floating)]

    rows: dict[str, ModuleDifference] = {}
    for name in started:
        boundary = boundaries[name]
        out_candidates, in_candidates = floats(boundary.outputs), floats(boundary.inputs)
        max_abs = max_rel = in_abs = None
        diverges = False
        for call in calls[name]:
            for reference in call.outputs:
                diff = _closest(reference, out_candidates)
                if diff is None:
                    continue
                scale = float(np.max(np.abs(reference))) if reference.size else 0.0
                max_abs = diff if max_abs is None else max(max_abs, diff)
                relative = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
                max_rel = relative if max_rel is None else max(max_rel, relative)
                diverges = diverges or diff > atol + rtol * scale
            for reference in call.inputs:
                diff = _closest(reference, in_candidates + out_candidates)
                if diff is not None:
                    in_abs = diff if in_abs is None else max(in_abs, diff)
        rows[name] = ModuleDifference(name, module_tags[name], len(calls[name]), max_abs, max_rel, in_abs, diverges)

    entries: list[str] = []
    for name in finished:  # children finish before their parents
        row = rows[name]
        if not row.diverges:
            continue
        inside = [e for e in entries if name == "" or e.startswith(name + ".")]
        if inside:
            continue
        inputs_differ = row.input_max_abs is not None and row.input_max_abs > atol
        if row.input_max_abs is None and entries:
            continue  # nothing to tell its inputs by, and the error already came in elsewhere
        if not inputs_differ:
            row.error_enters = True
            entries.append(name)
    return NumericsReport(tagged.path, atol, rtol, [rows[name] for name in started], entries)
