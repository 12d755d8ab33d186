"""A zoo of real architectures built from configs with random weights, for the sweep and the tests.

Every entry builds a small model (2 layers, hidden 32-64, images of 32-64 px) and its example
inputs at a given batch size, seeded and deterministic; nothing downloads. ``load(name, batch)``
returns a :class:`modelexport_core.prepare.models.LoadedModel` for ``export_model`` and ``compare_strategies``.

    .venv/bin/python benchmarks/zoo.py            # list the zoo
    .venv/bin/python benchmarks/zoo.py --check    # build and run every model at batch 1 and 2
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vision_shim  # noqa: E402

vision_shim.apply()  # where torchvision is installed (the benchmark environment), before transformers imports it

if TYPE_CHECKING:
    import torch
    from torch import nn

    from modelexport_core.prepare.models import LoadedModel

FAMILIES = ("encoder", "decoder", "encoder-decoder", "vision", "audio", "moe", "cnn", "rnn", "custom")
SEED = 0
SEQUENCE = 8  # token inputs
DECODER_SEQUENCE = 4  # decoder_input_ids of encoder-decoder models
VOCAB = 128

Inputs = dict[str, "torch.Tensor"]
Builder = Callable[[int], tuple["nn.Module", Inputs]]


@dataclass(frozen=True)
class ZooModel:
    """One architecture of the zoo: ``build(batch)`` gives ``(model in eval mode, inputs by name)``."""

    name: str
    family: str
    build: Builder
    description: str = ""
    quick: bool = False  # part of the small subset the test suite runs


def _generator(offset: int = 0) -> "torch.Generator":
    import torch

    return torch.Generator().manual_seed(SEED + offset)


def _token_ids(batch: int, length: int = SEQUENCE, vocab: int = VOCAB, offset: int = 0) -> "torch.Tensor":
    import torch

    # ids from 3 upwards: 0-2 are the pad/bos/eos ids of the configs below
    return torch.randint(3, vocab, (batch, length), generator=_generator(offset))


def _padded_mask(batch: int, length: int = SEQUENCE) -> "torch.Tensor":
    """Ones, with the last row padded at its last two positions (so batch 1 is padded too)."""
    import torch

    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, -2:] = 0
    return mask


def text_inputs(batch: int, with_mask: bool = True, token_type_ids: bool = False) -> Inputs:
    ids = _token_ids(batch)
    inputs = {"input_ids": ids}
    if with_mask:
        mask = _padded_mask(batch)
        ids[mask == 0] = 0  # pad id under the padding
        inputs["attention_mask"] = mask
    if token_type_ids:
        import torch

        inputs["token_type_ids"] = torch.zeros_like(ids)
    return inputs


def seq2seq_inputs(batch: int) -> Inputs:
    inputs = text_inputs(batch)
    inputs["decoder_input_ids"] = _token_ids(batch, DECODER_SEQUENCE, offset=1)
    return inputs


def image_inputs(batch: int, size: int = 32, channels: int = 3) -> Inputs:
    import torch

    return {"pixel_values": torch.randn(batch, channels, size, size, generator=_generator())}


def _transformers_model(
    config_class: str, model_class: str, config: dict[str, Any], inputs: Callable[[int], Inputs]
) -> Builder:
    """A builder for ``transformers.<model_class>(transformers.<config_class>(**config))``."""

    def build(batch: int) -> tuple["nn.Module", Inputs]:
        import torch
        import transformers

        cfg = getattr(transformers, config_class)(**config)
        torch.manual_seed(SEED)
        model = getattr(transformers, model_class)(cfg).eval()
        return model, inputs(batch)

    return build


def _text(**extra: Any) -> Callable[[int], Inputs]:
    return lambda batch: text_inputs(batch, **extra)


def _long_text(length: int) -> Callable[[int], Inputs]:
    """Token ids and a mask of ``length`` tokens (block-sparse attention needs several blocks)."""

    def inputs(batch: int) -> Inputs:
        ids = _token_ids(batch, length)
        mask = _padded_mask(batch, length)
        ids[mask == 0] = 0
        return {"input_ids": ids, "attention_mask": mask}

    return inputs


def _with_global_tokens(inputs: Callable[[int], Inputs]) -> Callable[[int], Inputs]:
    """``inputs`` and a ``global_attention_mask`` that makes the first token attend globally."""

    def with_global(batch: int) -> Inputs:
        import torch

        made = inputs(batch)
        global_mask = torch.zeros_like(made["input_ids"])
        global_mask[:, 0] = 1
        return {**made, "global_attention_mask": global_mask}

    return with_global


def _images(size: int = 32) -> Callable[[int], Inputs]:
    return lambda batch: image_inputs(batch, size)


_BERTLIKE = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                 max_position_embeddings=64, pad_token_id=0)
_DECODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                num_key_value_heads=2, max_position_embeddings=64, use_cache=False, pad_token_id=0, bos_token_id=1,
                eos_token_id=2)


# ---------------------------------------------------------------------------------------------------------------
# Hand-written models: LSTM/GRU, a DenseNet-like CNN, and small custom cases of tagging.


def _custom_classes() -> dict[str, type]:
    import torch
    from torch import nn

    class LSTMTagger(nn.Module):
        """Embedding, LSTM, a linear tag head per token."""

        def __init__(self, vocab: int = 64, width: int = 16, hidden: int = 32, tags: int = 5, bidirectional: bool = False):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.lstm = nn.LSTM(width, hidden, batch_first=True, bidirectional=bidirectional)
            self.head = nn.Linear(hidden * (2 if bidirectional else 1), tags)

        def forward(self, input_ids):
            states, _ = self.lstm(self.embed(input_ids))
            return self.head(states)

    class GRUClassifier(nn.Module):
        """A two-layer GRU over float features, classifying from the last step."""

        def __init__(self, features: int = 8, hidden: int = 32, classes: int = 3):
            super().__init__()
            self.gru = nn.GRU(features, hidden, num_layers=2, batch_first=True)
            self.classifier = nn.Linear(hidden, classes)

        def forward(self, x):
            states, _ = self.gru(x)
            return self.classifier(states[:, -1])

    class DenseLayer(nn.Module):
        def __init__(self, channels: int, growth: int):
            super().__init__()
            self.norm = nn.BatchNorm2d(channels)
            self.conv = nn.Conv2d(channels, growth, 3, padding=1, bias=False)

        def forward(self, x):
            return torch.cat([x, self.conv(torch.relu(self.norm(x)))], dim=1)

    class Transition(nn.Module):
        def __init__(self, channels: int, out: int):
            super().__init__()
            self.norm = nn.BatchNorm2d(channels)
            self.conv = nn.Conv2d(channels, out, 1, bias=False)

        def forward(self, x):
            return nn.functional.avg_pool2d(self.conv(torch.relu(self.norm(x))), 2)

    class DenseNetLike(nn.Module):
        """A stem, two dense blocks of two BatchNorm-ReLU-Conv layers, a transition, a classifier."""

        def __init__(self, growth: int = 8, classes: int = 10):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            channels = 16
            blocks: list[nn.Module] = []
            for i in range(2):
                layers = []
                for _ in range(2):
                    layers.append(DenseLayer(channels, growth))
                    channels += growth
                blocks.append(nn.Sequential(*layers))
                if i == 0:
                    blocks.append(Transition(channels, channels // 2))
                    channels //= 2
            self.features = nn.Sequential(*blocks)
            self.norm = nn.BatchNorm2d(channels)
            self.classifier = nn.Linear(channels, classes)

        def forward(self, pixel_values):
            x = torch.relu(self.norm(self.features(self.stem(pixel_values))))
            return self.classifier(x.mean(dim=(2, 3)))

    class NoSubmodules(nn.Module):
        """A model with no submodules at all: torch ops on its own parameters."""

        def __init__(self, width: int = 16):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(width, width) / width**0.5)
            self.bias = nn.Parameter(torch.zeros(width))
            self.scale = nn.Parameter(torch.ones(width))

        def forward(self, x):
            h = torch.tanh(x @ self.weight + self.bias)
            return (h * self.scale).softmax(dim=-1)

    class MLPBlock(nn.Module):
        def __init__(self, width: int):
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.up = nn.Linear(width, width * 2)
            self.down = nn.Linear(width * 2, width)

        def forward(self, x):
            return x + self.down(torch.relu(self.up(self.norm(x))))

    class ReusedBlock(nn.Module):
        """One block instance called twice, then a head."""

        def __init__(self, width: int = 16):
            super().__init__()
            self.block = MLPBlock(width)
            self.head = nn.Linear(width, 4)

        def forward(self, x):
            return self.head(self.block(self.block(x)))

    class IdenticalSiblings(nn.Module):
        """Two blocks in a ModuleList carrying identical weights, applied one after the other."""

        def __init__(self, width: int = 16):
            super().__init__()
            self.blocks = nn.ModuleList([MLPBlock(width) for _ in range(2)])
            self.blocks[1].load_state_dict(self.blocks[0].state_dict())
            self.head = nn.Linear(width, 4)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    class RootOps(nn.Module):
        """Operations in the root's own forward: scaling, a residual, a mask, a reduction."""

        def __init__(self, width: int = 16):
            super().__init__()
            self.inp = nn.Linear(width, width)
            self.blocks = nn.ModuleList([MLPBlock(width) for _ in range(2)])
            self.out = nn.Linear(width, 4)

        def forward(self, x):
            h = self.inp(x * 2.0)
            skip = h
            for block in self.blocks:
                h = block(h)
            h = h + skip
            keep = (x.abs().sum(dim=-1, keepdim=True) > 0).to(h.dtype)
            return self.out(h * keep).mean(dim=1)

    return {cls.__name__: cls for cls in (LSTMTagger, GRUClassifier, DenseNetLike, NoSubmodules, ReusedBlock,
                                          IdenticalSiblings, RootOps)}


