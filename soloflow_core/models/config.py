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


class SoloFlowConfig(BaseModel):
    """What a SoloFlow process runs with. Handed to every plugin by ``soloflow_configure``."""

    model_config = ConfigDict(extra="forbid")

    database_url: str | None = None
    user_id: str = "default"
    agent_id: str = "default"
    detector: DetectorConfig = Field(default_factory=DetectorConfig)
