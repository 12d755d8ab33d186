"""Per-node tags of usage_based's own export where only the order of the graph tells the module.

Exporters write nodes in the order they ran, and one call runs from its start to its
return. Each small model here holds a pattern real architectures have, where data flow
alone leaves the module open: a stack that builds its own mask from an input of the whole
model, a block building a mask from the size of its input for the attention it calls, a
caller restoring the shape it measured before a child worked on flat tokens, lookups numbering positions either in the
caller or themselves, activations of a class a model library defines, equal zero biases
in a norm and the layer after it, a pooling transition between unlike blocks, two
parameter-free helpers applied in turn, a module wrapping one convolution that lays its
tokens out as an image, a downsampling regrouping what the last block returned, and a post-norm layer adding its sublayer's result
to the sublayer's own input.
Every recorded node must get the module PyTorch recorded.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional
from usage_based_support import assert_every_recorded_node, measure_case

WIDTH = 8


class MaskedLayer(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.query = nn.Linear(width, width)
        self.proj = nn.Linear(width, width)

    def forward(self, x, bias):
        scores = self.query(x) @ x.transpose(1, 2) + bias
        return x + self.proj(scores.softmax(-1) @ x)


class MaskingStack(nn.Module):
    """Projects its input, then builds the additive mask its layers read from the model's ``keep`` input."""

    def __init__(self, width: int):
        super().__init__()
        self.entry = nn.Linear(width, width)
        self.layers = nn.ModuleList(MaskedLayer(width) for _ in range(2))

    def forward(self, x, keep):
        hidden = self.entry(x)
        bias = (1.0 - keep[:, None, :].to(hidden.dtype)) * -1e4
        for layer in self.layers:
            hidden = layer(hidden, bias)
        return hidden


