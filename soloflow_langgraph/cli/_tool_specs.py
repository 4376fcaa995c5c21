"""``--tools module:ATTR``: the tools a command's flow steps call, named on the command line.

The module is imported as ``python -m`` would import it: the current directory comes first on
the path, so ``--tools mytools:TOOLS`` finds ``./mytools.py``. A file path works too
(``--tools ./agents/tools.py:TOOLS``). Whatever goes wrong — no such module or file, an error
while importing it, an attribute that holds no tool — is one error naming the spec.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from soloflow_core.errors import SoloFlowError

__all__ = ["load_tools"]

_FORM = "write it as module.path:ATTRIBUTE (or path/to/file.py:ATTRIBUTE)"


def load_tools(spec: str) -> list[Any]:
    """``module:attr`` or ``file.py:attr`` → the tools it names: a list, tuple or dict of tools
    (a dict's values), or one tool. A tool is anything with a ``name`` (a LangChain tool) or a
    ``__name__`` (a function).

    Raises:
        SoloFlowError: the spec is malformed, its module cannot be imported, or it names no
            tool; the message names the spec and how to fix it.
    """
    source, _, attr = spec.rpartition(":")
    if not source or not attr or not attr.isidentifier():
        raise SoloFlowError(f"--tools {spec!r}: {_FORM}")
    module = _import(spec, source)
    try:
        value = getattr(module, attr)
    except AttributeError:
        public = sorted(n for n in vars(module) if not n.startswith("_"))[:20]
        raise SoloFlowError(
            f"--tools {spec!r}: {source!r} has no attribute {attr!r}"
            + (f" (it has: {', '.join(public)})" if public else "")
        ) from None
    if isinstance(value, dict):
        value = list(value.values())
    tools = list(value) if isinstance(value, list | tuple) else [value]
    if not tools:
        raise SoloFlowError(f"--tools {spec!r}: {attr} is empty; it must hold the tools")
    for tool in tools:
        if not (getattr(tool, "name", None) or getattr(tool, "__name__", None)):
            raise SoloFlowError(
                f"--tools {spec!r}: {_describe(tool)} is not a tool; {attr} must be a tool, or "
                "a list or dict of tools (LangChain tools, or functions)"
            )
    return tools


def _import(spec: str, source: str) -> ModuleType:
    if source.endswith(".py") or os.sep in source or "/" in source:
        return _import_file(spec, Path(source))
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does: ./mytools.py is `mytools`
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as exc:
        if exc.name is not None and source.split(".")[0] == exc.name.split(".")[0]:
            raise SoloFlowError(
                f"--tools {spec!r}: no module {exc.name!r} here ({cwd}) nor on the Python "
                "path; run the command from the directory that holds it, set PYTHONPATH, "
                "or give the file: --tools path/to/file.py:ATTRIBUTE"
            ) from None
        raise SoloFlowError(_failed(spec, source, exc)) from None
    except Exception as exc:  # the user's module raised while it was imported
        raise SoloFlowError(_failed(spec, source, exc)) from None


def _import_file(spec: str, path: Path) -> ModuleType:
    if not path.is_file():
        raise SoloFlowError(f"--tools {spec!r}: no file {str(path)!r}; check the path")
    name = f"soloflow_tools_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise SoloFlowError(f"--tools {spec!r}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up here
    # Its folder on the path, so that it can import the files beside it.
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise SoloFlowError(_failed(spec, str(path), exc)) from None
    return module


def _failed(spec: str, source: str, exc: BaseException) -> str:
    """Importing ``source`` raised ``exc``: what and where, without the import machinery."""
    where, message = "", str(exc)
    if isinstance(exc, SyntaxError) and exc.filename:
        where, message = f" ({exc.filename}, line {exc.lineno})", str(exc.msg)
    else:
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename
        ]
        if frames:
            where = f" ({frames[-1].filename}, line {frames[-1].lineno})"
    return f"--tools {spec!r}: importing {source!r} failed: {type(exc).__name__}: {message}{where}"


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}{'…' if len(text) > 60 else ''} (of type {type(value).__name__})"
