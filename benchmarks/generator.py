"""Models nobody tuned for: every family at seeded random configurations, split into a development and a held-out draw.

    .venv-bench/bin/python benchmarks/generator.py --draw dev                   # list the development draw
    .venv-bench/bin/python benchmarks/generator.py --draw heldout --seed N      # list a held-out draw
    .venv-bench/bin/python benchmarks/generator.py --draw heldout --seed N --check   # build and run each in torch
    .venv-bench/bin/python benchmarks/generator.py --survey                     # rewrite the transformers family list

Families come from three sources: (a) every transformers model type that builds offline from its config and
runs forward on generated inputs (found by ``--survey``, kept in ``generator_families.json``, the excluded
types and why in ``generator_excluded.md``), (b) timm and (c) torchvision (classification, detection
backbones, segmentation; the benchmark environment only, ``make bench-install``). A configuration is drawn
from a ``random.Random`` seeded by (seed, family, index), so a draw is the same on every machine. The
development draw uses :data:`DEV_SEED` and may be studied node by node; a held-out draw takes a seed given for
one report and refuses the development seed. Sizes stay small (width 32-128, 1-3 layers, short sequences,
32-64 px images) so one model exports in seconds. ``MODELEXPORT_DRAW_SEQUENCE_SCALE=K`` makes every token
sequence K times as long (the same configurations otherwise; positions allow up to 128 tokens): what the
strategies do with the long inputs users export with.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import vision_shim  # noqa: E402

vision_shim.apply()  # before transformers, timm or torchvision are imported

if TYPE_CHECKING:
    import torch
    from torch import nn

    from modelexport_core.prepare.models import LoadedModel

DEV_SEED = 0
DEV_PER_FAMILY = 3
HELDOUT_PER_FAMILY = 1
FAMILIES_FILE = HERE / "generator_families.json"
EXCLUDED_FILE = HERE / "generator_excluded.md"
SOURCES = ("transformers", "timm", "torchvision")

Inputs = dict[str, "torch.Tensor"]
Config = dict[str, Any]


@dataclass(frozen=True)
class Family:
    """A family of models: ``sample(rng)`` draws a JSON-able configuration, ``build(config, batch)`` makes it."""

    name: str  # "<source>:<family>", e.g. "transformers:bert", "timm:resnet"
    source: str
    sample: Callable[[random.Random], Config]
    build: Callable[[Config, int], tuple["nn.Module", Inputs]]


@dataclass(frozen=True)
class GeneratedModel:
    """One drawn configuration of one family; its name alone rebuilds it (``by_name``)."""

    family: str
    seed: int
    index: int
    config: Config = field(compare=False)

    @property
    def name(self) -> str:
        return f"{self.family}@{self.seed}.{self.index}"

    @property
    def source(self) -> str:
        return self.family.split(":", 1)[0]

    def build(self, batch: int) -> tuple["nn.Module", Inputs]:
        import torch

        torch.manual_seed(self.seed * 1000 + self.index)  # the random weights
        model, inputs = families()[self.family].build(self.config, batch)
        return model.eval(), inputs

    def load(self, batch: int) -> "LoadedModel":
        from modelexport_core.prepare.models import LoadedModel

        model, inputs = self.build(batch)
        return LoadedModel(model, f"generated:{self.name}", "factory", inputs=inputs, by_keyword=True)


def rng_for(seed: int, family: str, index: int) -> random.Random:
    """The generator of one configuration: seeded by a string, which Python hashes the same everywhere."""
    return random.Random(f"{seed}:{family}:{index}")


def draw(split: str, seed: int | None = None, per_family: int | None = None,
         only: list[str] | None = None, size: int | None = None) -> list[GeneratedModel]:
    """The development draw (``seed`` ignored: :data:`DEV_SEED`) or a held-out draw at ``seed``.

    ``per_family`` configurations of each family (development 3, held-out 1); with ``size``, that many models,
    the families taken in turn from each source (transformers, timm, torchvision) in an order the seed shuffles.
    """
    if split == "dev":
        seed = DEV_SEED
        per_family = per_family or DEV_PER_FAMILY
    elif split == "heldout":
        if seed is None:
            raise ValueError("a held-out draw needs a seed of its own (e.g. the output of `date +%s`)")
        if seed == DEV_SEED:
            raise ValueError(f"seed {DEV_SEED} is the development draw's; a held-out draw needs another")
        per_family = per_family or HELDOUT_PER_FAMILY
    else:
        raise ValueError(f"no draw {split!r}: use 'dev' or 'heldout'")
    names = [name for name in families() if not only or name in only or name.split(":", 1)[0] in only]
    if size is not None:
        names = _balanced(names, seed, -(-size // per_family))
    models = [GeneratedModel(name, seed, index, families()[name].sample(rng_for(seed, name, index)))
              for name in names for index in range(per_family)]
    return models[:size] if size is not None else models


def _balanced(names: list[str], seed: int, count: int) -> list[str]:
    """``count`` families, one from each source in turn (in that order), each source's order shuffled by ``seed``."""
    shuffler = random.Random(f"{seed}:families")
    queues = []
    for source in SOURCES:
        mine = sorted(n for n in names if n.startswith(source + ":"))
        shuffler.shuffle(mine)
        queues.append(mine)
    chosen: list[str] = []
    while len(chosen) < count and any(queues):
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop(0))
    return chosen  # in turn by source, so a sweep cut short has measured every source alike


