"""Tokens, cost and the per-workflow token budget.

Tokens come from the models' own ``usage_metadata``: a :class:`UsageMeter` is a LangChain
callback handler attached to each agent run, so it sees every chat model call below it
(inside a Runnable chain, a ``create_agent`` agent, or a plain function that calls a model).
Cost is computed from per-model prices (:class:`~soloflow_langgraph.sequential.models.TokenPrice`,
US dollars per million tokens); a model with no price costs the default price (0 unless set).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config

from soloflow_core.errors import ConfigError
from soloflow_core.ledger.tokens import token_usage
from soloflow_langgraph.sequential.models import TokenPrice

if TYPE_CHECKING:
    from soloflow_langgraph.sequential.trace import PhaseCalls

__all__ = ["TokenBudget", "Usage", "UsageMeter", "metered_config"]


@dataclass(slots=True)
class Usage:
    """Tokens and cost of one phase."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    model_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class UsageMeter(BaseCallbackHandler):
    """Adds up the ``usage_metadata`` of every chat model call of the run it is attached to.

    Thread-safe: tool and model callbacks may fire on worker threads.
    """

    def __init__(
        self,
        prices: Mapping[str, TokenPrice] | None = None,
        default_price: TokenPrice | None = None,
        *,
        calls: PhaseCalls | None = None,
    ) -> None:
        self.calls = calls
        """Told of each model call as it starts and ends (its ``chat`` span), when the phase is
        traced."""
        self._prices = dict(prices or {})
        self._default = default_price or TokenPrice()
        self._lock = threading.Lock()
        self._models: dict[UUID, str] = {}
        self._seen: set[str] = set()
        self._usage = Usage()

    def _price(self, model: str | None) -> TokenPrice:
        return self._prices.get(model or "", self._default)

    def _add(self, message: Any, model: str | None) -> None:
        usage = token_usage(getattr(message, "usage_metadata", None))
        if not usage:
            return
        model = model or (getattr(message, "response_metadata", None) or {}).get("model_name")
        inp, out = usage["input_tokens"], usage["output_tokens"]
        self._usage.input_tokens += inp
        self._usage.output_tokens += out
        self._usage.cost += self._price(model).cost(inp, out)
        self._usage.model_calls += 1
        if getattr(message, "id", None):
            self._seen.add(message.id)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = (metadata or {}).get("ls_model_name")
        if name:
            with self._lock:
                self._models[run_id] = str(name)
        if self.calls is not None:
            self.calls.model_started(run_id, str(name) if name else None)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        last = None
        with self._lock:
            model = self._models.pop(run_id, None)
            for generations in response.generations:
                for generation in generations:
                    last = getattr(generation, "message", None)
                    self._add(last, model)
        if self.calls is not None:
            self.calls.model_ended(run_id, last)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._models.pop(run_id, None)
        if self.calls is not None:
            self.calls.model_ended(run_id, None, error=f"{type(error).__name__}: {error}")

    def add_returned_message(self, message: Any) -> None:
        """Count a message an agent returned, unless a callback already counted it.

        A plain function that calls an API outside LangChain may return an ``AIMessage`` with
        ``usage_metadata`` to report its tokens; a chat model's own reply is not counted twice.
        """
        if not isinstance(message, AIMessage) or not message.usage_metadata:
            return
        with self._lock:
            if message.id and message.id in self._seen:
                return
            if not message.id and self._usage.model_calls:
                return  # no id to tell: trust the callbacks
            self._add(message, None)

    def usage(self) -> Usage:
        """What was counted so far (a copy)."""
        with self._lock:
            u = self._usage
            return Usage(
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cost=u.cost,
                model_calls=u.model_calls,
            )


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """A per-workflow token budget: a warning as it nears, a hard stop past it.

    Example:
        >>> budget = TokenBudget(limit=1000)
        >>> budget.should_warn(799), budget.should_warn(800), budget.exceeded(1000), budget.exceeded(1001)
        (False, True, False, True)
    """

    limit: int | None = None
    """The most tokens the workflow may use; None for no limit."""
    warn_fraction: float = 0.8
    """``soloflow_token_budget_warning`` fires once use reaches this fraction of ``limit``."""

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit <= 0:
            raise ConfigError(f"token budget must be a positive number of tokens, not {self.limit}")
        if not 0.0 < self.warn_fraction <= 1.0:
            raise ConfigError(f"warn_fraction must be in (0, 1], not {self.warn_fraction}")

    def should_warn(self, used: int) -> bool:
        """True once ``used`` has reached the warning threshold."""
        return self.limit is not None and used >= self.limit * self.warn_fraction

    def exceeded(self, used: int) -> bool:
        """True once ``used`` is past the limit: the workflow stops."""
        return self.limit is not None and used > self.limit


def metered_config(
    config: RunnableConfig | None, meter: UsageMeter, run_name: str
) -> RunnableConfig:
    """``config`` for a child run that also reports to ``meter``.

    Inside a LangGraph node ``config["callbacks"]`` is the node run's callback manager: the
    meter is added to a copy of it, so the child run stays nested under the node (tracing
    keeps working) and its model calls are metered.
    """
    callbacks = (config or {}).get("callbacks")
    merged: Any
    if callbacks is None:
        merged = [meter]
    elif isinstance(callbacks, list):
        merged = [*callbacks, meter]
    else:
        merged = callbacks.copy()
        merged.add_handler(meter, inherit=True)
    return patch_config(config, callbacks=merged, run_name=run_name)
