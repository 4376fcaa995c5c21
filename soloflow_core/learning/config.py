"""Learning settings: when SoloFlow learns a flow, and what it does with learned flows.

Values come from four places; the first that sets a field wins::

    code (overrides=...)  >  SOLOFLOW_LEARNING_<FIELD>  >  config file  >  defaults

The config file is ``soloflow.toml`` (a ``[learning]`` table) or ``pyproject.toml`` (a
``[tool.soloflow.learning]`` table), found from the working directory upward. Durations are
seconds (``learning_window = 300``) or a string with units (``"5m"``, ``"100ms"``,
``"1m30s"``). Every bad value is a :class:`~soloflow_core.errors.ConfigError` naming the file
and key (with its line) or the environment variable, and saying what is expected.
Reference: ``docs/learning.md``.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from soloflow_core.errors import ConfigError

__all__ = [
    "ENV_PREFIX",
    "LearningConfig",
    "SuggestionMode",
    "find_config_file",
    "format_duration",
    "load_learning_config",
    "parse_duration",
]

SuggestionMode = Literal["manual", "automatic", "hybrid"]
ENV_PREFIX = "SOLOFLOW_LEARNING_"


class LearningConfig(BaseModel):
    """When a run teaches SoloFlow a flow, and how learned flows are used.

    Durations are seconds (floats); validation also accepts a ``timedelta`` or a string
    such as ``"5m"`` or ``"100ms"`` (typed code passes them through ``model_validate`` or
    ``load_learning_config(overrides=...)``).

    >>> LearningConfig.model_validate({"learning_window": "2m"}).learning_window
    120.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    """Learn from runs at all."""
    min_steps_to_learn: int = Field(default=3, ge=2)
    """A run teaches a flow only with at least this many consecutive successful tool calls."""
    min_success_rate: float = Field(default=0.6, ge=0.0, le=1.0)
    """A flow whose success rate falls below this (after 5 executions) is demoted to
    suggestion-only."""
    confidence_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    """A flow runs without asking (``auto_execute``), or is promoted automatically, only with
    at least this confidence."""
    max_workflows_per_agent: int = Field(default=1000, ge=1)
    """Flows kept per (user, agent); past it, learned flows are evicted (never user-written)."""
    learning_timeout: float = Field(default=0.1, gt=0.0)
    """Seconds the agent waits for the learning step after a run; it then moves on."""
    learning_window: float = Field(default=300.0, gt=0.0)
    """Seconds allowed between two tool calls of one learned sequence."""
    auto_execute: bool = False
    """Run a matching flow without asking when its confidence ≥ ``confidence_threshold``."""
    suggestion_mode: SuggestionMode = "manual"
    """How candidates become flows: ``manual`` (a person approves), ``automatic`` (promoted
    when confidence and replay fidelity pass their thresholds), ``hybrid`` (automatic for
    read-only flows, manual otherwise)."""

    @field_validator("learning_timeout", "learning_window", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, bool):  # an int to Python, never a duration to a person
            raise ValueError(f"{value!r} is not a duration")
        if isinstance(value, timedelta):
            return value.total_seconds()
        if isinstance(value, str):
            return parse_duration(value)
        return value


FIELD_HINTS: dict[str, str] = {
    "enabled": "true or false",
    "min_steps_to_learn": "an integer ≥ 2",
    "min_success_rate": "a number between 0 and 1",
    "confidence_threshold": "a number between 0 and 1",
    "max_workflows_per_agent": "an integer ≥ 1",
    "learning_timeout": 'a duration > 0: seconds (0.1) or with a unit ("100ms")',
    "learning_window": 'a duration > 0: seconds (300) or with a unit ("5m")',
    "auto_execute": "true or false",
    "suggestion_mode": '"manual", "automatic" or "hybrid"',
}
"""What each field accepts, for error messages and the docs' reference table."""

_FIELDS = tuple(LearningConfig.model_fields)
_DURATION_FIELDS = frozenset({"learning_timeout", "learning_window"})
_BOOL_FIELDS = frozenset({"enabled", "auto_execute"})
_INT_FIELDS = frozenset({"min_steps_to_learn", "max_workflows_per_agent"})
_FLOAT_FIELDS = frozenset({"min_success_rate", "confidence_threshold"})

