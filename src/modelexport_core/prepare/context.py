"""Building the :class:`ExportContext` a strategy receives from a model and its example inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from modelexport_core.errors import ModelRunError, first_line
from modelexport_core.plugin.strategy import ExportContext
from modelexport_core.plugin.widening import widen_for_model
from modelexport_core.prepare.wrapper import flatten_outputs, forward_parameters, output_names, run_model, wrap_model

if TYPE_CHECKING:
    import torch


def takes_keywords(model: "torch.nn.Module", input_names: list[str]) -> bool:
    """Whether the model should be called with its inputs as keywords (every name is a forward parameter)."""
    params = forward_parameters(model)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return True
    return all(name in params for name in input_names)


def default_dynamic_axes(inputs: Mapping[str, "torch.Tensor"]) -> dict[str, dict[int, str]]:
    """Batch dynamic for every input of rank >= 1; sequence too for integer (token) inputs of rank 2.

    Token inputs of the same length share the dim ``sequence`` (ids and their mask); one of
    another length (a decoder's ids) gets a dim of its own, ``<name>_sequence``.
    """
    import torch

    axes: dict[str, dict[int, str]] = {}
    first_length: int | None = None
    for name, tensor in inputs.items():
        if tensor.dim() == 0:
            continue
        axes[name] = {0: "batch"}
        if tensor.dim() == 2 and not torch.is_floating_point(tensor):
            length = tensor.shape[1]
            first_length = length if first_length is None else first_length
            axes[name][1] = "sequence" if length == first_length else f"{name}_sequence"
    return axes


def make_context(
    model: "torch.nn.Module",
    inputs: Mapping[str, "torch.Tensor"],
    *,
    dynamic: bool = True,
    opset: int | None = None,
    options: Mapping[str, Any] | None = None,
    by_keyword: bool | None = None,
    keep_outputs: bool = True,
) -> ExportContext:
    """Wrap ``model`` for export and describe the export of it with ``inputs``.

    With ``keep_outputs`` the model runs once on ``inputs``: its outputs are kept as
    ``example_outputs`` for verification and name the graph's outputs (a model that fails
    on its own example fails here, once). Without it (nothing will compare with them) the
    model does not run here unless an axis needs widening: ``output_names`` is left empty
    and the capture names them (:func:`recorded_output_names`).
    """
    model.eval()
    names = list(inputs)
    if by_keyword is None:
        by_keyword = takes_keywords(model, names)
    wrapper = wrap_model(model, names, by_keyword).eval()
    user_args = tuple(inputs.values())

    def run(args: tuple["torch.Tensor", ...]) -> Any:
        return run_model(model, dict(zip(names, args)), by_keyword)

    try:
        args, axes, notes, output = widen_for_model(run, user_args, names, default_dynamic_axes(inputs) if dynamic else {})
        example_outputs: tuple = ()
        if output is None and keep_outputs:
            output = run(user_args)
            example_outputs = tuple(tensor for _, tensor in flatten_outputs(output))
    except Exception as error:
        raise _run_error(model, names, user_args, error) from error
    return ExportContext(
        model=model,
        module=wrapper,
        args=args,
        input_names=names,
        output_names=output_names(output) if output is not None else [],
        dynamic_axes=axes,
        opset=opset,
        options=dict(options or {}),
        example_args=user_args,
        notes=tuple(notes),
        example_outputs=example_outputs,
    )


def recorded_output_names(ctx: ExportContext) -> list[str]:
    """The output names of the context's last capture (the export wrapper records them as it runs), or []."""
    record = getattr(ctx.module, "output_record", None)
    return list(record.names) if record is not None else []


def check_model_runs(ctx: ExportContext) -> None:
    """Run the model on its own example; a failure there raises as the model's, in one line (ModelRunError)."""
    import torch

    try:
        with torch.no_grad():
            ctx.module(*ctx.user_args)
    except Exception as error:
        raise _run_error(ctx.model, ctx.input_names, ctx.user_args, error) from error


def _run_error(model: "torch.nn.Module", names: list[str], args: tuple["torch.Tensor", ...],
               error: BaseException) -> ModelRunError:
    shapes = ", ".join(f"{name} {list(t.shape)}" for name, t in zip(names, args))
    return ModelRunError(
        f"{type(model).__name__} failed on its example inputs ({shapes}): {type(error).__name__}: {first_line(error)}"
    )
