"""The export pipeline: try strategies in order, tag the winner's ONNX, check, verify, write atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from modelexport_core.errors import (
    AllStrategiesFailedError,
    ModelMismatchError,
    OutputPathError,
    StrategyOptionError,
    VerificationError,
    first_line,
)
from modelexport_core.export.fallback import AttemptFailed, AttemptResult, chain_error, first_success, run_attempt
from modelexport_core.export.verify import Verification, pytorch_self_difference, verify
from modelexport_core.format.graph import fill_missing_modules, name_outputs, node_key, strip_wrapper_names
from modelexport_core.format.onnx_file import check_graph, load_graph, save_graph
from modelexport_core.format.records import RECORDS_STRATEGY, read_records, records_result
from modelexport_core.format.sidecar import Attempt, build_sidecar, sidecar_path, write_sidecar
from modelexport_core.format.signals import deferred_signals
from modelexport_core.format.source_paths import strip_source_paths
from modelexport_core.format.tags import HierarchyTags
from modelexport_core.format.work_folder import close_work_folder, is_work_file, open_work_folder
from modelexport_core.format.writer import NodeTag, write_tags
from modelexport_core.plugin.discovery import StrategyInfo, get_strategies, get_strategy
from modelexport_core.plugin.options import resolve_options
from modelexport_core.plugin.strategy import ExportContext, StrategyFailed, TaggingResult
from modelexport_core.prepare.context import check_model_runs, make_context, recorded_output_names
from modelexport_core.prepare.inputs import (
    inputs_from_config,
    inputs_from_tokenizer,
    merge_input_specs,
    read_input_specs,
)
from modelexport_core.prepare.models import LoadedModel
from modelexport_core.prepare.wrapper import export_settings
from modelexport_core.version import __version__

if TYPE_CHECKING:
    import onnx
    import torch

Progress = Callable[[str], None]


@dataclass
class ExportOptions:
    """How to export, as the user asked."""

    strategies: list[str] | None = None  # None: every installed strategy by priority
    keep_torch_modules: bool = False
    opset: int | None = None
    dynamic: bool = True
    verify: bool = True
    atol: float = 1e-4
    rtol: float = 1e-5  # and a share of each PyTorch value, as numpy.allclose (Optimum's validation) allows
    doc_string: bool = False
    viewer_keys: bool = True  # also write `namespace` and `layer_ann` (Model Explorer, onnxruntime)
    strip_source_paths: bool = False  # drop stack traces and other source paths from the file
    input_specs: Path | None = None
    strategy_options: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class ExportReport:
    """What an export did, for the CLI summary and for Python callers."""

    onnx_path: Path
    sidecar_path: Path
    strategy: str
    attempts: list[Attempt]
    node_count: int
    tagged_count: int
    module_count: int
    tag_count: int
    seconds: float
    verification: Verification | None
    sidecar: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # what the user should know: axes exported static

    @property
    def coverage(self) -> float:
        return self.tagged_count / self.node_count if self.node_count else 1.0


def _quiet(_: str) -> None:
    pass


def example_inputs(loaded: LoadedModel, input_specs: Path | None) -> dict[str, "torch.Tensor"]:
    """Inputs for the export: the factory's, else the tokenizer's, else from the config; a spec file
    replaces the inputs it names and adds new ones. Generated inputs go to the model's device."""
    from modelexport_core.errors import InputSpecError

    base: dict[str, torch.Tensor] = {}
    if loaded.inputs is not None:
        base = dict(loaded.inputs)
    elif loaded.tokenizer is not None:
        base = inputs_from_tokenizer(loaded.tokenizer, loaded.model)
    if not base:
        try:
            base = inputs_from_config(loaded.model)
        except InputSpecError:
            if input_specs is None:
                raise
    if input_specs is not None:
        base = merge_input_specs(base, read_input_specs(input_specs), loaded.model)
    return base


def strategy_chain(names: list[str] | None) -> list[StrategyInfo]:
    """The strategies to try, in order."""
    if not names:
        chain = get_strategies()
        if not chain:
            raise AllStrategiesFailedError("no strategy is installed; install a plugin such as modelexport-fx")
        return chain
    return [get_strategy(name) for name in names]


