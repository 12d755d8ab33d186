"""Discovering strategies: pluggy plugins found through the ``modelexport`` entry points."""

from __future__ import annotations

import importlib.metadata
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pluggy

from modelexport_core.errors import DuplicateStrategyError, UnknownStrategyError
from modelexport_core.plugin import hookspecs
from modelexport_core.plugin.strategy import TaggingStrategy

ENTRY_POINT_GROUP = hookspecs.PROJECT_NAME


class PluginLoadWarning(UserWarning):
    """A plugin failed to load or to answer its hook; the other plugins still work."""


@dataclass(frozen=True)
class StrategyInfo:
    """An installed strategy and where it comes from."""

    strategy: type[TaggingStrategy]
    distribution: str
    version: str

    @property
    def name(self) -> str:
        return self.strategy.name

    @property
    def priority(self) -> int:
        return self.strategy.priority

    @property
    def tag_priority(self) -> int:
        """Order among strategies that tag an existing file, highest first."""
        declared = self.strategy.tag_priority
        return self.priority if declared is None else declared

    @property
    def can_tag_existing(self) -> bool:
        """Whether the strategy tags ONNX files exported elsewhere (``modelexport tag``)."""
        return self.strategy.tag_onnx is not TaggingStrategy.tag_onnx


def make_plugin_manager(load_entry_points: bool = True) -> pluggy.PluginManager:
    """A fresh plugin manager with the hookspecs and, by default, every installed plugin."""
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    if load_entry_points:
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            distribution = entry_point.dist.name if entry_point.dist else "unknown"
            if pm.get_plugin(entry_point.name) is not None:
                continue
            try:
                plugin = entry_point.load()
            except Exception as error:  # a broken plugin must not break the others
                warnings.warn(
                    f"plugin {entry_point.name!r} from {distribution} failed to load: {error}",
                    PluginLoadWarning,
                    stacklevel=2,
                )
                continue
            pm.register(plugin, name=entry_point.name)
    pm.check_pending()
    return pm


def _distribution_of(plugin: object, pm: pluggy.PluginManager,
                     entry_points: "importlib.metadata.EntryPoints") -> tuple[str, str]:
    module_name = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
    plugin_name = pm.get_name(plugin) or module_name
    for entry_point in entry_points:
        if entry_point.name == plugin_name and entry_point.dist is not None:
            return entry_point.dist.name, entry_point.dist.version
    top_level = module_name.split(".")[0]
    for distribution in importlib.metadata.packages_distributions().get(top_level, []):
        return distribution, importlib.metadata.version(distribution)
    return f"(registered in process: {module_name})", ""


def get_strategies(pm: pluggy.PluginManager | None = None) -> list[StrategyInfo]:
    """Every installed strategy, highest priority first (ties by name)."""
    pm = pm or make_plugin_manager()
    found: dict[str, StrategyInfo] = {}
    entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)  # read once, not once per plugin
    for hookimpl in pm.hook.modelexport_strategies.get_hookimpls():
        distribution, version = _distribution_of(hookimpl.plugin, pm, entry_points)
        try:
            listed: Any = hookimpl.function()
            strategies: list[Any] = list(listed or [])
        except Exception as error:
            warnings.warn(
                f"plugin {hookimpl.plugin_name!r} from {distribution} failed to list its strategies: {error}",
                PluginLoadWarning,
                stacklevel=2,
            )
            continue
        for strategy in strategies:
            name = getattr(strategy, "name", None)
            if not isinstance(name, str) or not name or name != name.lower():
                warnings.warn(
                    f"{distribution} offers a strategy without a lowercase name ({strategy!r}); skipped",
                    PluginLoadWarning,
                    stacklevel=2,
                )
                continue
            if name in found and found[name].strategy is not strategy:
                raise DuplicateStrategyError(
                    f"strategy {name!r} is provided by both {found[name].distribution} and {distribution}; "
                    f"uninstall one of them"
                )
            found[name] = StrategyInfo(strategy, distribution, version)
    return sorted(found.values(), key=lambda info: (-info.priority, info.name))


def get_strategy(name: str, pm: pluggy.PluginManager | None = None) -> StrategyInfo:
    """The installed strategy called ``name``."""
    strategies = get_strategies(pm)
    for info in strategies:
        if info.name == name:
            return info
    installed = ", ".join(info.name for info in strategies) or "none"
    raise UnknownStrategyError(f"unknown strategy {name!r}; installed: {installed}")
