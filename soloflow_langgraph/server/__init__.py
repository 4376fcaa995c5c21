"""Serving SoloFlow: the REST API (:mod:`.api`, FastAPI) and the MCP server (:mod:`.mcp`,
the official ``mcp`` SDK), both over one :class:`~.service.SoloFlowService`.

They need the ``api`` extra: ``pip install 'soloflow-engine[api]'``. Reference:
``docs/serve.md``.
"""

from __future__ import annotations

import importlib

__all__ = ["API_EXTRA_HINT", "missing_api_packages"]

API_EXTRA_HINT = "pip install 'soloflow-engine[api]'"
_API_PACKAGES = ("fastapi", "uvicorn", "mcp")


def missing_api_packages(packages: tuple[str, ...] = _API_PACKAGES) -> list[str]:
    """The packages of the ``api`` extra that cannot be imported here."""
    missing = []
    for name in packages:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing
