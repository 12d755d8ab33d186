"""Example inputs: from an input-spec file, a tokenizer, or the model's config and forward signature."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.errors import InputSpecError
from modelexport_core.prepare.wrapper import forward_parameters

if TYPE_CHECKING:
    import torch

BATCH = 2
SEQUENCE = 8
_DTYPES = {"int64": "int64", "long": "int64", "int32": "int32", "float32": "float32", "float": "float32",
           "float16": "float16", "bool": "bool"}


def _config_value(config: Any, *names: str, default: int) -> int:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return default


def inputs_from_config(model: "torch.nn.Module") -> dict[str, "torch.Tensor"]:
    """Inputs a transformers model takes, sized by its config: token ids and masks, or pixels."""
    import torch

    params = forward_parameters(model)
    config = getattr(model, "config", None)
    generator = torch.Generator().manual_seed(0)
    inputs: dict[str, torch.Tensor] = {}
    if "input_ids" in params:
        vocab = _config_value(config, "vocab_size", default=100)
        inputs["input_ids"] = torch.randint(0, vocab, (BATCH, SEQUENCE), generator=generator)
        if "attention_mask" in params:
            mask = torch.ones(BATCH, SEQUENCE, dtype=torch.long)
            mask[1, -2:] = 0  # one padded row, so masking is exercised
            inputs["attention_mask"] = mask
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            inputs["decoder_input_ids"] = torch.randint(0, vocab, (BATCH, SEQUENCE // 2), generator=generator)
    elif "pixel_values" in params:
        channels = _config_value(config, "num_channels", default=3)
        size = _config_value(config, "image_size", default=224)
        inputs["pixel_values"] = torch.randn(BATCH, channels, size, size, generator=generator)
    if not inputs:
        raise InputSpecError(
            f"cannot guess example inputs for {type(model).__name__}; give them with --input-specs FILE.json "
            "or return (model, inputs) from a factory"
        )
    return on_model_device(inputs, model)


def inputs_from_tokenizer(tokenizer: Any, model: "torch.nn.Module") -> dict[str, "torch.Tensor"]:
    """Real token ids from the model's own tokenizer, for the inputs the forward takes."""
    params = forward_parameters(model)
    encoded = tokenizer(
        ["modelexport tags every ONNX node.", "Hello world"], padding=True, return_tensors="pt"
    )
    return on_model_device({name: tensor for name, tensor in encoded.items() if name in params}, model)


def read_input_specs(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of an input-spec file, checked: ``{"name": {"shape": [2, 8], "dtype": "int64", "max": 100}}``."""
    try:
        spec = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise InputSpecError(f"cannot read input specs {path}: {error}") from error
    if not isinstance(spec, dict) or not spec:
        raise InputSpecError(f"input specs {path} must be a JSON object of name -> {{shape, dtype}}")
    for name, entry in spec.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list):
            raise InputSpecError(f"input spec {name!r} needs a 'shape' list")
        if not all(isinstance(d, int) and d >= 0 for d in entry["shape"]):
            raise InputSpecError(f"input spec {name!r}: shape must be a list of sizes >= 0")
        if str(entry.get("dtype", "float32")) not in _DTYPES:
            raise InputSpecError(f"input spec {name!r}: unknown dtype {entry.get('dtype')!r}; use one of {sorted(_DTYPES)}")
    return spec


def _check_names(names: list[str], model: "torch.nn.Module") -> None:
    """Every spec'd name must be a named parameter of ``forward``.

    ``**kwargs`` does not count (library forwards take options there, and an unknown tensor
    would be ignored); a forward of ``*args`` alone takes any names.
    """
    params = forward_parameters(model)
    named = [name for name, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)]
    if not params or (not named and any(p.kind is p.VAR_POSITIONAL for p in params.values())):
        return
    unknown = [name for name in names if name not in named]
    if unknown:
        raise InputSpecError(f"{type(model).__name__}.forward takes no input {unknown[0]!r}; it takes: {', '.join(named)}")


def merge_input_specs(
    inputs: dict[str, "torch.Tensor"], spec: dict[str, dict[str, Any]], model: "torch.nn.Module"
) -> dict[str, "torch.Tensor"]:
    """``inputs`` with the spec'd ones replaced or added, in ``forward``'s parameter order where it has one."""
    _check_names(list(spec), model)
    merged = dict(inputs)
    merged.update(inputs_from_spec(spec, model))
    order = list(forward_parameters(model))
    return dict(sorted(merged.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order)))


def inputs_from_spec(spec: dict[str, dict[str, Any]], model: "torch.nn.Module | None" = None) -> dict[str, "torch.Tensor"]:
    """Tensors for checked spec entries (see :func:`read_input_specs`), on the model's device."""
    import torch

    vocab = _config_value(getattr(model, "config", None), "vocab_size", default=100)
    generator = torch.Generator().manual_seed(0)
    inputs: dict[str, torch.Tensor] = {}
    for name, entry in spec.items():
        shape = tuple(int(d) for d in entry["shape"])
        dtype = getattr(torch, _DTYPES[str(entry.get("dtype", "float32"))])
        if dtype.is_floating_point:
            inputs[name] = torch.randn(shape, generator=generator).to(dtype)
        elif dtype == torch.bool:
            inputs[name] = torch.ones(shape, dtype=torch.bool)
        else:
            high = int(entry.get("max", vocab if "ids" in name else 2))
            inputs[name] = torch.randint(0, max(high, 1), shape, generator=generator, dtype=dtype)
    return on_model_device(inputs, model)


def on_model_device(inputs: dict[str, "torch.Tensor"], model: "torch.nn.Module | None") -> dict[str, "torch.Tensor"]:
    """Generated inputs moved to the device of the model's weights, floats cast to its floating dtype."""
    if model is None:
        return inputs
    weight = next((p for p in model.parameters() if p.is_floating_point()), None)
    if weight is None:
        return inputs
    return {name: tensor.to(weight.device, dtype=weight.dtype if tensor.is_floating_point() else tensor.dtype)
            for name, tensor in inputs.items()}
