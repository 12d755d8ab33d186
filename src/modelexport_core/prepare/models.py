"""Loading the model to export: a preset, a Python factory, or a Hugging Face id or directory."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core.errors import ModelLoadError, first_line
from modelexport_core.prepare.presets import PRESETS, build_preset

if TYPE_CHECKING:
    import torch

PRESET_PREFIX = "preset:"


@dataclass
class LoadedModel:
    """A model ready to export, with example inputs where its source gave them."""

    model: "torch.nn.Module"
    source: str
    kind: str  # "preset", "factory" or "huggingface"
    inputs: dict[str, "torch.Tensor"] | None = None
    tokenizer: Any = None
    by_keyword: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _is_factory_spec(spec: str) -> bool:
    target, sep, attribute = spec.rpartition(":")
    if not sep or not target or not attribute.isidentifier():
        return False
    return target.endswith(".py") or all(part.isidentifier() for part in target.split("."))


@contextlib.contextmanager
def _on_import_path(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` while a factory loads, as when running it as a script."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        if entry in sys.path:
            sys.path.remove(entry)


def _import_factory(spec: str):
    target, _, attribute = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise ModelLoadError(f"factory file {target} does not exist")
        module_name = f"modelexport_factory_{path.stem}_{abs(hash(path.resolve()))}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise ModelLoadError(f"cannot import {target}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        try:
            with _on_import_path(path.resolve().parent):
                module_spec.loader.exec_module(module)
        except Exception as error:
            raise ModelLoadError(f"importing {target} failed: {type(error).__name__}: {first_line(error)}") from error
    else:
        try:
            with _on_import_path(Path.cwd()):
                module = importlib.import_module(target)
        except Exception as error:
            raise ModelLoadError(f"cannot import module {target!r}: {first_line(error)}") from error
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ModelLoadError(f"{target} has no callable {attribute!r}")
    return factory


def positional_names(model: "torch.nn.Module", count: int) -> list[str]:
    """Names for ``count`` positional inputs: ``forward``'s parameter names, else ``input_0``, ..."""
    from modelexport_core.prepare.wrapper import forward_parameters

    params = forward_parameters(model)
    named = []
    for name, param in params.items():
        if param.kind is param.VAR_POSITIONAL:
            break
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            named.append(name)
    return named[:count] if len(named) >= count else [f"input_{i}" for i in range(count)]


def tensor_inputs(value: Any, spec: str, model: "torch.nn.Module") -> dict[str, "torch.Tensor"]:
    """Example inputs given as a tensor, a tuple of tensors (named after ``forward``'s parameters) or a dict."""
    import torch

    if isinstance(value, torch.Tensor):
        value = (value,)
    if isinstance(value, dict):
        if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items()):
            raise ModelLoadError(f"{spec}: inputs are not a dict of name -> tensor")
        return dict(value)
    if isinstance(value, (tuple, list)):
        if not all(isinstance(v, torch.Tensor) for v in value):
            raise ModelLoadError(f"{spec}: inputs are not a tuple of tensors")
        return dict(zip(positional_names(model, len(value)), value))
    raise ModelLoadError(f"{spec}: inputs of type {type(value).__name__}; expected a tensor, a tuple or a dict")


def load_factory(spec: str) -> LoadedModel:
    """Call ``path/to/file.py:callable`` or ``package.module:callable``: a module or (module, inputs)."""
    import torch

    factory = _import_factory(spec)
    try:
        produced = factory()
    except Exception as error:
        raise ModelLoadError(f"factory {spec} raised {type(error).__name__}: {first_line(error)}") from error
    inputs = None
    by_keyword = None
    if isinstance(produced, tuple) and len(produced) == 2 and isinstance(produced[0], torch.nn.Module):
        produced, raw_inputs = produced
        inputs = tensor_inputs(raw_inputs, spec, produced)
        by_keyword = isinstance(raw_inputs, dict)
    if not isinstance(produced, torch.nn.Module):
        raise ModelLoadError(
            f"factory {spec} returned {type(produced).__name__}; expected an nn.Module or (nn.Module, inputs)"
        )
    return LoadedModel(produced.eval(), spec, "factory", inputs=inputs, by_keyword=by_keyword)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model")


def _has_tokenizer_files(folder: Path) -> bool:
    """Whether a model folder ships a tokenizer (transformers would otherwise invent an empty one)."""
    return any((folder / name).is_file() for name in _TOKENIZER_FILES)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers at all (offline mode and no network both say no at once)."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def load_pretrained(spec: str) -> LoadedModel:
    """A transformers model from a local directory or a Hugging Face id, with its tokenizer if it has one.

    Without a network, an id is looked up in the local cache only, so a missing model fails
    at once instead of after the hub client's retries.
    """
    import transformers

    local = Path(spec).expanduser()
    if not local.exists() and (spec.startswith(("/", ".", "~")) or spec.count("/") > 1):
        raise ModelLoadError(f"{spec}: no such directory (and not a preset:NAME, factory or model id)")
    if local.exists() and not local.is_dir():
        raise ModelLoadError(f"{spec} is a file, not a model directory; give a directory, a preset or a factory")
    source = str(local) if local.is_dir() else spec
    offline = not local.is_dir() and not hub_reachable()
    try:
        model = transformers.AutoModel.from_pretrained(source, local_files_only=offline)
    except Exception as error:
        if offline:
            raise ModelLoadError(
                f"cannot load {spec!r}: it is not in the local Hugging Face cache and the hub cannot be reached "
                "(no network or HF_HUB_OFFLINE); give a local model directory, a preset:NAME or a factory"
            ) from error
        where = "local directory" if local.is_dir() else "model id (no local directory of that name)"
        raise ModelLoadError(f"cannot load {spec!r} as a {where}: {first_line(error)}") from error
    tokenizer = None
    if not local.is_dir() or _has_tokenizer_files(local):
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=offline)
        except Exception:  # many models (vision, random configs) have no tokenizer; inputs come from the config
            tokenizer = None
    return LoadedModel(model.eval(), spec, "huggingface", tokenizer=tokenizer)


def load_model(spec: str) -> LoadedModel:
    """Load what ``spec`` names: ``preset:NAME``, a factory ``file.py:fn`` / ``pkg.mod:fn``, or an id/directory."""
    if spec.startswith(PRESET_PREFIX):
        name = spec[len(PRESET_PREFIX):]
        if name not in PRESETS:
            raise ModelLoadError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
        return LoadedModel(build_preset(name), spec, "preset")
    if _is_factory_spec(spec) and not Path(spec).exists():
        return load_factory(spec)
    return load_pretrained(spec)
