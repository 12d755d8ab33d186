"""One call for a module in memory, shaped like ``torch.onnx.export``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from modelexport_core.errors import ModelLoadError

if TYPE_CHECKING:
    import torch

    from modelexport_core.export.pipeline import ExportReport


def export_module(
    module: "torch.nn.Module",
    args: "torch.Tensor | Sequence[torch.Tensor] | Mapping[str, torch.Tensor]",
    output: str | Path,
    *,
    strategies: Sequence[str] | None = None,
    keep_torch_modules: bool = False,
    opset: int | None = None,
    dynamic: bool = True,
    verify: bool = True,
    atol: float = 1e-4,
    rtol: float = 1e-5,
    strategy_options: Mapping[str, Mapping[str, str]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> "ExportReport":
    """Export ``module`` called on ``args`` to ``output`` with every node tagged; the sidecar goes beside it.

    ``args`` is a tensor, a tuple of tensors (passed positionally; graph inputs are named after
    ``forward``'s parameters) or a dict of name to tensor (passed as keywords). ``strategies``
    are tried in order (default: every installed one by priority). Returns the
    :class:`~modelexport_core.export.pipeline.ExportReport`. Raises a
    :class:`~modelexport_core.errors.ModelExportError` subclass, with a one-line message, when it
    cannot: ``AllStrategiesFailedError`` (every attempt, a line each), ``VerificationError``,
    ``OutputPathError``, ``ModelRunError`` (the module fails on ``args``), ``UnknownStrategyError``
    or ``StrategyOptionError``. Nothing is written on failure.
    """
    import torch

    from modelexport_core.export.pipeline import ExportOptions, export_model
    from modelexport_core.prepare.models import LoadedModel, tensor_inputs

    if not isinstance(module, torch.nn.Module):
        raise ModelLoadError(f"export_module takes a torch.nn.Module, not {type(module).__name__}")
    source = f"{type(module).__module__}.{type(module).__qualname__}"
    inputs = tensor_inputs(args, source, module)
    loaded = LoadedModel(module, source, "module", inputs=inputs, by_keyword=isinstance(args, Mapping))
    options = ExportOptions(
        strategies=list(strategies) if strategies else None,
        keep_torch_modules=keep_torch_modules,
        opset=opset,
        dynamic=dynamic,
        verify=verify,
        atol=atol,
        rtol=rtol,
        strategy_options={name: dict(values) for name, values in (strategy_options or {}).items()},
    )
    was_training = module.training
    try:
        return export_model(loaded, Path(output), options, progress or (lambda _step: None))
    finally:
        module.train(was_training)