class TwoMaskingStacks(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.first = MaskingStack(width)
        self.second = MaskingStack(width)

    def forward(self, x, keep):
        return self.second(self.first(x, keep), keep)


class DistanceAttention(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.query = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x, bias):
        scores = self.query(x) @ x.transpose(1, 2) + bias
        return self.out(scores.softmax(-1) @ x)


class DistanceBlock(nn.Module):
    """Builds a distance bias from the size of its input; only the attention it calls (given the normed input) reads it."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attention = DistanceAttention(width)

    def forward(self, x):
        normed = self.norm(x)
        positions = torch.arange(x.shape[1], device=x.device)
        bias = (positions[None, :] - positions[:, None]).abs().to(x.dtype) * -0.5
        return x + self.attention(normed, bias)


class DistanceStack(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.blocks = nn.ModuleList(DistanceBlock(width) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class FlatProjection(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, tokens):
        return self.down(torch.relu(self.up(tokens)))


class Flattening(nn.Module):
    """Measures its input, flattens the tokens for a child, and restores the shape of what the child returns."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.projection = FlatProjection(width)

    def forward(self, x):
        batch, length, width = x.shape
        tokens = self.norm(x.reshape(-1, width))
        return x + self.projection(tokens).reshape(batch, length, width)


class FlatteningModel(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.entry = nn.Linear(width, width)
        self.flattening = Flattening(width)
        self.exit = nn.Linear(width, width)

    def forward(self, x):
        return self.exit(self.flattening(self.entry(x)))


class PositionTable(nn.Embedding):
    """A position lookup with a forward of its own, given the positions to look up."""

    def forward(self, positions):
        return super().forward(positions)


class CountingTable(nn.Embedding):
    """A position lookup counting the positions itself along the value it is given."""

    def forward(self, like):
        positions = torch.arange(like.shape[1], device=like.device)
        return super().forward(positions + 2)


class TwoWaysOfCounting(nn.Module):
    """One lookup is given positions counted here along the token embeddings; the other counts its own."""

    def __init__(self, vocab: int = 16, width: int = WIDTH):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.given = PositionTable(vocab, width)
        self.counting = CountingTable(vocab + 2, width)
        self.proj = nn.Linear(width, width)

    def forward(self, ids):
        embedded = self.tokens(ids)
        positions = torch.arange(embedded.shape[1], device=ids.device)[None, :].expand(ids.shape[0], -1)
        counted = self.counting(embedded[:, :, 0])
        return self.proj(embedded + self.given(positions) + counted)


class ErfGelu(nn.Module):
    """An activation a model library defines itself (not a torch class)."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class ChannelMix(nn.Module):
    """A depthwise convolution over tokens: transposes them in, convolves, transposes back (its last op a view)."""

    def __init__(self, width: int):
        super().__init__()
        self.conv = nn.Conv1d(width, width, 3, padding=1, groups=width)

    def forward(self, x):
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


class MixingFeedForward(nn.Module):
    """Registered in call order: the activation follows the mixing child, whose last op is a view."""

    def __init__(self, width: int):
        super().__init__()
        self.dense = nn.Linear(width, 2 * width)
        self.mix = ChannelMix(2 * width)
        self.act = ErfGelu()
        self.out = nn.Linear(2 * width, width)

    def forward(self, x):
        return self.out(self.act(self.mix(self.dense(x))))


class PostNormLayerWithActivation(nn.Module):
    """The activation is registered right after the mixing sublayer, whose residual add the layer makes."""

    def __init__(self, width: int):
        super().__init__()
        self.mixing = nn.Linear(width, width)
        self.act = ErfGelu()
        self.mixing_norm = nn.LayerNorm(width)
        self.feed = MixingFeedForward(width)
        self.expand = nn.Linear(width, 2 * width)
        self.reduce = nn.Linear(2 * width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        x = self.mixing_norm(x + self.mixing(x))
        x = self.feed(x)
        return self.norm(x + self.reduce(self.act(self.expand(x))))


class ActivationStack(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.layers = nn.ModuleList(PostNormLayerWithActivation(width) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Trim(nn.Module):
    """Drops the last step a padded convolution adds (a parameter-free module of the model's own)."""

    def forward(self, x):
        return x[:, :, :-1]


class TrimmedConv(nn.Module):
    """A convolution, then two parameter-free helpers in turn: the trim, then the activation."""

    def __init__(self, width: int):
        super().__init__()
        self.conv = nn.Conv1d(width, width, 4, padding=2, groups=2)
        self.trim = Trim()
        self.act = ErfGelu()

    def forward(self, x):
        return self.act(self.trim(self.conv(x.transpose(1, 2)))).transpose(1, 2)


class Sublayer(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.query = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        return self.out((self.query(x) @ x.transpose(1, 2)).softmax(-1) @ x)


class AddThenNormLayer(nn.Module):
    """Adds its sublayer's result to the sublayer's own input, then norms: the add is the layer's."""

    def __init__(self, width: int):
        super().__init__()
        self.sublayer = Sublayer(width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.sublayer(x))


class TrimmedStack(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.entry = nn.Linear(width, width)
        self.position = TrimmedConv(width)
        self.norm = nn.LayerNorm(width)
        self.layers = nn.ModuleList(AddThenNormLayer(width) for _ in range(2))

    def forward(self, x):
        x = self.entry(x)
        x = self.norm(x + self.position(x))
        for layer in self.layers:
            x = layer(x)
        return x


class TokensAsImage(nn.Module):
    """Wraps one convolution: lays the tokens it is given out as an image, convolves, and back to tokens."""

    def __init__(self, width: int):
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3, padding=1, groups=width)

    def forward(self, tokens, height: int, width: int):
        batch, _, channels = tokens.shape
        image = tokens.transpose(1, 2).reshape(batch, channels, height, width)
        return self.conv(image).flatten(2).transpose(1, 2)


class ImageMixFeedForward(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.dense = nn.Linear(width, 2 * width)
        self.mix = TokensAsImage(2 * width)
        self.out = nn.Linear(2 * width, width)

    def forward(self, tokens):
        return self.out(self.mix(self.dense(tokens), 2, 3))


class ResidualBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mix = nn.Linear(width, width)

    def forward(self, x):
        return x + self.mix(self.norm(x))


class PairMerging(nn.Module):
    """Regroups neighbouring tokens in pairs (slices and a concatenation), then norms and reduces them."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(2 * width)
        self.reduction = nn.Linear(2 * width, width)

    def forward(self, x):
        return self.reduction(self.norm(torch.cat([x[:, 0::2], x[:, 1::2]], dim=-1)))


class MergingStage(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.blocks = nn.ModuleList(ResidualBlock(width) for _ in range(2))
        self.downsample = PairMerging(width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.downsample(x)


class ScaleShift(nn.Module):
    """``x * weight + bias`` with unit weight and zero bias, like the linear layers' zero biases."""

    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return x * self.weight + self.bias


class ScaledAttention(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        for layer in (self.query, self.key):
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        return (self.query(x) @ self.key(x).transpose(1, 2)).softmax(-1) @ x


class ScaledLayer(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.scale = ScaleShift(width)
        self.attention = ScaledAttention(width)

    def forward(self, x):
        return x + self.attention(self.scale(x))


class ScaledStack(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.layers = nn.ModuleList(ScaledLayer(width) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class DenseUnit(nn.Module):
    def __init__(self, channels: int, growth: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, growth, 3, padding=1)

    def forward(self, x):
        return torch.cat([x, torch.relu(self.conv(x))], 1)


class Transition(nn.Module):
    """A convolution, then a pooling in its own code."""

    def __init__(self, channels: int, out: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, out, 1)

    def forward(self, x):
        return functional.avg_pool2d(self.conv(x), 2)


class UnlikeStages(nn.Module):
    """A sequential of unlike elements: dense units, a pooling transition, dense units."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(DenseUnit(3, 2), Transition(5, 4), DenseUnit(4, 2))
        self.head = nn.Conv2d(6, 2, 1)

    def forward(self, pixels):
        return self.head(self.features(pixels))


CASES = {
    "mask_built_in_stack": (
        TwoMaskingStacks,
        lambda: {"x": torch.randn(2, 5, WIDTH), "keep": torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])},
    ),
    "mask_from_measured_input": (DistanceStack, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "shape_restored_by_measurer": (FlatteningModel, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "positions_counted_here_or_there": (TwoWaysOfCounting, lambda: {"ids": torch.tensor([[3, 5, 7, 1], [1, 2, 3, 4]])}),
    "library_activation": (ActivationStack, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "helpers_in_turn_and_post_norm": (TrimmedStack, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "wrapper_lays_out_its_input": (ImageMixFeedForward, lambda: {"tokens": torch.randn(2, 6, WIDTH)}),
    "result_regrouped_by_next_module": (MergingStage, lambda: {"x": torch.randn(2, 6, WIDTH)}),
    "equal_zero_biases": (ScaledStack, lambda: {"x": torch.randn(2, 5, WIDTH)}),
    "pooling_transition": (UnlikeStages, lambda: {"pixels": torch.randn(2, 3, 8, 8)}),
}


@pytest.mark.parametrize("name", CASES)
def test_every_recorded_node_gets_the_recorded_module(name, tmp_path):
    assert_every_recorded_node(measure_case(CASES, name, tmp_path))
