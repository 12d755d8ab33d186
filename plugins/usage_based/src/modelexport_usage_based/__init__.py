"""modelexport plugin: the ``usage_based`` strategy."""

from modelexport_core.sdk import hookimpl


@hookimpl
def modelexport_strategies():
    from .strategy import UsageBasedStrategy

    return [UsageBasedStrategy]
