"""The generator's timm and torchvision families (benchmark environment only: ``make bench-install``).

Each family draws a configuration from a seeded ``random.Random``: a registered variant or the model class's
own constructor arguments (widths, depths, heads, kernel, patch, window and image sizes), kept small. The
images are 32-64 px except where an architecture needs more (its family says so).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Callable

from generator import Config, Family, Inputs

if TYPE_CHECKING:
    from torch import nn


def pixels(model: "nn.Module", batch: int, size: int | tuple[int, int], seed: int = 0) -> Inputs:
    """An image batch under the name of ``forward``'s first parameter (``x``, ``input``, ...)."""
    import inspect

    import torch

    height, width = (size, size) if isinstance(size, int) else size
    name = next(iter(inspect.signature(model.forward).parameters))
    return {name: torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(seed))}


def _pick(rng: random.Random, *options: Any) -> Any:
    return rng.choice(options)


# --------------------------------------------------------------------------------------------------------------
# timm: create_model(variant, **kwargs), kwargs overriding the variant's own arguments.

def _vit_kwargs(rng: random.Random, image: int | None = None) -> Config:
    heads = _pick(rng, 2, 4)
    embed = heads * _pick(rng, 8, 16, 32)
    patch = _pick(rng, 4, 8)
    return {"img_size": image or _pick(rng, 32, 48, 64), "patch_size": patch, "embed_dim": embed,
            "depth": rng.randint(1, 3), "num_heads": heads, "mlp_ratio": _pick(rng, 1.0, 2.0, 4.0)}


def _stages(rng: random.Random, count: int = 4, base: tuple[int, ...] = (8, 16)) -> tuple[list[int], list[int]]:
    width = _pick(rng, *base)
    dims = [width * 2 ** i for i in range(count)]
    depths = [rng.randint(1, 2) for _ in range(count)]
    return dims, depths


def _timm_sampler(variants: list[str], extra: Callable[[random.Random], Config] | None = None,
                  images: tuple[int, ...] = (32, 48, 64)) -> Callable[[random.Random], Config]:
    def sample(rng: random.Random) -> Config:
        kwargs = extra(rng) if extra else {}
        image = kwargs.pop("_image", None) or kwargs.get("img_size") or _pick(rng, *images)
        return {"variant": rng.choice(variants), "kwargs": kwargs, "image": image, "classes": rng.randint(3, 12)}

    return sample


def _resolve(reference: Any) -> Any:
    """``"package.module:Name"`` (or a list of them) as the object it names."""
    import importlib

    if isinstance(reference, list):
        return [_resolve(item) for item in reference]
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def _timm_build(config: Config, batch: int) -> tuple["nn.Module", Inputs]:
    import timm

    variant = config["variant"]
    if variant in TIMM_CLASSES:  # entrypoints that fix the arguments drawn here: the class with the variant's own
        class_name, refs, fixed = TIMM_CLASSES[variant]
        kwargs = {**fixed, **{k: _resolve(v) for k, v in refs.items()}, **config["kwargs"]}
        model = _resolve(class_name)(num_classes=config["classes"], **kwargs)
    else:
        model = timm.create_model(variant, pretrained=False, num_classes=config["classes"], **config["kwargs"])
    return model, pixels(model, batch, config["image"])


