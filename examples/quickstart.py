"""Quick start: capture a real `create_agent` agent with SoloFlow's callback handler.

Run it with `python examples/quickstart.py`. It needs no API key: a scripted chat model plays
the LLM. With a real model, replace `ScriptedChatModel(...)` by e.g. `init_chat_model(...)`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from soloflow_core.store import Store
from soloflow_langgraph import SoloFlowCallbackHandler
from soloflow_langgraph.testing import ScriptedChatModel


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"18°C and clear in {city}"


@tool
def get_forecast(city: str, days: int = 3) -> str:
    """Weather forecast for the next days."""
    return f"{days}-day forecast for {city}: mild"


def main() -> None:
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "get_weather",
                        "args": {"city": "Lyon"},
                        "id": "c1",
                        "type": "tool_call",
                    }
                ],
            ),
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "get_forecast",
                        "args": {"city": "Lyon", "days": 2},
                        "id": "c2",
                        "type": "tool_call",
                    }
                ],
            ),
            AIMessage(content="It is 18°C and clear in Lyon, and mild for the next two days."),
        ]
    )
    agent = create_agent(
        model, tools=[get_weather, get_forecast], system_prompt="You are a weather bot."
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(str(Path(tmp) / "quickstart.db"))  # omit for the embedded default
        handler = SoloFlowCallbackHandler(store=store, user_id="alice", agent_id="weather-bot")
        agent.invoke(
            {"messages": [{"role": "user", "content": "Weather in Lyon?"}]},
            config={"callbacks": [handler]},
        )
        run = store.get_run(handler.last_run.run_id, user_id="alice", agent_id="weather-bot")
        print(f"task: {run.task}")
        for call in run.tool_calls:
            print(f"  {call.name}({call.args}) -> {call.output!r} [{call.duration_ms:.1f} ms]")
        print(f"model calls: {len(run.model_calls)}, tokens: {run.tokens}")
        store.close()


if __name__ == "__main__":
    main()
