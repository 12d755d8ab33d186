"""Tiny models for the tools' tests: an encoder fed a mask, and a small CNN. Random weights, no network."""

from __future__ import annotations


def bert_with_mask():
    """A 2-layer BERT-family encoder called with input_ids and an attention mask with padding."""
    import torch
    import transformers

    config = transformers.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=37, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, 128, (2, 8), generator=generator)
    attention_mask = torch.ones(2, 8, dtype=torch.int64)
    attention_mask[1, 6:] = 0
    return model, {"input_ids": input_ids, "attention_mask": attention_mask}


def small_resnet():
    """A transformers ResNet with two stages of one basic block each, on 2 images of 32x32."""
    import torch
    import transformers

    config = transformers.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                       layer_type="basic")
    torch.manual_seed(0)
    model = transformers.ResNetModel(config).eval()
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    return model, {"pixel_values": pixels}
