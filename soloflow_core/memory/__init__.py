"""Memory: the provider interface plugins implement and its registry; procedural memory."""

from soloflow_core.memory.procedural import ProceduralMemory, WorkflowMatch
from soloflow_core.memory.providers import (
    InMemoryProvider,
    MemoryProvider,
    MemoryProviderRegistry,
    MemoryRecord,
    build_memory_registry,
)

__all__ = [
    "InMemoryProvider",
    "MemoryProvider",
    "MemoryProviderRegistry",
    "MemoryRecord",
    "ProceduralMemory",
    "WorkflowMatch",
    "build_memory_registry",
]