_METAFORMER = "timm.models.metaformer"
TIMM_CLASSES: dict[str, tuple[str, dict[str, Any], Config]] = {
    "poolformer_s12": (f"{_METAFORMER}:MetaFormer", {"mlp_act": "torch.nn:GELU", "norm_layers": f"{_METAFORMER}:GroupNorm1"},
                       {"downsample_norm": None, "mlp_bias": True, "layer_scale_init_values": 1e-5,
                        "res_scale_init_values": None, "use_mlp_head": False}),
    "poolformerv2_s12": (f"{_METAFORMER}:MetaFormer", {}, {}),
    "convformer_s18": (f"{_METAFORMER}:MetaFormer", {"token_mixers": f"{_METAFORMER}:SepConv"}, {}),
    "caformer_s18": (f"{_METAFORMER}:MetaFormer",
                     {"token_mixers": [f"{_METAFORMER}:SepConv"] * 2 + [f"{_METAFORMER}:Attention"] * 2,
                      "norm_layers": [f"{_METAFORMER}:LayerNorm2dNoBias"] * 2 + [f"{_METAFORMER}:LayerNormNoBias"] * 2},
                     {}),
    "mixer_s16_224": ("timm.models.mlp_mixer:MlpMixer", {}, {}),
    "resmlp_12_224": ("timm.models.mlp_mixer:MlpMixer", {"block_layer": "timm.models.mlp_mixer:ResBlock",
                                                         "norm_layer": "timm.models.mlp_mixer:Affine"}, {}),
    "gmlp_ti16_224": ("timm.models.mlp_mixer:MlpMixer", {"block_layer": "timm.models.mlp_mixer:SpatialGatingBlock",
                                                         "mlp_layer": "timm.layers:GatedMlp"}, {}),
    "convmixer_768_32": ("timm.models.convmixer:ConvMixer", {}, {}),
}


def _convnext(rng: random.Random) -> Config:
    dims, depths = _stages(rng)
    return {"dims": dims, "depths": depths, "kernel_sizes": _pick(rng, 3, 5, 7)}


def _metaformer(rng: random.Random) -> Config:
    dims, depths = _stages(rng, base=(32,))  # attention stages take heads of 32 channels
    return {"dims": dims, "depths": depths}


def _swin(rng: random.Random) -> Config:
    stages = rng.randint(2, 3)
    heads = [2 ** i for i in range(stages)]
    window = _pick(rng, 2, 4)
    image = 4 * window * 2 ** (stages - 1) * _pick(rng, 1, 2)
    return {"img_size": image, "patch_size": 4, "window_size": window, "embed_dim": _pick(rng, 16, 32),
            "depths": tuple(rng.randint(1, 2) for _ in range(stages)), "num_heads": tuple(heads)}


def _resnet(rng: random.Random) -> Config:
    return {"layers": [rng.randint(1, 2) for _ in range(4)]}


def _densenet(rng: random.Random) -> Config:
    return {"growth_rate": _pick(rng, 8, 12, 16), "block_config": tuple(rng.randint(1, 3) for _ in range(4))}


def _mixer(rng: random.Random) -> Config:
    kwargs = _vit_kwargs(rng)
    return {"img_size": kwargs["img_size"], "patch_size": kwargs["patch_size"], "embed_dim": kwargs["embed_dim"],
            "num_blocks": kwargs["depth"], "mlp_ratio": _pick(rng, 2.0, 4.0)}


def _convmixer(rng: random.Random) -> Config:
    return {"dim": _pick(rng, 32, 64, 96), "depth": rng.randint(1, 3), "kernel_size": _pick(rng, 3, 5, 7),
            "patch_size": _pick(rng, 2, 4)}


def _cait(rng: random.Random) -> Config:
    kwargs = _vit_kwargs(rng)
    kwargs["depth_token_only"] = rng.randint(1, 2)
    return kwargs


def _pvt(rng: random.Random) -> Config:
    dims, depths = _stages(rng, base=(16, 32))
    return {"embed_dims": dims, "depths": depths, "num_heads": [1, 2, 4, 8][:4], "mlp_ratios": [2, 2, 2, 2]}


