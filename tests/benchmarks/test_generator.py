"""The evaluation generator: the held-out split never yields the development seed, draws are deterministic per
seed, and drawn models build and run (benchmarks/generator.py)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import generator  # noqa: E402

pytestmark = pytest.mark.unit  # the fast tier, run first

TINY = ["transformers:bert", "transformers:gpt2"]


def test_heldout_refuses_the_development_seed():
    with pytest.raises(ValueError, match="development"):
        generator.draw("heldout", generator.DEV_SEED)
    with pytest.raises(ValueError, match="seed"):
        generator.draw("heldout", None)


def test_heldout_models_carry_their_own_seed_and_dev_the_dev_seed():
    heldout = generator.draw("heldout", 1764100000, only=TINY)
    dev = generator.draw("dev", 1764100000, only=TINY)  # the dev draw ignores a seed given to it
    assert heldout and all(m.seed == 1764100000 for m in heldout)
    assert len(heldout) == len(TINY) * generator.HELDOUT_PER_FAMILY
    assert dev and all(m.seed == generator.DEV_SEED for m in dev)
    assert len(dev) == len(TINY) * generator.DEV_PER_FAMILY
    assert not {m.name for m in heldout} & {m.name for m in dev}


def test_configurations_are_deterministic_per_seed_and_differ_between_seeds():
    first = generator.draw("heldout", 7, only=TINY, per_family=3)
    again = generator.draw("heldout", 7, only=TINY, per_family=3)
    other = generator.draw("heldout", 8, only=TINY, per_family=3)
    assert [m.config for m in first] == [m.config for m in again]
    assert [m.config for m in first] != [m.config for m in other]
    assert all(generator.by_name(m.name).config == m.config for m in first)


def test_size_takes_families_from_every_source_in_turn():
    models = generator.draw("heldout", 11, size=6)
    assert len(models) == 6 and len({m.family for m in models}) == 6
    sources = {m.source for m in models}
    installed = {name.split(":")[0] for name in generator.families()}
    assert sources == installed  # 6 models reach every installed source (at most 3)


def test_sizes_stay_small_and_divisible():
    for index in range(30):
        sizes = generator.draw_sizes(generator.rng_for(5, "any", index))
        assert 32 <= sizes["hidden"] <= 128 and sizes["hidden"] % sizes["heads"] == 0
        assert sizes["heads"] % sizes["kv_heads"] == 0 and 1 <= sizes["layers"] <= 3


@pytest.mark.parametrize("family", TINY)
def test_tiny_families_build_and_run(family):
    import torch

    model = generator.draw("heldout", 3, only=[family])[0]
    module, inputs = model.build(1)
    assert sum(p.numel() for p in module.parameters()) < 2_000_000
    with torch.no_grad():
        module(**inputs)
    assert next(iter(inputs.values())).shape[0] == 1


def test_a_family_that_rejects_its_drawn_sizes_gets_aligned_widths_then_a_larger_image():
    """Grouped convolutions and grouped matmuls reject odd widths; some vision stacks an image under 128 pixels."""
    config = {"sizes": {"image": 32}, "config": {"intermediate_size": 37, "hidden_size": 37, "image_size": 32,
                                                 "text_config": {"moe_intermediate_size": 101}}}
    drawn, aligned, larger = generator._fallback_configs(config)
    assert drawn is config
    assert aligned["config"] == {"intermediate_size": 32, "hidden_size": 37, "image_size": 32,
                                 "text_config": {"moe_intermediate_size": 96}}
    assert larger["sizes"]["image"] == 128 and larger["config"]["image_size"] == 128


def test_an_image_size_given_as_height_and_width_is_drawn_too():
    """A config whose image size is a (height, width) pair gets the drawn size, not its default (hundreds of pixels:
    thousands of patches)."""
    from transformers import YolosConfig

    sizes = generator.draw_sizes(random.Random(0))
    overrides = generator.transformers_overrides(YolosConfig, sizes, random.Random(0))
    assert overrides["image_size"] == [sizes["image"], sizes["image"] * 3 // 2]