def _custom_model(class_name: str, inputs: Callable[[int], Inputs], **kwargs: Any) -> Builder:
    def build(batch: int) -> tuple["nn.Module", Inputs]:
        import torch

        torch.manual_seed(SEED)
        return _custom_classes()[class_name](**kwargs).eval(), inputs(batch)

    return build


def _float_sequence(length: int = 5, width: int = 16) -> Callable[[int], Inputs]:
    def inputs(batch: int) -> Inputs:
        import torch

        return {"x": torch.randn(batch, length, width, generator=_generator())}

    return inputs


def _float_vector(width: int = 16) -> Callable[[int], Inputs]:
    def inputs(batch: int) -> Inputs:
        import torch

        return {"x": torch.randn(batch, width, generator=_generator())}

    return inputs


def _ids(vocab: int = 64, length: int = 10) -> Callable[[int], Inputs]:
    return lambda batch: {"input_ids": _token_ids(batch, length, vocab)}


def _whisper_inputs(batch: int) -> Inputs:
    import torch

    return {
        "input_features": torch.randn(batch, 16, 32, generator=_generator()),  # mel bins x 2 * max_source_positions
        "decoder_input_ids": _token_ids(batch, DECODER_SEQUENCE, offset=1),
    }


def _audio_inputs(batch: int) -> Inputs:
    import torch

    return {"input_values": torch.randn(batch, 400, generator=_generator())}


