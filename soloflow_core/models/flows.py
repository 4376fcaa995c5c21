"""Flow definitions: what users write and what the detector proposes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from soloflow_core.models.names import Name

FlowSource = Literal["auto-learned", "user-submitted"]
"""Where a registered flow came from: learned from the ledger, or written by a person."""
SOURCE_LEARNED: FlowSource = "auto-learned"
SOURCE_USER: FlowSource = "user-submitted"

OnFailure = Literal["stop", "continue", "skip_dependents", "fallback", "compensate"]
"""What a step that failed (after its retries) does to the run:

- ``stop``: the run fails at once (the default);
- ``continue``: the error is recorded and every other step runs (a step that reads the
  failed step's output then fails on its template);
- ``skip_dependents``: the steps that depend on it, directly or not, are skipped; the
  independent ones run and the run completes;
- ``fallback``: no further step starts; the run ends with the partial results and a
  hand-off text for the agent to carry the task on;
- ``compensate``: no further step starts; the ``compensation`` of every completed step
  runs, in the reverse order of completion, and the run fails.
"""


MAX_NAME_CHARS = 1000
"""Longest flow or step name: a learned flow is named after its tools (``Auto: a → b``)."""
MAX_ID_CHARS = 200
"""Longest step id."""
MAX_KEY_CHARS = 500
"""Longest ``skill_key``."""


class Compensation(BaseModel):
    """How to undo a completed step: one call, run when a later step fails with
    ``on_failure="compensate"``. Its ``input_map`` may read the flow's inputs and every
    completed step's output, its own step's included."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skill_key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)
    input_map: dict[str, Any] = Field(default_factory=dict)


class FlowStep(BaseModel):
    """One step of a flow: a call to the executor registered under ``skill_key``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=MAX_ID_CHARS, pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")
    """Unique within the flow; templates refer to the step's output by it."""
    name: str = Field(default="", max_length=MAX_NAME_CHARS)
    """Human-readable name (e.g. "File Read")."""
    skill_key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)
    """Which executor runs the step: a tool name or a key a plugin registered."""
    depends_on: list[str] = Field(default_factory=list)
    """Steps that must complete before this one starts."""
    output_key: str | None = None
    """Name under which the step's output is stored; defaults to the step id."""
    retry_max: int = Field(default=2, ge=0)
    """Retries after the first attempt (any exception is retried)."""
    retry_backoff: float = Field(default=1.0, ge=0)
    """Seconds before the first retry; doubled for each further retry."""
    timeout_seconds: float = Field(default=120, gt=0)
    """Time limit of one attempt. An async tool is cancelled when it runs over; a sync
    tool's thread cannot be stopped in Python: the attempt fails at the limit and the
    call's thread runs on in the background (its result is discarded)."""
    on_failure: OnFailure = "stop"
    """What a failed step does to the run (after its retries); see :data:`OnFailure`."""
    side_effects: bool | None = None
    """Whether the call changes the world. None: taken from the tool's LangChain
    ``metadata`` (``read_only``/``side_effects``), and side-effecting when unknown."""
    compensation: Compensation | None = None
    """The call that undoes this step (see ``on_failure="compensate"``)."""
    input_map: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the call. Strings may hold ``{{_trigger.<input>}}`` and
    ``{{<step_id>.<dotted.path>}}`` templates; anything else is a constant."""
    map_over: str | None = None
    """A map step: one template naming a list (``{{step_1.reservations}}``). The step's
    tool is called once per item, in parallel (a LangGraph ``Send`` fan-out); ``input_map``
    reads the item as ``{{_item}}`` or ``{{_item.<path>}}``; the step's output is the list
    of the calls' outputs, in item order."""


class FlowDefinition(BaseModel):
    """A flow: named steps in dependency order, with its inputs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Name = Field(min_length=1, max_length=MAX_NAME_CHARS)
    """Unique in its namespace (each name has versions); no control character (see
    :mod:`soloflow_core.models.names`)."""
    description: str = ""
    version: int = Field(default=1, ge=1)
    steps: list[FlowStep] = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    input_schema: dict[str, Any] | None = None
    """JSON Schema (type object) of the flow's inputs. When given, every
    ``{{_trigger.<name>}}`` must be one of its properties."""
    extraction: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per input: how to recover it from a new task's text (see :mod:`soloflow_core.generalize`)."""
    output_step: str | None = None
    """Whose output is the flow's result; defaults to the last step."""
    requires_approval: bool = False
    """Pause each run before its first side-effecting step until a person approves it
    (``soloflow flows approve RUN_ID``) or rejects it (the run is cancelled)."""
    reply_template: str | None = None
    """What the user is told when the flow ran in the agent's place (routed with no model
    call): text with templates over the flow's inputs and its steps' outputs, e.g.
    ``"Your order {{step_3.order_id}} is {{step_3.status}}."``. Learned from the agent's own
    final answers when they agree; without one, the reply states what the flow did."""

    def step(self, step_id: str) -> FlowStep:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    @property
    def result_step(self) -> str:
        return self.output_step or self.steps[-1].id
