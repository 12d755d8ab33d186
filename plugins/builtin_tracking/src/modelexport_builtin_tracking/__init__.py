"""modelexport plugin: the ``builtin_tracking`` strategy."""

from modelexport_core.sdk import hookimpl


@hookimpl
def modelexport_strategies():
    from .strategy import BuiltinTrackingStrategy

    return [BuiltinTrackingStrategy]