TIMM_FAMILIES: dict[str, tuple[list[str], Callable[[random.Random], Config] | None, tuple[int, ...]]] = {
    "resnet": (["resnet18", "resnet26", "resnet10t", "resnet50d"], _resnet, (32, 48, 64)),
    "resnext": (["resnext26ts", "seresnext26d_32x4d"], None, (32, 64)),
    "vision_transformer": (["vit_tiny_patch16_224", "vit_small_patch16_224"], _vit_kwargs, ()),
    "deit": (["deit_tiny_distilled_patch16_224", "deit_tiny_patch16_224"], _vit_kwargs, ()),
    "beit": (["beit_base_patch16_224"], _vit_kwargs, ()),
    "cait": (["cait_xxs24_224"], _cait, ()),
    "convnext": (["convnext_atto", "convnext_femto"], _convnext, (32, 64)),
    "efficientnet": (["efficientnet_b0", "efficientnet_lite0", "efficientnet_es", "tf_efficientnet_b0"], None,
                     (32, 48, 64)),
    "mobilenetv3": (["mobilenetv3_small_050", "mobilenetv3_small_100", "mobilenetv3_large_075"], None, (32, 64)),
    "mobilenetv4": (["mobilenetv4_conv_small"], None, (32, 64)),
    "mnasnet": (["mnasnet_small", "spnasnet_100", "mnasnet_050"], None, (32, 64)),
    "regnet": (["regnetx_002", "regnety_002", "regnetx_004", "regnety_004"], None, (32, 64)),
    "densenet": (["densenet121"], _densenet, (32, 64)),
    "dla": (["dla46_c", "dla46x_c", "dla60x_c"], None, (32, 64)),
    "ghostnet": (["ghostnet_050", "ghostnet_100"], None, (32, 64)),
    "rexnet": (["rexnet_100", "rexnetr_100"], None, (32, 64)),
    "mobilevit": (["mobilevit_xxs", "mobilevitv2_050"], None, (64,)),
    "poolformer": (["poolformer_s12", "poolformerv2_s12"], _metaformer, (32, 64)),
    "convformer": (["convformer_s18", "caformer_s18"], _metaformer, (32, 64)),
    "swin": (["swin_tiny_patch4_window7_224"], _swin, ()),
    "mlp_mixer": (["mixer_s16_224", "resmlp_12_224", "gmlp_ti16_224"], _mixer, ()),
    "convmixer": (["convmixer_768_32"], _convmixer, (32, 64)),
    "pvt_v2": (["pvt_v2_b0"], _pvt, (32, 64)),
    "byobnet": (["repvgg_a0", "gernet_s", "resnet32ts", "eca_resnext26ts"], None, (32, 64)),
    "mobileone": (["mobileone_s0", "mobileone_s1"], None, (32, 64)),
    "fastvit": (["fastvit_t8"], None, (64,)),
    "edgenext": (["edgenext_xx_small"], None, (64,)),
    "efficientvit_mit": (["efficientvit_b0"], None, (64,)),
    "ghostnetv2": (["ghostnetv2_100"], None, (64,)),
    "hgnet": (["hgnetv2_b0"], None, (64,)),
    "vovnet": (["ese_vovnet19b_slim", "ese_vovnet19b_slim_dw"], None, (32, 64)),
    "selecsls": (["selecsls42b"], None, (32, 64)),
    "levit": (["levit_128s"], lambda rng: {"img_size": _pick(rng, 64, 96)}, ()),
    "xcit": (["xcit_nano_12_p16_224"], lambda rng: {"img_size": _pick(rng, 32, 64), "depth": rng.randint(1, 3)}, ()),
    "cspnet": (["cs3darknet_focus_s", "cs3darknet_s", "cspresnet50"], None, (32, 64)),
}


def timm_families() -> dict[str, Family]:
    found = {}
    for name, (variants, extra, images) in TIMM_FAMILIES.items():
        found[f"timm:{name}"] = Family(f"timm:{name}", "timm", _timm_sampler(variants, extra, images or (32, 64)),
                                       _timm_build)
    return found


# --------------------------------------------------------------------------------------------------------------
# torchvision: the model classes built with their own arguments.

def _tv_resnet(rng: random.Random) -> Config:
    return {"block": _pick(rng, "BasicBlock", "Bottleneck"), "layers": [rng.randint(1, 2) for _ in range(4)],
            "groups": _pick(rng, 1, 4), "width_per_group": _pick(rng, 16, 32, 64), "image": _pick(rng, 32, 48, 64)}


def _build_tv_resnet(config: Config) -> "nn.Module":
    from torchvision.models import resnet

    groups = config["groups"] if config["block"] == "Bottleneck" else 1
    width = config["width_per_group"] if config["block"] == "Bottleneck" else 64
    return resnet.ResNet(getattr(resnet, config["block"]), config["layers"], num_classes=config["classes"],
                         groups=groups, width_per_group=width)


def _build_tv_mobilenet_v2(config: Config) -> "nn.Module":
    from torchvision.models import MobileNetV2

    return MobileNetV2(num_classes=config["classes"], width_mult=config["width_mult"])