def _entries() -> list[ZooModel]:
    tf = _transformers_model
    return [
        # encoders, all given input_ids and an attention_mask with a padded row
        ZooModel("bert", "encoder", tf("BertConfig", "BertModel", _BERTLIKE, _text()), "BERT, 2 layers, hidden 32",
                 quick=True),
        ZooModel("roberta", "encoder", tf("RobertaConfig", "RobertaModel", dict(_BERTLIKE, pad_token_id=1), _text()),
                 "RoBERTa"),
        ZooModel("albert", "encoder", tf("AlbertConfig", "AlbertModel", dict(_BERTLIKE, embedding_size=16), _text()),
                 "ALBERT (one layer's weights shared by both layers)"),
        ZooModel("electra", "encoder", tf("ElectraConfig", "ElectraModel", dict(_BERTLIKE, embedding_size=16),
                                         _text()), "ELECTRA discriminator"),
        ZooModel("distilbert", "encoder",
                 tf("DistilBertConfig", "DistilBertModel",
                    dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64,
                         pad_token_id=0), _text()), "DistilBERT"),
        ZooModel("mobilebert", "encoder",
                 tf("MobileBertConfig", "MobileBertModel",
                    dict(_BERTLIKE, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
                         num_feedforward_networks=2), _text()), "MobileBERT (bottlenecks, stacked FFNs)"),
        ZooModel("clip_text", "encoder",
                 tf("CLIPTextConfig", "CLIPTextModel",
                    dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=64, projection_dim=32, pad_token_id=0,
                         bos_token_id=1, eos_token_id=2), _text()), "CLIP text tower (causal mask, pooled at eos)"),
        ZooModel("deberta_v2", "encoder",
                 tf("DebertaV2Config", "DebertaV2Model",
                    dict(_BERTLIKE, relative_attention=True, position_buckets=16, max_relative_positions=32,
                         pos_att_type=["p2c", "c2p"]), _text()), "DeBERTa-v2 (disentangled relative attention)"),
        # decoders
        ZooModel("gpt2", "decoder",
                 tf("GPT2Config", "GPT2Model",
                    dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False,
                         bos_token_id=1, eos_token_id=2), _text()), "GPT-2, given a padded attention_mask", quick=True),
        ZooModel("llama", "decoder", tf("LlamaConfig", "LlamaModel", _DECODER, _text()),
                 "LLaMA (RMSNorm, rotary, grouped-query attention), padded attention_mask"),
        ZooModel("mistral", "decoder", tf("MistralConfig", "MistralModel", dict(_DECODER, sliding_window=4),
                                         _text(with_mask=False)), "Mistral (sliding window 4)"),
        ZooModel("qwen2", "decoder", tf("Qwen2Config", "Qwen2Model", _DECODER, _text(with_mask=False)),
                 "Qwen2 (qkv bias)"),
        ZooModel("gemma", "decoder", tf("GemmaConfig", "GemmaModel", dict(_DECODER, head_dim=8),
                                       _text(with_mask=False)), "Gemma (scaled embeddings, GeGLU)"),
        ZooModel("falcon", "decoder",
                 tf("FalconConfig", "FalconModel",
                    dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         use_cache=False, bos_token_id=1, eos_token_id=2), _text(with_mask=False)),
                 "Falcon (multi-query, parallel attention and MLP)"),
        ZooModel("phi", "decoder",
                 tf("PhiConfig", "PhiModel",
                    dict(_DECODER, num_key_value_heads=4, partial_rotary_factor=0.5), _text(with_mask=False)),
                 "Phi (partial rotary, parallel blocks)"),
        # mixture of experts
        ZooModel("mixtral", "moe",
                 tf("MixtralConfig", "MixtralModel", dict(_DECODER, intermediate_size=48, num_local_experts=4, num_experts_per_tok=2),
                    _text(with_mask=False)), "Mixtral-like: 4 experts, top-2 routing (grouped_mm needs 16-byte strides: intermediate 48)"),
        ZooModel("qwen2_moe", "moe",
                 tf("Qwen2MoeConfig", "Qwen2MoeModel",
                    dict(_DECODER, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                         shared_expert_intermediate_size=16, decoder_sparse_step=1), _text(with_mask=False)),
                 "Qwen2-MoE: 4 routed experts and a shared expert"),
        ZooModel("switch_transformers", "moe",
                 tf("SwitchTransformersConfig", "SwitchTransformersModel",
                    dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2,
                         num_heads=4, num_experts=4, encoder_sparse_step=1, decoder_sparse_step=1, use_cache=False,
                         pad_token_id=0, decoder_start_token_id=0), seq2seq_inputs),
                 "Switch Transformers: top-1 switch routing to 4 experts in every layer, encoder and decoder"),
        # long-sequence attention
        ZooModel("big_bird", "encoder",
                 tf("BigBirdConfig", "BigBirdModel",
                    dict(_BERTLIKE, attention_type="block_sparse", block_size=4, num_random_blocks=1),
                    _long_text(32)),
                 "BigBird: block-sparse attention (blocks of 4, one random block), 32 tokens"),
        ZooModel("longformer", "encoder",
                 tf("LongformerConfig", "LongformerModel", dict(_BERTLIKE, attention_window=4, pad_token_id=1),
                    _with_global_tokens(_text())),
                 "Longformer: sliding-window attention (window 4) with a global first token"),
        ZooModel("led", "encoder-decoder",
                 tf("LEDConfig", "LEDModel",
                    dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, attention_window=4,
                         max_encoder_position_embeddings=64, max_decoder_position_embeddings=64, use_cache=False,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2),
                    _with_global_tokens(seq2seq_inputs)),
                 "LED: Longformer's sliding-window encoder with a global first token, BART-like decoder"),
        ZooModel("mamba2", "decoder",
                 tf("Mamba2Config", "Mamba2Model",
                    dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, state_size=16, expand=2, head_dim=8,
                         num_heads=8, n_groups=1, chunk_size=4, use_cache=False, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2), _text(with_mask=False)),
                 "Mamba2: chunked state-space scan (chunks of 4), no attention"),
        # encoder-decoders
        ZooModel("t5", "encoder-decoder",
                 tf("T5Config", "T5Model",
                    dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2,
                         num_heads=4, use_cache=False, pad_token_id=0, decoder_start_token_id=0), seq2seq_inputs),
                 "T5 (relative position buckets)"),
        ZooModel("bart", "encoder-decoder",
                 tf("BartConfig", "BartModel",
                    dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37,
                         max_position_embeddings=64, use_cache=False, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, decoder_start_token_id=2), seq2seq_inputs), "BART"),
        # audio
        ZooModel("whisper", "audio",
                 tf("WhisperConfig", "WhisperModel",
                    dict(vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
                         encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37,
                         decoder_ffn_dim=37, max_source_positions=16, max_target_positions=32, use_cache=False,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1),
                    _whisper_inputs), "Whisper-like: conv front end, encoder, decoder (input_features)"),
        ZooModel("wav2vec2", "audio",
                 tf("Wav2Vec2Config", "Wav2Vec2Model",
                    dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                         conv_dim=(16, 16, 16), conv_kernel=(10, 3, 3), conv_stride=(5, 2, 2),
                         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, mask_time_prob=0.0),
                    _audio_inputs), "wav2vec2-like: conv feature encoder, conv positions, 2 layers"),
        # vision transformers
        ZooModel("vit", "vision",
                 tf("ViTConfig", "ViTModel",
                    dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37), _images()), "ViT, 32 px, patch 8", quick=True),
        ZooModel("swin", "vision",
                 tf("SwinConfig", "SwinModel",
                    dict(image_size=64, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4,
                         mlp_ratio=2.0), _images(64)), "Swin: shifted-window attention, 2 stages, 64 px"),
        ZooModel("mobilevit", "vision",
                 tf("MobileViTConfig", "MobileViTModel",
                    dict(image_size=64, patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24,
                                                                                                 24, 48],
                         num_attention_heads=2, mlp_ratio=2.0), _images(64)), "MobileViT, 64 px"),
        ZooModel("segformer", "vision",
                 tf("SegformerConfig", "SegformerModel",
                    dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                         patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                         decoder_hidden_size=32), _images(64)), "Segformer encoder (efficient attention), 64 px"),
        ZooModel("convnext", "vision",
                 tf("ConvNextConfig", "ConvNextModel",
                    dict(num_stages=2, hidden_sizes=[16, 32], depths=[2, 2]), _images()), "ConvNeXt, 2 stages"),
        # BatchNorm CNNs
        ZooModel("resnet", "cnn",
                 tf("ResNetConfig", "ResNetModel",
                    dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"), _images()),
                 "ResNet (basic blocks, BatchNorm)", quick=True),
        ZooModel("efficientnet", "cnn",
                 tf("EfficientNetConfig", "EfficientNetModel",
                    dict(image_size=32, hidden_dim=1280, in_channels=[32, 16], out_channels=[16, 24],
                         kernel_sizes=[3, 5], strides=[1, 2], num_block_repeats=[1, 1], expand_ratios=[1, 6],
                         depthwise_padding=[], width_coefficient=1.0, depth_coefficient=1.0), _images()),
                 "EfficientNet (squeeze-excitation, BatchNorm), 2 stages"),
        ZooModel("mobilenet_v2", "cnn",
                 tf("MobileNetV2Config", "MobileNetV2Model", dict(image_size=32, depth_multiplier=0.25), _images()),
                 "MobileNetV2 (inverted residuals, BatchNorm), width 0.25"),
        ZooModel("regnet", "cnn",
                 tf("RegNetConfig", "RegNetModel",
                    dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8), _images()),
                 "RegNet (grouped convs, squeeze-excitation free Y-block)"),
        ZooModel("densenet_like", "cnn", _custom_model("DenseNetLike", _images()),
                 "hand-written DenseNet-like: dense blocks of BatchNorm-ReLU-Conv, a transition"),
        # recurrent
        ZooModel("lstm_tagger", "rnn", _custom_model("LSTMTagger", _ids()), "embedding + LSTM + linear per token",
                 quick=True),
        ZooModel("bilstm_tagger", "rnn", _custom_model("LSTMTagger", _ids(), bidirectional=True),
                 "embedding + bidirectional LSTM + linear"),
        ZooModel("gru_classifier", "rnn", _custom_model("GRUClassifier", _float_sequence(10, 8)),
                 "2-layer GRU over float features, linear on the last step"),
        # custom
        ZooModel("no_submodules", "custom", _custom_model("NoSubmodules", _float_vector()),
                 "no submodules: torch ops on the root's own parameters", quick=True),
        ZooModel("reused_block", "custom", _custom_model("ReusedBlock", _float_sequence()),
                 "one block instance called twice"),
        ZooModel("identical_siblings", "custom", _custom_model("IdenticalSiblings", _float_sequence()),
                 "two sibling blocks with identical weights"),
        ZooModel("root_ops", "custom", _custom_model("RootOps", _float_sequence()),
                 "scaling, residual and masking in the root's own forward"),
    ]


