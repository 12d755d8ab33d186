"""The ``modelexport`` command: a thin typer app over the library."""

from __future__ import annotations

import json
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Optional

import typer
import typer.core
from rich.console import Console
from rich.table import Table

from modelexport_core.errors import AllStrategiesFailedError, ModelExportError, first_line
from modelexport_core.format.signals import Stopped, stop_if_signalled, stop_on_signals
from modelexport_core.format.work_folder import StaleWorkFolderWarning, close_open_work_folders
from modelexport_core.plugin.discovery import PluginLoadWarning

app = typer.Typer(
    help="Export PyTorch models to ONNX with every node tagged by the module that produced it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def _print_versions(show: bool) -> None:
    """``--version``: the core's version, then each installed strategy with its distribution and version."""
    if not show:
        return
    from modelexport_core.plugin.discovery import get_strategies
    from modelexport_core.version import __version__

    with _user_errors():
        console.print(f"modelexport-core {__version__}", highlight=False)
        found = get_strategies()
        width = max((len(info.name) for info in found), default=0)
        for info in found:
            console.print(f"  {info.name:<{width}}  {info.distribution} {info.version}".rstrip(), highlight=False)
        if not found:
            console.print("  no strategies installed; install a plugin such as modelexport-fx", highlight=False)
    raise typer.Exit()


@app.callback()
def _main_options(
    version: bool = typer.Option(False, "--version", callback=_print_versions, is_eager=True,
                                 help="Show the versions of the core and of every installed strategy, and exit"),
) -> None:
    """Export PyTorch models to ONNX with every node tagged by the module that produced it."""


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _fail(message: str, code: int = 1) -> None:
    err_console.print("[bold red]error:[/] " + _escape(message), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def _user_errors(verbose: bool = False) -> Iterator[None]:
    """Turn library errors into one line on stderr (a line per attempt for a failed chain) and a
    non-zero exit; plugin warnings into lines. ``verbose`` adds each attempt's whole message."""
    with warnings.catch_warnings(record=True) as caught, stop_on_signals():
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", PluginLoadWarning)
        warnings.simplefilter("always", StaleWorkFolderWarning)
        try:
            try:
                yield
            except Exception:
                stop_if_signalled()  # an error a stop signal caused (raised within library code) is the stop
                raise
        except Stopped as stop:
            _flush_warnings(caught)
            close_open_work_folders()
            _fail(f"{stop}; nothing was written and no work folder is left", stop.exit_code)
        except ModelExportError as error:
            _flush_warnings(caught)
            attempts = getattr(error, "attempts", [])
            if verbose:
                _print_details(attempts)
            if isinstance(error, AllStrategiesFailedError) and len(attempts) > 1:
                # one line per attempt and nothing more, the first saying that the whole chain failed
                for i, attempt in enumerate(attempts[:-1]):
                    lead = "every strategy failed; " if i == 0 else ""
                    err_console.print("[bold red]error:[/] " + _escape(f"{lead}{attempt.label} {attempt.status}: "
                                      f"{attempt.reason}"), highlight=False, soft_wrap=True)
                last = attempts[-1]
                _fail(f"{last.label} {last.status}: {last.reason}")
            _fail(str(error))
        except KeyboardInterrupt:
            _fail("interrupted; nothing was written", 130)
        except typer.Exit:
            raise
        except Exception as error:
            if os.environ.get("MODELEXPORT_DEBUG"):
                raise
            _fail(f"unexpected {type(error).__name__}: {first_line(error)} (set MODELEXPORT_DEBUG=1 for the traceback)")
        _flush_warnings(caught)


def _flush_warnings(caught: list[warnings.WarningMessage]) -> None:
    for warning in caught:
        if issubclass(warning.category, (PluginLoadWarning, StaleWorkFolderWarning)):
            err_console.print(f"[yellow]warning:[/] {warning.message}", highlight=False, soft_wrap=True)


def _quiet_libraries(verbose: bool = False) -> None:
    """Keep library chatter (torch's log lines, transformers' hints and progress bars) off the user's
    screen, unless ``--verbose``."""
    import logging

    if verbose:
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    except ImportError:
        pass
    # after the imports: torch sets its loggers' levels when it loads
    for name in ("torch", "torch.onnx", "torch._export", "torch.export", "onnxscript", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _print_details(attempts: list) -> None:
    """Each failed attempt's whole message (the exporter's own), for ``--verbose``."""
    for attempt in attempts:
        if attempt.status != "ok" and (attempt.detail or attempt.reason):
            err_console.rule(f"{attempt.label} {attempt.status}", style="dim")
            err_console.print(attempt.detail or attempt.reason, highlight=False, markup=False, soft_wrap=True)


@contextmanager
def _stdout_kept_for(as_json: bool) -> Iterator[None]:
    """With --json, anything libraries print goes to stderr so stdout holds only the JSON."""
    if not as_json:
        yield
        return
    from contextlib import redirect_stdout

    with redirect_stdout(sys.stderr):
        yield


def _split_strategies(value: Optional[str]) -> Optional[list[str]]:
    if not value:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


def _warn(message: str) -> None:
    err_console.print("[yellow]warning:[/] " + _escape(message), highlight=False, soft_wrap=True)


def _print_report(report, as_json: bool, verbose: bool = False) -> None:
    """The summary of an export or tagging run: one table for people, one JSON line for scripts."""
    if verbose:
        _print_details(report.attempts)
    for attempt in report.attempts:
        if attempt.status != "ok":
            _warn(f"strategy {attempt.label} {attempt.status}: {attempt.reason}")
    for note in report.notes:
        _warn(note)
    if report.verification is not None and report.verification.skipped:
        _warn(f"not verified: {report.verification.skipped}")
    for note in report.verification.notes if report.verification is not None else ():
        _warn(note)
    attempted = [a.strategy for a in report.attempts]
    if as_json:
        print(json.dumps({
            "output": str(report.onnx_path),
            "sidecar": str(report.sidecar_path),
            "strategy": report.strategy,
            "attempted": attempted,
            "attempts": [{**a.record(), "seconds": a.seconds} for a in report.attempts],
            "nodes": report.node_count,
            "coverage": report.coverage,
            "modules": report.module_count,
            "distinct_tags": report.tag_count,
            "seconds": round(report.seconds, 2),
            "max_abs_diff": None if report.verification is None else report.verification.max_abs_diff,
            "notes": report.notes,
        }))
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("output", f"{report.onnx_path}  (+ {report.sidecar_path.name})")
    table.add_row("strategy", report.strategy + (f"  (tried {', '.join(attempted)})" if len(attempted) > 1 else ""))
    records = report.sidecar.get("details", {}) if report.strategy == "records" else {}
    if records:
        table.add_row("records", f"{records['description']}: {records['recorded_nodes']} nodes read, "
                                 f"{records['unrecorded_nodes']} without a record given their neighbours' module")
    table.add_row("nodes", f"{report.node_count}, {report.coverage:.0%} tagged with {report.tag_count} distinct tags")
    table.add_row("modules", str(report.module_count))
    if report.verification is not None and report.verification.skipped:
        table.add_row("verified", "no (see the warning above)")
    elif report.verification is not None:
        shapes = len(report.verification.checks)
        table.add_row("verified", f"max abs diff {report.verification.max_abs_diff:.2e} over {shapes} input shape(s)")
    table.add_row("time", f"{report.seconds:.1f} s")
    console.print(table)


@app.command()
def export(
    model: str = typer.Argument(..., help="preset:NAME, a Hugging Face id or directory, or a factory file.py:fn / pkg.mod:fn"),
    output: Path = typer.Argument(..., help="Where to write the ONNX file; the sidecar goes beside it"),
    strategy: Optional[str] = typer.Option(None, "--strategy", "-s", help="Strategies to try in order, comma-separated"),
    torch_module: bool = typer.Option(False, "--torch-module", help="Keep torch.nn modules in tags"),
    opset: Optional[int] = typer.Option(None, "--opset", help="ONNX opset (default: the strategy's)"),
    input_specs: Optional[Path] = typer.Option(None, "--input-specs", help="JSON file of input names, shapes, dtypes"),
    do_verify: bool = typer.Option(True, "--verify/--no-verify", help="Compare onnxruntime with PyTorch"),
    atol: float = typer.Option(1e-4, "--atol", help="Largest absolute difference verification accepts"),
    rtol: float = typer.Option(1e-5, "--rtol", help="And this share of each PyTorch value (numpy.allclose's rule)"),
    doc_string: bool = typer.Option(False, "--doc-string", help="Also write the JSON hierarchy into each node's doc_string"),
    viewer_keys: bool = typer.Option(True, "--viewer-keys/--no-viewer-keys", help="Also write `namespace` (Model Explorer) and `layer_ann` (onnxruntime) on each node"),
    strip_paths: bool = typer.Option(False, "--strip-source-paths", help="Remove stack traces and other source file paths from the file"),
    static: bool = typer.Option(False, "--static", help="Fixed input shapes (default: dynamic batch and sequence)"),
    strategy_option: List[str] = typer.Option([], "--option", "-O", help="Strategy option STRATEGY.NAME=VALUE (see `modelexport strategies`)"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show each failed attempt's whole message and library logs"),
) -> None:
    """Export MODEL to OUTPUT with every node tagged, and write OUTPUT's .hierarchy.json sidecar."""
    from modelexport_core.export.pipeline import ExportOptions, check_before_loading, export_model
    from modelexport_core.plugin.options import parse_assignments
    from modelexport_core.prepare.models import load_model
    from modelexport_core.progress import progress_display

    with _user_errors(verbose):
        _quiet_libraries(verbose)
        options = ExportOptions(
            strategies=_split_strategies(strategy),
            keep_torch_modules=torch_module,
            opset=opset,
            dynamic=not static,
            verify=do_verify,
            atol=atol,
            rtol=rtol,
            doc_string=doc_string,
            viewer_keys=viewer_keys,
            strip_source_paths=strip_paths,
            input_specs=input_specs,
            strategy_options=parse_assignments(strategy_option),
        )
        check_before_loading(output, options)
        with progress_display(err_console, enabled=not as_json) as progress, _stdout_kept_for(as_json):
            progress(f"loading {model}")
            loaded = load_model(model)
            report = export_model(loaded, output, options, progress)
        _print_report(report, as_json, verbose)


def _option_value(value: object) -> str:
    """An option's default as a user would type it on the command line."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@app.command()
def strategies(as_json: bool = typer.Option(False, "--json", help="Print as JSON")) -> None:
    """List the installed tagging strategies, in the order they are tried."""
    from modelexport_core.plugin.discovery import get_strategies

    with _user_errors():
        found = get_strategies()
        rows: list[dict[str, Any]] = [
            {
                "name": info.name,
                "priority": info.priority,
                "distribution": info.distribution,
                "version": info.version,
                "description": info.strategy.description,
                "requires": info.strategy.requires,
                "tags_existing_files": info.can_tag_existing,
                "options": [
                    {"name": o.name, "type": o.type.__name__, "default": o.default, "help": o.help}
                    for o in info.strategy.options
                ],
            }
            for info in found
        ]
        if as_json:
            print(json.dumps(rows, default=str))
            return
        if not rows:
            console.print("no strategies installed; install a plugin such as modelexport-fx")
            return
        console.print("[bold]Installed strategies[/], in the order they are tried without --strategy:\n")
        for row in rows:
            console.print(
                f"[bold cyan]{row['name']}[/]  [dim]priority {row['priority']}, "
                f"{row['distribution']} {row['version']}[/]", highlight=False,
            )
            console.print(f"  {row['description']}", highlight=False)
            if row["requires"]:
                console.print(f"  [dim]needs:[/] {row['requires']}", highlight=False)
            if row["tags_existing_files"]:
                console.print("  [dim]also tags ONNX files exported elsewhere (modelexport tag)[/]", highlight=False)
            for option in row["options"]:
                console.print(
                    f"  [dim]-O[/] {row['name']}.{option['name']}={_option_value(option['default'])}  [dim]{option['help']}[/]",
                    highlight=False,
                )
            console.print()


class _TagCommand(typer.core.TyperCommand):
    """``tag --help`` lists the installed strategies that can tag an existing file."""

    def format_help(self, ctx, formatter) -> None:  # noqa: ANN001
        from modelexport_core.plugin.discovery import get_strategies

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            able = [info.name for info in get_strategies() if info.can_tag_existing]
        base = (self.help or "").split("\n\n")[0]
        self.help = (
            f"{base}\n\nStrategies that can tag an existing file: {', '.join(able) if able else 'none installed'}. "
            "The others need their own export (modelexport export)."
        )
        super().format_help(ctx, formatter)


@app.command(cls=_TagCommand)
def tag(
    onnx_file: Path = typer.Argument(..., help="An ONNX file exported elsewhere, or derived from a tagged file"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="The PyTorch model it was exported from (as for export)"),
    source: Optional[Path] = typer.Option(None, "--from", help="The tagged file ONNX_FILE was made from (optimized, quantized, simplified)"),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the tagged copy"),
    strategy: Optional[str] = typer.Option(
        None, "--strategy", "-s",
        help="Strategies to try in order (with --model); default: the file's own module records where whole, "
             "else every strategy that can tag an existing file"),
    torch_module: bool = typer.Option(False, "--torch-module", help="Keep torch.nn modules in tags"),
    input_specs: Optional[Path] = typer.Option(None, "--input-specs", help="JSON file of input names, shapes, dtypes"),
    doc_string: bool = typer.Option(False, "--doc-string", help="Also write the JSON hierarchy into each node's doc_string"),
    viewer_keys: bool = typer.Option(True, "--viewer-keys/--no-viewer-keys", help="Also write `namespace` and `layer_ann` on each node"),
    strip_paths: bool = typer.Option(False, "--strip-source-paths", help="Remove stack traces and other source file paths"),
    strategy_option: List[str] = typer.Option([], "--option", "-O", help="Strategy option STRATEGY.NAME=VALUE"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show each failed attempt's whole message and library logs"),
) -> None:
    """Tag an ONNX file: with the modules of MODEL (--model), or from the tagged file it was derived from (--from)."""
    from modelexport_core.export.pipeline import ExportOptions, check_before_tagging, tag_existing
    from modelexport_core.plugin.options import parse_assignments
    from modelexport_core.prepare.models import load_model
    from modelexport_core.progress import progress_display

    with _user_errors(verbose):
        if (model is None) == (source is None):
            _fail("give either --model (the PyTorch model) or --from (the tagged file it was made from), not both" if model
                  else "give --model (the PyTorch model) or --from (the tagged file ONNX_FILE was made from)")
        if source is not None:
            from modelexport_core.tools.derived import tag_derived

            derived = tag_derived(onnx_file, source, output, viewer_keys=viewer_keys)
            if as_json:
                print(json.dumps({"output": str(derived.output), "sidecar": str(derived.sidecar), "nodes": derived.nodes,
                                  "coverage": derived.coverage, "found_by": derived.counts}))
                return
            found = ", ".join(f"{n} by {how.replace('_', ' ')}" for how, n in sorted(derived.counts.items()))
            console.print(f"output    {derived.output}  (+ {derived.sidecar.name})", highlight=False)
            console.print(f"nodes     {derived.nodes}, {derived.coverage:.0%} tagged ({found})", highlight=False)
            return
        _quiet_libraries(verbose)
        options = ExportOptions(
            strategies=_split_strategies(strategy), keep_torch_modules=torch_module, input_specs=input_specs,
            doc_string=doc_string, viewer_keys=viewer_keys, strip_source_paths=strip_paths,
            strategy_options=parse_assignments(strategy_option),
        )
        check_before_tagging(onnx_file, output, options)
        with progress_display(err_console, enabled=not as_json) as progress, _stdout_kept_for(as_json):
            progress(f"loading {model}")
            assert model is not None  # --model or --from, one of them, checked above
            loaded = load_model(model)
            report = tag_existing(onnx_file, loaded, output, options, progress)
        _print_report(report, as_json, verbose)


@app.command()
def compare(
    model: str = typer.Argument(..., help="preset:NAME, a Hugging Face id or directory, or a factory"),
    strategy: Optional[str] = typer.Option(None, "--strategy", "-s", help="Strategies to compare (default: all)"),
    torch_module: bool = typer.Option(False, "--torch-module", help="Compare with torch.nn modules kept in tags"),
    input_specs: Optional[Path] = typer.Option(None, "--input-specs", help="JSON file of input names, shapes, dtypes"),
    static: bool = typer.Option(False, "--static", help="Fixed input shapes"),
    strategy_option: List[str] = typer.Option([], "--option", "-O", help="Strategy option STRATEGY.NAME=VALUE"),
    cost: bool = typer.Option(True, "--cost/--no-cost", help="Run each strategy in a process of its own and set its "
                              "time and peak memory against a plain torch.onnx.export"),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
) -> None:
    """Run each strategy on MODEL and measure its tags against PyTorch's own per-node records."""
    from dataclasses import asdict

    from modelexport_core.export.pipeline import ExportOptions
    from modelexport_core.measure.compare import compare_strategies
    from modelexport_core.plugin.options import parse_assignments
    from modelexport_core.prepare.models import load_model
    from modelexport_core.progress import progress_display

    with _user_errors():
        _quiet_libraries()
        options = ExportOptions(
            strategies=_split_strategies(strategy), keep_torch_modules=torch_module, input_specs=input_specs,
            dynamic=not static, verify=False, strategy_options=parse_assignments(strategy_option),
        )
        with progress_display(err_console, enabled=not as_json) as progress, _stdout_kept_for(as_json):
            progress(f"loading {model}")
            loaded = load_model(model)
            progress("running every strategy")
            results = compare_strategies(loaded, options, measure_cost=cost)
        if as_json:
            print(json.dumps([asdict(r) for r in results]))
            return
        table = Table(title=f"Strategies on {model}: tags against PyTorch's own records")
        costs = any(r.time_ratio is not None for r in results)
        columns = ["strategy", "exporter", "nodes", "coverage", "agreement", "sibling errors", "inferred", "time"]
        columns += ["x plain time", "peak MB", "x plain memory"] if costs else []
        for column in columns:
            table.add_column(column, justify="left" if column in ("strategy", "exporter") else "right")
        for r in results:
            if r.status != "ok":
                table.add_row(r.strategy, "[red]failed[/]", "", "", "", "", "", f"{r.seconds:.1f} s",
                              *([""] * (len(columns) - 8)))
                continue
            agreement = "n/a" if r.agreement is None else f"{r.agreement:.1%} of {r.reference_nodes}"
            cost_cells = []
            if costs:
                cost_cells = [f"{r.time_ratio:.2f}" if r.time_ratio is not None else "",
                              f"{r.peak_mb:.0f}" if r.peak_mb is not None else "",
                              f"{r.memory_ratio:.2f}" if r.memory_ratio is not None else ""]
            table.add_row(r.strategy, r.exporter, str(r.nodes), f"{r.coverage:.0%}", agreement,
                          str(r.contaminated), f"{1 - r.evidence.get('record', 0.0):.0%}", f"{r.seconds:.1f} s", *cost_cells)
        console.print(table)
        for r in results:
            if r.status != "ok":
                err_console.print(f"[yellow]{r.strategy} failed:[/] {r.reason}", highlight=False, soft_wrap=True)


@app.command()
def inspect(
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    as_json: bool = typer.Option(False, "--json", help="Print the tree as JSON"),
    depth: int = typer.Option(0, "--depth", help="Show tags this many levels deep (0: all)"),
) -> None:
    """Show the hierarchy of tags in a tagged ONNX file, with the node count of each module."""
    from rich.tree import Tree

    from modelexport_core.measure.compare import format_evidence
    from modelexport_core.tools.inspect_tags import TagNode, recorded_evidence, tag_tree

    with _user_errors():
        if not onnx_file.is_file():
            _fail(f"{onnx_file}: no such file")
        try:
            root, node_count, untagged = tag_tree(onnx_file)
        except Exception as error:
            _fail(f"{onnx_file} is not a readable ONNX file: {first_line(error)}")
        if node_count and untagged == node_count:
            _fail(f"{onnx_file} has no modelexport tags; tag it with "
                  f"`modelexport tag {onnx_file} --model MODEL -o TAGGED.onnx`, or export with `modelexport export`")

        def as_dict(node: TagNode) -> dict:
            return {"tag": node.tag, "nodes": node.own_nodes, "total_nodes": node.total_nodes,
                    "op_types": dict(node.op_types.most_common()),
                    "children": [as_dict(child) for child in node.children.values()]}

        evidence = recorded_evidence(onnx_file)
        if as_json:
            print(json.dumps({"nodes": node_count, "untagged": untagged, "evidence": evidence, "tree": as_dict(root)}))
            return

        def label(node: TagNode) -> str:
            ops = ", ".join(f"{op} {n}" for op, n in node.op_types.most_common(4))
            more = "" if len(node.op_types) <= 4 else ", ..."
            name = node.tag.rsplit("/", 1)[-1] or "(untagged root)"
            return f"[bold]{name}[/]  [cyan]{node.total_nodes}[/] nodes" + (f"  [dim]{ops}{more}[/]" if ops else "")

        def grow(branch: Tree, node: TagNode, level: int) -> None:
            if depth and level >= depth:
                return
            for child in node.children.values():
                grow(branch.add(label(child)), child, level + 1)

        tree = Tree(label(root))
        grow(tree, root, 1)
        console.print(tree)
        console.print(f"{node_count} nodes, {node_count - untagged} tagged ({(node_count - untagged) / max(node_count, 1):.0%})")
        if evidence:
            console.print(f"decided by {format_evidence(evidence)}", highlight=False)


@app.command()
def nodes(
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    module: str = typer.Option(..., "--module", "-m", help="named_modules() name (blocks.0) or tag (/Model/Block.0)"),
    ops: Optional[str] = typer.Option(None, "--ops", help="Only these op types, comma-separated (MatMul,Gemm)"),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list"),
) -> None:
    """Print the node names of a module and its descendants, one a line (for nodes_to_exclude, partitioners)."""
    from modelexport_core.tools.nodes import module_nodes

    with _user_errors():
        found = module_nodes(onnx_file, module, set(_split_strategies(ops) or []) or None)
        if as_json:
            print(json.dumps(found.names))
            return
        for name in found.names:
            print(name)


@app.command()
def extract(
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    module: str = typer.Option(..., "--module", "-m", help="named_modules() name or tag of the module to cut out"),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the part"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
) -> None:
    """Write one module and its descendants as a standalone model; its inputs and outputs keep their names."""
    from dataclasses import asdict

    from modelexport_core.tools.extract import extract_module

    with _user_errors():
        report = extract_module(onnx_file, module, output)
        if as_json:
            print(json.dumps(asdict(report), default=str))
            return
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_row("output", str(report.output))
        table.add_row("module", f"{report.module or '(root)'}  {report.tag}")
        table.add_row("nodes", f"{report.nodes}, {report.initializers} initializers")
        table.add_row("inputs", ", ".join(report.inputs))
        table.add_row("outputs", ", ".join(report.outputs))
        console.print(table)


@app.command()
def profile(
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    runs: int = typer.Option(10, "--runs", min=1, help="Timed runs after one warm-up"),
    level: str = typer.Option("all", "--level", help="onnxruntime graph optimization: disabled, basic, extended, all"),
    node_data: Optional[Path] = typer.Option(None, "--node-data", help="Write Model Explorer's per-node data JSON here"),
    depth: int = typer.Option(0, "--depth", help="Show modules this many levels deep (0: all)"),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
) -> None:
    """Time each module in onnxruntime on generated inputs: self and cumulative time, share of the total."""
    from dataclasses import asdict

    from rich.tree import Tree

    from modelexport_core.tools.profiling import LEVELS, profile_file, write_node_data

    with _user_errors():
        if level not in LEVELS:
            _fail(f"--level takes one of {', '.join(LEVELS)}, not {level!r}")
        report = profile_file(onnx_file, runs, level)
        if node_data is not None:
            write_node_data(report, node_data)
        if as_json:
            print(json.dumps({"file": str(report.path), "runs": report.runs, "level": report.level,
                              "total_us": report.total_us, "fused_nodes": report.fused,
                              "modules": [asdict(m) for m in report.modules], "nodes": report.node_us,
                              "node_tags": report.node_tags}))
            return
        branches: dict[str, Tree] = {}
        tree: Tree | None = None
        for row in report.modules:
            level_of = row.tag.count("/")
            if depth and level_of > depth:
                continue
            label = (f"[bold]{row.tag.rsplit('/', 1)[-1]}[/]  [cyan]{row.total_us / 1000:.3f} ms[/] "
                     f"{row.share:6.1%}  [dim]self {row.self_us / 1000:.3f} ms, {row.nodes} nodes[/]")
            parent = branches.get(row.tag.rsplit("/", 1)[0])
            branches[row.tag] = parent.add(label) if parent is not None else Tree(label)
            tree = tree or branches[row.tag]
        if tree is not None:
            console.print(tree)
        console.print(f"{report.total_us / 1000:.3f} ms per run over {report.runs} runs, optimization {report.level}; "
                      f"{report.fused} of the nodes run are onnxruntime's own (fused or converted), tagged through their names and data flow",
                      highlight=False)
        if node_data is not None:
            console.print(f"node data for Model Explorer: {node_data}", highlight=False)


@app.command()
def numerics(
    model: str = typer.Argument(..., help="The PyTorch model the file was exported from (as for export)"),
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    input_specs: Optional[Path] = typer.Option(None, "--input-specs", help="JSON file of input names, shapes, dtypes"),
    atol: float = typer.Option(1e-4, "--atol", help="Absolute tolerance"),
    rtol: float = typer.Option(1e-3, "--rtol", help="Relative tolerance, of the largest PyTorch value"),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
) -> None:
    """Compare each module's output in PyTorch and onnxruntime; show where the difference comes in."""
    from dataclasses import asdict

    from modelexport_core.measure.numerics import compare_numerics
    from modelexport_core.prepare.models import load_model
    from modelexport_core.progress import progress_display

    with _user_errors():
        _quiet_libraries()
        with progress_display(err_console, enabled=not as_json) as progress, _stdout_kept_for(as_json):
            progress(f"loading {model}")
            loaded = load_model(model)
            progress("running PyTorch and onnxruntime")
            report = compare_numerics(loaded, onnx_file, input_specs=input_specs, atol=atol, rtol=rtol)
        if as_json:
            print(json.dumps({"file": str(report.path), "atol": report.atol, "rtol": report.rtol,
                              "first_divergent": report.first_divergent,
                              "modules": [asdict(m) for m in report.modules]}))
            return
        table = Table(title=f"PyTorch against onnxruntime per module (atol {atol:g}, rtol {rtol:g})")
        for column in ("module", "max abs", "max rel", "inputs max abs", ""):
            table.add_column(column, justify="left" if column in ("module", "") else "right")

        def number(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.2e}"

        for row in report.modules:
            mark = "[bold red]error comes in here[/]" if row.error_enters else ("[yellow]differs[/]" if row.diverges else "")
            table.add_row(row.module or "(root)", number(row.max_abs), number(row.max_rel), number(row.input_max_abs), mark)
        console.print(table)
        if report.first_divergent:
            console.print("first divergent: " + ", ".join(m or "(root)" for m in report.first_divergent), highlight=False)
        else:
            console.print("no module differs beyond the tolerance", highlight=False)


@app.command()
def report(
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the HTML report"),
    with_profile: bool = typer.Option(False, "--profile", help="Add each module's time in onnxruntime (as `profile`)"),
    runs: int = typer.Option(10, "--runs", min=1, help="Timed runs for --profile, after one warm-up"),
    level: str = typer.Option("all", "--level", help="onnxruntime graph optimization for --profile"),
    numerics_model: Optional[str] = typer.Option(None, "--numerics", help="Add each module's error against this "
                                                 "PyTorch model (as `numerics MODEL`)"),
    input_specs: Optional[Path] = typer.Option(None, "--input-specs", help="JSON file of input names, shapes, dtypes (--numerics)"),
    atol: float = typer.Option(1e-4, "--atol", help="Absolute tolerance for --numerics"),
    rtol: float = typer.Option(1e-3, "--rtol", help="Relative tolerance for --numerics"),
) -> None:
    """Write one self-contained HTML page of the module hierarchy: tree, chart, figures and nodes per module."""
    from modelexport_core.format.tagged import load_tagged
    from modelexport_core.progress import progress_display
    from modelexport_core.tools.profiling import LEVELS, profile_file
    from modelexport_core.tools.report import build_report, write_report

    with _user_errors():
        if level not in LEVELS:
            _fail(f"--level takes one of {', '.join(LEVELS)}, not {level!r}")
        load_tagged(onnx_file)  # a missing or untagged file fails before any model loads
        times = numbers = None
        with progress_display(err_console) as progress:
            if with_profile:
                progress(f"profiling {onnx_file.name} in onnxruntime")
                times = profile_file(onnx_file, runs, level)
            if numerics_model is not None:
                from modelexport_core.measure.numerics import compare_numerics
                from modelexport_core.prepare.models import load_model

                _quiet_libraries()
                progress(f"loading {numerics_model}")
                loaded = load_model(numerics_model)
                progress("running PyTorch and onnxruntime")
                numbers = compare_numerics(loaded, onnx_file, input_specs=input_specs, atol=atol, rtol=rtol)
            progress("writing the report")
            written = write_report(build_report(onnx_file, times, numbers), output)
        console.print(f"report  {written}  ({written.stat().st_size / 1e6:.1f} MB)", highlight=False)


@app.command()
def view(
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    overlay: Optional[str] = typer.Option(None, "--overlay", help="Colour the nodes by time (as `profile`) or error (as `numerics`, needs --model)"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="The PyTorch model the file was exported from, for --overlay error"),
    runs: int = typer.Option(10, "--runs", min=1, help="Timed runs for --overlay time"),
    host: str = typer.Option("localhost", "--host", help="Host to serve on"),
    port: int = typer.Option(8080, "--port", help="Port to serve on (8080: the first free one from 8080)"),
    open_browser: bool = typer.Option(True, "--browser/--no-browser", help="Open the page in a browser"),
) -> None:
    """Open the file in Model Explorer: one collapsible group per module, nodes coloured by time or error."""
    from modelexport_core.format.tagged import load_tagged
    from modelexport_core.tools.viewer import OVERLAYS, error_node_data, require_model_explorer, serve

    with _user_errors():
        if overlay is not None and overlay not in OVERLAYS:
            _fail(f"--overlay takes one of {', '.join(OVERLAYS)}, not {overlay!r}")
        if overlay == "error" and model is None:
            _fail("--overlay error compares with the PyTorch model: give it with --model MODEL")
        require_model_explorer()
        tagged = load_tagged(onnx_file)
        node_data = None
        if overlay == "time":
            from modelexport_core.tools.profiling import node_data_document, profile_file

            node_data = node_data_document(profile_file(onnx_file, runs))
        elif overlay == "error":
            from modelexport_core.measure.numerics import compare_numerics
            from modelexport_core.prepare.models import load_model

            _quiet_libraries()
            assert model is not None  # --overlay error without --model is refused above
            node_data = error_node_data(tagged, compare_numerics(load_model(model), onnx_file))
        serve(onnx_file, node_data, host, port, open_browser)


@app.command()
def validate(
    onnx_file: Path = typer.Argument(..., help="A tagged ONNX file"),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
) -> None:
    """Check a tagged file: ONNX checker, every node tagged, tags well formed, sidecar in agreement."""
    from modelexport_core.tools.validate import validate_file

    with _user_errors():
        result = validate_file(onnx_file)
        if as_json:
            print(json.dumps({"file": str(result.path), "ok": result.ok, "nodes": result.nodes,
                              "tagged": result.tagged, "problems": result.problems}))
        elif result.ok:
            console.print(f"{result.path}: valid, {result.nodes} nodes, all tagged", highlight=False)
        else:
            for problem in result.problems:
                err_console.print(f"[red]problem:[/] {problem}", highlight=False, soft_wrap=True)
        if not result.ok:
            _fail(f"{result.path} has {len(result.problems)} problem(s)")


def main() -> None:
    from modelexport_core.export.allocator import keep_freed_buffers

    keep_freed_buffers()  # the command's own process: large buffers reused, not faulted in afresh
    app()


if __name__ == "__main__":
    main()
