"""An example modelexport plugin: the ``whole_model`` strategy."""

from pathlib import Path

from modelexport_core.sdk import ExportContext, StrategyFailed, TaggingResult, TaggingStrategy, hookimpl


class WholeModelStrategy(TaggingStrategy):
    """Tags every node with the root module: the smallest strategy that is still correct."""

    name = "whole_model"
    priority = 1  # tried last unless the user names it
    description = "Example: every node gets the root module's tag"
    requires = "a model the TorchScript exporter can trace"

    def export(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        import onnx
        import torch

        try:
            torch.onnx.export(
                ctx.module, ctx.args, str(onnx_path),
                input_names=ctx.input_names, output_names=ctx.output_names,
                dynamic_axes=ctx.dynamic_axes or None, dynamo=False,
            )
        except Exception as error:
            raise StrategyFailed(f"export failed: {error}") from error
        graph = onnx.load(str(onnx_path), load_external_data=False).graph
        return TaggingResult(node_modules={node.name: "" for node in graph.node}, exporter="torchscript")


@hookimpl
def modelexport_strategies():
    return [WholeModelStrategy]
