"""Counting tokens of a text: a real tokenizer when one is installed, else an estimate.

``tiktoken`` is used when it is importable *and* its encoding is already on this machine:
tiktoken downloads its BPE files on first use, and SoloFlow never goes to the network for
that (the loader is guarded; any error falls back). Otherwise the count is the usual rule of
thumb of **four characters per token**, rounded up, which is what ``ScriptedChatModel``
reports too. ``SOLOFLOW_TOKENIZER=estimate`` forces the estimate (for identical summaries on
every machine).

This module imports no LangChain, so the built-in summariser plugin can use it cheaply.

Example:
    >>> from soloflow_langgraph.sequential.tokens import estimate_tokens
    >>> estimate_tokens("twelve chars")
    3
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "CHARS_PER_TOKEN",
    "ENV_TOKENIZER",
    "ESTIMATE",
    "TokenCounter",
    "count_tokens",
    "default_token_counter",
    "estimate_tokens",
    "load_tiktoken_offline",
]

CHARS_PER_TOKEN = 4
"""The estimate used when no tokenizer is available."""
ENV_TOKENIZER = "SOLOFLOW_TOKENIZER"
"""``estimate`` forces the estimate; anything else (or unset) tries tiktoken first."""
TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base")
"""Tried in this order; the first one already on this machine is used."""


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``: the estimate. Sub-additive, so parts never under-count a whole."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts and truncates by tokens with one tokenizer."""

    name: str
    """``"tiktoken:<encoding>"`` or ``"estimate:4-chars-per-token"``."""
    encode: Callable[[str], Sequence[int]] | None = None
    decode: Callable[[Sequence[int]], str] | None = None

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        if self.encode is None:
            return estimate_tokens(text)
        return len(self.encode(text))

    def truncate(self, text: str, budget: int) -> str:
        """The longest prefix of ``text`` that has at most ``budget`` tokens (about)."""
        if budget <= 0:
            return ""
        if self.encode is None or self.decode is None:
            return text[: budget * CHARS_PER_TOKEN]
        cut = self.decode(list(self.encode(text))[:budget])
        while cut and self.count(cut) > budget:  # decoding may merge differently
            cut = cut[:-1]
        return cut


_LOADER_LOCK = threading.Lock()


class _NoDownload(Exception):
    """Raised inside tiktoken's loader instead of fetching a URL."""


def load_tiktoken_offline(encodings: Sequence[str] = TIKTOKEN_ENCODINGS) -> TokenCounter | None:
    """A tiktoken counter if tiktoken is installed and an encoding is cached here, else None.

    tiktoken's loader is given a ``read_file`` that refuses URLs for the duration of the
    call, so a missing encoding means None, never a download.
    """
    try:
        import tiktoken
        import tiktoken.load as loader
    except Exception:  # not installed, or broken: the estimate will do
        return None
    with _LOADER_LOCK:  # the loader is patched for the call: one caller at a time
        return _load_guarded(tiktoken, loader, encodings)


def _load_guarded(
    tiktoken: object, loader: object, encodings: Sequence[str]
) -> TokenCounter | None:
    original = getattr(loader, "read_file", None)
    if original is None:  # a tiktoken whose loader we do not know: do not risk a download
        return None

    def offline_read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise _NoDownload(blobpath)
        return original(blobpath)

    loader.read_file = offline_read_file  # type: ignore[attr-defined]
    try:
        for name in encodings:
            try:
                encoding = tiktoken.get_encoding(name)  # type: ignore[attr-defined]
            except Exception:  # _NoDownload, an unknown name, a corrupt cache...
                continue
            return TokenCounter(
                name=f"tiktoken:{name}",
                encode=functools.partial(encoding.encode, disallowed_special=()),
                decode=encoding.decode,
            )
        return None
    finally:
        loader.read_file = original  # type: ignore[attr-defined]


ESTIMATE = TokenCounter(name=f"estimate:{CHARS_PER_TOKEN}-chars-per-token")


@functools.cache
def default_token_counter() -> TokenCounter:
    """tiktoken when available offline (unless ``SOLOFLOW_TOKENIZER=estimate``), else the estimate.

    Cached for the process; call ``default_token_counter.cache_clear()`` after changing
    the environment.
    """
    if os.environ.get(ENV_TOKENIZER, "").strip().lower() == "estimate":
        return ESTIMATE
    return load_tiktoken_offline() or ESTIMATE


def count_tokens(text: str) -> int:
    """Tokens of ``text`` with :func:`default_token_counter`."""
    return default_token_counter().count(text)
