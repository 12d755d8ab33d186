"""The export pipeline: try strategies in order, tag the winner's ONNX, check, verify, write atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from . import __version__
from .context import make_context
from .errors import AllStrategiesFailedError, OutputPathError, StrategyOptionError, VerificationError
from .exporters import first_line
from .graph import fill_missing_modules, node_key
from .inputs import inputs_from_config, inputs_from_spec, inputs_from_tokenizer
from .models import LoadedModel
from .onnx_file import check_graph, load_graph, save_nodes
from .options import resolve_options
from .plugins import StrategyInfo, get_strategies, get_strategy
from .sidecar import Attempt, build_sidecar, sidecar_path, write_sidecar
from .strategy import ExportContext, StrategyFailed, StrategyUnavailable, TaggingResult
from .tags import HierarchyTags
from .verify import Verification, verify
from .writer import NodeTag, write_tags

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
    doc_string: bool = False
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

    @property
    def coverage(self) -> float:
        return self.tagged_count / self.node_count if self.node_count else 1.0


def _quiet(_: str) -> None:
    pass


def example_inputs(loaded: LoadedModel, input_specs: Path | None) -> dict[str, "torch.Tensor"]:
    """Inputs for the export: the spec file, else the factory's, else the tokenizer's, else from the config."""
    if input_specs is not None:
        return inputs_from_spec(input_specs, loaded.model)
    if loaded.inputs is not None:
        return loaded.inputs
    if loaded.tokenizer is not None:
        inputs = inputs_from_tokenizer(loaded.tokenizer, loaded.model)
        if inputs:
            return inputs
    return inputs_from_config(loaded.model)


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
    for name, qualname in node_modules.items():
        tag = by_module.get(qualname)
        if tag is None:
            kept = tags.kept_module(qualname)
            tag = by_module[qualname] = NodeTag(tags.tag_of(kept), kept)
        others = result.also.get(name)
        if others:
            also = tuple(dict.fromkeys(t for q in others if (t := tags.tag_of(q)) != tag.tag))
            tag = NodeTag(tag.tag, tag.module, also) if also else tag
        node_tags[name] = tag
    return node_tags


def _sidecar_document(
    ctx: ExportContext,
    loaded: LoadedModel,
    model: "onnx.ModelProto",
    node_tags: dict[str, NodeTag],
    tags: HierarchyTags,
    result: TaggingResult,
    strategy: str,
    attempts: list[Attempt],
    options: ExportOptions,
    verification: Verification | None,
) -> dict[str, Any]:
    nodes = {}
    for i, node in enumerate(model.graph.node):
        key = node_key(node, i)
        tag = node_tags[key]
        entry: dict[str, Any] = {"tag": tag.tag, "module": tag.module, "op_type": node.op_type}
        if tag.also:
            entry["also"] = list(tag.also)
        nodes[key] = entry
    modules = {
        qualname: {"tag": tags.tag_of(qualname), "class": record.class_name, "kept": qualname == tags.kept_module(qualname)}
        for qualname, record in tags.records.items()
    }
    model_info = {
        "class": type(ctx.model).__name__,
        "python_class": f"{type(ctx.model).__module__}.{type(ctx.model).__qualname__}",
        "source": loaded.source,
        "parameters": sum(p.numel() for p in ctx.model.parameters()),
        "inputs": {name: list(t.shape) for name, t in zip(ctx.input_names, ctx.args)},
        "outputs": ctx.output_names,
    }
    export_info = {
        "modelexport_version": __version__,
        "exporter": result.exporter,
        "opset": next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None),
        "dynamic_axes": {name: {str(k): v for k, v in axes.items()} for name, axes in ctx.dynamic_axes.items()},
        "torch_modules_kept": options.keep_torch_modules,
        "doc_string": options.doc_string,
        "verification": None
        if verification is None
        else {"atol": verification.atol, "max_abs_diff": verification.max_abs_diff, "passed": verification.passed,
              "shapes": [check.shapes for check in verification.checks]},
    }
    return build_sidecar(
        strategy=strategy,
        attempts=attempts,
        model_info=model_info,
        modules=modules,
        nodes=nodes,
        export_info=export_info,
        details=result.details,
    )


def _prepare_output(output: Path) -> Path:
    """The folder the output goes in, created if needed; a clear error if it cannot be written."""
    output = output.expanduser()
    if output.is_dir():
        raise OutputPathError(f"{output} is a directory; give a file name such as {output / 'model.onnx'}")
    folder = output.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputPathError(f"cannot create {folder}: {error.strerror or error}") from error
    if not os.access(folder, os.W_OK):
        raise OutputPathError(f"cannot write to {folder}: permission denied")
    return folder


def run_strategies(
    ctx: ExportContext,
    chain: list[StrategyInfo],
    workdir: Path,
    onnx_name: str,
    strategy_options: dict[str, dict[str, str]],
    progress: Progress = _quiet,
) -> tuple[StrategyInfo, TaggingResult, Path, list[Attempt]]:
    """Try each strategy in turn until one exports; every attempt is recorded."""
    attempts: list[Attempt] = []
    unknown = sorted(set(strategy_options) - {info.name for info in chain})
    if unknown:
        raise StrategyOptionError(f"option given for {unknown[0]!r}, which is not among the strategies tried")
    for info in chain:
        progress(f"exporting with {info.name}")
        options = resolve_options(info.strategy, strategy_options.get(info.name, {}))
        attempt_ctx = replace(ctx, options=options)
        attempt_dir = workdir / info.name
        attempt_dir.mkdir()
        onnx_path = attempt_dir / onnx_name
        started = time.perf_counter()
        try:
            strategy = info.strategy()
            strategy.check(attempt_ctx)
            result = strategy.export(attempt_ctx, onnx_path)
        except StrategyUnavailable as error:
            attempts.append(Attempt(info.name, "unavailable", str(error), round(time.perf_counter() - started, 3)))
            continue
        except StrategyFailed as error:
            attempts.append(Attempt(info.name, "failed", str(error), round(time.perf_counter() - started, 3)))
            continue
        except Exception as error:  # a strategy's bug must not stop the chain; its reason is reported
            reason = f"{type(error).__name__}: {first_line(error)}"
            attempts.append(Attempt(info.name, "failed", reason, round(time.perf_counter() - started, 3)))
            continue
        attempts.append(Attempt(info.name, "ok", "", round(time.perf_counter() - started, 3)))
        return info, result, onnx_path, attempts
    reasons = "; ".join(f"{a.strategy}: {a.reason}" for a in attempts)
    raise AllStrategiesFailedError(f"every strategy failed ({reasons})")


def _write_outputs(
    ctx: ExportContext,
    loaded: LoadedModel,
    onnx_path: Path,
    result: TaggingResult,
    strategy: str,
    attempts: list[Attempt],
    options: ExportOptions,
    tags: HierarchyTags,
    output: Path,
    progress: Progress,
    started: float,
) -> ExportReport:
    """Tag the ONNX file in the work folder, check and verify it, then move it and its sidecar into place."""
    progress("writing tags")
    # the graph alone is read and written back: weights stay in the file, copied byte for byte
    model = load_graph(onnx_path)
    node_tags = node_tags_from_result(model, result, tags)
    write_tags(model, node_tags, doc_string=options.doc_string, strategy=strategy)
    progress("checking the model")
    check_graph(model, onnx_path)
    tagged = onnx_path.with_name(f".{onnx_path.name}.tagged")
    save_nodes(model, onnx_path, tagged)
    os.replace(tagged, onnx_path)
    verification = None
    if options.verify:
        progress("verifying with onnxruntime")
        verification = verify(onnx_path, ctx, options.atol)
        if not verification.passed:
            raise VerificationError(
                f"onnxruntime differs from PyTorch by {verification.max_abs_diff:.3g} "
                f"(tolerance {options.atol:g}); rerun with --atol or --no-verify to keep the file"
            )
    document = _sidecar_document(ctx, loaded, model, node_tags, tags, result, strategy, attempts, options, verification)
    sidecar = sidecar_path(output)
    write_sidecar(document, onnx_path.parent / sidecar.name)
    # the ONNX file moves last, so a reader never sees it without its sidecar and data
    for produced in sorted(onnx_path.parent.iterdir(), key=lambda p: p == onnx_path):
        os.replace(produced, output.parent / produced.name)
    return ExportReport(
        onnx_path=output,
        sidecar_path=sidecar,
        strategy=strategy,
        attempts=attempts,
        node_count=len(model.graph.node),
        tagged_count=sum(1 for t in node_tags.values() if t.tag),
        module_count=len(tags.records),
        tag_count=len({t.tag for t in node_tags.values()}),
        seconds=time.perf_counter() - started,
        verification=verification,
        sidecar=document,
    )


def _prepare(loaded: LoadedModel, options: ExportOptions, progress: Progress) -> tuple[ExportContext, HierarchyTags]:
    """The export context (wrapped model, example inputs) and the model's tags."""
    progress("preparing inputs")
    inputs = example_inputs(loaded, options.input_specs)
    ctx = make_context(loaded.model, inputs, dynamic=options.dynamic, opset=options.opset, by_keyword=loaded.by_keyword)
    return ctx, HierarchyTags.from_model(loaded.model, options.keep_torch_modules)


