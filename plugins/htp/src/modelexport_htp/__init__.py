"""modelexport plugin: the ``htp`` (Hierarchical Trace-and-Project) strategy."""

from modelexport_core.sdk import hookimpl


@hookimpl
def modelexport_strategies():
    from .strategy import HTPStrategy

    return [HTPStrategy]