def _build_tv_mobilenet_v3(config: Config) -> "nn.Module":
    from torchvision.models import mobilenetv3

    setting, last = mobilenetv3._mobilenet_v3_conf(config["arch"], width_mult=config["width_mult"])
    return mobilenetv3.MobileNetV3(setting, last, num_classes=config["classes"])


def _build_tv_efficientnet(config: Config) -> "nn.Module":
    from torchvision.models import efficientnet

    setting, last = efficientnet._efficientnet_conf(config["arch"], width_mult=config["width_mult"],
                                                    depth_mult=config["depth_mult"])
    return efficientnet.EfficientNet(setting, 0.2, last_channel=last, num_classes=config["classes"])


def _build_tv_shufflenet(config: Config) -> "nn.Module":
    from torchvision.models import ShuffleNetV2

    return ShuffleNetV2(config["repeats"], config["channels"], num_classes=config["classes"])


def _build_tv_regnet(config: Config) -> "nn.Module":
    from torchvision.models import regnet

    params = regnet.BlockParams.from_init_params(depth=config["depth"], w_0=config["w_0"], w_a=config["w_a"],
                                                 w_m=config["w_m"], group_width=config["group_width"],
                                                 se_ratio=config["se_ratio"])
    return regnet.RegNet(params, num_classes=config["classes"], stem_width=config["stem_width"])


def _build_tv_densenet(config: Config) -> "nn.Module":
    from torchvision.models import DenseNet

    return DenseNet(growth_rate=config["growth_rate"], block_config=tuple(config["block_config"]),
                    num_init_features=config["init_features"], bn_size=config["bn_size"],
                    num_classes=config["classes"])


def _build_tv_mnasnet(config: Config) -> "nn.Module":
    from torchvision.models import MNASNet

    return MNASNet(config["alpha"], num_classes=config["classes"])


def _build_tv_squeezenet(config: Config) -> "nn.Module":
    from torchvision.models import SqueezeNet

    return SqueezeNet(config["version"], num_classes=config["classes"])


def _build_tv_convnext(config: Config) -> "nn.Module":
    from torchvision.models import convnext

    dims, depths = config["dims"], config["depths"]
    setting = [convnext.CNBlockConfig(d, dims[i + 1] if i + 1 < len(dims) else None, depths[i])
               for i, d in enumerate(dims)]
    return convnext.ConvNeXt(setting, stochastic_depth_prob=0.0, num_classes=config["classes"])


def _build_tv_vit(config: Config) -> "nn.Module":
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(config["image"], config["patch"], config["layers"], config["heads"], config["hidden"],
                             config["mlp"], num_classes=config["classes"])


def _build_tv_swin(config: Config) -> "nn.Module":
    from torchvision.models import swin_transformer as swin

    extra = {"block": swin.SwinTransformerBlockV2, "downsample_layer": swin.PatchMergingV2} if config["v2"] else {}
    return swin.SwinTransformer([4, 4], config["embed"], config["depths"], config["heads"],
                                [config["window"]] * 2, stochastic_depth_prob=0.0, num_classes=config["classes"],
                                **extra)


def _build_tv_maxvit(config: Config) -> "nn.Module":
    from torchvision.models.maxvit import MaxVit

    return MaxVit(input_size=(config["image"], config["image"]), stem_channels=config["stem"],
                  partition_size=config["partition"], block_channels=config["channels"],
                  block_layers=config["layers"], head_dim=config["head_dim"], stochastic_depth_prob=0.0,
                  num_classes=config["classes"])


def _build_tv_googlenet(config: Config) -> "nn.Module":
    from torchvision.models import GoogLeNet

    return GoogLeNet(num_classes=config["classes"], aux_logits=False, init_weights=False)


def _build_tv_fpn_resnet(config: Config) -> "nn.Module":
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

    return resnet_fpn_backbone(backbone_name=config["backbone"], weights=None, trainable_layers=5,
                               returned_layers=config["returned"])


