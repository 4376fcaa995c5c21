"""The ``soloflow`` app: global options, error handling, sub-command groups."""

from __future__ import annotations

import gc
import json
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import typer
from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from typer.core import TyperGroup

from soloflow_core.errors import ExecutorNotFoundError, InvalidNameError, SoloFlowError
from soloflow_core.models.names import check_name

if TYPE_CHECKING:
    from soloflow_core.learning.config import LearningConfig
    from soloflow_core.store import Store

MAX_LIMIT = 100_000
"""Largest ``--limit``-like option (how many rows to show or propose)."""
MAX_COUNT = 2**31 - 1
"""Largest count, version or id-like number option (what the databases store)."""


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Characters that drive a terminal (ESC, BEL, ...): shown as ``\\xNN``, never sent."""


class _LiteralSafeConsole(Console):
    """A console on which stored text can never crash a command or drive the terminal: a
    string whose markup rich cannot parse (a task text holding ``[/x]``) is printed as it is,
    and control characters (an ESC sequence in a stored text) are shown escaped. Stored text
    is escaped where it is printed; this is the net under the places that forget."""

    def render_str(self, text: str, **kwargs: Any) -> Any:  # type: ignore[override]
        text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
        try:
            return super().render_str(text, **kwargs)
        except MarkupError:
            return super().render_str(text, **{**kwargs, "markup": False})


# No automatic highlighting: it colours stored text as if it were Python, and rich's
# highlighter takes seconds on one long number in a task text.
err = _LiteralSafeConsole(stderr=True, highlight=False)
out = _LiteralSafeConsole(highlight=False)


INTERRUPTED_EXIT = 130
"""The exit code of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT), as shells use."""


class _SoloFlowGroup(TyperGroup):
    """Turns a SoloFlowError anywhere below into one clear line on stderr, exit code 1, and a
    Ctrl-C into one line and exit code 130."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except ExecutorNotFoundError as exc:
            # Forgetting --tools is the usual cause: one line that says so, not one per step.
            err.print(f"error: {_no_executor(exc)}", highlight=False, markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except SoloFlowError as exc:
            # The message is plain text: a '[word]' in it is not markup.
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            # Click ends the process with 130 and not a word: say it stopped.
            err.print("interrupted (Ctrl-C).", highlight=False, markup=False)
            raise typer.Exit(INTERRUPTED_EXIT) from None


def _no_executor(exc: ExecutorNotFoundError) -> str:
    known = ", ".join(exc.registered[:20]) or "none"
    return (
        f"flow {exc.flow!r} calls {', '.join(exc.skill_keys)}, which no executor provides "
        f"(known: {known}); pass the agent's tools with --tools module:ATTR (for "
        "./mytools.py: --tools mytools:TOOLS) or register them in a plugin's "
        "soloflow_register_executors"
    )


app = typer.Typer(
    cls=_SoloFlowGroup,
    name="soloflow",
    help="SoloFlow: capture agent tool calls, detect repeated workflows, run them as flows.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


class Namespace(TypedDict):
    user_id: str
    agent_id: str


@dataclass
class Context:
    db: str | None
    user: str
    agent: str
    command: typer.Context | None = None
    """The invocation's root context."""
    _store: Store | None = None

    def store(self, *, create: bool = False) -> Store:
        """The database the command works on, opened once. Only a command that writes
        passes ``create``: for the others a missing SQLite file is an error naming it."""
        if self._store is None:
            from soloflow_langgraph.cli._database import open_store  # SQLAlchemy: only when used

            self._store = open_store(self.db, create=create)
            if self.command is not None:  # closed when the invocation ends, after the command's own
                self.command.call_on_close(self._store.close)
        return self._store

    def close(self) -> None:
        """Close the store a command opened (also after an error)."""
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def ns(self) -> Namespace:
        return {"user_id": self.user, "agent_id": self.agent}

    def learning_config(self) -> LearningConfig:
        """The learning settings in force (config file, ``SOLOFLOW_LEARNING_*``)."""
        from soloflow_core.learning.config import load_learning_config

        return load_learning_config()


def _version(value: bool) -> None:
    if value:
        from soloflow_core import __version__

        sys.stdout.write(f"soloflow {__version__}\n")
        raise typer.Exit()


@app.callback()
def _global(
    ctx: typer.Context,
    _show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    db: str | None = typer.Option(
        None,
        "--db",
        envvar="SOLOFLOW_DATABASE_URL",
        help="Database URL (sqlite:///file.db, postgresql://...) or a SQLite file path. "
        "Default: the embedded file under $SOLOFLOW_HOME or ~/.local/share/soloflow.",
    ),
    user: str = typer.Option(
        "default", "--user", envvar="SOLOFLOW_USER", help="Your user id (namespace)."
    ),
    agent: str = typer.Option(
        "default", "--agent", envvar="SOLOFLOW_AGENT", help="The agent id (namespace)."
    ),
) -> None:
    for option, value in (("--user", user), ("--agent", agent)):
        _check_namespace(option, value)
    ctx.obj = Context(db=db, user=user, agent=agent, command=ctx)


MAX_NAMESPACE = 255
"""Longest user or agent id (the databases' column width)."""


def _check_namespace(option: str, value: str) -> None:
    """A user or agent id the store can hold: 1–255 characters, none of them a control
    character (an unset shell variable, ``--user "$USERNAME"``, gives an empty one)."""
    env = "SOLOFLOW_USER" if option == "--user" else "SOLOFLOW_AGENT"
    if not value.strip():
        raise typer.BadParameter(
            f"is empty; give an id (or unset {env}, for 'default')", param_hint=option
        )
    if len(value) > MAX_NAMESPACE:
        raise typer.BadParameter(
            f"is {len(value):,} characters; at most {MAX_NAMESPACE}", param_hint=option
        )
    try:
        check_name(value, option)
    except InvalidNameError as exc:
        raise typer.BadParameter(
            f"holds a control character (U+{ord(exc.character):04X}) at position "
            f"{exc.position}; a user or agent id is one line of printable text: remove it",
            param_hint=option,
        ) from None


def print_json(value: Any) -> None:
    """Only JSON on stdout."""
    sys.stdout.write(json.dumps(value, indent=2, default=str, ensure_ascii=False) + "\n")


def fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    # A short-lived process: what the imports built lives until exit. Frozen, it is left out
    # of the full collections that a command building many objects (detect, ingest) triggers.
    gc.freeze()
    app(args=argv)
