"""Per-node tags of usage_based's own export against PyTorch's records, on small models built here.

Each model holds one pattern real architectures have (named after what it does, not after
an architecture): a norm whose weight the exporter folds into ``1 + weight``, a module computing
from a buffer, post-norm layers with equal norm weights, a gate multiplying its input, pooling of
the returned value in the root, ids computed from the inputs for one lookup, one block class
with a residual in some instances only, a layer whose weight a parametrization computes, a
layer norm equal to a batch norm folded away, a convolution padding its input itself right
after a block that added its residual, conv-norm-activation sequences (in-place activations, the
norm folded away), a norm subclass applying its own activation once the norm is folded away, a block applying
one activation module twice (before and after its residual), residual blocks whose last norm scales by zero
(plain, and applying its own activation),
one-element scales and shifts the exporter merges, and a padding by fixed amounts.
Every recorded node must get the module PyTorch recorded.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional
from usage_based_support import assert_every_recorded_node, measure_case

WIDTH = 8


class OffsetNorm(nn.Module):
    """A norm scaling by ``1 + weight`` (weight zero at init): the exporter folds the sum into one constant."""

    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return normed * (1.0 + self.weight)


class OffsetNormLayer(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = OffsetNorm(width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return x + self.proj(self.norm(x))


class OffsetNormStack(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.layers = nn.ModuleList(OffsetNormLayer(width) for _ in range(2))
        self.norm = OffsetNorm(width)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class NormFirstStack(nn.Module):
    """OffsetNormStack registering its final norm before the layers (it runs after them), with more layers: owners
    of the one merged unit tensor taken in registration order shift every norm onto the one before it."""

    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.norm = OffsetNorm(width)
        self.layers = nn.ModuleList(OffsetNormLayer(width) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Waves(nn.Module):
    """A parameter-free module but for a buffer, computing cos and sin of positions from it."""

    def __init__(self, width: int):
        super().__init__()
        self.register_buffer("frequencies", torch.arange(1, width // 2 + 1, dtype=torch.float32) / width)

    def forward(self, positions):
        angles = positions[:, :, None] * self.frequencies
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos() * 2.0, angles.sin() * 2.0


class WaveModel(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.waves = Waves(width)
        self.proj = nn.Linear(width, width)

    def forward(self, x, positions):
        cos, sin = self.waves(positions)
        return self.proj(x * cos + x * sin)


class PostNormLayer(nn.Module):
    """The norm after the residual add: it closes the layer and feeds the next one."""

    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.proj(x))


class PostNormStack(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.layers = nn.ModuleList(PostNormLayer(width) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Gate(nn.Module):
    """Pools its input, computes a gate from it with a small sequential, multiplies the input by the gate."""

    def __init__(self, channels: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.score = nn.Sequential(nn.Conv2d(channels, channels, 1), nn.Sigmoid())

    def forward(self, x):
        return x * self.score(self.pool(x))


class GatedBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(), Gate(channels))
        self.out = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        return self.out(self.layers(x))


class GatedCnn(nn.Module):
    """Gated blocks, then the root pools what the stack returns."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.Sequential(GatedBlock(channels), GatedBlock(channels))
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, pixels):
        hidden = self.blocks(self.stem(pixels))
        return hidden, self.pool(hidden).flatten(1)


class CountedEmbeddings(nn.Module):
    """Token lookup plus a position lookup whose ids are computed here from the token ids."""

    def __init__(self, vocab: int = 16, width: int = WIDTH):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(vocab + 2, width)

    def forward(self, ids):
        mask = ids.ne(0).int()
        position_ids = torch.cumsum(mask, dim=1) * mask + 1
        return self.tokens(ids) + self.positions(position_ids)


