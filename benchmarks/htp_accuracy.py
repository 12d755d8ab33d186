"""htp's per-node agreement with PyTorch's own scope records on real architectures (random weights, batch 2).

Run: .venv/bin/python benchmarks/htp_accuracy.py [MODEL ...] [--exporter torchscript|dynamo] [--detail]
Prints one line per model (agreement, contaminated nodes) and, with --detail, the
disagreeing nodes grouped by (htp's module, PyTorch's module, op type). Not a test: it
builds about fifteen models from transformers configs and takes a minute or two.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Callable

TEXT = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64)


def _hf(config_class: str, model_class: str, **config) -> Callable[[], tuple]:
    def build():
        import torch
        import transformers

        from modelexport_core.prepare.inputs import inputs_from_config

        torch.manual_seed(0)
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config)).eval()
        if "image_size" in config:
            size = config["image_size"]
            channels = config.get("num_channels", 3)
            return model, {"pixel_values": torch.randn(2, channels, size, size, generator=torch.Generator().manual_seed(0))}
        return model, inputs_from_config(model)

    return build


def _lstm():
    import torch
    from torch import nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(50, 16)
            self.rnn = nn.LSTM(16, 16, num_layers=2, batch_first=True)
            self.head = nn.Linear(16, 5)

        def forward(self, input_ids):
            out, _ = self.rnn(self.embed(input_ids))
            return self.head(out)

    torch.manual_seed(0)
    return Tagger().eval(), {"input_ids": torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(0))}


MODELS: dict[str, Callable[[], tuple]] = {
    "bert": _hf("BertConfig", "BertModel", **TEXT),
    "roberta": _hf("RobertaConfig", "RobertaModel", **TEXT),
    "albert": _hf("AlbertConfig", "AlbertModel", embedding_size=16, **TEXT),
    "electra": _hf("ElectraConfig", "ElectraModel", embedding_size=16, **TEXT),
    "distilbert": _hf("DistilBertConfig", "DistilBertModel", vocab_size=128, dim=32, n_layers=2, n_heads=4,
                      hidden_dim=37, max_position_embeddings=64),
    "mobilebert": _hf("MobileBertConfig", "MobileBertModel", vocab_size=128, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=37, embedding_size=16, intra_bottleneck_size=16,
                      max_position_embeddings=64),
    "clip_text": _hf("CLIPTextConfig", "CLIPTextModel", vocab_size=128, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=37, max_position_embeddings=64),
    "t5": _hf("T5Config", "T5Model", vocab_size=128, d_model=32, d_kv=8, d_ff=37, num_layers=2,
              num_decoder_layers=2, num_heads=4, use_cache=False),
    "gpt2": _hf("GPT2Config", "GPT2Model", vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                use_cache=False, bos_token_id=0, eos_token_id=0),
    "llama": _hf("LlamaConfig", "LlamaModel", num_key_value_heads=2, use_cache=False, **TEXT),
    "vit": _hf("ViTConfig", "ViTModel", image_size=32, patch_size=8, num_channels=3, hidden_size=32,
               num_hidden_layers=2, num_attention_heads=4, intermediate_size=37),
    "swin": _hf("SwinConfig", "SwinModel", image_size=32, patch_size=2, num_channels=3, embed_dim=16, depths=[2, 2],
                num_heads=[2, 4], window_size=4),
    "mobilevit": _hf("MobileViTConfig", "MobileViTModel", image_size=64, num_channels=3, hidden_sizes=[16, 24, 32],
                     neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 48]),
    "regnet": _hf("RegNetConfig", "RegNetModel", image_size=32, num_channels=3, embedding_size=8,
                  hidden_sizes=[8, 16], depths=[1, 2], groups_width=8),
    "resnet": _hf("ResNetConfig", "ResNetModel", image_size=32, num_channels=3, embedding_size=8,
                  hidden_sizes=[8, 16], depths=[1, 1], layer_type="bottleneck"),
    "lstm": _lstm,
}


def measure(name: str, exporter: str, detail: bool) -> dict:
    import onnx

    from modelexport_core import make_context
    from modelexport_core.format.reference import dynamo_node_modules, torchscript_node_modules
    from modelexport_core.testing import sibling_contamination
    from modelexport_htp.strategy import HTPStrategy

    model, inputs = MODELS[name]()
    ctx = make_context(model, inputs, dynamic=True, options={"exporter": exporter})
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "model.onnx"
        started = time.perf_counter()
        result = HTPStrategy().export(ctx, path)
        seconds = time.perf_counter() - started
        onnx_model = onnx.load(str(path))
    if result.exporter == "dynamo":
        reference = dynamo_node_modules(onnx_model)
    else:
        reference = torchscript_node_modules(onnx_model, [n for n, _ in ctx.module.named_modules()])
    scoped = [k for k, v in reference.items() if v is not None]
    wrong = [k for k in scoped if result.node_modules.get(k) != reference[k]]
    contaminated = sibling_contamination(result.node_modules, reference)
    row = {"model": name, "exporter": result.exporter, "nodes": len(onnx_model.graph.node), "scoped": len(scoped),
           "agreement": round(1 - len(wrong) / max(len(scoped), 1), 4), "contaminated": len(contaminated),
           "seconds": round(seconds, 1)}
    if detail:
        ops = {k: k.rpartition("/")[2] for k in reference}
        how = result.details.get("tagged_by", {})
        groups = Counter((result.node_modules.get(k), reference[k], ops[k].split("_")[0]) for k in wrong)
        row["wrong"] = [f"{n:3} htp {h!r} torch {r!r} {op}" for (h, r, op), n in groups.most_common(40)]
        row["tagged_by"] = how
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"models to measure (default: all of {', '.join(MODELS)})")
    parser.add_argument("--exporter", default="torchscript", choices=["torchscript", "dynamo"])
    parser.add_argument("--detail", action="store_true", help="list the disagreeing nodes")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    rows = []
    for name in args.models or list(MODELS):
        try:
            row = measure(name, args.exporter, args.detail)
        except Exception as error:  # noqa: BLE001 - a benchmark reports a failing model and goes on
            row = {"model": name, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
        rows.append(row)
        if not args.json:
            if "error" in row:
                print(f"{name:12} ERROR {row['error']}")
                continue
            print(f"{name:12} {row['exporter']:11} nodes {row['nodes']:5} agreement {row['agreement']:.4f} "
                  f"contaminated {row['contaminated']:3}  {row['seconds']:5.1f} s", flush=True)
            for line in row.get("wrong", []):
                print("    " + line)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
