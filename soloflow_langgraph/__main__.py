"""``soloflow`` and ``python -m soloflow_langgraph``: the command line, with a quiet Ctrl-C
(while it loads — the commands import LangGraph and the stores, a second or two on a busy
machine — Ctrl-C would otherwise print Python's ``KeyboardInterrupt`` traceback)."""

from __future__ import annotations

import sys

INTERRUPTED_EXIT = 130
"""128 + SIGINT, as shells report a command stopped by Ctrl-C."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: load the commands, then run one. A Ctrl-C no command
    handles itself (``flows run`` records its run as interrupted) ends the process with
    exit code 130 and one line, not a traceback."""
    loaded = False
    try:
        from soloflow_langgraph.cli import main as run_command

        loaded = True
        run_command(argv)
    except KeyboardInterrupt:
        sys.stderr.write(
            "interrupted (Ctrl-C)" + ("" if loaded else " while starting: nothing ran") + ".\n"
        )
        raise SystemExit(INTERRUPTED_EXIT) from None


if __name__ == "__main__":
    main()