# --------------------------------------------------------------------------- durations

_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|sec|min|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a duration string: a number of seconds or parts with units.

    Units: ``ms``, ``s``, ``m``/``min``, ``h``; parts add up.

    >>> parse_duration("300"), parse_duration("5m"), parse_duration("100ms"), parse_duration("1m30s")
    (300.0, 300.0, 0.1, 90.0)

    Raises:
        ValueError: not a duration (the message says what is accepted).
    """
    s = text.strip().lower()
    try:
        return float(s)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if s[pos : m.start()].strip():
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos == 0 or s[pos:].strip():
        raise ValueError(
            f"{text!r} is not a duration; write seconds (300) or a number with a unit: "
            '"100ms", "30s", "5m", "1h", "1m30s"'
        )
    return total


def format_duration(seconds: float) -> str:
    """A short human form of a duration: ``5m``, ``4m10s``, ``100ms``, ``1.5s``.

    >>> format_duration(300), format_duration(250), format_duration(0.1), format_duration(1.5)
    ('5m', '4m10s', '100ms', '1.5s')
    """
    if seconds < 1:
        return f"{seconds * 1000:.4g}ms"
    if seconds < 60:
        return f"{seconds:.4g}s"
    minutes, rest = divmod(seconds, 60)
    if minutes >= 60:
        hours, minutes = divmod(minutes, 60)
        return f"{hours:.0f}h" + (f"{minutes:.0f}m" if minutes else "")
    return f"{minutes:.0f}m" + (f"{rest:.3g}s" if rest >= 0.5 else "")


# --------------------------------------------------------------------------- the config file

_PYPROJECT = "pyproject.toml"
_SOLOFLOW_TOML = "soloflow.toml"


def find_config_file(start: str | Path | None = None) -> Path | None:
    """The config file in force for ``start`` (the working directory by default).

    From ``start`` upward, the first directory with a ``soloflow.toml``, or with a
    ``pyproject.toml`` that has a ``[tool.soloflow]`` table, wins (``soloflow.toml`` first).
    The search stops at a directory holding ``.git`` (the repository's root, still searched)
    and at the filesystem root.
    """
    here = Path(start if start is not None else Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / _SOLOFLOW_TOML
        if candidate.is_file():
            return candidate
        candidate = directory / _PYPROJECT
        if candidate.is_file() and _has_soloflow_table(candidate):
            return candidate
        if (directory / ".git").exists():
            return None
    return None


def _has_soloflow_table(pyproject: Path) -> bool:
    # A cheap text check first: most pyproject.toml files never mention soloflow.
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    return "soloflow" in text and isinstance(
        _parse_toml(pyproject, text).get("tool", {}).get("soloflow"), dict
    )


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message carries line and column
        raise ConfigError(f"{path}: not valid TOML: {exc}; fix the syntax") from None


def _table_path(path: Path) -> tuple[str, ...]:
    return ("tool", "soloflow", "learning") if path.name == _PYPROJECT else ("learning",)


def _read_file(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``learning`` table of ``path`` and, per key, where it stands (for errors)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror or exc})") from None
    table: Any = _parse_toml(path, text)
    keys = _table_path(path)
    for depth, key in enumerate(keys):
        if not isinstance(table, dict) or key not in table:
            return {}, {}
        table = table[key]
        if not isinstance(table, dict):
            dotted = ".".join(keys[: depth + 1])
            raise ConfigError(
                f"{path}: {dotted} must be a table ([{dotted}]), got {type(table).__name__}"
            )
    header = ".".join(keys)
    where = {k: _where(path, text, header=header, key=k) for k in table}
    unknown = sorted(k for k in table if k not in _FIELDS)
    if unknown:
        raise ConfigError(
            "\n".join(f"{where[k]}: unknown setting{_did_you_mean(k)}" for k in unknown)
            + f"\nvalid keys of [{header}]: {', '.join(_FIELDS)}"
        )
    return dict(table), where


def _where(path: Path, text: str, header: str, key: str) -> str:
    """``file:line: [table].key`` — the line found by a text scan (tomllib gives none)."""
    line = _key_line(text, header, key)
    return f"{path}{f':{line}' if line else ''}: [{header}].{key}"


def _key_line(text: str, header: str, key: str) -> int | None:
    in_table = False
    header_re = re.compile(
        r"^\s*\[\s*" + r"\s*\.\s*".join(map(re.escape, header.split("."))) + r"\s*\]"
    )
    key_re = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("["):
            in_table = bool(header_re.match(line))
        elif in_table and key_re.match(line):
            return number
    return None


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, _FIELDS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------- environment


def _read_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    where: dict[str, str] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        field = name[len(ENV_PREFIX) :].lower()
        if field not in _FIELDS:
            valid = ", ".join(ENV_PREFIX + f.upper() for f in _FIELDS)
            close = difflib.get_close_matches(field, _FIELDS, n=1)
            hint = f" (did you mean {ENV_PREFIX + close[0].upper()}?)" if close else ""
            raise ConfigError(
                f"environment variable {name}: unknown setting{hint}; valid variables: {valid}"
            )
        where[field] = f"environment variable {name}"
        values[field] = _env_value(field, raw, where[field])
    return values, where


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _env_value(field: str, raw: str, where: str) -> Any:
    text = raw.strip()
    try:
        if field in _BOOL_FIELDS:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(f"{raw!r} is not a boolean")
        if field in _INT_FIELDS:
            return int(text)
        if field in _FLOAT_FIELDS:
            return float(text)
        if field in _DURATION_FIELDS:
            return parse_duration(text)
    except ValueError:
        raise ConfigError(
            f"{where}: invalid value {raw!r}; expected {FIELD_HINTS[field]}"
        ) from None
    return text


# --------------------------------------------------------------------------- loading


def load_learning_config(
    *,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LearningConfig:
    """The learning settings in force: code overrides > environment > config file > defaults.

    Args:
        path: the config file (``pyproject.toml`` reads ``[tool.soloflow.learning]``, any
            other name ``[learning]``); None searches from the working directory upward
            (:func:`find_config_file`).
        env: the environment (``os.environ`` when None); ``SOLOFLOW_LEARNING_<FIELD>``
            variables are read from it.
        overrides: field → value set in code; they win over everything else.

    Raises:
        ConfigError: a value is invalid or a key unknown; the message names the file and
            key (with its line), the environment variable or the override, and what is
            expected.

    Example::

        # soloflow.toml: [learning] min_steps_to_learn = 4
        # SOLOFLOW_LEARNING_LEARNING_WINDOW=2m
        config = load_learning_config(overrides={"auto_execute": True})
        config.min_steps_to_learn, config.learning_window, config.auto_execute  # (4, 120.0, True)
    """
    file = Path(path) if path is not None else find_config_file()
    if file is not None and path is not None and not file.is_file():
        raise ConfigError(f"{file}: config file not found; check the path")
    file_values, file_where = _read_file(file) if file is not None else ({}, {})
    env_values, env_where = _read_env(os.environ if env is None else env)
    code = dict(overrides or {})
    unknown = sorted(k for k in code if k not in _FIELDS)
    if unknown:
        raise ConfigError(
            "; ".join(f"overrides[{k!r}]: unknown setting{_did_you_mean(k)}" for k in unknown)
            + f"; valid settings: {', '.join(_FIELDS)}"
        )
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for values, where in (
        (file_values, file_where),
        (env_values, env_where),
        (code, {k: f"overrides[{k!r}] (code)" for k in code}),
    ):
        merged.update(values)
        origin.update(where)
    try:
        return LearningConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, origin)) from None


def _explain(exc: ValidationError, origin: Mapping[str, str]) -> str:
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        where = origin.get(field, field or "learning config")
        msg = err["msg"].removeprefix("Value error, ")
        hint = FIELD_HINTS.get(field)
        lines.append(
            f"{where}: invalid value {err.get('input')!r}: {msg}"
            + (f"; expected {hint}" if hint else "")
        )
    return "invalid learning configuration:\n  " + "\n  ".join(lines)
