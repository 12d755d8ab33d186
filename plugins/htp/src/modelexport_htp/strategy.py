"""The ``htp`` strategy: Hierarchical Trace-and-Project.

Trace: run the model once with module hooks and a torch function mode, recording every
torch call with the module stack at that moment. Project: export plainly, compute every
intermediate ONNX value with onnxruntime, and match ONNX nodes to recorded calls by their
values and data flow. The exporter's own scope records (node names, metadata) are never
read: the hierarchy is inferred, and those records stay a reference for the tests.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from modelexport_core.sdk import EVIDENCE_KIND as CONTAINMENT
from modelexport_core.sdk import (
    EXPORTER_OPTION,
    ExportContext,
    ModelMismatchError,
    StrategyFailed,
    StrategyUnavailable,
    TaggingResult,
    TaggingStrategy,
    export_dynamo,
    export_in_turn,
    export_torchscript,
    first_line,
    hold_call_containment,
    hold_causality,
)

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from modelexport_core.sdk import StreamedModel

    from .project import Projection
    from .trace import Trace

DEFAULT_DYNAMO_OPSET = 18
"""The lowest opset the dynamo exporter writes (a file of it or later is taken for a dynamo export)."""
EXPORTERS = ("torchscript", "dynamo", "auto")


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {first_line(error)}"[:300]


def export_plain(ctx: ExportContext, onnx_path: Path, exporter: str) -> None:
    """Export ``ctx.module`` with the named torch exporter, untouched (no tags, no renaming)."""
    if exporter == "torchscript":
        export_torchscript(ctx, onnx_path)
    else:
        export_dynamo(ctx, onnx_path)


class HTPStrategy(TaggingStrategy):
    """Trace torch calls with a module stack, then project them onto a plain export by data flow."""

    name = "htp"
    priority = 100
    description = (
        "Hierarchical Trace-and-Project: records every torch call with the module stack (hooks + "
        "TorchFunctionMode), then matches ONNX nodes to calls by intermediate values and data flow"
    )
    requires = "onnxruntime, and a model whose export onnxruntime can run on the example inputs"
    exporters = ("torchscript", "dynamo")
    options = (EXPORTER_OPTION,)

    def check(self, ctx: ExportContext) -> None:
        from importlib.util import find_spec

        # found, not imported: onnxruntime loaded before the export slows the TorchScript exporter by 5-10 %
        if find_spec("onnxruntime") is None:
            raise StrategyUnavailable("htp needs onnxruntime to compare values")
        exporter = ctx.options.get("exporter", "auto")
        if exporter not in EXPORTERS:
            raise StrategyUnavailable(f"htp.exporter must be one of {', '.join(EXPORTERS)}, not {exporter!r}")

    def export(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        self.check(ctx)
        return export_in_turn(self.exporters, ctx.options.get("exporter", "auto"),
                              lambda exporter: self._export_with(ctx, onnx_path, exporter))

    def _export_with(self, ctx: ExportContext, onnx_path: Path, exporter: str) -> TaggingResult:
        from modelexport_core.sdk import load_graph

        unwritten = None
        try:
            if exporter == "torchscript":  # into memory where the core may write the file (once, tagged)
                unwritten = export_torchscript(ctx, onnx_path, in_memory=ctx.may_leave_unwritten)
            else:
                export_plain(ctx, onnx_path, exporter)
        except StrategyFailed:  # already one line, naming the exporter
            raise
        except Exception as error:  # noqa: BLE001 - any exporter error means this exporter failed
            raise StrategyFailed(f"{exporter} export failed: {_one_line(error)}") from error
        if unwritten is not None:  # onnxruntime and the initializer reads take the weights where the exporter left them
            result = self._tag(ctx, unwritten.model, exporter, weights=unwritten)
            result.unwritten = unwritten
            return result
        # the graph only: onnxruntime and the initializer reads take the weights from the file
        return self._tag(ctx, load_graph(Path(onnx_path)), exporter, weights=Path(onnx_path))

    def tag_onnx(self, ctx: ExportContext, onnx_model: "onnx.ModelProto") -> TaggingResult:
        """Tag an export made elsewhere: the projection needs only the graph and the example inputs."""
        self.check(ctx)
        ctx = _with_file_input_names(ctx, onnx_model)
        return self._tag(ctx, onnx_model, _exporter_guess(onnx_model), outputs=[o.name for o in onnx_model.graph.output])

    def _tag(
        self, ctx: ExportContext, onnx_model: "onnx.ModelProto", exporter: str,
        weights: "Path | StreamedModel | None" = None, outputs: list[str] | None = None,
    ) -> TaggingResult:
        """Trace, run the file in onnxruntime, project; ``weights``: where a weightless graph's weights are (the file
        it was read from, or the exporter's bytes); ``outputs``: the graph outputs of a file made elsewhere, held to
        the model's own outputs first."""
        from .fill import known_places, tag_nodes
        from .project import project, read_initializers
        from .trace import model_weights

        reader = None
        if isinstance(weights, Path):
            from modelexport_core.sdk import tensor_value

            folder = weights.parent

            def reader(tensor: "onnx.TensorProto") -> "np.ndarray":
                return tensor_value(tensor, folder)
        elif weights is not None:
            reader = weights.value
        initializers: list = []

        def match_weights() -> None:  # once, in this thread, while onnxruntime runs the file in another
            if not initializers:
                initializers.append(read_initializers(onnx_model, model_weights(ctx.model), reader))

        traced_ctx, trace, values = _analyse(ctx, onnx_model, exporter, weights, match_weights)
        if outputs is not None:
            _check_same_function(traced_ctx, trace.model_outputs, [values.get(name) for name in outputs])
        match_weights()
        projection = project(onnx_model, values, trace, initializers[0])
        node_modules, also, how = tag_nodes(onnx_model, projection, trace, values, exporter)
        reused = [name for name, count in Counter(trace.execution_trace).items() if count > 1]
        held = hold_call_containment(onnx_model.graph, node_modules, reused, set(trace.execution_trace))
        first_call = {name: position for position, name in reversed(list(enumerate(trace.execution_trace)))}
        anchored = [key for key in known_places(onnx_model.graph, projection, trace, how) if key not in held.moved]
        timely = hold_causality(onnx_model.graph, held.node_modules, first_call, reused, anchored)
        held.moved.update({k: v for k, v in timely.moved.items() if k not in held.moved})
        node_modules = timely.node_modules
        details = _details(ctx, trace, projection, how, exporter)
        details["analysed_inputs"] = {name: list(arg.shape) for name, arg in zip(ctx.input_names, traced_ctx.args)}
        details["containment_moved"] = len(held.moved)
        evidence = {key: _EVIDENCE.get(kind, kind) for key, kind in how.items()}
        evidence.update(dict.fromkeys(held.moved, CONTAINMENT))
        return TaggingResult(node_modules=node_modules, exporter=exporter, also=also, details=details, evidence=evidence)


