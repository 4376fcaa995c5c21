"""A compiled flow inside LangChain and LangGraph: as an agent's tool, or as a graph node.

:func:`flow_tool` gives a ``StructuredTool`` whose arguments are the flow's inputs (a
pydantic model built from ``input_schema``). An agent calls it like any tool; the flow runs
its steps with no model call, and the model gets the flow's output back (a string as is,
other values as compact JSON). A failed run is a ``ToolException`` naming the flow, the
step and the error, which the tool returns to the model as an error ``ToolMessage``.

:func:`flow_node` gives a node for the user's own ``StateGraph``: it reads the flow's
inputs from the parent state, runs the compiled flow as a real LangGraph subgraph (its
own checkpoint namespace, visible to ``stream(..., subgraphs=True)``), and writes back one
key only. Adding the compiled flow itself as a node would hand the parent the flow's whole
state, and a parent reducer such as ``Annotated[list, operator.add]`` would count the
parent's entries twice; a wrapper node avoids that.

Example:
    >>> from langchain_core.tools import tool
    >>> from soloflow_core.models import FlowDefinition, FlowStep
    >>> @tool
    ... def shout(text: str) -> str:
    ...     '''Upper-case a text.'''
    ...     return text.upper()
    >>> flow = FlowDefinition(name="shout it", steps=[
    ...     FlowStep(id="s", skill_key="shout", input_map={"text": "{{_trigger.text}}"})])
    >>> t = flow_tool(flow, tools=[shout])
    >>> t.name, t.invoke({"text": "hi"})
    ('soloflow_shout_it', 'HI')
"""

from __future__ import annotations

import asyncio
import json
import keyword
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Union

from langchain_core.callbacks import BaseCallbackManager, Callbacks
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import patch_config, set_config_context
from langchain_core.tools import StructuredTool, ToolException
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, ConfigDict, Field, create_model

from soloflow_core.errors import ConfigError, FlowRunError, FlowValidationError, SoloFlowError
from soloflow_core.flow.executors import build_executor_registry
from soloflow_core.flow.templates import TRIGGER, iter_references
from soloflow_core.flow.validate import validate_flow
from soloflow_core.models import FlowDefinition
from soloflow_core.plugins import get_plugin_manager
from soloflow_langgraph.compile.graph import compile_flow
from soloflow_langgraph.runtime.inputs import check_inputs
from soloflow_langgraph.runtime.results import FlowRunResult
from soloflow_langgraph.runtime.runner import run_flow

if TYPE_CHECKING:
    import pluggy

    from soloflow_core.flow.executors import ExecutorRegistry

__all__ = [
    "refused_call",
    "FlowRunner",
    "flow_args_schema",
    "flow_node",
    "flow_tool",
    "flow_tool_name",
]

FlowRunner = Callable[[FlowDefinition, dict[str, Any]], FlowRunResult]
"""Runs a flow once on the given inputs (``run_flow`` by default)."""

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_MAX_DESCRIPTION = 1024  # OpenAI's limit on a function description

_SIMPLE_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "null": type(None),
}
_CONSTRAINTS = {
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "minItems": "min_length",
    "maxItems": "max_length",
}


# --------------------------------------------------------------------------- names and schema


def flow_tool_name(flow: FlowDefinition) -> str:
    """``soloflow_<flow name>``, cut to OpenAI's tool-name rule ``^[a-zA-Z0-9_-]{1,64}$``."""
    ascii_name = unicodedata.normalize("NFKD", flow.name).encode("ascii", "ignore").decode()
    stem = re.sub(r"[^a-zA-Z0-9_-]+", "_", ascii_name).strip("_") or "flow"
    return ("soloflow_" + stem)[:64]


def _json_type(spec: Any) -> Any:
    """The Python type of a JSON Schema fragment (nested objects stay ``dict``)."""
    if not isinstance(spec, Mapping):
        return Any
    if "const" in spec:
        return Literal[spec["const"]]
    enum = spec.get("enum")
    if (
        isinstance(enum, list)
        and enum
        and all(isinstance(v, str | int | bool) or v is None for v in enum)
    ):
        return Literal[tuple(enum)]
    for combinator in ("anyOf", "oneOf"):
        options = spec.get(combinator)
        if isinstance(options, list) and options:
            return Union[tuple(_json_type(o) for o in options)]  # noqa: UP007 - built at run time
    jtype = spec.get("type")
    if isinstance(jtype, list) and jtype:
        return Union[tuple(_json_type({**spec, "type": t}) for t in jtype)]  # noqa: UP007
    if jtype == "array":
        return list[_json_type(spec.get("items"))]  # type: ignore[misc]
    return _SIMPLE_TYPES.get(jtype, Any) if isinstance(jtype, str) else Any


