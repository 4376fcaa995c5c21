"""Configuration objects passed to ``soloflow_configure``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DetectorConfig(BaseModel):
    """Settings of the repeated-sequence detector."""

    model_config = ConfigDict(extra="forbid")

    min_sequence_length: int = Field(default=3, ge=2)
    min_occurrences: int = Field(default=3, ge=2)
    lookback_limit: int | None = Field(default=None, ge=1)
    """Only the newest N task runs; None means the whole ledger."""
    max_candidates: int = Field(default=5, ge=1)
    include_failed_runs: bool = False
    """Count runs whose ``success`` is False toward support (left out by default)."""
    tolerate_noise: bool = True
    """Credit occurrences with one stray call between steps, one swapped adjacent pair
    (no data passing between them) or an end cut short by a failing call."""
    side_effects: dict[str, bool] = Field(default_factory=dict)
    """Tool name → whether it has side effects. Steps of read-only tools (``False``) with no
    data dependency between them may run in parallel in a proposed flow; a tool not named
    here is read from its recorded calls' metadata (``side_effects`` / ``read_only``, as a
    LangChain tool's ``metadata`` is captured), else assumed to have side effects."""
    min_gain_bits: float = 0.0
    """A pattern is proposed only when it compresses the ledger by more than this many bits
    (0: any pattern that explains the data better than its tools alone; raise it to be
    stricter on large ledgers). See docs/mining.md."""


class ModelPrice(BaseModel):
    """A user's own price of a model, in USD per million tokens (overrides ``genai-prices``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class SoloFlowConfig(BaseModel):
    """What a SoloFlow process runs with. Handed to every plugin by ``soloflow_configure``."""

    model_config = ConfigDict(extra="forbid")

    database_url: str | None = None
    user_id: str = "default"
    agent_id: str = "default"
    detector: DetectorConfig = Field(default_factory=DetectorConfig)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Model name → the user's own price; other models are priced by ``genai-prices``."""