def _build_tv_fpn_mobilenet(config: Config) -> "nn.Module":
    from torchvision.models.detection.backbone_utils import mobilenet_backbone

    return mobilenet_backbone(backbone_name=config["backbone"], weights=None, fpn=True, trainable_layers=6)


def _build_tv_lraspp(config: Config) -> "nn.Module":
    from torchvision.models import mobilenetv3
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3

    backbone = mobilenetv3.MobileNetV3(*mobilenetv3._mobilenet_v3_conf("mobilenet_v3_large", dilated=True,
                                                                       width_mult=config["width_mult"]))
    return _lraspp_mobilenetv3(backbone, config["classes"])


def _build_tv_deeplab_mobilenet(config: Config) -> "nn.Module":
    from torchvision.models import mobilenetv3
    from torchvision.models.segmentation.deeplabv3 import _deeplabv3_mobilenetv3

    backbone = mobilenetv3.MobileNetV3(*mobilenetv3._mobilenet_v3_conf("mobilenet_v3_large", dilated=True,
                                                                       width_mult=config["width_mult"]))
    return _deeplabv3_mobilenetv3(backbone, config["classes"], aux=False)


def _build_tv_fcn_resnet(config: Config) -> "nn.Module":
    from torchvision.models import resnet
    from torchvision.models.segmentation.deeplabv3 import _deeplabv3_resnet
    from torchvision.models.segmentation.fcn import _fcn_resnet

    backbone = resnet.ResNet(resnet.Bottleneck, config["layers"], replace_stride_with_dilation=[False, True, True],
                             width_per_group=config["width_per_group"])
    make = _fcn_resnet if config["head"] == "fcn" else _deeplabv3_resnet
    return make(backbone, config["classes"], aux=False)


def _tv_sampler(draw: Callable[[random.Random], Config], images: tuple[int, ...] = (32, 48, 64)
                ) -> Callable[[random.Random], Config]:
    def sample(rng: random.Random) -> Config:
        config = draw(rng)
        config.setdefault("image", rng.choice(images))
        config["classes"] = rng.randint(3, 12)
        return config

    return sample


def _tv_swin_config(rng: random.Random) -> Config:
    stages = rng.randint(2, 3)
    window = _pick(rng, 2, 4)
    return {"embed": _pick(rng, 16, 32), "depths": [rng.randint(1, 2) for _ in range(stages)],
            "heads": [2 ** i for i in range(stages)], "window": window, "v2": rng.random() < 0.5,
            "image": 4 * window * 2 ** (stages - 1) * _pick(rng, 1, 2)}


def _tv_vit_config(rng: random.Random) -> Config:
    heads = _pick(rng, 2, 4)
    hidden = heads * _pick(rng, 8, 16, 32)
    return {"image": _pick(rng, 32, 48, 64), "patch": _pick(rng, 4, 8), "layers": rng.randint(1, 3), "heads": heads,
            "hidden": hidden, "mlp": hidden * _pick(rng, 1, 2, 4)}


def _tv_maxvit_config(rng: random.Random) -> Config:
    stages = rng.randint(2, 3)
    partition = _pick(rng, 2, 4)
    head_dim = _pick(rng, 8, 16)
    return {"image": 4 * partition * 2 ** (stages - 1) * _pick(rng, 1, 2), "stem": _pick(rng, 16, 32),
            "partition": partition, "channels": [head_dim * 2 ** i for i in range(stages)],
            "layers": [1] * stages, "head_dim": head_dim}