def _field_name(name: str, taken: set[str]) -> str:
    """A pydantic-safe attribute name for input ``name`` (the input keeps its name as alias)."""
    if (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and not name.startswith(("model_validate", "model_dump"))
        and not hasattr(BaseModel, name)
    ):
        return name
    base = "in_" + (re.sub(r"\W+", "_", name).strip("_") or "input")
    out, k = base, 2
    while out in taken:
        out, k = f"{base}_{k}", k + 1
    return out


def _trigger_inputs(flow: FlowDefinition) -> dict[str, bool]:
    """Input names the steps' templates read, in step order; True if a ``map_over`` list."""
    found: dict[str, bool] = {}
    for step in flow.steps:
        for _, ref in iter_references(step.input_map):
            if not isinstance(ref, Exception) and ref.root == TRIGGER:
                found.setdefault(ref.path[0], False)
        if step.map_over is not None:
            for _, ref in iter_references(step.map_over):
                if not isinstance(ref, Exception) and ref.root == TRIGGER:
                    found[ref.path[0]] = found.get(ref.path[0], False) or len(ref.path) == 1
    return found


def _model_name(flow: FlowDefinition) -> str:
    words = re.findall(r"[A-Za-z0-9]+", flow.name)
    return "".join(w[:1].upper() + w[1:] for w in words) + "Inputs" if words else "FlowInputs"


def flow_args_schema(flow: FlowDefinition) -> type[BaseModel]:
    """The pydantic model of ``flow``'s inputs: the tool's ``args_schema``.

    Built from ``flow.input_schema`` (types, ``required``, ``description``, ``default``,
    ``enum``/``const`` as ``Literal``, numeric and length bounds; a nested object is a plain
    ``dict``). A flow without one gets a required string per ``{{_trigger.<name>}}`` its
    steps read (a list for a trigger that is a step's ``map_over``). An input whose name
    cannot be a pydantic field (``schema``, ``json``, ``_x``, ``for``, ``user-id``) becomes
    ``in_<name>`` with the input's name as alias; both spellings are accepted.
    """
    fields: dict[str, Any] = {}
    if flow.input_schema is None:
        for name, is_list in _trigger_inputs(flow).items():
            fname = _field_name(name, set(fields))
            ann = list[Any] if is_list else str
            fields[fname] = (ann, Field(alias=name) if fname != name else Field())
    else:
        props: Mapping[str, Any] = flow.input_schema.get("properties") or {}
        required = set(flow.input_schema.get("required") or [])
        for name, spec in props.items():
            spec = spec if isinstance(spec, Mapping) else {}
            fname = _field_name(name, set(fields))
            ann = _json_type(spec)
            kw: dict[str, Any] = {
                k2: spec[k1]
                for k1, k2 in _CONSTRAINTS.items()
                if k1 in spec and isinstance(spec[k1], int | float | str)
            }
            if spec.get("description"):
                kw["description"] = str(spec["description"])
            if fname != name:
                kw["alias"] = name
            if "default" in spec:
                kw["default"] = spec["default"]
            elif name not in required:
                ann, kw["default"] = ann | None, None
            fields[fname] = (ann, Field(**kw))
    config = ConfigDict(populate_by_name=True, extra="ignore")
    model: type[BaseModel] = create_model(_model_name(flow), __config__=config, **fields)
    model.__doc__ = f"Inputs of flow {flow.name!r}."
    return model


def _describe(flow: FlowDefinition) -> str:
    layers = validate_flow(flow).layers
    path = " → ".join(
        layer[0] if len(layer) == 1 else "(" + ", ".join(layer) + ")" for layer in layers
    )
    text = f"Runs deterministic flow {flow.name!r}: {path}. Same steps every time, no model call."
    if flow.description.strip():
        text = flow.description.strip() + "\n" + text
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 1] + "…"


