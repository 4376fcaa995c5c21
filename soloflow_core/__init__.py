"""SoloFlow's framework-free core: hooks, models, store, miner, flows. Imports no LangChain."""

from soloflow_core.errors import (
    ConfigError,
    ExecutorNotFoundError,
    FlowRunError,
    FlowValidationError,
    LedgerError,
    NotFoundError,
    PluginError,
    SchemaVersionError,
    SoloFlowError,
    StoreError,
)
from soloflow_core.markers import hookimpl, hookspec
from soloflow_core.models import (
    DetectorConfig,
    FlowCandidate,
    FlowDefinition,
    FlowStep,
    ModelCall,
    SoloFlowConfig,
    StepRecord,
    TaskRun,
    ToolCall,
)
from soloflow_core.plugins import get_plugin_manager

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DetectorConfig",
    "ExecutorNotFoundError",
    "FlowCandidate",
    "FlowDefinition",
    "FlowRunError",
    "FlowStep",
    "FlowValidationError",
    "LedgerError",
    "ModelCall",
    "NotFoundError",
    "PluginError",
    "SchemaVersionError",
    "SoloFlowConfig",
    "SoloFlowError",
    "StepRecord",
    "StoreError",
    "TaskRun",
    "ToolCall",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
]
