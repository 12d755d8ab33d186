"""What exporters make of parameters on the way: tensors derived from the model's own, to be matched by value.

The TorchScript exporter's constant folding (on by default) rewrites torch layers' parameters:

- a batch norm that follows a layer is folded into it: the layer's weight scaled per output
  channel by ``gamma / sqrt(var + eps)``, its bias ``(b - mean) * gamma / sqrt(var + eps) + beta``;
- a recurrent layer's weights are packed per layer: gates reordered to the ONNX order, input and
  hidden biases concatenated, directions stacked;
- a parametrized tensor (a weight norm) is computed from its parameters and stored as the result.

Each derived tensor is computed from the module tree alone (torch layer kinds and their
parameters, never a model's names) and names the module whose node reads it in the export.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import numpy as np
    import torch

GATE_ORDER = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN_TANH": (0,), "RNN_RELU": (0,)}
"""Where ONNX's gate order (LSTM: i, o, f, c; GRU: z, r, n) takes each of PyTorch's gates (i, f, g, o; r, z, n)."""


@dataclass(frozen=True)
class DerivedTensor:
    """A tensor an exporter computes from parameters: who reads it, and which parameters it stands for."""

    array: "np.ndarray"
    module: str
    """The module whose node reads the derived tensor (the layer a norm is folded into)."""
    sources: tuple[str, ...]
    """Qualified names of the parameters and buffers it is computed from."""
    exact: bool
    """Whether it is a rearrangement of values (matched exactly) or computed (matched within a tolerance)."""


def derived_tensors(model: "torch.nn.Module") -> Iterator[DerivedTensor]:
    """Every tensor the exporter may derive from the model's parameters."""
    yield from _packed_recurrent(model)
    yield from _folded_norms(model)
    yield from _parametrized(model)


def _parametrized(model: "torch.nn.Module") -> Iterator[DerivedTensor]:
    """Tensors a parametrization computes from a module's parameters (a weight norm's ``g * v / |v|``).

    The module reads the computed tensor; the exporter folds it into a constant that equals
    none of the stored parameters.
    """
    import torch
    from torch.nn.utils import parametrize

    for qualname, module in model.named_modules():
        if not parametrize.is_parametrized(module):
            continue
        prefix = f"{qualname}." if qualname else ""
        for name in module.parametrizations:
            with torch.no_grad():
                value = getattr(module, name)
            sources = tuple(
                f"{prefix}parametrizations.{name}.{original}"
                for original, _ in module.parametrizations[name].named_parameters(recurse=False)
            )
            array = _array(value)
            yield DerivedTensor(array, qualname, sources, False)
            if array.ndim == 2:  # a linear layer's weight is stored transposed for MatMul
                yield DerivedTensor(array.T, qualname, sources, False)


def _array(tensor: "torch.Tensor") -> "np.ndarray":
    import torch

    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def _packed_recurrent(model: "torch.nn.Module") -> Iterator[DerivedTensor]:
    """ONNX's W, R and B of each layer of a recurrent torch layer: gates reordered, biases joined, directions stacked."""
    import numpy as np
    import torch

    for qualname, module in model.named_modules():
        if not isinstance(module, torch.nn.RNNBase) or module.mode not in GATE_ORDER:
            continue
        order = GATE_ORDER[module.mode]
        directions = 2 if module.bidirectional else 1
        for layer in range(module.num_layers):
            names = module._all_weights[layer * directions:(layer + 1) * directions]

            def reordered(name: str, module: Any = module, order: tuple = order) -> "np.ndarray":
                gates = np.split(_array(getattr(module, name)), len(order))
                return np.concatenate([gates[g] for g in order])

            prefix = f"{qualname}." if qualname else ""
            for position in (0, 1):  # input weights, then hidden weights
                stacked = np.stack([reordered(group[position]) for group in names])
                yield DerivedTensor(stacked, qualname, tuple(prefix + group[position] for group in names), True)
            if module.bias:
                biases = np.stack([np.concatenate([reordered(group[2]), reordered(group[3])]) for group in names])
                sources = tuple(prefix + name for group in names for name in group[2:4])
                yield DerivedTensor(biases, qualname, sources, True)


def _folded_norms(model: "torch.nn.Module") -> Iterator[DerivedTensor]:
    """The weight and bias of a layer with a batch norm folded into it, for the layers next to each norm.

    A norm folds into the layer that feeds it: a module holding a weight with one row per
    channel the norm normalises. Which layer that is the graph says, not the tree; the nearest
    such layers registered before and after the norm, and those beside it, are the candidates.
    """
    import torch

    layers = [
        (qualname, module)
        for qualname, module in model.named_modules()
        if isinstance(getattr(module, "weight", None), torch.Tensor) and module.weight.dim() >= 2
    ]
    position = {qualname: i for i, (qualname, _) in enumerate(model.named_modules())}
    for qualname, norm in model.named_modules():
        if not isinstance(norm, torch.nn.modules.batchnorm._BatchNorm) or norm.running_var is None:
            continue
        channels = norm.num_features
        fitting = [(name, layer) for name, layer in layers if layer.weight.shape[0] == channels]
        before = [pair for pair in fitting if position[pair[0]] < position[qualname]][-1:]
        after = [pair for pair in fitting if position[pair[0]] > position[qualname]][:1]
        parent = qualname.rpartition(".")[0]
        beside = [pair for pair in fitting if pair[0].rpartition(".")[0] == parent]
        seen: set[str] = set()
        for name, layer in before + after + beside:
            if name not in seen:
                seen.add(name)
                yield from _fold(name, layer, qualname, norm)


def _fold(layer_name: str, layer: "torch.nn.Module", norm_name: str, norm: "torch.nn.Module") -> Iterator[DerivedTensor]:
    import torch

    with torch.no_grad():
        scale = torch.rsqrt(norm.running_var.float() + norm.eps)
        if norm.weight is not None:
            scale = scale * norm.weight.float()
        shift = -norm.running_mean.float() * scale
        if norm.bias is not None:
            shift = shift + norm.bias.float()
        weight = layer.weight.float() * scale.reshape(-1, *([1] * (layer.weight.dim() - 1)))
        bias = shift if getattr(layer, "bias", None) is None else layer.bias.float() * scale + shift
    norm_sources = tuple(
        f"{norm_name}.{name}" if norm_name else name
        for name, value in (("weight", norm.weight), ("bias", norm.bias), ("running_mean", norm.running_mean),
                            ("running_var", norm.running_var))
        if value is not None
    )
    prefix = f"{layer_name}." if layer_name else ""
    yield DerivedTensor(_array(weight), layer_name, (prefix + "weight",) + norm_sources, False)
    bias_sources = ((prefix + "bias",) if getattr(layer, "bias", None) is not None else ()) + norm_sources
    yield DerivedTensor(_array(bias), layer_name, bias_sources, False)
