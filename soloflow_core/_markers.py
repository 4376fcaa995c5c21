"""The pluggy markers of the ``soloflow`` project."""

import pluggy

PROJECT_NAME = "soloflow"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
