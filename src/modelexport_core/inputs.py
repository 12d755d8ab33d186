"""Example inputs: from an input-spec file, a tokenizer, or the model's config and forward signature."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InputSpecError
from .wrapper import forward_parameters

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
    return inputs


def inputs_from_tokenizer(tokenizer: Any, model: "torch.nn.Module") -> dict[str, "torch.Tensor"]:
    """Real token ids from the model's own tokenizer, for the inputs the forward takes."""
    params = forward_parameters(model)
    encoded = tokenizer(
        ["modelexport tags every ONNX node.", "Hello world"], padding=True, return_tensors="pt"
    )
    return {name: tensor for name, tensor in encoded.items() if name in params}


def inputs_from_spec(path: Path, model: "torch.nn.Module | None" = None) -> dict[str, "torch.Tensor"]:
    """Inputs described by a JSON file: ``{"name": {"shape": [2, 8], "dtype": "int64", "max": 100}}``."""
    import torch

    try:
        spec = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise InputSpecError(f"cannot read input specs {path}: {error}") from error
    if not isinstance(spec, dict) or not spec:
        raise InputSpecError(f"input specs {path} must be a JSON object of name -> {{shape, dtype}}")
    vocab = _config_value(getattr(model, "config", None), "vocab_size", default=100)
    generator = torch.Generator().manual_seed(0)
    inputs: dict[str, torch.Tensor] = {}
    for name, entry in spec.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list):
            raise InputSpecError(f"input spec {name!r} needs a 'shape' list")
        shape = tuple(int(d) for d in entry["shape"])
        dtype_name = _DTYPES.get(str(entry.get("dtype", "float32")))
        if dtype_name is None:
            raise InputSpecError(f"input spec {name!r}: unknown dtype {entry.get('dtype')!r}; use one of {sorted(_DTYPES)}")
        dtype = getattr(torch, dtype_name)
        if dtype.is_floating_point:
            inputs[name] = torch.randn(shape, generator=generator).to(dtype)
        elif dtype == torch.bool:
            inputs[name] = torch.ones(shape, dtype=torch.bool)
        else:
            high = int(entry.get("max", vocab if "ids" in name else 2))
            inputs[name] = torch.randint(0, max(high, 1), shape, generator=generator, dtype=dtype)
    return inputs
