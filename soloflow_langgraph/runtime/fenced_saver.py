"""A checkpointer that drops the writes of an invocation its runtime has stopped waiting for.

With ``durability="exit"`` LangGraph saves a run's checkpoint when an invocation ends —
however it ends, an exception included. An invocation the runtime abandoned (a call ran past
its limit, or the caller was interrupted: :mod:`~soloflow_langgraph.compile.run_watch`) ends
when its call returns, maybe long after the run went on in a new invocation: its checkpoint
would be a stale one, saved as the thread's newest. :class:`FencedSaver` wraps the runtime's
checkpointer; each watched invocation carries its :class:`~soloflow_langgraph.compile.run_watch.RunWatch`
in its config (:data:`WATCH_KEY`, a key LangGraph keeps out of checkpoint metadata), and a
write whose invocation is fenced is not saved. Reads and deletions pass through unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )

__all__ = ["WATCH_KEY", "FencedSaver", "fenced"]

WATCH_KEY = "__soloflow_watch"
"""The ``configurable`` key of a watched invocation's ``RunWatch``."""


def _fenced(config: RunnableConfig) -> bool:
    watch = (config.get("configurable") or {}).get(WATCH_KEY)
    return bool(getattr(watch, "fenced", False))


def _saved_as(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
    """The config ``put`` returns, for a checkpoint that was not saved."""
    conf = config.get("configurable") or {}
    return {
        "configurable": {
            "thread_id": conf.get("thread_id"),
            "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "checkpoint_id": checkpoint["id"],
        }
    }


class FencedSaver(BaseCheckpointSaver[Any]):
    """``inner``, whose ``put``/``put_writes`` skip the writes of fenced invocations."""

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    # ------------------------------------------------------------------ writes

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if _fenced(config):
            return _saved_as(config, checkpoint)
        return self.inner.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if not _fenced(config):
            self.inner.put_writes(config, writes, task_id, task_path)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if _fenced(config):
            return _saved_as(config, checkpoint)
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if not _fenced(config):
            await self.inner.aput_writes(config, writes, task_id, task_path)

    # ------------------------------------------------------------------ the rest, unchanged

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.inner.aget_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's parameter name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's parameter name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        return self.inner.alist(config, filter=filter, before=before, limit=limit)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.inner.get_next_version(current, channel)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return await self.inner.aget_delta_channel_history(config=config, channels=channels)

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.inner.adelete_thread(thread_id)


def fenced(checkpointer: Any, durability: str) -> Any:
    """The checkpointer a runtime compiles its graphs with: ``checkpointer`` wrapped in a
    :class:`FencedSaver` when it saves at exit, else itself."""
    if durability == "exit" and isinstance(checkpointer, BaseCheckpointSaver):
        return FencedSaver(checkpointer)
    return checkpointer
