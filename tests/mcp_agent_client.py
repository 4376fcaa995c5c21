"""A LangChain agent whose tools are an MCP server's, loaded with ``langchain-mcp-adapters``.

Run by ``test_serve_mcp_agent.py`` with the client environment's Python (see
``mcp_client_requirements.txt``): ``python mcp_agent_client.py CONFIG_JSON``. For each server
of the config it loads the tools, builds a real ``create_agent`` agent driven by SoloFlow's
scripted chat model — which calls the flow tool once, then answers with what it returned —
and prints one JSON line: per server, the tools and the messages.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient

from soloflow_langgraph.testing import ScriptedChatModel


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


async def main(config: dict[str, Any]) -> dict[str, Any]:
    client = MultiServerMCPClient(config["servers"])
    report: dict[str, Any] = {}
    for server in config["servers"]:
        tools = await client.get_tools(server_name=server)

        def script(messages: list[BaseMessage]) -> AIMessage:
            results = [m for m in messages if isinstance(m, ToolMessage)]
            if not results:
                return AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": config["tool"],
                            "args": config["args"],
                            "id": "call_flow",
                            "type": "tool_call",
                        }
                    ],
                )
            return AIMessage(content="The flow says: " + _text(results[-1].content))

        agent = create_agent(
            ScriptedChatModel(script=script), tools=tools, system_prompt="Use the flow tools."
        )
        state = await agent.ainvoke({"messages": [{"role": "user", "content": config["task"]}]})
        report[server] = {
            "tools": sorted(t.name for t in tools),
            "tool_messages": [
                {"name": m.name, "status": m.status, "text": _text(m.content)}
                for m in state["messages"]
                if isinstance(m, ToolMessage)
            ],
            "answer": _text(state["messages"][-1].content),
        }
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
