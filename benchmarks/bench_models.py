"""Random-weight models the benchmarks export, as factories ``benchmarks/bench_models.py:NAME``.

Each returns ``(model, inputs)`` with inputs as keywords (batch 2, so torch.export keeps the
batch axis dynamic). Weights are seeded, so a plain export and a tagged export see the same model.
"""

from __future__ import annotations

import os

import torch
import transformers

SEQUENCE = 128
BATCH = 2


def _text_inputs(vocab: int, sequence: int = SEQUENCE) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (BATCH, sequence), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones(BATCH, sequence, dtype=torch.long)}


def _build(config_class: str, model_class: str, **config):
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
    return model.eval()


def tiny_bert():
    model = _build("BertConfig", "BertModel", vocab_size=128, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
    return model, _text_inputs(128, 16)


def bert_base():
    """BERT-base shape: 12 layers, hidden 768, 110 M parameters."""
    return _build("BertConfig", "BertModel"), _text_inputs(30522)


def gpt2_small():
    """GPT-2 small shape: 12 blocks, hidden 768."""
    model = _build("GPT2Config", "GPT2Model", n_layer=12, n_embd=768, n_head=12, use_cache=False)
    return model, _text_inputs(50257)


def llama_small():
    """A LLaMA-like decoder (RMSNorm, rotary, grouped-query attention): 8 layers, hidden 768."""
    model = _build("LlamaConfig", "LlamaModel", vocab_size=32000, hidden_size=768, intermediate_size=2048,
                   num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=4, use_cache=False)
    return model, _text_inputs(32000)


def llama_large():
    """A LLaMA-like decoder of about 0.6 B parameters (2.4 GB in fp32): weights go to external data."""
    model = _build("LlamaConfig", "LlamaModel", vocab_size=32000, hidden_size=1536, intermediate_size=4096,
                   num_hidden_layers=20, num_attention_heads=16, num_key_value_heads=4, use_cache=False)
    return model, _text_inputs(32000, 64)


def scaled_bert():
    """A small BERT whose depth comes from ``BENCH_LAYERS`` (for the scaling run)."""
    layers = int(os.environ.get("BENCH_LAYERS", "2"))
    model = _build("BertConfig", "BertModel", vocab_size=256, hidden_size=64, num_hidden_layers=layers,
                   num_attention_heads=4, intermediate_size=128, max_position_embeddings=128)
    return model, _text_inputs(256, 32)
