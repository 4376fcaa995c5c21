"""Memory providers: the interface plugins implement, and the registry that picks one."""

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
    "build_memory_registry",
]