def by_name(name: str) -> GeneratedModel:
    """The model ``family@seed.index`` (as :attr:`GeneratedModel.name` writes it)."""
    family, _, rest = name.partition("@")
    seed, _, index = rest.partition(".")
    if family not in families():
        raise KeyError(f"no generated family {family!r}")
    seed_value, index_value = int(seed), int(index)
    return GeneratedModel(family, seed_value, index_value,
                          families()[family].sample(rng_for(seed_value, family, index_value)))


def load(name: str, batch: int) -> "LoadedModel":
    return by_name(name).load(batch)


def family_of(name: str) -> str:
    return name.partition("@")[0]


# --------------------------------------------------------------------------------------------------------------
# Sizes: one draw of the knobs every family reads from.


def draw_sizes(rng: random.Random) -> Config:
    """Widths, depths, heads, sequence and image sizes, drawn so the usual divisibility holds."""
    heads = rng.choice([2, 4])
    hidden = rng.choice([32, 64, 96, 128])
    head_dim = hidden // heads
    kv_heads = rng.choice([h for h in (1, 2, 4) if heads % h == 0])
    return {
        "hidden": hidden,
        "heads": heads,
        "head_dim": head_dim,
        "kv_heads": kv_heads,
        "layers": rng.randint(1, 3),
        "intermediate": hidden * rng.choice([1, 2, 3]) + rng.choice([0, 5]),
        "vocab": rng.choice([128, 256, 384]),
        "sequence": rng.randint(5, 16),
        "decoder_sequence": rng.randint(3, 8),
        "image": rng.choice([32, 48, 64]),
        "patch": rng.choice([4, 8]),
        "audio": rng.choice([800, 1200, 1600]),
        "frames": rng.choice([16, 24, 32]),
        "stages": rng.randint(2, 4),
        "classes": rng.randint(3, 12),
    }


# --------------------------------------------------------------------------------------------------------------
# (a) transformers: any model type whose config takes the knobs below.

_HIDDEN = ("hidden_size", "d_model", "n_embd", "embed_dim", "word_embed_proj_dim", "embedding_size", "dim",
           "projection_dim", "text_embed_dim", "vision_embed_dim")
_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
           "num_decoder_layers", "num_encoder_layers")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
          "decoder_attention_heads", "num_decoder_attention_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "multi_query_group_num")
_FFN = ("intermediate_size", "d_ff", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "hidden_dim",
        "moe_intermediate_size", "shared_expert_intermediate_size", "dim_feedforward", "decoder_intermediate_size")