def node_tags_from_result(
    model: "onnx.ModelProto", result: TaggingResult, tags: HierarchyTags
) -> dict[str, NodeTag]:
    """Tag of every node from a strategy's module names; nodes the strategy missed get their neighbours'."""
    node_modules = fill_missing_modules(model.graph, result.node_modules)
    node_tags = {}
    by_module: dict[str, NodeTag] = {}  # a graph has far fewer modules than nodes
    also_by_node = result.also
    for name, qualname in node_modules.items():
        tag = by_module.get(qualname)
        if tag is None:
            kept = tags.kept_module(qualname)
            tag = by_module[qualname] = NodeTag(tags.tag_of(kept), kept)
        others = also_by_node.get(name) if also_by_node else None
        if others:
            also = tuple(dict.fromkeys(t for q in others if (t := tags.tag_of(q)) != tag.tag))
            tag = NodeTag(tag.tag, tag.module, also) if also else tag
        node_tags[name] = tag
    return node_tags


def node_evidence(model: "onnx.ModelProto", result: TaggingResult) -> dict[str, str]:
    """How each node's module was decided: the strategy's word, ``neighbours`` where the core filled it in."""
    evidence = {}
    for i, node in enumerate(model.graph.node):
        key = node_key(node, i)
        if key not in result.node_modules:
            evidence[key] = "neighbours"
        else:
            evidence[key] = result.evidence.get(key, "unstated")
    return evidence


@dataclass
class ExportRun:
    """What every attempt of one export shares: the model, its tags, the options and where to write."""

    loaded: LoadedModel
    ctx: ExportContext
    tags: HierarchyTags
    options: ExportOptions
    output: Path
    workdir: Path
    progress: Progress = _quiet
    static_fallback: "StaticFallback | None" = None  # set for the chain's last resort


@dataclass(frozen=True)
class StaticFallback:
    """The chain's last resort: every axis exported static at the user's example, and why."""

    axes: dict[str, dict[int, str]]  # the axes the user's export would have had dynamic
    reason: str

    def record(self) -> dict[str, Any]:
        """The sidecar's ``export.static_fallback``."""
        return {"axes": {name: {str(axis): dim for axis, dim in dims.items()} for name, dims in self.axes.items()},
                "reason": self.reason, "checks": ["the example", "random inputs of the example's shape"]}


def static_fallback_run(run: ExportRun, dynamic_attempts: list[Attempt]) -> ExportRun:
    """``run`` with every axis static at the user's example, and the one line that says which and why."""
    ctx = run.ctx
    sizes = {name: tensor.shape for name, tensor in zip(ctx.input_names, ctx.user_args)}
    axes = ", ".join(f"{name} axis {axis} ({dim!r}) = {sizes[name][axis]}"
                     for name, dims in ctx.dynamic_axes.items() for axis, dim in sorted(dims.items()))
    failures = "; ".join(f"{a.strategy}: {_shortened(a.reason)}" for a in dynamic_attempts)
    reason = f"no strategy exported and verified it with dynamic axes ({failures})"
    note = f"every axis is exported static at the example's sizes ({axes}): {reason}"
    static_ctx = replace(ctx, args=ctx.user_args, dynamic_axes={}, notes=ctx.notes + (note,))
    fallback = StaticFallback(dict(ctx.dynamic_axes), reason)
    return replace(run, ctx=static_ctx, static_fallback=fallback,
                   options=replace(run.options, verify=True))


def _shortened(reason: str, limit: int = 160) -> str:
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


@dataclass
class TaggedFile:
    """One strategy's file, tagged and checked in the work folder, not yet in place."""

    strategy: str
    result: TaggingResult
    ctx: ExportContext
    onnx_path: Path
    model: "onnx.ModelProto"  # the graph, without its weights
    node_tags: dict[str, NodeTag]
    verification: Verification | None = None
    evidence: dict[str, str] = field(default_factory=dict)