# --------------------------------------------------------------------------- flow as a tool


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _tool_content(flow: FlowDefinition, result: FlowRunResult) -> str:
    """What the model sees; raises ``ToolException`` for a failed run."""
    if result.status == "completed":
        text = _as_text(result.output)
        if result.errors:
            skipped = "; ".join(f"{k}: {v}" for k, v in result.errors.items())
            text += f"\n(flow {flow.name!r} skipped failed steps: {skipped})"
        return text
    if result.status == "fallback":
        handoff = getattr(result, "handoff", None)
        if handoff:
            return str(handoff)
        return (
            f"flow {flow.name!r} handed the task back to you; results so far: "
            f"{_as_text(result.results)}"
        )
    if result.status == "waiting":
        return waiting_text(flow.name, result.run_id)
    if result.status == "failed":
        raise ToolException(_failure_text(flow, result.errors))
    raise ToolException(f"flow {flow.name!r} ended with status {result.status!r}")


def waiting_text(flow_name: str, run_id: str | None) -> str:
    """What the model (or the user) is told about a run waiting for a person's approval."""
    return (
        f"The flow {flow_name!r} is waiting for a person's approval (flow run {run_id}): it "
        f"runs once they approve it (`soloflow flows runs approve {run_id}`). Do not do its steps "
        "yourself meanwhile; tell the user it awaits approval."
    )


def _failure_text(flow: FlowDefinition, errors: Mapping[str, str]) -> str:
    """One line per failed step, each naming the flow and the step (once)."""
    lines = []
    for step, error in errors.items():
        if step in ("", "None"):
            lines.append(f"flow {flow.name!r} failed: {error}")
        elif f"step {step!r}" in error and repr(flow.name) in error:
            lines.append(error)  # the runtime's own message already names both
        else:
            lines.append(f"flow {flow.name!r} failed at step {step!r}: {error}")
    return "\n".join(lines) or f"flow {flow.name!r} failed (no error recorded)"


def flow_tool(
    flow: FlowDefinition,
    *,
    tools: Sequence[Any] = (),
    plugin_manager: pluggy.PluginManager | None = None,
    registry: ExecutorRegistry | None = None,
    name: str | None = None,
    description: str | None = None,
    run: FlowRunner | None = None,
) -> StructuredTool:
    """``flow`` as a LangChain tool an agent can call.

    Args:
        flow: the definition; validated now (a missing executor fails here, not mid-run).
        tools: the tools (or callables) its steps name as ``skill_key``.
        plugin_manager: where other executors come from, and whose ``soloflow_step_finished``
            hears each step.
        registry: a ready executor registry (then ``tools`` and ``plugin_manager`` do not
            look for executors).
        name: the tool name; default :func:`flow_tool_name`.
        description: default: the flow's description and its steps.
        run: runs the flow once, ``run(flow, inputs) -> FlowRunResult``; default
            :func:`~soloflow_langgraph.runtime.runner.run_flow`. It runs inside the tool's child
            ``RunnableConfig`` (``ensure_config()`` returns it), so the flow's steps nest under
            the tool run in callbacks and tracing. The async path runs it in a thread.

    Returns:
        A ``StructuredTool`` with ``handle_tool_error=True``: a failed run reaches the model
        as an error ``ToolMessage`` naming the flow, the step and the error. A run with status
        ``fallback`` returns its ``handoff`` text instead; one that waits for a person's
        approval says so (:func:`waiting_text`), and the agent must not do its steps itself.

    Raises:
        ConfigError: ``name`` breaks the tool-name rule ``^[a-zA-Z0-9_-]{1,64}$``.
        FlowValidationError: the flow is invalid; ``ExecutorNotFoundError`` when a step's
            ``skill_key`` has no executor.
    """
    tool_name = name if name is not None else flow_tool_name(flow)
    if not _TOOL_NAME.match(tool_name):
        raise ConfigError(
            f"flow_tool name {tool_name!r} is not a valid tool name: use 1-64 letters, digits, "
            "'_' or '-'"
        )
    runner = (
        run
        if run is not None
        else _default_runner(flow, tools=tools, plugin_manager=plugin_manager, registry=registry)
    )
    if run is not None:
        validate_flow(flow)  # the default runner's registry has checked the executors too
    schema = flow_args_schema(flow)
    aliases = {f: info.alias for f, info in schema.model_fields.items() if info.alias}
    optional = _omit_when_none(flow, schema)

    def inputs_of(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            aliases.get(k, k): v for k, v in kwargs.items() if not (v is None and k in optional)
        }

    def execute(
        config: RunnableConfig, callbacks: Callbacks, kwargs: dict[str, Any]
    ) -> FlowRunResult:
        # LangChain hands ``callbacks`` = the tool run's child manager: the flow nests under it.
        if isinstance(callbacks, BaseCallbackManager):
            child = patch_config(config, callbacks=callbacks)
        else:
            child = config
        with set_config_context(child) as context:
            try:
                return context.run(runner, flow, inputs_of(kwargs))
            except SoloFlowError as exc:  # bad inputs, a step failing with raise_on_failure
                raise ToolException(f"flow {flow.name!r}: {exc}") from exc

    def call(config: RunnableConfig, callbacks: Callbacks = None, **kwargs: Any) -> str:
        return _tool_content(flow, execute(config, callbacks, kwargs))

    async def acall(config: RunnableConfig, callbacks: Callbacks = None, **kwargs: Any) -> str:
        # run_flow is synchronous; to_thread copies the context (and so the child config).
        result = await asyncio.to_thread(execute, config, callbacks, kwargs)
        return _tool_content(flow, result)

    return StructuredTool.from_function(
        func=call,
        coroutine=acall,
        name=tool_name,
        description=description if description is not None else _describe(flow),
        args_schema=schema,
        handle_tool_error=True,
        metadata={"soloflow_flow": flow.name, "soloflow_flow_version": flow.version},
    )


