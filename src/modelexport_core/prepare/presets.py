"""Tiny random-weight models built from configs, so the tool runs with no network.

Each preset names a transformers config and model class; sizes are small enough that
an export takes a second or two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Preset:
    name: str
    config_class: str
    model_class: str
    config: dict[str, Any] = field(default_factory=dict)
    description: str = ""


_TEXT = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in [
        Preset("bert", "BertConfig", "BertModel", dict(_TEXT, max_position_embeddings=64), "BERT encoder, 2 layers"),
        Preset(
            "gpt2",
            "GPT2Config",
            "GPT2Model",
            dict(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False, bos_token_id=0, eos_token_id=0),
            "GPT-2 decoder, 2 blocks",
        ),
        Preset(
            "vit",
            "ViTConfig",
            "ViTModel",
            dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=37),
            "Vision Transformer, 32x32 images, 2 layers",
        ),
        Preset(
            "llama",
            "LlamaConfig",
            "LlamaModel",
            dict(_TEXT, num_key_value_heads=2, max_position_embeddings=64, use_cache=False),
            "LLaMA-like decoder (RMSNorm, rotary, grouped-query attention), 2 layers",
        ),
        Preset(
            "t5",
            "T5Config",
            "T5Model",
            dict(vocab_size=128, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2, num_heads=4,
                 use_cache=False),
            "T5 encoder-decoder, 2+2 layers",
        ),
    ]
}


def build_preset(name: str, seed: int = 0) -> "torch.nn.Module":
    """The preset's model with random weights (deterministic for a given seed)."""
    import torch
    import transformers

    preset = PRESETS[name]
    config = getattr(transformers, preset.config_class)(**preset.config)
    torch.manual_seed(seed)
    model = getattr(transformers, preset.model_class)(config)
    return model.eval()
