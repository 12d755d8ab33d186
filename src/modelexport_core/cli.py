"""The ``modelexport`` command: a thin typer app over the library."""

from __future__ import annotations

import json
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import typer
import typer.core
from rich.console import Console
from rich.table import Table

from .errors import AllStrategiesFailedError, ModelExportError
from .exporters import first_line
from .plugins import PluginLoadWarning

app = typer.Typer(
    help="Export PyTorch models to ONNX with every node tagged by the module that produced it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


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
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", PluginLoadWarning)
        try:
            yield
        except ModelExportError as error:
            _flush_warnings(caught)
            attempts = getattr(error, "attempts", [])
            if verbose:
                _print_details(attempts)
            if isinstance(error, AllStrategiesFailedError) and len(attempts) > 1:
                # one line per attempt and nothing more, the first saying that the whole chain failed
                for i, attempt in enumerate(attempts[:-1]):
                    lead = "every strategy failed; " if i == 0 else ""
                    err_console.print("[bold red]error:[/] " + _escape(f"{lead}{attempt.strategy} {attempt.status}: "
                                      f"{attempt.reason}"), highlight=False, soft_wrap=True)
                last = attempts[-1]
                _fail(f"{last.strategy} {last.status}: {last.reason}")
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
        if issubclass(warning.category, PluginLoadWarning):
            err_console.print(f"[yellow]warning:[/] {warning.message}", highlight=False, soft_wrap=True)


def _quiet_libraries(verbose: bool = False) -> None:
    """Keep library chatter (torch's log lines, transformers' hints and progress bars) off the user's
    screen, unless ``--verbose``."""
    import logging

    if verbose:
        return
    for name in ("torch", "torch.onnx", "torch._export", "torch.export", "onnxscript", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TORCH_LOGS", "-all")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    except ImportError:
        pass


def _print_details(attempts: list) -> None:
    """Each failed attempt's whole message (the exporter's own), for ``--verbose``."""
    for attempt in attempts:
        if attempt.status != "ok" and (attempt.detail or attempt.reason):
            err_console.rule(f"{attempt.strategy} {attempt.status}", style="dim")
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
            _warn(f"strategy {attempt.strategy} {attempt.status}: {attempt.reason}")
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
    doc_string: bool = typer.Option(False, "--doc-string", help="Also write the JSON hierarchy into each node's doc_string"),
    static: bool = typer.Option(False, "--static", help="Fixed input shapes (default: dynamic batch and sequence)"),
    strategy_option: List[str] = typer.Option([], "--option", "-O", help="Strategy option STRATEGY.NAME=VALUE (see `modelexport strategies`)"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show each failed attempt's whole message and library logs"),
) -> None:
    """Export MODEL to OUTPUT with every node tagged, and write OUTPUT's .hierarchy.json sidecar."""
    from .export import ExportOptions, check_before_loading, export_model
    from .models import load_model
    from .options import parse_assignments
    from .progress import progress_display

    with _user_errors(verbose):
        _quiet_libraries(verbose)
        options = ExportOptions(
            strategies=_split_strategies(strategy),
            keep_torch_modules=torch_module,
            opset=opset,
            dynamic=not static,
            verify=do_verify,
            atol=atol,
            doc_string=doc_string,
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
    from .plugins import get_strategies

    with _user_errors():
        found = get_strategies()
        rows = [
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
        from .plugins import get_strategies

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
    onnx_file: Path = typer.Argument(..., help="An ONNX file exported elsewhere"),
    model: str = typer.Option(..., "--model", "-m", help="The PyTorch model it was exported from (as for export)"),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the tagged copy"),
    strategy: Optional[str] = typer.Option("usage_based", "--strategy", "-s", help="Strategies to try in order"),
    torch_module: bool = typer.Option(False, "--torch-module", help="Keep torch.nn modules in tags"),
    input_specs: Optional[Path] = typer.Option(None, "--input-specs", help="JSON file of input names, shapes, dtypes"),
    doc_string: bool = typer.Option(False, "--doc-string", help="Also write the JSON hierarchy into each node's doc_string"),
    strategy_option: List[str] = typer.Option([], "--option", "-O", help="Strategy option STRATEGY.NAME=VALUE"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show each failed attempt's whole message and library logs"),
) -> None:
    """Tag an existing ONNX file with the modules of MODEL, from the graph and the parameters alone."""
    from .export import ExportOptions, check_before_tagging, tag_existing
    from .models import load_model
    from .options import parse_assignments
    from .progress import progress_display

    with _user_errors(verbose):
        _quiet_libraries(verbose)
        options = ExportOptions(
            strategies=_split_strategies(strategy), keep_torch_modules=torch_module, input_specs=input_specs,
            doc_string=doc_string, strategy_options=parse_assignments(strategy_option),
        )
        check_before_tagging(onnx_file, output, options)
        with progress_display(err_console, enabled=not as_json) as progress, _stdout_kept_for(as_json):
            progress(f"loading {model}")
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

    from .compare import compare_strategies
    from .export import ExportOptions
    from .models import load_model
    from .options import parse_assignments
    from .progress import progress_display

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
        columns = ["strategy", "exporter", "nodes", "coverage", "agreement", "sibling errors", "time"]
        columns += ["x plain time", "peak MB", "x plain memory"] if costs else []
        for column in columns:
            table.add_column(column, justify="left" if column in ("strategy", "exporter") else "right")
        for r in results:
            if r.status != "ok":
                table.add_row(r.strategy, "[red]failed[/]", "", "", "", "", f"{r.seconds:.1f} s",
                              *([""] * (len(columns) - 7)))
                continue
            agreement = "n/a" if r.agreement is None else f"{r.agreement:.1%} of {r.reference_nodes}"
            cost_cells = []
            if costs:
                cost_cells = [f"{r.time_ratio:.2f}" if r.time_ratio is not None else "",
                              f"{r.peak_mb:.0f}" if r.peak_mb is not None else "",
                              f"{r.memory_ratio:.2f}" if r.memory_ratio is not None else ""]
            table.add_row(r.strategy, r.exporter, str(r.nodes), f"{r.coverage:.0%}", agreement,
                          str(r.contaminated), f"{r.seconds:.1f} s", *cost_cells)
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

    from .inspect_tags import TagNode, tag_tree

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

        if as_json:
            print(json.dumps({"nodes": node_count, "untagged": untagged, "tree": as_dict(root)}))
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


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