def export_model(
    loaded: LoadedModel, output: Path, options: ExportOptions | None = None, progress: Progress = _quiet
) -> ExportReport:
    """Export ``loaded`` to ``output`` with tags, and the sidecar beside it; nothing is written on failure."""
    options = options or ExportOptions()
    started = time.perf_counter()
    output = Path(output).expanduser()
    folder = _prepare_output(output)
    chain = strategy_chain(options.strategies)
    ctx, tags = _prepare(loaded, options, progress)
    workdir = Path(tempfile.mkdtemp(prefix=".modelexport-", dir=folder))
    try:
        info, result, onnx_path, attempts = run_strategies(
            ctx, chain, workdir, output.name, options.strategy_options, progress
        )
        return _write_outputs(ctx, loaded, onnx_path, result, info.name, attempts, options, tags, output, progress, started)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
    """Tag an ONNX file exported elsewhere with a strategy that reads graph and parameters only."""
    import onnx

    options = options or ExportOptions()
    options = replace(options, verify=False)  # its inputs and outputs need not match the wrapper's
    started = time.perf_counter()
    onnx_file = Path(onnx_file).expanduser()
    if not onnx_file.is_file():
        raise OutputPathError(f"{onnx_file}: no such ONNX file")
    output = Path(output).expanduser()
    folder = _prepare_output(output)
    chain = strategy_chain(options.strategies)
    ctx, tags = _prepare(loaded, options, progress)
    try:
        # the graph alone is what gets tagged and written; strategies get the weights too, since
        # they match initializers to parameters by value
        source = onnx.load(str(onnx_file), load_external_data=False)
        with_weights = onnx.load(str(onnx_file))
    except Exception as error:
        raise OutputPathError(f"{onnx_file} is not a readable ONNX file: {first_line(error)}") from error
    workdir = Path(tempfile.mkdtemp(prefix=".modelexport-", dir=folder))
    try:
        attempts: list[Attempt] = []
        for info in chain:
            progress(f"tagging with {info.name}")
            attempt_started = time.perf_counter()
            strategy_ctx = replace(ctx, options=resolve_options(info.strategy, options.strategy_options.get(info.name, {})))
            try:
                result = info.strategy().tag_onnx(strategy_ctx, with_weights)
            except (StrategyUnavailable, StrategyFailed) as error:
                status = "unavailable" if isinstance(error, StrategyUnavailable) else "failed"
                attempts.append(Attempt(info.name, status, str(error), round(time.perf_counter() - attempt_started, 3)))
                continue
            attempts.append(Attempt(info.name, "ok", "", round(time.perf_counter() - attempt_started, 3)))
            onnx_path = workdir / output.name
            _copy_external_data(source, onnx_file.parent, workdir, output.name)
            onnx.save(source, str(onnx_path))
            return _write_outputs(ctx, loaded, onnx_path, result, info.name, attempts, options, tags, output,
                                  progress, started)
        reasons = "; ".join(f"{a.strategy}: {a.reason}" for a in attempts)
        raise AllStrategiesFailedError(f"no strategy could tag {onnx_file.name} ({reasons})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
