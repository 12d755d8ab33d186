"""Extra models for the htp tests: patterns the core's HARD_CASES do not cover.

Each factory returns ``(model, inputs)``, like ``modelexport_core.testing.HARD_CASES``.
"""

from __future__ import annotations

import torch
from torch import nn


class ConvBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x))) + x


class ConvNet(nn.Module):
    """Conv + batch-norm blocks (which the exporter fuses) in a Sequential, pooling, a head."""

    def __init__(self, channels: int = 8, depth: int = 3):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.stages = nn.Sequential(*[ConvBlock(channels) for _ in range(depth)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(channels, 5)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(self.pool(x), 1))


class CrossBlock(nn.Module):
    """Reads the shape of a tensor every block shares, so the exporter may merge those computations."""

    def __init__(self, width: int, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, memory):
        batch, length, width = memory.shape
        k, v = self.kv(memory).chunk(2, dim=-1)
        q = self.q(x).view(x.shape[0], -1, self.heads, width // self.heads).transpose(1, 2)
        k = k.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)
        v = v.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / (width // self.heads) ** 0.5
        mixed = scores.softmax(-1) @ v
        return x + self.out(mixed.transpose(1, 2).reshape(x.shape[0], -1, width))


class CrossStack(nn.Module):
    """Identical cross blocks reading one shared memory; a root parameter and root ops between blocks."""

    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.memory_proj = nn.Linear(width, width)
        self.blocks = nn.ModuleList([CrossBlock(width) for _ in range(depth)])
        self.gain = nn.Parameter(torch.linspace(0.9, 1.1, width))

    def forward(self, x, memory):
        memory = torch.tanh(self.memory_proj(memory))
        for block in self.blocks:
            x = block(x, memory) * self.gain
        return x.mean(dim=1)


class InPlace(nn.Module):
    """In-place updates, a buffer, masked_fill and an inplace ReLU inside identical layers."""

    def __init__(self, width: int = 16, depth: int = 2):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.acts = nn.ModuleList([nn.ReLU(inplace=True) for _ in range(depth)])
        self.register_buffer("offset", torch.linspace(-1.0, 1.0, width))

    def forward(self, x):
        for layer, act in zip(self.layers, self.acts):
            y = layer(x)
            y.add_(self.offset)
            y = act(y)
            x = x + y.masked_fill(y > 1.5, 1.5)
        return x


class Recurrent(nn.Module):
    """A GRU, split/chunk outputs and a gather at the root."""

    def __init__(self, width: int = 12):
        super().__init__()
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.left = nn.Linear(width // 2, 3)
        self.right = nn.Linear(width // 2, 3)

    def forward(self, x):
        out, _ = self.rnn(x)
        a, b = out.split(out.shape[-1] // 2, dim=-1)
        scores = self.left(a) + self.right(b)
        index = scores.argmax(dim=-1, keepdim=True)
        return torch.gather(scores, -1, index).squeeze(-1).cumsum(dim=-1)


class TorchLayers(nn.Module):
    """torch.nn.TransformerEncoder layers: two identical torch-only blocks, a root projection."""

    def __init__(self, width: int = 16):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, 2, dim_feedforward=24, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.proj = nn.Linear(width, 4)

    def forward(self, x):
        return self.proj(self.body(x))


class IdenticalSiblings(nn.Module):
    """Three blocks with the very same weights in a ModuleList: values alone cannot tell them apart."""

    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList([CrossBlock(width) for _ in range(depth)])
        for block in self.blocks[1:]:
            block.load_state_dict(self.blocks[0].state_dict())

    def forward(self, x):
        for block in self.blocks:
            x = block(x, x)
        return x


class PatchEmbed(nn.Module):
    """Returns its output with the height and width it read from the output's shape."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.proj = nn.Conv2d(3, channels, 2, stride=2)

    def forward(self, pixels):
        features = self.proj(pixels)
        _, _, height, width = features.shape
        return features.flatten(2).transpose(1, 2), height, width


class GridMixer(nn.Module):
    """Uses the height and width it is given to fold tokens back into a grid."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, tokens, height, width):
        grid = tokens.transpose(1, 2).reshape(tokens.shape[0], -1, height, width)
        return tokens + self.conv(grid).flatten(2).transpose(1, 2)


class ParentCode(nn.Module):
    """Shape reads and a mask built in the root's own forward, used only by the children."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.embed = PatchEmbed(channels)
        self.mixers = nn.ModuleList([GridMixer(channels) for _ in range(2)])
        self.head = nn.Linear(channels, 3)

    def forward(self, pixels):
        tokens, height, width = self.embed(pixels)
        keep = (torch.arange(tokens.shape[1]) % 2 == 0).to(tokens.dtype)[None, :, None]
        for mixer in self.mixers:
            tokens = mixer(tokens * keep, height, width)
        return self.head(tokens.mean(dim=1))


class FadingConvs(nn.Module):
    """Conv + batch-norm blocks with tiny norm weights: activations fade to exact zeros after a few blocks."""

    def __init__(self, channels: int = 8, depth: int = 8):
        super().__init__()
        self.stages = nn.Sequential(*[ConvBlock(channels) for _ in range(depth)])
        for block in self.stages:
            nn.init.constant_(block.bn.weight, 1e-4)
            block.forward = lambda x, block=block: block.act(block.bn(block.conv(x)))
        self.head = nn.Linear(channels, 4)

    def forward(self, x):
        return self.head(self.stages(x).mean(dim=(2, 3)))


def _seeded(factory, *inputs):
    torch.manual_seed(0)
    model = factory().eval()
    generator = torch.Generator().manual_seed(1)
    return model, {name: torch.randn(*shape, generator=generator) for name, shape in inputs}


def conv_net():
    return _seeded(ConvNet, ("x", (2, 3, 8, 8)))


def cross_stack():
    return _seeded(CrossStack, ("x", (2, 5, 16)), ("memory", (2, 7, 16)))


def in_place():
    return _seeded(InPlace, ("x", (2, 4, 16)))


def recurrent():
    return _seeded(Recurrent, ("x", (2, 6, 12)))


def torch_layers():
    return _seeded(TorchLayers, ("x", (2, 6, 16)))


def identical_siblings():
    return _seeded(IdenticalSiblings, ("x", (2, 5, 16)))


def parent_code():
    return _seeded(ParentCode, ("pixels", (2, 3, 8, 8)))


def fading_convs():
    return _seeded(FadingConvs, ("x", (2, 8, 8, 8)))


def _transformers_model(config_class: str, model_class: str, **config):
    import transformers

    from modelexport_core.prepare.inputs import inputs_from_config

    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config)).eval()
    if "image_size" in config:
        generator = torch.Generator().manual_seed(0)
        size = config["image_size"]
        return model, {"pixel_values": torch.randn(2, 3, size, size, generator=generator)}
    return model, inputs_from_config(model)


_TEXT = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64)

# More architectures from transformers configs, beyond the core's presets.
ARCHITECTURES = {
    "opt": lambda: _transformers_model("OPTConfig", "OPTModel", vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, ffn_dim=37, max_position_embeddings=64,
                                       word_embed_proj_dim=32),
    "qwen2": lambda: _transformers_model("Qwen2Config", "Qwen2Model", num_key_value_heads=2, **_TEXT),
    "gpt_neo": lambda: _transformers_model("GPTNeoConfig", "GPTNeoModel", vocab_size=128, hidden_size=32, num_layers=2,
                                           num_heads=4, attention_types=[[["global", "local"], 1]],
                                           max_position_embeddings=64, window_size=4, bos_token_id=0, eos_token_id=0),
    "windowed": lambda: _transformers_model("SwinConfig", "SwinModel", image_size=32, patch_size=2, embed_dim=8,
                                            depths=[2, 2], num_heads=[2, 2], window_size=4, mlp_ratio=1.0),
    "conv_stages": lambda: _transformers_model("ResNetConfig", "ResNetModel", num_channels=3, embedding_size=8,
                                               hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", image_size=32),
}


CUSTOM_CASES: dict = {
    "conv_net": conv_net,
    "cross_stack": cross_stack,
    "in_place": in_place,
    "recurrent": recurrent,
    "torch_layers": torch_layers,
    "identical_siblings": identical_siblings,
    "parent_code": parent_code,
    "fading_convs": fading_convs,
}