def _default_runner(
    flow: FlowDefinition,
    *,
    tools: Sequence[Any],
    plugin_manager: pluggy.PluginManager | None,
    registry: ExecutorRegistry | None,
) -> FlowRunner:
    """``run_flow`` over one executor registry, built and checked against ``flow`` now; with
    neither a registry nor a plugin manager, over the default plugin manager's executors."""
    pm = plugin_manager
    if registry is None:
        pm = pm if pm is not None else get_plugin_manager()
        registry = build_executor_registry(pm, tools=tools)
    ready = registry
    validate_flow(flow, executors=ready.keys())

    def run(flow: FlowDefinition, inputs: dict[str, Any]) -> FlowRunResult:
        return run_flow(flow, inputs, tools=tools, plugin_manager=pm, registry=ready)

    return run


def _omit_when_none(flow: FlowDefinition, schema: type[BaseModel]) -> set[str]:
    """Optional inputs with no default: the schema fills them with None; the flow must not see it."""
    props = (flow.input_schema or {}).get("properties") or {}
    out: set[str] = set()
    for fname, info in schema.model_fields.items():
        spec = props.get(info.alias or fname)
        if isinstance(spec, Mapping) and "default" not in spec and not info.is_required():
            out.add(fname)
    return out


# --------------------------------------------------------------------------- flow as a graph node


def _state_get(state: Any, key: str) -> tuple[bool, Any]:
    if isinstance(state, Mapping):
        return (key in state, state.get(key))
    return (hasattr(state, key), getattr(state, key, None))