def _sidecar_document(run: ExportRun, tagged: TaggedFile, attempts: list[Attempt]) -> dict[str, Any]:
    ctx, tags, options, verification = tagged.ctx, run.tags, run.options, tagged.verification
    nodes = {}
    for i, node in enumerate(tagged.model.graph.node):
        key = node_key(node, i)
        tag = tagged.node_tags[key]
        entry: dict[str, Any] = {"tag": tag.tag, "module": tag.module, "op_type": node.op_type}
        if tag.also:
            entry["also"] = list(tag.also)
        if key in tagged.evidence:
            entry["by"] = tagged.evidence[key]
        nodes[key] = entry
    modules = {
        qualname: {"tag": tags.tag_of(qualname), "class": record.class_name, "kept": qualname == tags.kept_module(qualname)}
        for qualname, record in tags.records.items()
    }
    model_info = {
        "class": type(ctx.model).__name__,
        "python_class": f"{type(ctx.model).__module__}.{type(ctx.model).__qualname__}",
        "source": run.loaded.source,
        "parameters": sum(p.numel() for p in ctx.model.parameters()),
        "inputs": {name: list(t.shape) for name, t in zip(ctx.input_names, ctx.user_args)},
        "outputs": ctx.output_names,
    }
    export_info = {
        "modelexport_version": __version__,
        "exporter": tagged.result.exporter,
        "opset": next((o.version for o in tagged.model.opset_import if o.domain in ("", "ai.onnx")), None),
        "dynamic_axes": {name: {str(k): v for k, v in axes.items()} for name, axes in ctx.dynamic_axes.items()},
        "notes": list(ctx.notes),
        "evidence": dict(Counter(tagged.evidence.values()).most_common()),
        "torch_modules_kept": options.keep_torch_modules,
        "doc_string": options.doc_string,
        "viewer_keys": options.viewer_keys,
        "source_paths_stripped": options.strip_source_paths,
        **({"static_fallback": run.static_fallback.record()} if run.static_fallback else {}),
        "verification": None
        if verification is None
        else {"atol": verification.atol, "rtol": verification.rtol, "max_abs_diff": verification.max_abs_diff, "passed": verification.passed,
              "shapes": [check.shapes for check in verification.checks], "skipped": verification.skipped or None},
    }
    return build_sidecar(
        strategy=tagged.strategy,
        attempts=attempts,
        model_info=model_info,
        modules=modules,
        nodes=nodes,
        export_info=export_info,
        details=tagged.result.details,
    )


def _prepare_output(output: Path) -> Path:
    """The folder the output goes in, created if needed; a clear error, naming ``output``, if it cannot be written."""
    output = output.expanduser()
    if output.is_dir():
        raise OutputPathError(f"{output} is a directory; give a file name such as {output / 'model.onnx'}")
    folder = output.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe, probe_path = tempfile.mkstemp(prefix=".modelexport-probe-", dir=folder)
        os.close(probe)
        os.unlink(probe_path)
    except OSError as error:
        raise OutputPathError(f"cannot write {output}: {error.strerror or error}") from error
    return folder