def _analyse(
    ctx: ExportContext, onnx_model: "onnx.ModelProto", exporter: str, weights: "Path | StreamedModel | None",
    meanwhile: Callable[[], None] = lambda: None,
) -> tuple[ExportContext, "Trace", dict[str, "np.ndarray"]]:
    """Trace the model and run the file in onnxruntime on the same inputs: the example cut short along its
    dynamic axes where that saves most of the work and the file then computes what the model computes
    (``inputs.shorter_args``), else the example, each with masks that vary (``inputs.informative_args``).

    onnxruntime runs in a second thread while this one traces the model (the model runs where the exporter
    ran it, in this thread's autocast and grad modes) and then calls ``meanwhile``; where the graph holds its
    weights (``weights`` None), one after the other.
    """
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from modelexport_core.sdk import intermediate_values

    from .inputs import informative_args, shorter_args
    from .trace import trace_execution

    def run(args: tuple) -> tuple[ExportContext, "Trace", dict[str, "np.ndarray"]]:
        run_ctx = replace(ctx, args=args)
        if weights is None:  # onnxruntime's copy of the graph is made from it in place
            trace = trace_execution(run_ctx, exporter)
            meanwhile()
            return run_ctx, trace, intermediate_values(onnx_model, ctx.input_names, args, weights)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="htp-onnxruntime") as pool:
            running = pool.submit(intermediate_values, onnx_model, ctx.input_names, args, weights)
            trace = trace_execution(run_ctx, exporter)
            meanwhile()
            return run_ctx, trace, running.result()

    shorter = shorter_args(tuple(ctx.args), ctx.input_names, ctx.dynamic_axes)
    if shorter is not None:
        try:
            analysed = run(informative_args(shorter) or shorter)
            if _same_outputs(analysed[1].model_outputs, [analysed[2].get(o.name) for o in onnx_model.graph.output]):
                return analysed
            del analysed  # its values are let go before the example's are computed
        except Exception:  # noqa: BLE001 - the model or the file refuses the shorter inputs: the example serves
            pass
    varied = informative_args(tuple(ctx.args))
    if varied is not None:  # an all-ones mask makes the values built from it alike: trace with one that varies
        try:
            return run(varied)
        except Exception:  # noqa: BLE001 - the model or the file refuses them: the example itself is traced
            pass
    try:
        trace = trace_execution(ctx, exporter)
    except Exception as error:  # noqa: BLE001
        raise StrategyFailed(f"tracing the model failed: {_one_line(error)}") from error
    meanwhile()
    try:
        values = intermediate_values(onnx_model, ctx.input_names, ctx.args, weights)
    except Exception as error:  # noqa: BLE001
        raise StrategyFailed(f"onnxruntime could not run the export: {_one_line(error)}") from error
    return ctx, trace, values