_HEAD_DIM = ("head_dim", "d_kv", "kv_channels", "attention_head_dim", "qk_nope_head_dim", "v_head_dim")
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_K = ("num_experts_per_tok", "moe_top_k", "top_k", "num_selected_experts")
_POSITIONS = ("max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions",
              "n_ctx", "max_seq_len", "max_sequence_length")
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
              "cls_token_id", "mask_token_id", "unk_token_id")
_OFF = {"use_cache": False, "output_hidden_states": False, "output_attentions": False, "mask_time_prob": 0.0,
        "mask_feature_prob": 0.0, "layerdrop": 0.0, "tie_word_embeddings": False}


def _scaled_list(name: str, value: list, sizes: Config, rng: random.Random) -> list | None:
    """Stage-wise lists (hidden_sizes, depths, heads per stage) scaled down, their length kept."""
    if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    if name in ("depths", "num_layers_per_stage", "layers", "stage_depths", "block_repeats", "num_block_repeats"):
        return [rng.randint(1, 2) for _ in value]
    if name in ("hidden_sizes", "embed_dims", "dims", "embedding_sizes", "channels", "widths", "num_channels_list",
                "out_channels", "in_channels", "neck_hidden_sizes"):
        base = rng.choice([8, 16])
        grown = [base * 2 ** min(i, 3) for i in range(len(value))]
        return [max(8, g - g % 8) for g in grown]
    if name in ("num_heads", "num_attention_heads", "attention_heads", "heads"):
        return [min(v, 2 ** min(i, 2)) for i, v in enumerate(value)]
    return None


