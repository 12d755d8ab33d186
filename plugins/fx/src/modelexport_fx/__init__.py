"""modelexport plugin: the ``fx`` strategy (module of each node read from the FX graph of torch.export)."""

from modelexport_core.sdk import hookimpl


@hookimpl
def modelexport_strategies():
    from .strategy import FxStrategy

    return [FxStrategy]