def _same_outputs(expected: list[Any], produced: list[Any]) -> bool:
    """Whether the file's outputs are the model's, in order: as many, each of the same shape and, within the
    tolerance of float arithmetic, the same values."""
    import numpy as np

    if len(expected) != len(produced):
        return False
    for want, got in zip(expected, produced):
        if want is None or got is None:
            continue
        got = np.asarray(got)
        if np.issubdtype(want.dtype, np.floating) or np.issubdtype(got.dtype, np.floating):
            if not _close(want, got):
                return False
        elif not np.array_equal(got, want):
            return False
    return True


_EVIDENCE = {
    "matched": "value",
    "parameter owner": "parameter",
    "consumer": "consumers",
    "first consumer": "consumers",
    "common consumer": "consumers",
    "running call": "order",
    "handed in": "value",
    "before the call": "order",
    "written before": "order",
    "shape element": "shape read",
    "value element": "value read",
    "input size": "exporter convention",
}
"""htp's ways of tagging a node (``fill.tag_nodes``) as the core's evidence kinds, where one fits."""


def _check_same_function(ctx: ExportContext, model_outputs: list[Any], file_outputs: list[Any]) -> None:
    """A file exported from the model computes what the model computes: on the same inputs (``model_outputs``, what
    the traced run returned), some float output of the file equals one of the model's (another model's file, or
    other weights, matches none)."""
    import numpy as np

    def floats(values: list[Any]) -> list["np.ndarray"]:
        return [np.asarray(v, dtype=np.float32) for v in values
                if v is not None and np.issubdtype(np.asarray(v).dtype, np.floating)]

    expected, produced = floats(model_outputs), floats(file_outputs)
    if not expected or not produced:
        return
    if any(_close(want, got) for want in expected for got in produced):
        return
    raise ModelMismatchError(
        f"the file's outputs differ from {type(ctx.model).__name__}'s on the same inputs"
        " (another model, other weights or dtype?)"
    )


def _close(want: "np.ndarray", got: "np.ndarray") -> bool:
    """The same shape and, within the tolerance of float arithmetic (relative 1e-3, absolute 1e-4 plus 1e-3 of the
    largest magnitude), the same values."""
    import numpy as np

    if got.shape != want.shape:
        return False
    scale = float(np.abs(want).max(initial=0)) if want.size else 0.0
    return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-4 + 1e-3 * scale,
                            equal_nan=True))


def _with_file_input_names(ctx: ExportContext, onnx_model: "onnx.ModelProto") -> ExportContext:
    """The context feeding the file's own inputs: a file exported elsewhere names them its own way
    (``input.1``); they follow the model's arguments in order."""
    from dataclasses import replace

    initializers = {tensor.name for tensor in onnx_model.graph.initializer}
    names = [value.name for value in onnx_model.graph.input if value.name not in initializers]
    if set(names) == set(ctx.input_names) or len(names) != len(ctx.input_names):
        return ctx
    return replace(ctx, input_names=names)


def _exporter_guess(onnx_model: "onnx.ModelProto") -> str:
    """Which torch exporter most likely wrote a file, for the record only: dynamo writes opset 18 and up."""
    opset = next((o.version for o in onnx_model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return "dynamo" if opset >= DEFAULT_DYNAMO_OPSET else "torchscript"


def _details(
    ctx: ExportContext, trace: "Trace", projection: "Projection", how: dict[str, str], exporter: str
) -> dict[str, Any]:
    """The sidecar section: the execution trace and how each node was tagged."""
    calls = Counter(trace.execution_trace)
    return {
        "execution_trace": list(trace.execution_trace),
        "module_calls": {name: count for name, count in calls.items() if count > 1},
        "modules_never_called": [name for name, _ in ctx.model.named_modules() if name not in calls],
        "recorded_calls": len(trace.records),
        "matched_nodes": len(projection.matched),
        "ambiguous_values": projection.ambiguous,
        "realigned_nodes": projection.realigned,
        "unmatched_values": projection.unmatched_values,
        "tagged_by": dict(Counter(how.values())),
        "exporter": exporter,
    }