TORCHVISION_FAMILIES: dict[str, tuple[Callable[[Config], "nn.Module"], Callable[[random.Random], Config], str]] = {
    "resnet": (_build_tv_resnet, _tv_sampler(_tv_resnet), "x"),
    "mobilenet_v2": (_build_tv_mobilenet_v2, _tv_sampler(lambda r: {"width_mult": _pick(r, 0.25, 0.35, 0.5)}), "x"),
    "mobilenet_v3": (_build_tv_mobilenet_v3,
                     _tv_sampler(lambda r: {"arch": _pick(r, "mobilenet_v3_small", "mobilenet_v3_large"),
                                            "width_mult": _pick(r, 0.25, 0.5, 0.75)}), "x"),
    "efficientnet": (_build_tv_efficientnet,
                     _tv_sampler(lambda r: {"arch": "efficientnet_b0", "width_mult": _pick(r, 0.25, 0.5),
                                            "depth_mult": _pick(r, 0.25, 0.5)}), "x"),
    "shufflenet_v2": (_build_tv_shufflenet,
                      _tv_sampler(lambda r: {"repeats": [r.randint(1, 3) for _ in range(3)],
                                             "channels": [24, *(_pick(r, 24, 48) * 2 ** i for i in range(3)),
                                                          _pick(r, 128, 256)]}), "x"),
    "regnet": (_build_tv_regnet,
               _tv_sampler(lambda r: {"depth": r.randint(4, 10), "w_0": _pick(r, 16, 24), "w_a": _pick(r, 8.0, 12.0),
                                      "w_m": _pick(r, 2.0, 2.5), "group_width": 8,
                                      "se_ratio": _pick(r, None, 0.25), "stem_width": _pick(r, 16, 32)}), "x"),
    "densenet": (_build_tv_densenet,
                 _tv_sampler(lambda r: {"growth_rate": _pick(r, 8, 12, 16),
                                        "block_config": [r.randint(1, 3) for _ in range(4)],
                                        "init_features": _pick(r, 16, 24, 32), "bn_size": _pick(r, 2, 4)}), "x"),
    "mnasnet": (_build_tv_mnasnet, _tv_sampler(lambda r: {"alpha": _pick(r, 0.5, 0.75, 1.0)}), "x"),
    "squeezenet": (_build_tv_squeezenet, _tv_sampler(lambda r: {"version": _pick(r, "1_0", "1_1")}, (48, 64)), "x"),
    "convnext": (_build_tv_convnext,
                 _tv_sampler(lambda r: {"dims": [_pick(r, 8, 16) * 2 ** i for i in range(r.randint(2, 4))],
                                        "depths": [r.randint(1, 2) for _ in range(4)]}), "x"),
    "vit": (_build_tv_vit, _tv_sampler(_tv_vit_config), "x"),
    "swin": (_build_tv_swin, _tv_sampler(_tv_swin_config), "x"),
    "maxvit": (_build_tv_maxvit, _tv_sampler(_tv_maxvit_config), "x"),
    "googlenet": (_build_tv_googlenet, _tv_sampler(lambda r: {}, (48, 64)), "x"),
    "fpn_resnet": (_build_tv_fpn_resnet,
                   _tv_sampler(lambda r: {"backbone": _pick(r, "resnet18", "resnet34"),
                                          "returned": sorted(r.sample([1, 2, 3, 4], r.randint(2, 4)))}, (64,)), "x"),
    "fpn_mobilenet": (_build_tv_fpn_mobilenet,
                      _tv_sampler(lambda r: {"backbone": _pick(r, "mobilenet_v3_small", "mobilenet_v3_large")},
                                  (64,)), "x"),
    "lraspp": (_build_tv_lraspp, _tv_sampler(lambda r: {"width_mult": _pick(r, 0.25, 0.5)}, (32, 64)), "x"),
    "deeplabv3_mobilenet": (_build_tv_deeplab_mobilenet,
                            _tv_sampler(lambda r: {"width_mult": _pick(r, 0.25, 0.5)}, (32, 64)), "x"),
    "segmentation_resnet": (_build_tv_fcn_resnet,
                            _tv_sampler(lambda r: {"head": _pick(r, "fcn", "deeplabv3"),
                                                   "layers": [1, 1, r.randint(1, 2), 1],
                                                   "width_per_group": _pick(r, 16, 32)}, (32, 48)), "x"),
}


def _tv_builder(make: Callable[[Config], "nn.Module"]) -> Callable[[Config, int], tuple["nn.Module", Inputs]]:
    def build(config: Config, batch: int) -> tuple["nn.Module", Inputs]:
        model = make(config)
        return model, pixels(model, batch, config["image"])

    return build


def torchvision_families() -> dict[str, Family]:
    return {f"torchvision:{name}": Family(f"torchvision:{name}", "torchvision", sample, _tv_builder(make))
            for name, (make, sample, _) in TORCHVISION_FAMILIES.items()}