def _export_attempt(info: StrategyInfo, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
    """One strategy's export into ``onnx_path``; its failures raise as the strategy raised them."""
    strategy = info.strategy()
    strategy.check(ctx)
    return strategy.export(ctx, onnx_path)


def export_attempt(
    info: StrategyInfo, ctx: ExportContext, workdir: Path, onnx_name: str, strategy_options: dict[str, str],
) -> AttemptResult[tuple[TaggingResult, Path]]:
    """One strategy's export into ``workdir`` (untagged, unverified), as an attempt's result."""
    attempt_dir = workdir / info.name
    attempt_dir.mkdir()
    onnx_path = attempt_dir / onnx_name

    def step() -> tuple[TaggingResult, Path]:
        attempt_ctx = replace(ctx, options=resolve_options(info.strategy, strategy_options))
        return _export_attempt(info, attempt_ctx, onnx_path), onnx_path

    return run_attempt(info.name, step)


def _check_option_targets(chain: list[StrategyInfo], strategy_options: dict[str, dict[str, str]]) -> None:
    unknown = sorted(set(strategy_options) - {info.name for info in chain})
    if unknown:
        raise StrategyOptionError(f"option given for {unknown[0]!r}, which is not among the strategies tried")


def _tag_file(run: ExportRun, strategy: str, result: TaggingResult, onnx_path: Path, rename: bool) -> TaggedFile:
    """Tag the file in the work folder (names as a plain export of the user's model would give them) and check it."""
    ctx = result.context or run.ctx
    unwritten = result.unwritten
    # the graph alone is tagged: weights are written once from memory, or stay in the file, copied byte for byte
    model = unwritten.model if unwritten is not None else load_graph(onnx_path)
    node_modules = result.node_modules
    also = result.also
    evidence = result.evidence
    if rename:
        renamed = strip_wrapper_names(model.graph)
        node_modules = {renamed.get(name, name): module for name, module in node_modules.items()}
        also = {renamed.get(name, name): modules for name, modules in also.items()}
        evidence = {renamed.get(name, name): kind for name, kind in evidence.items()}
        if not ctx.output_names:  # the model did not run before the capture: the capture's run named them
            name_outputs(model.graph, recorded_output_names(ctx))
    if not ctx.output_names:
        ctx = replace(ctx, output_names=[output.name for output in model.graph.output])
    result = replace(result, node_modules=node_modules, also=also, evidence=evidence, unwritten=None)
    node_tags = node_tags_from_result(model, result, run.tags)
    write_tags(model, node_tags, doc_string=run.options.doc_string, strategy=strategy,
               viewer_keys=run.options.viewer_keys)
    if run.options.strip_source_paths:
        strip_source_paths(model)
    if unwritten is not None:
        unwritten.write(onnx_path)
        model = load_graph(onnx_path)  # the checker and verification read the weights from the file
    try:
        check_graph(model, onnx_path)  # the tagged graph, against the weights in the file
    except Exception as error:
        raise AttemptFailed(f"the file fails the ONNX checker: {first_line(error)}") from error
    if unwritten is None:
        rewritten = onnx_path.with_name(f".{onnx_path.name}.tagged")
        save_graph(model, onnx_path, rewritten)
        os.replace(rewritten, onnx_path)
    return TaggedFile(strategy, result, ctx, onnx_path, model, node_tags, evidence=node_evidence(model, result))


def _verify(run: ExportRun, tagged: TaggedFile) -> None:
    """Run the tagged file in onnxruntime against PyTorch; a difference over the tolerance fails the attempt."""
    static = run.static_fallback is not None or tagged.result.value_dependent
    try:
        verification = verify(tagged.onnx_path, tagged.ctx, run.options.atol, same_shape_second=static,
                              rtol=run.options.rtol)
    except VerificationError as error:
        raise AttemptFailed(str(error), float("inf")) from error
    tagged.verification = verification
    checks = verification.checks
    if static and not verification.passed and checks[0].passed:
        raise AttemptFailed(
            f"it matches PyTorch at the example but {_second_check_failure(verification.max_abs_diff)} on random "
            f"inputs of {'another' if tagged.ctx.dynamic_axes else 'the same'} shape: the file keeps a choice the model made from the example's values (routing, "
            "control flow), so no export is right for other inputs", verification.max_abs_diff)
    if not verification.passed:
        itself = pytorch_self_difference(tagged.ctx, run.options.atol, run.options.rtol) if not checks[0].passed else None
        if itself is not None:
            raise AttemptFailed(
                f"PyTorch's own outputs differ between two runs on the example (by {itself:.3g}): the model draws "
                "random numbers in forward, so no file can be verified against it; make the randomness an input, or "
                "export with --no-verify", verification.max_abs_diff)
        if verification.max_abs_diff == float("inf"):
            raise AttemptFailed("onnxruntime gives NaN where PyTorch gives a number (or outputs of another shape or "
                                "count)", verification.max_abs_diff)
        raise AttemptFailed(
            f"onnxruntime differs from PyTorch by {verification.max_abs_diff:.3g} (tolerance {run.options.atol:g} "
            f"+ {run.options.rtol:g} x |PyTorch's value|)",
            verification.max_abs_diff,
        )


def _second_check_failure(max_abs_diff: float) -> str:
    return "onnxruntime cannot run it (or gives NaN where PyTorch does not)" if max_abs_diff == float("inf") \
        else f"differs by {max_abs_diff:.3g}"


def exporters_to_try(info: StrategyInfo, given: dict[str, str]) -> tuple[str, ...]:
    """The exporters the core tries a strategy with in turn: those it declares, where it has an ``exporter``
    option the user left alone; otherwise none (the strategy exports as its options say)."""
    declared = info.strategy.exporters
    has_option = any(option.name == "exporter" for option in info.strategy.options)
    return declared if len(declared) > 1 and has_option and "exporter" not in given else ()


def _try_strategy(run: ExportRun, info: StrategyInfo) -> TaggedFile:
    """Export, tag, check and verify with one strategy, with each exporter it can use in turn where the user
    chose none; raises what made the (last) attempt fail."""
    given = run.options.strategy_options.get(info.name, {})
    exporters = exporters_to_try(info, given)
    if not exporters:
        return _try_strategy_once(run, info, given, info.name)
    failures: list[str] = []
    differences: list[float] = []
    for exporter in exporters:
        try:
            tagged = _try_strategy_once(run, info, {**given, "exporter": exporter}, f"{info.name}-{exporter}")
        except (AttemptFailed, StrategyFailed) as error:
            failures.append(f"{exporter}: {first_line(error)}")
            if isinstance(error, AttemptFailed) and error.max_abs_diff is not None:
                differences.append(error.max_abs_diff)
            continue
        if failures:
            tagged.result.details["exporter_fallback"] = failures
            tagged.ctx = replace(tagged.ctx, notes=tagged.ctx.notes + (
                f"{info.name} made its file with the {exporter} exporter: " + "; ".join(failures),))
        return tagged
    raise AttemptFailed("; ".join(failures), min(differences) if differences else None)


def _try_strategy_once(run: ExportRun, info: StrategyInfo, given: dict[str, str], label: str) -> TaggedFile:
    """One export, tagging, check and verification with ``given`` options, in its own folder ``label``."""
    ctx = replace(run.ctx, options=resolve_options(info.strategy, given), may_leave_unwritten=True)
    attempt_dir = run.workdir / (f"{label}-static" if run.static_fallback else label)
    attempt_dir.mkdir()
    onnx_path = attempt_dir / run.output.name
    run.progress(f"exporting with {info.name}" + (" (every axis static)" if run.static_fallback else ""))
    result = _export_attempt(info, ctx, onnx_path)
    run.progress(f"tagging and checking the {info.name} export")
    tagged = _tag_file(run, info.name, result, onnx_path, rename=True)
    if run.options.verify:
        run.progress(f"verifying the {info.name} export with onnxruntime")
        _verify(run, tagged)
    return tagged


def _measured(tagged: TaggedFile) -> float | None:
    return tagged.verification.max_abs_diff if tagged.verification else None


def _publish(run: ExportRun, tagged: TaggedFile, attempts: list[Attempt], started: float) -> ExportReport:
    """Write the sidecar beside the tagged file, then move both (and any data file) into place."""
    document = _sidecar_document(run, tagged, attempts)
    sidecar = sidecar_path(run.output)
    write_sidecar(document, tagged.onnx_path.parent / sidecar.name)
    # the ONNX file moves last, so a reader never sees it without its sidecar and data
    produced_files = [p for p in tagged.onnx_path.parent.iterdir() if not is_work_file(p)]
    with deferred_signals():  # a stop now would leave a new sidecar beside the old file
        for produced in sorted(produced_files, key=lambda p: p == tagged.onnx_path):
            os.replace(produced, run.output.parent / produced.name)
    node_tags = tagged.node_tags
    return ExportReport(
        onnx_path=run.output,
        sidecar_path=sidecar,
        strategy=tagged.strategy,
        attempts=attempts,
        node_count=len(tagged.model.graph.node),
        tagged_count=sum(1 for t in node_tags.values() if t.tag),
        module_count=len(run.tags.records),
        tag_count=len({t.tag for t in node_tags.values()}),
        seconds=time.perf_counter() - started,
        verification=tagged.verification,
        sidecar=document,
        notes=list(tagged.ctx.notes),
    )


def prepare_export(loaded: LoadedModel, options: ExportOptions, progress: Progress = _quiet,
                   keep_outputs: bool | None = None) -> tuple[ExportContext, HierarchyTags]:
    """The export context (wrapped model, example inputs) and the model's tags, as export, compare and cost make them.

    ``keep_outputs`` (default: when verifying) keeps the example run's outputs for verification.
    """
    progress("preparing inputs")
    inputs = example_inputs(loaded, options.input_specs)
    ctx = make_context(loaded.model, inputs, dynamic=options.dynamic, opset=options.opset, by_keyword=loaded.by_keyword,
                       keep_outputs=options.verify if keep_outputs is None else keep_outputs)
    return ctx, HierarchyTags.from_model(loaded.model, options.keep_torch_modules)


def check_before_loading(output: Path, options: ExportOptions) -> list[StrategyInfo]:
    """Everything that can be checked without the model: strategies, their options, the output path, the specs."""
    chain = strategy_chain(options.strategies)
    _check_option_targets(chain, options.strategy_options)
    for info in chain:
        resolve_options(info.strategy, options.strategy_options.get(info.name, {}))
    _prepare_output(Path(output))
    if options.input_specs is not None:
        read_input_specs(options.input_specs)
    return chain


def export_model(
    loaded: LoadedModel, output: Path, options: ExportOptions | None = None, progress: Progress = _quiet
) -> ExportReport:
    """Export ``loaded`` to ``output`` with tags, and the sidecar beside it; nothing is written on failure.

    Strategies are tried in turn; one whose export fails, or whose file fails the checker or
    verification, is recorded as a failed attempt and the next is tried.
    """
    options = options or ExportOptions()
    started = time.perf_counter()
    output = Path(output).expanduser()
    chain = check_before_loading(output, options)
    with export_settings(loaded.model):
        ctx, tags = prepare_export(loaded, options, progress)
        workdir = open_work_folder(output.parent)
        run = ExportRun(loaded, ctx, tags, options, output, workdir, progress)
        try:
            attempts: list[Attempt] = []
            success = first_success(chain, lambda info: _try_strategy(run, info), attempts, measured=_measured)
            if success is not None:
                return _publish(run, success.made(), attempts, started)
            if not ctx.output_names:  # the model has not run: a failure of its own is one error, not one per strategy
                check_model_runs(ctx)
            retry = [info for info, attempt in zip(chain, attempts) if attempt.status == "failed"]
            if not ctx.dynamic_axes or not retry:
                raise chain_error(attempts, named=bool(options.strategies))
            # the last resort: every axis static at the user's example, verified at it and at a second input
            static_run = static_fallback_run(run, attempts)
            static_attempts: list[Attempt] = []
            success = first_success(retry, lambda info: _try_strategy(static_run, info), static_attempts,
                                    measured=_measured)
            attempts += [replace(attempt, static=True) for attempt in static_attempts]
            if success is not None:
                return _publish(static_run, success.made(), attempts, started)
            raise chain_error(attempts, named=bool(options.strategies))
        finally:
            close_work_folder(workdir)


def _copy_external_data(model: "onnx.ModelProto", source_folder: Path, target_folder: Path, output_name: str) -> None:
    """Copy the external data files a graph refers to beside the tagged copy, named after it."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    external = [tensor for tensor in model.graph.initializer if uses_external_data(tensor)]
    locations = sorted({ExternalDataInfo(tensor).location for tensor in external})
    renamed = {
        location: f"{output_name}.data" if len(locations) == 1 else f"{output_name}.{i}.data"
        for i, location in enumerate(locations)
    }
    for location, new_name in renamed.items():
        source = source_folder / location
        if not source.is_file():
            raise OutputPathError(f"external data file {source} is missing")
        shutil.copyfile(source, target_folder / new_name)
    for tensor in external:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = renamed[entry.value]


def tag_existing(
    onnx_file: Path, loaded: LoadedModel, output: Path, options: ExportOptions | None = None,
    progress: Progress = _quiet,
) -> ExportReport:
    """Tag an ONNX file exported elsewhere.

    With no strategy named, the module records the file already carries (``records``) are used
    where they are whole; otherwise, and when strategies are named, strategies that read the graph
    and the parameters only are tried in turn.
    """
    import onnx

    options = options or ExportOptions()
    options = replace(options, verify=False)  # its inputs and outputs need not match the wrapper's
    started = time.perf_counter()
    onnx_file = Path(onnx_file).expanduser()
    output = Path(output).expanduser()
    chain = check_before_tagging(onnx_file, output, options)
    with export_settings(loaded.model):
        ctx, tags = prepare_export(loaded, options, progress)
    try:
        # the graph alone is what gets tagged and written; strategies get the weights too, since
        # they match initializers to parameters by value
        source = onnx.load(str(onnx_file), load_external_data=False)
        with_weights = onnx.load(str(onnx_file))
    except Exception as error:
        raise OutputPathError(f"{onnx_file} is not a readable ONNX file: {first_line(error)}") from error
    workdir = open_work_folder(output.parent)
    run = ExportRun(loaded, ctx, tags, options, output, workdir, progress)

    def tag_copy(strategy: str, result: TaggingResult) -> TaggedFile:
        onnx_path = workdir / output.name
        _copy_external_data(source, onnx_file.parent, workdir, output.name)
        onnx.save(source, str(onnx_path))
        return _tag_file(run, strategy, result, onnx_path, rename=False)

    try:
        attempts: list[Attempt] = []
        if not options.strategies:
            progress("reading the file's own module records")
            records = read_records(source, [name for name, _ in loaded.model.named_modules()])
            if records is not None:
                recorded = run_attempt(RECORDS_STRATEGY, lambda: tag_copy(RECORDS_STRATEGY, records_result(records)),
                                       stop_on=(Exception,))
                attempts.append(recorded.attempt)
                return _publish(run, recorded.made(), attempts, started)
            attempts.append(Attempt(RECORDS_STRATEGY, "unavailable",
                                    "the file carries no whole module records (its nodes renamed or rebuilt); inferring"))
            chain = sorted((info for info in chain if info.can_tag_existing), key=lambda info: (-info.tag_priority, info.name))
            if not chain:
                raise AllStrategiesFailedError(
                    "the file carries no whole module records and no installed strategy can tag an existing file; "
                    "install one such as modelexport-usage-based")
        def tag_with(info: StrategyInfo) -> TaggedFile:
            progress(f"tagging with {info.name}")
            strategy_ctx = replace(ctx, options=resolve_options(info.strategy, options.strategy_options.get(info.name, {})))
            return tag_copy(info.name, info.strategy().tag_onnx(strategy_ctx, with_weights))

        success = first_success(chain, tag_with, attempts, stop_on=(ModelMismatchError,))
        if success is not None:
            return _publish(run, success.made(), attempts, started)
        raise chain_error(attempts, named=bool(options.strategies), what="tag")
    finally:
        close_work_folder(workdir)


def check_before_tagging(onnx_file: Path, output: Path, options: ExportOptions) -> list[StrategyInfo]:
    """What ``tag`` can check before loading the model: the input file, strategies, options, output path."""
    import onnx

    onnx_file = Path(onnx_file).expanduser()
    if not onnx_file.is_file():
        raise OutputPathError(f"{onnx_file}: no such ONNX file")
    try:
        onnx.load(str(onnx_file), load_external_data=False)
    except Exception as error:
        raise OutputPathError(f"{onnx_file} is not a readable ONNX file: {first_line(error)}") from error
    chain = check_before_loading(output, replace(options, verify=False))
    return chain
