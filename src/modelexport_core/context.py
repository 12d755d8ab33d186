"""Building the :class:`ExportContext` a strategy receives from a model and its example inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from .errors import ModelRunError
from .exporters import first_line
from .strategy import ExportContext
from .widening import widen_for_model
from .wrapper import flatten_outputs, forward_parameters, output_names, run_model, wrap_model

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
) -> ExportContext:
    """Wrap ``model`` for export and describe the export of it with ``inputs``."""
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
        if output is None:
            output = run(user_args)
            example_outputs = tuple(tensor for _, tensor in flatten_outputs(output))
    except Exception as error:
        shapes = ", ".join(f"{name} {list(t.shape)}" for name, t in inputs.items())
        raise ModelRunError(
            f"{type(model).__name__} failed on its example inputs ({shapes}): {type(error).__name__}: {first_line(error)}"
        ) from error
    return ExportContext(
        model=model,
        module=wrapper,
        args=args,
        input_names=names,
        output_names=output_names(output),
        dynamic_axes=axes,
        opset=opset,
        options=dict(options or {}),
        example_args=user_args,
        notes=tuple(notes),
        example_outputs=example_outputs,
    )
