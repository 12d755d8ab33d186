"""The hooks a modelexport plugin can implement.

A plugin is a package with an entry point in the group ``modelexport`` that points at a
module implementing these hooks with ``@modelexport_core.hookimpl``.
"""

from __future__ import annotations

import pluggy

from modelexport_core.plugin.strategy import TaggingStrategy

PROJECT_NAME = "modelexport"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def modelexport_strategies() -> list[type[TaggingStrategy]]:
    """Return the tagging-strategy classes this plugin provides.

    Example::

        from modelexport_core import hookimpl

        @hookimpl
        def modelexport_strategies():
            from modelexport_core.plugin.strategy import MyStrategy
            return [MyStrategy]
    """
    raise NotImplementedError  # a specification: pluggy calls the plugins' implementations