class CountedModel(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.embeddings = CountedEmbeddings(width=width)
        self.proj = nn.Linear(width, width)

    def forward(self, ids):
        return self.proj(self.embeddings(ids))


class MaybeResidual(nn.Module):
    """One class; the instances that keep the width add their input back, the others do not."""

    def __init__(self, width_in: int, width_out: int):
        super().__init__()
        self.expand = nn.Linear(width_in, width_in * 2)
        self.act = nn.ReLU()
        self.reduce = nn.Linear(width_in * 2, width_out)
        self.residual = width_in == width_out

    def forward(self, x):
        y = self.reduce(self.act(self.expand(x)))
        return x + y if self.residual else y


class MaybeResidualStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(MaybeResidual(4, 8), MaybeResidual(8, 8), MaybeResidual(8, 6), MaybeResidual(6, 6))

    def forward(self, x):
        return self.blocks(x)


class NormedMix(nn.Module):
    """A linear layer under a weight-norm parametrization: the exporter stores ``g * v / |v|`` computed."""

    def __init__(self, width: int):
        super().__init__()
        self.mix = nn.utils.parametrizations.weight_norm(nn.Linear(width, width))

    def forward(self, x):
        return self.mix(x)


class NormedModel(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.first = nn.Linear(width, width)
        self.normed = NormedMix(width)
        self.last = nn.Linear(width, width)
        for layer in (self.first, self.normed.mix, self.last):
            nn.init.zeros_(layer.bias)  # equal biases: only the weight tells the modules apart

    def forward(self, x):
        return self.last(self.normed(self.first(x)))


class ConvBlock(nn.Module):
    """A convolution and its batch norm, which the exporter folds into the convolution."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, padding=1)
        self.norm = nn.BatchNorm1d(channels)

    def forward(self, x):
        return self.norm(self.conv(x))


class ConvThenTokens(nn.Module):
    """A layer norm holding the same unit weight and zero bias as the folded batch norm before it."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.project = ConvBlock(channels)
        self.tokens = nn.Linear(channels, channels)
        self.norm = nn.LayerNorm(channels)

    def forward(self, signal):
        return self.norm(self.tokens(self.project(signal)))


class SamePadConv(nn.Module):
    """A convolution padding its input to keep its size, the pads worked out from the input's shape."""

    def __init__(self, channels: int, kernel: int, out: int | None = None):
        super().__init__()
        self.conv = nn.Conv2d(channels, out or channels, kernel)
        self.act = nn.ReLU6()

    def forward(self, x):
        total = max(self.conv.kernel_size[0] - 1 - (int(x.shape[-2]) - 1) % 1, 0)
        x = functional.pad(x, (total // 2, total - total // 2, total // 2, total - total // 2))
        return self.act(self.conv(x))


class PaddedBlock(nn.Module):
    """Two padding convolutions; the blocks that keep the width add their input back."""

    def __init__(self, channels: int, out: int):
        super().__init__()
        self.expand = SamePadConv(channels, 1)
        self.mix = SamePadConv(channels, 3, out)
        self.residual = channels == out

    def forward(self, x):
        y = self.mix(self.expand(x))
        return x + y if self.residual else y


class PaddedStack(nn.Module):
    """A block without a residual pads what the block before it added: the pad is its first layer's."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 1)
        self.blocks = nn.Sequential(PaddedBlock(channels, channels), PaddedBlock(channels, 6), PaddedBlock(6, 6))

    def forward(self, pixels):
        return self.blocks(self.stem(pixels))


class ConvNormActivation(nn.Sequential):
    """A convolution, a norm the exporter folds into it, and an activation: the activation has parameter
    nodes of other modules on both sides and belongs to the sequence."""

    def __init__(self, inputs: int, outputs: int, activation: type[nn.Module]):
        super().__init__(nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs),
                         activation(inplace=True) if activation is nn.ReLU else activation())


class ConvNormActivationNet(nn.Module):
    def __init__(self, channels: int = 6):
        super().__init__()
        self.stem = ConvNormActivation(3, channels, nn.ReLU)
        self.body = nn.Sequential(ConvNormActivation(channels, channels, nn.SiLU), ConvNormActivation(channels, channels, nn.Hardswish))
        self.head = nn.Linear(channels, 3)

    def forward(self, pixels):
        return self.head(self.body(self.stem(pixels)).mean((2, 3)))


class NormThenActivation(nn.BatchNorm2d):
    """A batch norm that also applies an activation of its own: folded into the convolution before it, the
    norm leaves only its activation's nodes, which read that convolution's result."""

    def __init__(self, channels: int, activation: type[nn.Module]):
        super().__init__(channels)
        self.act = activation()

    def forward(self, x):
        return self.act(super().forward(x))


class NormActivationNet(nn.Module):
    def __init__(self, channels: int = 6):
        super().__init__()
        self.conv_stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn1 = NormThenActivation(channels, nn.SiLU)
        self.blocks = nn.Sequential(*(nn.Sequential(nn.Conv2d(channels, channels, 1, bias=False),
                                                    NormThenActivation(channels, nn.ReLU)) for _ in range(2)))
        self.head = nn.Linear(channels, 3)

    def forward(self, pixels):
        return self.head(self.blocks(self.bn1(self.conv_stem(pixels))).mean((2, 3)))


class TwiceActivatedBlock(nn.Module):
    """One ReLU module applied after the first convolution and again after the residual add."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.conv2(self.relu(self.conv1(x))) + x)


class TwiceActivatedStack(nn.Module):
    def __init__(self, channels: int = 4):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 1)
        self.blocks = nn.Sequential(*(TwiceActivatedBlock(channels) for _ in range(3)))
        self.head = nn.Conv2d(channels, 2, 1)

    def forward(self, pixels):
        return self.head(self.blocks(self.stem(pixels)))


class ZeroScaledBlock(nn.Module):
    """conv-norm, activation, conv-norm with the last norm's scale zero (a block that starts as the identity),
    the input added back: the exporter folds a zero into the last convolution, which any convolution of its
    shape times that zero equals."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(channels, channels, 1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv2d(channels, channels, 1, bias=False), nn.BatchNorm2d(channels))
        nn.init.zeros_(self.conv2[1].weight)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.conv2(self.conv1(x)) + x)


class ZeroScaledStack(nn.Module):
    def __init__(self, channels: int = 6):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU())  # what the blocks return
        self.blocks = nn.Sequential(*(ZeroScaledBlock(channels) for _ in range(3)))
        self.head = nn.Conv2d(channels, 2, 1)

    def forward(self, pixels):
        return self.head(self.blocks(self.stem(pixels)))


class ZeroScaledActivatedBlock(nn.Module):
    """Two convolutions each with a norm applying its own activation, the second norm's scale zero, the input
    added back: the zero folded into the second convolution equals any convolution of its shape times zero,
    and the norm's activation still runs on that convolution's result."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(channels, channels, 1, bias=False), NormThenActivation(channels, nn.SiLU))
        self.conv2 = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                                   NormThenActivation(channels, nn.SiLU))
        nn.init.zeros_(self.conv2[1].weight)

    def forward(self, x):
        return x + self.conv2(self.conv1(x))


class ZeroScaledActivatedStack(nn.Module):
    def __init__(self, channels: int = 6):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU())
        self.blocks = nn.Sequential(*(ZeroScaledActivatedBlock(channels) for _ in range(3)))
        self.head = nn.Conv2d(channels, 2, 1)

    def forward(self, pixels):
        return self.head(self.blocks(self.stem(pixels)))


class ScalarAffine(nn.Module):
    """``x * scale + bias`` with one-element parameters at their initial 1 and 0: the exporter keeps one copy
    of the equal ones, named after the first, and copies it under each other's name."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return x * self.scale + self.bias


class ScaledConv(nn.Module):
    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.conv = nn.Conv2d(inputs, outputs, 3, padding=1)
        self.act = nn.ReLU()
        self.affine = ScalarAffine()

    def forward(self, x):
        return self.affine(self.act(self.conv(x)))


class ScaledConvStack(nn.Module):
    def __init__(self, channels: int = 4):
        super().__init__()
        self.layers = nn.Sequential(ScaledConv(3, channels), *(ScaledConv(channels, channels) for _ in range(3)))

    def forward(self, pixels):
        return self.layers(pixels)


class PaddingStem(nn.Module):
    """Pads what its first convolution block returned by fixed amounts before the second (the exporter computes
    the pads in several constant steps read by the one node padding), twice."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.first = ScaledConv(3, channels)
        self.second = ScaledConv(channels, channels)
        self.third = nn.Conv2d(channels, channels, 2)

    def forward(self, x):
        x = self.second(functional.pad(self.first(x), [0, 1, 0, 1]))
        return self.third(functional.pad(x, [1, 0, 1, 0]))


class PaddedNet(nn.Module):
    def __init__(self, channels: int = 4):
        super().__init__()
        self.stem = PaddingStem(channels)
        self.head = nn.Conv2d(channels, 2, 1)

    def forward(self, pixels):
        return self.head(self.stem(pixels))


def _tokens() -> dict[str, torch.Tensor]:
    return {"ids": torch.tensor([[3, 5, 7, 0, 0], [1, 2, 3, 4, 0]])}


CASES = {
    "offset_norm": (OffsetNormStack, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "norm_registered_first": (NormFirstStack, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "buffer_waves": (WaveModel, lambda: {"x": torch.randn(2, 5, WIDTH), "positions": torch.rand(2, 5) * 5}),
    "post_norm": (PostNormStack, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "gated_cnn": (GatedCnn, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "counted_positions": (CountedModel, _tokens),
    "maybe_residual": (MaybeResidualStack, lambda: {"x": torch.randn(2, 5, 4)}),
    "weight_norm": (NormedModel, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "folded_norm_twin": (ConvThenTokens, lambda: {"signal": torch.randn(2, 4, 4)}),
    "pad_after_residual": (PaddedStack, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "conv_norm_activation": (ConvNormActivationNet, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "norm_with_activation": (NormActivationNet, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "activation_twice": (TwiceActivatedStack, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "zero_scaled_residual": (ZeroScaledStack, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "zero_scaled_activated": (ZeroScaledActivatedStack, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "merged_scalars": (ScaledConvStack, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
    "constant_padding": (PaddedNet, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
}


@pytest.mark.parametrize("name", CASES)
def test_every_recorded_node_gets_the_recorded_module(name, tmp_path):
    assert_every_recorded_node(measure_case(CASES, name, tmp_path))
