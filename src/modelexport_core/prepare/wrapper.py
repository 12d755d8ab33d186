"""Making any model exportable: positional tensor inputs in, a flat tuple of tensors out.

transformers 5 forwards are keyword-first (calling them positionally fails on
``use_cache``), return dataclass-like outputs and may return cache objects that no
exporter accepts. The wrapper calls the model with keywords, turns caches off and
flattens the output to named tensors. It holds the model as the attribute ``model``;
the core strips that prefix so the wrapper never shows in a tag.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core.plugin.strategy import WRAPPER_ATTRIBUTE

if TYPE_CHECKING:
    import torch


def flatten_outputs(output: Any, prefix: str = "") -> list[tuple[str, "torch.Tensor"]]:
    """Named tensors of a model output: dict keys, dataclass fields or positions; other objects dropped."""
    import torch

    if isinstance(output, torch.Tensor):
        return [(prefix or "output", output)]
    if isinstance(output, dict):  # includes transformers' ModelOutput
        items = [(str(key), value) for key, value in output.items()]
    elif isinstance(output, (tuple, list)):
        items = [(str(i) if prefix else f"output_{i}", value) for i, value in enumerate(output)]
    elif hasattr(output, "__dataclass_fields__"):
        items = [(name, getattr(output, name)) for name in output.__dataclass_fields__]
    else:
        return []  # caches and other objects are not outputs of the graph
    flat: list[tuple[str, torch.Tensor]] = []
    for key, value in items:
        flat.extend(flatten_outputs(value, f"{prefix}.{key}" if prefix else key))
    return flat


def forward_parameters(model: "torch.nn.Module") -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return {}


def fixed_keywords(model: "torch.nn.Module") -> dict[str, Any]:
    """Keyword arguments every export passes: caches off, where the forward takes the flag."""
    params = forward_parameters(model)
    return {"use_cache": False} if "use_cache" in params else {}


class OutputRecord:
    """The output names of the export wrapper's last run. A plain object: torch.export puts a module's own
    attributes back as they were after a capture, and the names are wanted after it."""

    def __init__(self) -> None:
        self.names: list[str] = []


def _make_wrapper_class():
    import torch

    class ExportWrapper(torch.nn.Module):
        """Calls the user's model with named tensors and returns a flat tuple of tensors."""

        def __init__(self, model: torch.nn.Module, input_names: list[str], by_keyword: bool):
            super().__init__()
            setattr(self, WRAPPER_ATTRIBUTE, model)
            self.input_names = list(input_names)
            self.by_keyword = by_keyword
            self.keywords = fixed_keywords(model)
            self.output_record = OutputRecord()

        def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
            model = getattr(self, WRAPPER_ATTRIBUTE)
            if self.by_keyword:
                output = model(**dict(zip(self.input_names, tensors)), **self.keywords)
            else:
                output = model(*tensors, **self.keywords)
            flat = flatten_outputs(output)
            # the names of what this run returned, for the core to name a capture's outputs by; TorchDynamo,
            # which reads this code rather than running it, skips the branch
            if not torch.compiler.is_dynamo_compiling():
                self.output_record.names = unique_names([name for name, _ in flat])
            return tuple(tensor for _, tensor in flat)

    return ExportWrapper


_WRAPPER_CLASS = None


def wrap_model(model: "torch.nn.Module", input_names: list[str], by_keyword: bool) -> "torch.nn.Module":
    """The export wrapper around ``model``."""
    global _WRAPPER_CLASS
    if _WRAPPER_CLASS is None:
        _WRAPPER_CLASS = _make_wrapper_class()
    return _WRAPPER_CLASS(model, input_names, by_keyword)


def run_model(model: "torch.nn.Module", inputs: dict[str, "torch.Tensor"], by_keyword: bool) -> Any:
    """The model's output on ``inputs``, called the way the export wrapper calls it."""
    import torch

    keywords = fixed_keywords(model)
    with torch.no_grad():
        if by_keyword:
            return model(**inputs, **keywords)
        return model(*inputs.values(), **keywords)


def output_names(output: Any) -> list[str]:
    """Names of the flattened tensors of a model output, made unique; a name that is a number (a dict keyed
    ``"0"``, as feature pyramids return) is prefixed ``output_``: TorchScript takes no number for a value's name."""
    names = [name for name, _ in flatten_outputs(output)]
    return unique_names([f"output_{name}" if name.isdigit() else name for name in names])


def unique_names(names: list[str]) -> list[str]:
    """``names`` with each repeat suffixed ``_1``, ``_2``, ..."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}_{seen[name] - 1}")
    return unique


EXPORTABLE_EXPERTS = "batched_mm"
"""The mixture-of-experts implementation that exports: weights gathered per token, then one batched
matmul. The grouped kernels sort tokens and loop over data-dependent group sizes, which no exporter
can capture as a graph."""


@contextlib.contextmanager
def export_settings(model: "torch.nn.Module") -> Iterator[None]:
    """Switch the model's library settings that only choose between kernels to exportable ones, for the
    duration of an export; restored afterwards.

    Today that is the experts implementation of models whose config offers one (the choice between
    equivalent grouped, batched and looped expert kernels); the mathematics is unchanged.
    """
    configs = {id(config): config for module in model.modules()
               if (config := getattr(module, "config", None)) is not None
               and hasattr(config, "_experts_implementation_internal")}
    saved = {key: config._experts_implementation_internal for key, config in configs.items()}
    try:
        for config in configs.values():
            if config._experts_implementation_internal not in (None, EXPORTABLE_EXPERTS):
                config._experts_implementation_internal = EXPORTABLE_EXPERTS
        yield
    finally:
        for key, config in configs.items():
            config._experts_implementation_internal = saved[key]