def transformers_overrides(config_class: type, sizes: Config, rng: random.Random, depth: int = 0) -> Config:
    """The keyword arguments that shrink ``config_class`` to ``sizes``: only the knobs its defaults have."""
    default = config_class()
    values = default.to_dict()
    overrides: Config = {}

    def put(names: tuple[str, ...], value: Any) -> None:
        for name in names:
            if isinstance(values.get(name), int) and not isinstance(values.get(name), bool):
                overrides[name] = value

    put(_HIDDEN, sizes["hidden"])
    put(_LAYERS, sizes["layers"])
    put(_HEADS, sizes["heads"])
    put(_KV_HEADS, sizes["kv_heads"])
    put(_FFN, sizes["intermediate"])
    put(_HEAD_DIM, sizes["head_dim"])
    put(_EXPERTS, 4)
    put(_TOP_K, 2)
    put(_POSITIONS, 128)
    put(("vocab_size",), sizes["vocab"])
    put(("image_size",), sizes["image"])
    if _pair(pair := values.get("image_size")):  # (height, width): the drawn height; the width as drawn where the
        wide = pair[1] != pair[0]  # default is square, else half as large again
        overrides["image_size"] = [sizes["image"], sizes["image"] * 3 // 2 if wide else sizes["image"]]
    put(("patch_size",), sizes["patch"])
    put(("num_labels",), sizes["classes"])
    put(("window_size", "attention_window_size"), 2)
    for name in _TOKEN_IDS:
        if isinstance(values.get(name), int) and values[name] >= sizes["vocab"]:
            overrides[name] = min(values[name], sizes["vocab"] - 1) if name != "pad_token_id" else 0
    for name, value in _OFF.items():
        if name in values:
            overrides[name] = value
    for name, value in values.items():
        if isinstance(value, list) and name not in overrides:
            scaled = _scaled_list(name, value, sizes, rng)
            if scaled is not None:
                overrides[name] = scaled
    if depth < 2:
        for name, sub_class in (getattr(default, "sub_configs", None) or {}).items():
            if isinstance(sub_class, type) and isinstance(getattr(default, name, None), object):
                try:
                    overrides[name] = transformers_overrides(sub_class, sizes, rng, depth + 1)
                except Exception:  # a sub-config that cannot be made alone keeps its defaults
                    continue
    return overrides


def _pair(value: Any) -> bool:
    """Whether a config value is a (height, width) pair of sizes."""
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def _transformers_classes(model_type: str) -> tuple[type, type]:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    class_name = MODEL_MAPPING_NAMES[model_type]
    if isinstance(class_name, (list, tuple)):
        class_name = class_name[0]
    return CONFIG_MAPPING[model_type], getattr(transformers, class_name)


def _forward_parameters(model: "nn.Module") -> dict[str, Any]:
    import inspect

    return dict(inspect.signature(model.forward).parameters)


def _nested_value(config: Any, *names: str, default: int) -> int:
    for holder in (config, getattr(config, "text_config", None), getattr(config, "vision_config", None),
                   getattr(config, "audio_config", None), getattr(config, "encoder", None)):
        for name in names:
            value = getattr(holder, name, None) if holder is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return default


def inputs_for(model: "nn.Module", sizes: Config, batch: int) -> Inputs:
    """Inputs from the forward signature and the config: token ids, pixels, waveforms or features."""
    import torch

    params = _forward_parameters(model)
    config = getattr(model, "config", None)
    generator = torch.Generator().manual_seed(sizes.get("input_seed", 0))
    inputs: Inputs = {}
    scale = int(os.environ.get("MODELEXPORT_DRAW_SEQUENCE_SCALE", "1"))
    sequence = sizes["sequence"] * scale
    vocab = _nested_value(config, "vocab_size", default=sizes["vocab"])
    if "input_ids" in params:
        inputs["input_ids"] = torch.randint(3, max(vocab, 4), (batch, sequence), generator=generator)
        if "attention_mask" in params:
            inputs["attention_mask"] = torch.ones(batch, sequence, dtype=torch.long)
    if "decoder_input_ids" in params and getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = torch.randint(3, max(vocab, 4), (batch, sizes["decoder_sequence"] * scale),
                                                    generator=generator)
    if "pixel_values" in params:
        channels = _nested_value(config, "num_channels", "in_channels", "num_input_channels", default=3)
        size = _nested_value(config, "image_size", "img_size", default=sizes["image"])
        if isinstance(getattr(config, "image_size", None), (list, tuple)):
            height, width = config.image_size[:2]
        else:
            height = width = size
        inputs["pixel_values"] = torch.randn(batch, channels, height, width, generator=generator)
    if "input_values" in params:
        inputs["input_values"] = torch.randn(batch, sizes["audio"], generator=generator)
    if "input_features" in params:
        bins = _nested_value(config, "num_mel_bins", "input_feat_per_channel", "feature_size", default=80)
        frames = 2 * getattr(config, "max_source_positions", 0) or sizes["frames"] * 4
        if getattr(config, "model_type", "") in ("speech_to_text",):
            inputs["input_features"] = torch.randn(batch, frames, bins, generator=generator)
        else:
            inputs["input_features"] = torch.randn(batch, bins, frames, generator=generator)
    if not inputs:
        raise ValueError(f"no input recipe for {type(model).__name__}.forward({', '.join(params)})")
    return inputs


def _with_ints(value: Any, names: tuple[str, ...], change: Callable[[int], int]) -> Any:
    """``value`` (a config's overrides, nested configs too) with every int, and each int of every (height, width)
    pair, under one of ``names`` changed."""
    def changed(key: str, item: Any) -> Any:
        if key not in names:
            return _with_ints(item, names, change)
        if isinstance(item, int):
            return change(item)
        return [change(x) for x in item] if _pair(item) else _with_ints(item, names, change)

    if isinstance(value, dict):
        return {k: changed(k, v) for k, v in value.items()}
    return value


def _fallback_configs(config: Config) -> list[Config]:
    """The drawn configuration; then, for a family that rejects it or fails on its inputs, the same with
    feed-forward widths aligned, and that with the image four times larger. The first that builds and runs wins."""
    # grouped matmuls and grouped convolutions want feed-forward widths in multiples of 8
    aligned = {"sizes": dict(config["sizes"]), "config": _with_ints(config["config"], _FFN, lambda v: max(8, v - v % 8))}
    larger = {"sizes": dict(aligned["sizes"], image=aligned["sizes"]["image"] * 4),
              "config": _with_ints(aligned["config"], ("image_size",), lambda v: v * 4)}
    return [config, aligned, larger]


def _run(model: "nn.Module", inputs: Inputs) -> None:
    import torch

    with torch.no_grad():
        model.eval()(**inputs)


def _transformers_family(model_type: str) -> Family:
    name = f"transformers:{model_type}"

    def sample(rng: random.Random) -> Config:
        sizes = draw_sizes(rng)
        config_class, _ = _transformers_classes(model_type)
        return {"sizes": sizes, "config": transformers_overrides(config_class, sizes, rng)}

    def build(config: Config, batch: int) -> tuple["nn.Module", Inputs]:
        config_class, model_class = _transformers_classes(model_type)
        attempts = _fallback_configs(config)  # the drawn sizes, else aligned ones, else a larger image
        for number, attempt in enumerate(attempts, 1):
            try:
                model = model_class(config_class(**attempt["config"]))
                inputs = inputs_for(model, attempt["sizes"], batch)
                _run(model, inputs)
                return model, inputs
            except Exception:  # noqa: BLE001 - a configuration the family rejects: try the next
                if number == len(attempts):
                    raise
        raise AssertionError("unreachable")

    return Family(name, "transformers", sample, build)


# --------------------------------------------------------------------------------------------------------------
# The catalogue of families.

_FAMILIES: dict[str, Family] | None = None


def families() -> dict[str, Family]:
    """Every family the generator draws from, by name; timm and torchvision only where installed."""
    global _FAMILIES
    if _FAMILIES is None:
        import importlib.util

        found: dict[str, Family] = {}
        if FAMILIES_FILE.is_file():
            for model_type in json.loads(FAMILIES_FILE.read_text())["transformers"]:
                found[f"transformers:{model_type}"] = _transformers_family(model_type)
        if importlib.util.find_spec("timm") is not None:
            import generator_vision

            found.update(generator_vision.timm_families())
        if importlib.util.find_spec("torchvision") is not None:
            import generator_vision

            found.update(generator_vision.torchvision_families())
        _FAMILIES = found
    return _FAMILIES


# --------------------------------------------------------------------------------------------------------------
# The survey: which transformers model types build offline and run forward at small sizes.


def survey_one(model_type: str, max_params: int = 30_000_000) -> str:
    """Empty when ``model_type`` builds at the development draw's first configuration and runs; else why not."""
    import torch

    family = _transformers_family(model_type)
    try:
        config = family.sample(rng_for(DEV_SEED, family.name, 0))
        torch.manual_seed(0)
        model, inputs = family.build(config, 1)
        model.eval()
        params = sum(p.numel() for p in model.parameters())
        if params > max_params:
            return f"too large at small sizes ({params / 1e6:.0f}M parameters)"
        with torch.no_grad():
            model(**inputs)
    except Exception as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"{type(error).__name__}: {text[:160]}"
    return ""


def _survey_worker() -> int:
    """Survey the model types named on stdin, one JSON line each on stdout."""
    import warnings

    warnings.simplefilter("ignore")
    for line in sys.stdin:
        model_type = line.strip()
        print(json.dumps({"type": model_type, "reason": survey_one(model_type)}), flush=True)
    return 0


SURVEY_LOG = HERE / "results" / "generator-survey.jsonl"


def survey(timeout: float = 30.0, only: list[str] | None = None, shard: tuple[int, int] = (0, 1)) -> dict[str, str]:
    """Every model type of MODEL_MAPPING, each in a worker with a deadline: type -> reason ('' when kept).

    Answers are appended to :data:`SURVEY_LOG` as they come and kept on a rerun, so a survey can stop and go
    on, and shards (``shard=(i, n)``: every n-th type from the i-th) can run side by side.
    """
    import os
    import selectors
    import subprocess
    import time

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    done = surveyed()
    todo = [t for i, t in enumerate(MODEL_MAPPING_NAMES) if (not only or t in only) and i % shard[1] == shard[0]]
    reasons: dict[str, str] = {t: done[t] for t in todo if t in done}
    log = SURVEY_LOG.open("a")

    def record(model_type: str, reason: str) -> None:
        reasons[model_type] = reason
        log.write(json.dumps({"type": model_type, "reason": reason}) + "\n")
        log.flush()
        print(f"{len(reasons)}/{len(todo)}: {model_type}: {reason or 'ok'}", file=sys.stderr, flush=True)

    for model_type in todo:
        if model_type not in CONFIG_MAPPING_NAMES and model_type not in reasons:
            record(model_type, "no config class")
    todo = [t for t in todo if t not in reasons]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore")
    worker = None
    served = 0
    while todo:
        if worker is None:
            worker = subprocess.Popen([sys.executable, __file__, "--survey-worker"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
            selector = selectors.DefaultSelector()
            selector.register(worker.stdout, selectors.EVENT_READ)
            served = 0
        model_type = todo.pop(0)
        worker.stdin.write(model_type + "\n")
        worker.stdin.flush()
        served += 1
        started = time.monotonic()
        line = ""
        while time.monotonic() - started < timeout and not line:
            if selector.select(timeout=1.0):
                line = worker.stdout.readline()
                if not line:
                    break
        if line:
            record(model_type, json.loads(line)["reason"])
        else:
            record(model_type, f"timed out after {timeout:g} s" if worker.poll() is None else "worker died")
        if not line or served >= 40:  # a fresh worker now and then: every type imported stays in memory
            worker.kill()
            worker.wait()
            worker = None
    if worker is not None:
        worker.kill()
        worker.wait()
    log.close()
    return reasons


def surveyed() -> dict[str, str]:
    """The answers :data:`SURVEY_LOG` holds so far."""
    if not SURVEY_LOG.is_file():
        return {}
    answers = {}
    for line in SURVEY_LOG.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            answers[entry["type"]] = entry["reason"]
    return answers


def write_survey(reasons: dict[str, str]) -> None:
    import transformers

    kept = sorted(t for t, reason in reasons.items() if not reason)
    FAMILIES_FILE.write_text(json.dumps({"transformers_version": transformers.__version__, "transformers": kept},
                                        indent=1) + "\n")
    excluded = sorted((t, r) for t, r in reasons.items() if r)
    lines = ["# transformers model types the generator leaves out", "",
             f"Written by `python benchmarks/generator.py --survey` (transformers {transformers.__version__}): "
             f"each type of `MODEL_MAPPING` is built from its config shrunk to the development draw's first "
             f"configuration and run forward on generated inputs. {len(kept)} kept, {len(excluded)} left out:", "",
             "| model type | why |", "| --- | --- |"]
    lines += [f"| {t} | {r.replace('|', '/')} |" for t, r in excluded]
    EXCLUDED_FILE.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draw", choices=("dev", "heldout"), default="dev")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--size", type=int, help="models in the draw (default: every family)")
    parser.add_argument("--only", default="", help="comma-separated families or sources")
    parser.add_argument("--check", action="store_true", help="build and run each model in torch at batch 1")
    parser.add_argument("--survey", action="store_true", help="survey the transformers model types (resumable)")
    parser.add_argument("--shard", default="0/1", help="with --survey: I/N, every N-th model type from the I-th")
    parser.add_argument("--survey-write", action="store_true",
                        help="write the family list and the excluded types from the survey's answers")
    parser.add_argument("--survey-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    only = [name for name in args.only.split(",") if name] or None
    if args.survey_worker:
        return _survey_worker()
    if args.survey:
        index, _, count = args.shard.partition("/")
        survey(only=only, shard=(int(index), int(count)))
        return 0
    if args.survey_write:
        write_survey(surveyed())
        return 0
    models = draw(args.draw, args.seed, only=only, size=args.size)
    failed = 0
    for model in models:
        status = json.dumps(model.config.get("sizes", model.config))[:120]
        if args.check:
            import torch

            try:
                module, inputs = model.build(1)
                with torch.no_grad():
                    module(**inputs)
                status = f"ok {sum(p.numel() for p in module.parameters()):>9} params"
            except Exception as error:
                failed += 1
                status = f"FAILED {type(error).__name__}: {str(error).splitlines()[0][:150] if str(error) else ''}"
        print(f"{model.name:50} {status}", flush=True)
    print(f"{len(models)} models", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