def flow_node(
    flow: FlowDefinition,
    *,
    inputs: Mapping[str, str] | Callable[[Any], Mapping[str, Any]],
    output_key: str,
    errors_key: str | None = None,
    tools: Sequence[Any] = (),
    plugin_manager: pluggy.PluginManager | None = None,
    registry: ExecutorRegistry | None = None,
    name: str | None = None,
) -> RunnableLambda:
    """A node for your own ``StateGraph`` that runs ``flow`` as a subgraph.

    The flow is compiled once, here. Each call reads the flow's inputs from the parent
    state, runs the compiled flow with the node's config (so it is a LangGraph subgraph: it
    inherits the parent's checkpointer under its own namespace and shows in
    ``stream(..., subgraphs=True)``), and returns only ``{output_key: output}``, plus
    ``{errors_key: {...}}`` when ``errors_key`` is set (the steps that failed with
    ``on_failure="continue"``). Parent keys are never echoed back, so parent reducers see
    nothing twice. Inputs the parent leaves out take their ``input_schema`` default.

    Args:
        flow: the definition.
        inputs: flow input → parent state key, or a function of the parent state that
            returns the flow's inputs.
        output_key: the parent state key that receives the flow's output.
        errors_key: the parent state key that receives step errors, if any.
        tools: where executors come from, as in ``compile_flow``.
        plugin_manager: as in ``compile_flow``.
        registry: as in ``compile_flow``.
        name: the node's default name (``add_node(node)``); default :func:`flow_tool_name`.

    Raises:
        ConfigError: ``inputs`` maps an input the flow does not take, or leaves out a
            required one.
        FlowValidationError: the flow is invalid, or an executor is missing.

    At run time a failed step raises ``FlowRunError`` naming the flow and the step (the
    step's exception is its ``__cause__``); interrupts and other LangGraph control
    exceptions pass through untouched.

    Example:
        >>> graph.add_node("research", flow_node(flow, tools=tools,
        ...                inputs={"query": "question"}, output_key="findings"))  # doctest: +SKIP
    """
    graph = compile_flow(flow, tools=tools, plugin_manager=plugin_manager, registry=registry)
    read = _input_reader(flow, inputs)
    node_name = name or flow_tool_name(flow)

    def update(state: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {output_key: (state.get("results") or {}).get(flow.result_step)}
        if errors_key is not None:
            out[errors_key] = dict(state.get("errors") or {})
        return out

    def failure(exc: Exception) -> FlowRunError:
        # The compiled steps raise SoloFlow errors naming the step; anything else is wrapped.
        step = getattr(exc, "step", None)
        where = f" at step {step!r}" if step else ""
        return FlowRunError(
            f"flow {flow.name!r} failed{where}: {type(exc).__name__}: {exc}",
            flow=flow.name,
            step=step,
            cause=exc,
        )

    props = (flow.input_schema or {}).get("properties") or {}
    defaults = {
        k: v["default"] for k, v in props.items() if isinstance(v, Mapping) and "default" in v
    }

    def start(state: Any) -> dict[str, Any]:
        given = {**defaults, **read(state)}  # as the tool's schema does; the runner does not
        check_inputs(flow, given)
        return {"inputs": given, "results": {}, "errors": {}}

    def call(state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            return update(graph.invoke(start(state), config))
        except (GraphBubbleUp, SoloFlowError):  # interrupts, or already naming flow and step
            raise
        except Exception as exc:
            raise failure(exc) from exc

    async def acall(state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            return update(await graph.ainvoke(start(state), config))
        except (GraphBubbleUp, SoloFlowError):
            raise
        except Exception as exc:
            raise failure(exc) from exc

    return RunnableLambda(call, afunc=acall, name=node_name)


def _input_reader(
    flow: FlowDefinition, inputs: Mapping[str, str] | Callable[[Any], Mapping[str, Any]]
) -> Callable[[Any], dict[str, Any]]:
    if callable(inputs):
        fn = inputs
        return lambda state: dict(fn(state))
    mapping = dict(inputs)
    if flow.input_schema is not None:
        props = set((flow.input_schema.get("properties") or {}).keys())
        required = set(flow.input_schema.get("required") or [])
    else:
        props = required = set(_trigger_inputs(flow))
    unknown = sorted(set(mapping) - props)
    if unknown:
        raise ConfigError(
            f"flow_node({flow.name!r}): inputs maps {', '.join(map(repr, unknown))}, "
            f"which the flow does not take; its inputs: {', '.join(sorted(props)) or 'none'}"
        )
    missing = sorted(required - set(mapping))
    if missing:
        raise ConfigError(
            f"flow_node({flow.name!r}): inputs leaves out required input(s) "
            f"{', '.join(map(repr, missing))}; map each to a parent state key"
        )

    def read(state: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for flow_input, key in mapping.items():
            present, value = _state_get(state, key)
            if present:
                out[flow_input] = value
            elif flow_input in required:
                raise FlowValidationError(
                    f"flow_node({flow.name!r}): the parent state has no {key!r} for required "
                    f"flow input {flow_input!r}; set it before this node runs",
                    flow=flow.name,
                    field=f"inputs.{flow_input}",
                )
        return out

    return read


def refused_call(call: Any, text: str) -> ToolMessage:
    """The error answer to a tool call that was not run, saying why (``text``)."""
    return ToolMessage(
        content=text,
        tool_call_id=str(call.get("id") or ""),
        name=str(call.get("name") or ""),
        status="error",
    )
