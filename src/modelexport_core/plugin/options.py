"""Strategy-specific options: parsing ``-O strategy.option=value`` against what strategies declare."""

from __future__ import annotations

from typing import Any

from modelexport_core.errors import StrategyOptionError
from modelexport_core.plugin.strategy import TaggingStrategy

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_assignments(assignments: list[str]) -> dict[str, dict[str, str]]:
    """``["fx.optimize=false"]`` -> ``{"fx": {"optimize": "false"}}``."""
    parsed: dict[str, dict[str, str]] = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        strategy, dot, option = key.partition(".")
        if not sep or not dot or not strategy or not option:
            raise StrategyOptionError(f"strategy option {assignment!r} must look like STRATEGY.OPTION=VALUE")
        parsed.setdefault(strategy, {})[option] = value
    return parsed


def _convert(strategy: str, option: str, kind: type, value: str) -> Any:
    if kind is bool:
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise StrategyOptionError(f"{strategy}.{option} takes true or false, not {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError) as error:
        raise StrategyOptionError(f"{strategy}.{option} takes a {kind.__name__}, not {value!r}") from error


def resolve_options(strategy: type[TaggingStrategy], given: dict[str, str]) -> dict[str, Any]:
    """The strategy's declared options with defaults, overridden by the values the user gave."""
    declared = {option.name: option for option in strategy.options}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise StrategyOptionError(f"strategy {strategy.name!r} has no option {unknown[0]!r}; its options: {known}")
    resolved = {name: option.default for name, option in declared.items()}
    for name, value in given.items():
        resolved[name] = _convert(strategy.name, name, declared[name].type, value)
    return resolved
