"""The demo's world: a customer-support agent with real tools and a scripted chat model.

The scripted model plays the LLM deterministically (no network, no API key): it reads the
conversation so far and picks the next tool call the way a model would, and reports token
usage on every message (``usage_metadata``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from soloflow_langgraph.testing import ScriptedChatModel

CUSTOMERS = {
    "alice@example.com": {"customer_id": "C-1001", "name": "Alice Martin"},
    "bob@example.org": {"customer_id": "C-1002", "name": "Bob Chen"},
    "carol@example.net": {"customer_id": "C-1003", "name": "Carol Diaz"},
    "dave@example.com": {"customer_id": "C-1004", "name": "Dave Okafor"},
    "erin@example.io": {"customer_id": "C-1005", "name": "Erin Novak"},
}
ORDERS = {
    "C-1001": [
        {"order_id": "O-5001", "item": "desk lamp"},
        {"order_id": "O-4410", "item": "cable"},
    ],
    "C-1002": [{"order_id": "O-5002", "item": "keyboard"}],
    "C-1003": [{"order_id": "O-5003", "item": "monitor arm"}],
    "C-1004": [
        {"order_id": "O-5004", "item": "office chair"},
        {"order_id": "O-3999", "item": "mat"},
    ],
    "C-1005": [{"order_id": "O-5005", "item": "headset"}],
}
SHIPMENTS = {
    "O-5001": {"carrier": "DHL", "status": "in transit", "eta": "2026-11-25"},
    "O-5002": {"carrier": "UPS", "status": "delivered", "eta": "2026-11-20"},
    "O-5003": {"carrier": "FedEx", "status": "out for delivery", "eta": "2026-11-22"},
    "O-5004": {"carrier": "DHL", "status": "label created", "eta": "2026-11-28"},
    "O-5005": {"carrier": "GLS", "status": "in transit", "eta": "2026-11-26"},
}
NOTIFICATIONS: list[dict[str, str]] = []


@tool
def find_customer(email: str) -> str:
    """Look up a customer account by email address."""
    if email not in CUSTOMERS:
        raise ValueError(f"no customer with email {email!r}")
    return json.dumps({"email": email, **CUSTOMERS[email]})


@tool
def list_orders(customer_id: str) -> str:
    """List a customer's orders, newest first."""
    return json.dumps(ORDERS.get(customer_id, []))


@tool
def track_shipment(order_id: str) -> str:
    """Track the shipment of an order."""
    return json.dumps({"order_id": order_id, **SHIPMENTS.get(order_id, {"status": "unknown"})})


@tool
def notify_customer(customer_id: str, order_id: str, status: str) -> str:
    """Send the customer a shipment-status notification."""
    NOTIFICATIONS.append({"customer_id": customer_id, "order_id": order_id, "status": status})
    return f"notified {customer_id} that {order_id} is {status}"


@tool
def search_help_center(query: str) -> str:
    """Search the help-center articles."""
    return "Returns: unopened items within 30 days; opened items within 14 days for store credit."


TOOLS = [find_customer, list_orders, track_shipment, notify_customer, search_help_center]

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def _call(name: str, args: dict[str, str], n: int) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": f"call_{n}_{name}", "type": "tool_call"}],
    )


def support_script(messages: list[BaseMessage]) -> AIMessage:
    """What the 'LLM' does next, given the conversation so far."""
    task = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "")
    results = [m for m in messages if isinstance(m, ToolMessage)]
    email = _EMAIL.search(task)
    if email is None:
        if not results:
            return _call("search_help_center", {"query": task}, 0)
        return AIMessage(content=f"From our help center: {results[-1].content}")
    step = len(results)
    if step == 0:
        return _call("find_customer", {"email": email.group(0)}, step)
    last: Any = json.loads(str(results[-1].content)) if step < 4 else None
    if step == 1:
        return _call("list_orders", {"customer_id": last["customer_id"]}, step)
    if step == 2:
        return _call("track_shipment", {"order_id": last[0]["order_id"]}, step)
    if step == 3:
        customer = json.loads(str(results[0].content))["customer_id"]
        return _call(
            "notify_customer",
            {"customer_id": customer, "order_id": last["order_id"], "status": last["status"]},
            step,
        )
    shipment = json.loads(str(results[2].content))
    return AIMessage(
        content=f"Your order {shipment['order_id']} is {shipment['status']} "
        f"(ETA {shipment.get('eta', '?')}). I've sent you a notification."
    )


def build_support_agent(name: str = "support_agent"):  # type: ignore[no-untyped-def]
    """A real ``create_agent`` agent over the demo tools, driven by the scripted model."""
    from langchain.agents import create_agent

    model = ScriptedChatModel(script=support_script)
    agent = create_agent(
        model, tools=TOOLS, system_prompt="You are a customer-support agent.", name=name
    )
    return agent, model