ZOO: dict[str, ZooModel] = {entry.name: entry for entry in _entries()}
QUICK: list[str] = [name for name, entry in ZOO.items() if entry.quick]


def build(name: str, batch: int) -> tuple["nn.Module", Inputs]:
    """The zoo model ``name`` and its inputs at ``batch``."""
    if name not in ZOO:
        raise KeyError(f"no zoo model {name!r}; the zoo has {', '.join(ZOO)}")
    return ZOO[name].build(batch)


def load(name: str, batch: int) -> "LoadedModel":
    """The zoo model as the core loads a factory: inputs given by keyword."""
    from modelexport_core.prepare.models import LoadedModel

    model, inputs = build(name, batch)
    return LoadedModel(model, f"zoo:{name}", "factory", inputs=inputs, by_keyword=True)


def run_in_torch(name: str, batch: int) -> Any:
    """Build and run the model once in PyTorch (the check that the entry is sound)."""
    import torch

    model, inputs = build(name, batch)
    with torch.no_grad():
        return model(**inputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="List the zoo, or build and run its models in PyTorch.")
    parser.add_argument("--check", action="store_true", help="run every model at batch 1 and 2")
    parser.add_argument("--only", default="", help="comma-separated names")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(ZOO)
    failed = 0
    for name in names:
        entry = ZOO[name]
        status = ""
        if args.check:
            import time

            started = time.perf_counter()
            try:
                for batch in (1, 2):
                    run_in_torch(name, batch)
                model, _ = build(name, 1)
                params = sum(p.numel() for p in model.parameters())
                status = f"ok  {params:>7} params  {time.perf_counter() - started:5.2f} s"
            except Exception as error:  # report every broken entry, not only the first
                failed += 1
                status = f"FAILED {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        print(f"{name:20} {entry.family:16} {'quick' if entry.quick else '':6} {status or entry.description}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
