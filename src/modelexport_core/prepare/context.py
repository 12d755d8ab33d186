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

    The model runs once on ``inputs`` (names its outputs; a model that fails on its own
    example fails here, once). ``keep_outputs``: that run computes real outputs, kept as
    ``example_outputs`` for verification; without it (nothing will compare with them) the
    run is made on fake tensors where the model allows, shapes only: no arithmetic.
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
        if output is None and not keep_outputs:
            output = _fake_run(run, user_args, model)
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


def _fake_run(run: Any, args: tuple["torch.Tensor", ...], model: "torch.nn.Module") -> Any:
    """``run(args)`` on fake tensors (shapes and dtypes, no data), or None where the model needs real values.

    A model whose code reads values (``.item()``, a branch on a tensor) or calls an op with no
    fake implementation cannot run so; the caller then runs it for real, which also reports
    a failure of the model's own as one clear error. A module that caches a tensor while
    running (a lazily built table) gets its own tensor back afterwards, never a fake one.
    """
    slots = _tensor_slots(model)
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            return run(tuple(mode.from_tensor(tensor) for tensor in args))
    except Exception:  # noqa: BLE001 - any failure here only means: run it for real
        return None
    finally:
        _restore_tensor_slots(model, slots)


def _tensor_slots(model: "torch.nn.Module") -> dict[tuple[int, str, str], Any]:
    """What each module of ``model`` holds (parameters, buffers, plain attributes), by where it is held."""
    slots: dict[tuple[int, str, str], Any] = {}
    for module in model.modules():
        for name, value in vars(module).items():
            slots[(id(module), "", name)] = value
            if name in ("_parameters", "_buffers"):
                slots.update({(id(module), name, key): tensor for key, tensor in value.items()})
    return slots


def _restore_tensor_slots(model: "torch.nn.Module", slots: dict[tuple[int, str, str], Any]) -> None:
    """Put back what :func:`_tensor_slots` saw wherever a fake tensor took its place (or was added)."""
    from torch._subclasses.fake_tensor import FakeTensor

    for module in model.modules():
        state = vars(module)
        holders = [("_parameters", state.get("_parameters", {})), ("_buffers", state.get("_buffers", {})), ("", state)]
        for kind, holder in holders:
            for key, value in list(holder.items()):
                if isinstance(value, FakeTensor):
                    slot = (id(module), kind, key)
                    if slot in slots:
                        holder[key] = slots[slot]
                    else:
                        del holder[key]
