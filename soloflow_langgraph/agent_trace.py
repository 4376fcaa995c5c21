"""The trace of one captured agent run: ``invoke_agent`` → ``chat`` (each model call, with
its tokens and cost) and ``execute_tool`` (each tool call), built from LangChain's callback
events by :class:`~soloflow_langgraph.callbacks.SoloFlowCallbackHandler`."""

from __future__ import annotations

from contextvars import Token
from typing import TYPE_CHECKING, Any
from uuid import UUID

from soloflow_core.tracing import PriceTable, Span, SpanRecorder, active_listener, current_span
from soloflow_core.tracing.tree import COST, INPUT_TOKENS, OUTPUT_TOKENS, UNPRICED

if TYPE_CHECKING:
    import pluggy

__all__ = ["AgentTrace", "chat_attributes"]

_LOW64 = (1 << 64) - 1


def span_id_of(run_id: UUID) -> str:
    """A LangChain run's span id: the low 64 bits of its UUID (the random ones of a UUIDv7)."""
    return f"{run_id.int & _LOW64 or 1:016x}"


def chat_attributes(
    prices: PriceTable, span: Span, *, usage: dict[str, Any] | None, response_model: str | None
) -> dict[str, Any]:
    """The attributes a ``chat`` span gets when its call ends: the model that answered, the
    tokens of its ``usage_metadata`` and their cost (``soloflow.unpriced`` when no price is
    known for the model: the one that answered, else the one asked)."""
    attrs: dict[str, Any] = {}
    if response_model:
        attrs["gen_ai.response.model"] = response_model
    if usage:
        inp, out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        attrs[INPUT_TOKENS], attrs[OUTPUT_TOKENS] = inp, out
        model = response_model or span.attributes.get("gen_ai.request.model")
        price = prices.price(model, input_tokens=inp, output_tokens=out)
        if price is None:
            attrs[UNPRICED] = True
        else:
            attrs[COST] = float(price)
    return attrs


class AgentTrace:
    """The spans of one root run, keyed by LangChain run id. Called under the handler's lock
    or from the thread that owns the run being ended."""

    __slots__ = ("cost", "open", "prices", "recorder", "root", "tokens", "unpriced")

    def __init__(
        self,
        root_id: UUID,
        name: str | None,
        *,
        prices: PriceTable,
        plugin_manager: pluggy.PluginManager | None,
    ) -> None:
        self.recorder = SpanRecorder(
            root_id.hex, plugin_manager=plugin_manager, listener=active_listener()
        )
        self.prices = prices
        self.open: dict[int, Span] = {}
        self.tokens: dict[int, Token[Span | None]] = {}
        """Tool calls that are ``current_span`` in the context they run in."""
        self.cost = 0.0
        self.unpriced = 0
        attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
        if name:
            attrs["gen_ai.agent.name"] = name
        self.root = self.recorder.start(
            f"invoke_agent {name}" if name else "invoke_agent",
            "invoke_agent",
            None,
            attrs,
            span_id=span_id_of(root_id),
        )

    def _parent(self, parent_run_id: UUID | None) -> Span:
        # A model or tool run's parent is a graph node chain (not a span): the agent's span.
        if parent_run_id is not None:
            found = self.open.get(parent_run_id.int)
            if found is not None:
                return found
        return self.root

    def model_started(self, run_id: UUID, parent_run_id: UUID | None, model: str | None) -> None:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if model:
            attrs["gen_ai.request.model"] = model
        self.open[run_id.int] = self.recorder.start(
            f"chat {model}" if model else "chat",
            "chat",
            self._parent(parent_run_id),
            attrs,
            span_id=span_id_of(run_id),
        )

    def model_ended(
        self,
        run_id: UUID,
        usage: dict[str, Any] | None,
        response_model: str | None,
        error: str | None = None,
    ) -> None:
        span = self.open.pop(run_id.int, None)
        if span is None:
            return
        attrs = chat_attributes(self.prices, span, usage=usage, response_model=response_model)
        if attrs.get(UNPRICED):
            self.unpriced += 1
        elif COST in attrs:
            self.cost += attrs[COST]
        self.recorder.end(span, error=error, attributes=attrs)

    def tool_started(
        self, run_id: UUID, parent_run_id: UUID | None, name: str, call_id: str | None
    ) -> None:
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if call_id:
            attrs["gen_ai.tool.call.id"] = call_id
        if span_id_of(run_id) == self.root.id:  # a tool called on its own: it is the run
            self.root.name, self.root.kind = f"execute_tool {name}", "execute_tool"
            self.root.attributes.clear()
            self.root.attributes.update(attrs)
            return
        span = self.recorder.start(
            f"execute_tool {name}",
            "execute_tool",
            self._parent(parent_run_id),
            attrs,
            span_id=span_id_of(run_id),
        )
        self.open[run_id.int] = span
        # The handler is called in the context the tool then runs in (a copy of it).
        self.tokens[run_id.int] = current_span.set(span)

    def tool_ended(self, run_id: UUID, error: str | None) -> None:
        token = self.tokens.pop(run_id.int, None)
        if token is not None:
            try:
                current_span.reset(token)
            except ValueError:  # ended in another context than it started in: nothing to undo here
                pass
        span = self.open.pop(run_id.int, None)
        if span is not None:
            self.recorder.end(span, error=error)

    def finish(self, error: str | None) -> list[Span]:
        """End the run's span (and any left open under it); its spans, in start order."""
        self.recorder.close_open(error=error)
        return self.recorder.spans

    @property
    def run_cost(self) -> float | None:
        """The run's cost in USD; None when a model call is unpriced (unknown, not 0)."""
        return None if self.unpriced else self.cost
