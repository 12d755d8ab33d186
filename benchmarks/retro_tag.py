"""usage_based on files exported elsewhere: ``modelexport tag`` on plain default TorchScript exports of zoo models.

Each model is exported the way a user would without modelexport: ``torch.onnx.export(model, args, f,
dynamo=False)`` with the defaults (constant folding on: BatchNorm folded into convolutions, recurrent
weights packed, linear weights transposed, identical tensors merged). usage_based then tags that file
from the model's parameters, and its tags are measured node by node against the scopes the exporter
wrote into the node names (``modelexport_core.format.reference.torchscript_node_modules``). ``--own`` also
measures usage_based's own export of the model with ``compare_strategies``.

    .venv/bin/python benchmarks/retro_tag.py [--own] [--only resnet,lstm_tagger] [--json out.json]
                                             [--strategy usage_based|htp|records] [--rename]
                                             [--exporter torchscript|dynamo]
    .venv-bench/bin/python benchmarks/retro_tag.py --draw heldout --seed N --sources timm,torchvision --rename

With ``--draw``, the models are one configuration of each family of ``benchmarks/generator.py`` from the named
sources (a held-out draw's seed, as ``zoo_sweep.py --draw`` takes it; the benchmark environment), not the zoo.

Figures: ``module`` is the share of scoped nodes given exactly the recorded module, ``tag`` the share
given the same hierarchy tag (torch.nn modules folded into their parents, as the CLI writes them),
``contaminated`` the nodes given to a sibling layer. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import zoo  # noqa: E402  (the zoo lives beside this script)

RETRO_MODELS = [
    "resnet", "efficientnet", "mobilenet_v2", "regnet", "densenet_like",
    "lstm_tagger", "bilstm_tagger", "gru_classifier",
    "bert", "distilbert",
    "reused_block", "identical_siblings", "root_ops",
]
"""The models the ``tag`` target names: BatchNorm CNNs, recurrent models, BERT-family encoders, custom cases."""


@dataclass
class Row:
    model: str
    status: str = "ok"
    reason: str = ""
    nodes: int = 0
    module: float | None = None
    tag: float | None = None
    contaminated: int = 0
    own_tag: float | None = None
    own_contaminated: int | None = None
    own_reason: str = ""
    seconds: float = 0.0


def build(name: str, batch: int):
    """A zoo model by its zoo name, or a generated one by its ``family@seed.index`` name."""
    if "@" in name:
        import generator

        return generator.by_name(name).build(batch)
    return zoo.build(name, batch)


def plain_export(model, inputs, path: Path, exporter: str = "torchscript") -> None:
    """A default export: TorchScript through the core's wrapper (transformers forwards are keyword-first), or
    dynamo of the model itself with keyword inputs."""
    import torch

    from modelexport_core import make_context

    ctx = make_context(model, inputs)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(model, (), str(path), kwargs=dict(inputs), dynamo=True)
        else:
            torch.onnx.export(ctx.module, ctx.args, str(path), input_names=ctx.input_names, dynamo=False)


def _tagger(strategy: str):
    """``tag(ctx, onnx_model) -> node_modules`` for a strategy name, or for ``records`` (tag without ``-s``)."""
    if strategy == "records":
        from modelexport_core.format.records import read_records
        from modelexport_core.plugin.strategy import StrategyUnavailable

        def from_records(ctx, onnx_model):
            records = read_records(onnx_model, [name for name, _ in ctx.model.named_modules()])
            if records is None:
                raise StrategyUnavailable("the file carries no whole module records")
            return records.node_modules
        return from_records
    from modelexport_core.plugin.discovery import get_strategy

    strategy_class = get_strategy(strategy).strategy
    return lambda ctx, onnx_model: strategy_class().tag_onnx(ctx, onnx_model).node_modules


def measure_tag(name: str, folder: Path, strategy: str = "usage_based", rename: bool = False,
                exporter: str = "torchscript") -> Row:
    import onnx

    from modelexport_core import HierarchyTags, make_context
    from modelexport_core.format import reference
    from modelexport_core.format.graph import fill_missing_modules
    from modelexport_core.plugin.strategy import StrategyUnavailable
    from modelexport_core.testing import sibling_contamination

    row = Row(name)
    model, inputs = build(name, 2)
    path = folder / f"{name.replace(':', '_')}.onnx"
    plain_export(model, inputs, path, exporter)
    onnx_model = onnx.load(str(path))
    ctx = make_context(model, inputs)
    names = [qualname for qualname, _ in model.named_modules()]  # a plain export of the model: no wrapper
    recorded = {n: m for n, m in (reference.dynamo_node_modules(onnx_model, wrapped=False) if exporter == "dynamo"
                                  else reference.torchscript_node_modules(onnx_model, names, wrapped=False)).items()
                if m is not None}
    if rename:  # a file whose node names were replaced: the records are gone, the references stay by position
        position = {node.name: f"n{i}" for i, node in enumerate(onnx_model.graph.node)}
        for node in onnx_model.graph.node:
            node.name = position[node.name]
        recorded = {position[n]: m for n, m in recorded.items()}
    started = time.perf_counter()
    try:
        node_modules = fill_missing_modules(onnx_model.graph, _tagger(strategy)(ctx, onnx_model))
    except StrategyUnavailable as error:
        row.status, row.reason = "refused", str(error)
        return row
    row.seconds = round(time.perf_counter() - started, 2)
    tags = HierarchyTags.from_model(model)
    row.nodes = len(onnx_model.graph.node)
    row.module = sum(node_modules[n] == m for n, m in recorded.items()) / len(recorded)
    row.tag = sum(tags.tag_of(node_modules[n]) == tags.tag_of(m) for n, m in recorded.items()) / len(recorded)
    row.contaminated = len(sibling_contamination(node_modules, recorded))
    return row


def measure_own(name: str, row: Row) -> None:
    from modelexport_core.export.pipeline import ExportOptions
    from modelexport_core.measure.compare import compare_strategies
    from modelexport_core.prepare.models import LoadedModel

    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        model, inputs = build(name, 2)
        loaded = LoadedModel(model, name, "factory", inputs=inputs, by_keyword=True)
        (comparison,) = compare_strategies(loaded, ExportOptions(strategies=["usage_based"]))
    row.own_tag = comparison.agreement
    row.own_contaminated = comparison.contaminated
    row.own_reason = comparison.reason


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated zoo names (default: the tag target's models)")
    parser.add_argument("--own", action="store_true", help="also measure usage_based's own export")
    parser.add_argument("--strategy", default="usage_based",
                        help="usage_based, htp, or records (what `tag` without -s reads from the file)")
    parser.add_argument("--rename", action="store_true", help="replace every node name (n0, n1, ...) before tagging")
    parser.add_argument("--exporter", default="torchscript", choices=["torchscript", "dynamo"],
                        help="the plain export to tag (dynamo: the model itself, keyword inputs)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--draw", choices=("dev", "heldout"), help="generated models instead of the zoo's")
    parser.add_argument("--seed", type=int, help="the held-out draw's seed")
    parser.add_argument("--sources", default="timm,torchvision",
                        help="with --draw: the generator's sources (or families) to take one model of each from")
    args = parser.parse_args(argv)
    if args.draw:
        import generator

        drawn = generator.draw(args.draw, args.seed, per_family=1, only=args.sources.split(","))
        names = [m.name for m in drawn]
    else:
        names = [n for n in args.only.split(",") if n] or RETRO_MODELS
    rows = []
    print(f"{'model':28.28} {'nodes':>5} {'module':>7} {'tag':>7} {'contam':>6} {'own tag':>7} {'own cont':>8}  note")
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            try:
                row = measure_tag(name, Path(folder), args.strategy, args.rename, args.exporter)
            except Exception as error:  # one broken model must not stop the table
                row = Row(name, "failed", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
            if args.own:
                try:
                    measure_own(name, row)
                except Exception as error:
                    row.own_reason = f"{type(error).__name__}: {error}"
            rows.append(row)
            print(f"{name.partition('@')[0]:28.28} {row.nodes:5} {_figure(row.module):>7} {_figure(row.tag):>7} {row.contaminated:6} "
                  f"{_figure(row.own_tag):>7} {'-' if row.own_contaminated is None else row.own_contaminated:>8}  "
                  f"{row.reason or row.own_reason}"[:220], flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
