"""Pydantic models at SoloFlow's boundaries."""

from soloflow_core.models.candidates import (
    CandidateStatus,
    FlowCandidate,
    MatchType,
    candidate_id_for,
    dedupe_key_for,
)
from soloflow_core.models.config import DetectorConfig, ModelPrice, SoloFlowConfig
from soloflow_core.models.flows import (
    SOURCE_LEARNED,
    SOURCE_USER,
    Compensation,
    FlowDefinition,
    FlowSource,
    FlowStep,
)
from soloflow_core.models.ledger import (
    DEFAULT_AGENT,
    DEFAULT_USER,
    ModelCall,
    StepRecord,
    TaskRun,
    ToolCall,
)
from soloflow_core.models.names import Name, check_name, check_namespace

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_USER",
    "SOURCE_LEARNED",
    "SOURCE_USER",
    "CandidateStatus",
    "Compensation",
    "DetectorConfig",
    "FlowCandidate",
    "FlowDefinition",
    "FlowSource",
    "FlowStep",
    "MatchType",
    "Name",
    "ModelCall",
    "ModelPrice",
    "SoloFlowConfig",
    "StepRecord",
    "TaskRun",
    "ToolCall",
    "candidate_id_for",
    "check_name",
    "check_namespace",
    "dedupe_key_for",
]
