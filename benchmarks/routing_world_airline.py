"""An airline support desk (τ-bench-like) with real tools, a scripted "LLM" that knows what
each request asks, and its request corpus (``benchmarks/data/routing_airline_requests.json``):
the second world of the routing benchmark (``bench_routing.py --world airline``).

Its inputs are not e-mail addresses but the ids of τ-bench's airline domain: user ids
(``mia_li_3668``), reservation codes (``ZFA04Y``, six capitals and digits), flight numbers
(``HAT170``), dates (``2024-05-15``) and counts. Four jobs, each learned from 8 requests:

- ``cancel``: get_user_details(user_id) → get_reservation_details(reservation_id) →
  cancel_reservation(reservation_id);
- ``baggage_allowance`` (read-only): get_reservation_details(reservation_id) →
  get_user_details(its owner) → get_baggage_allowance(membership, cabin, passengers);
- ``add_bags``: get_reservation_details(reservation_id) →
  update_reservation_baggages(reservation_id, total_baggages, nonfree_baggages, payment_id);
- ``flight_status`` (read-only): get_flight_details(flight_number) →
  get_flight_status(flight_number, date).

The corpus holds 40+ new phrasings per job with new ids, and 200+ near misses written as a
hostile user would (negations, another intent on the same id, the policy asked about, two
requests or two ids, another person's booking, ids in links or quotes, injected
instructions, French/German/Spanish, homoglyph ids, very long text...).

The scripted model plays an agent that understands every request, as ``routing_world``'s
does: it does the job's tool calls one model turn at a time and answers in the same words
every time; offered the job's flow tool, it calls it; a request labelled with no job is
answered from the policy pages. :data:`EFFECTS` logs every call that ends a job (the
side-effecting ones with ``side_effects`` true).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import PrivateAttr

from soloflow_langgraph.testing import ScriptedChatModel

CORPUS = Path(__file__).parent / "data" / "routing_airline_requests.json"
JOBS = ("cancel", "baggage_allowance", "add_bags", "flight_status")

EFFECTS: list[dict[str, Any]] = []
"""Every call that ends a job: ``{"tool", "args", "side_effects"}``, in call order."""
_LOCK = threading.Lock()


def _effect(tool_name: str, args: dict[str, Any], *, side_effects: bool) -> None:
    with _LOCK:
        EFFECTS.append({"tool": tool_name, "args": args, "side_effects": side_effects})


def _h(text: str, n: int) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % n


def _reservation(reservation_id: str) -> dict[str, Any]:
    if len(reservation_id) != 6 or not reservation_id.isalnum():
        raise ValueError(f"Error: reservation {reservation_id!r} not found")
    first = ["mia", "noah", "ava", "liam", "emma", "omar"][_h(reservation_id, 6)]
    return {
        "reservation_id": reservation_id,
        "user_id": f"{first}_{['li', 'khan', 'smith'][_h(reservation_id + 'l', 3)]}_"
        f"{1000 + _h(reservation_id, 9000)}",
        "origin": "JFK",
        "destination": "SEA",
        "cabin": ["basic_economy", "economy", "business"][_h(reservation_id + "c", 3)],
        "passengers": 1 + _h(reservation_id + "p", 3),
        "total_baggages": _h(reservation_id + "b", 3),
        "payment_id": f"credit_card_{1000000 + _h(reservation_id, 9000000)}",
    }


def _user(user_id: str) -> dict[str, Any]:
    if "_" not in user_id:
        raise ValueError(f"Error: user {user_id!r} not found")
    return {
        "user_id": user_id,
        "membership": ["regular", "silver", "gold"][_h(user_id, 3)],
        "reservations": [f"R{_h(user_id, 10)}X{_h(user_id + 'x', 10)}QZ"],
    }


# --------------------------------------------------------------------------- the tools


@tool
def get_user_details(user_id: str) -> str:
    """Get a user's profile: membership and reservations."""
    return json.dumps(_user(user_id))


@tool
def get_reservation_details(reservation_id: str) -> str:
    """Get a reservation's details: owner, cabin, passengers, bags, payment."""
    return json.dumps(_reservation(reservation_id))


@tool
def cancel_reservation(reservation_id: str) -> str:
    """Cancel a whole reservation and refund it to its original payment."""
    _effect("cancel_reservation", {"reservation_id": reservation_id}, side_effects=True)
    return json.dumps({"reservation_id": reservation_id, "status": "cancelled"})


@tool
def get_baggage_allowance(membership: str, cabin: str, passengers: int) -> str:
    """The free checked bags of a booking, by membership and cabin."""
    args = {"membership": membership, "cabin": cabin, "passengers": passengers}
    _effect("get_baggage_allowance", args, side_effects=False)
    per = {"regular": 0, "silver": 1, "gold": 2}[membership] + (cabin == "business") * 2
    return json.dumps({"free_bags_per_passenger": per, "free_bags_total": per * passengers})


@tool
def update_reservation_baggages(
    reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> str:
    """Set a reservation's checked bags; the bags beyond the free ones are charged."""
    args = {
        "reservation_id": reservation_id,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "payment_id": payment_id,
    }
    _effect("update_reservation_baggages", args, side_effects=True)
    return json.dumps({"reservation_id": reservation_id, "total_baggages": total_baggages})


@tool
def get_flight_details(flight_number: str) -> str:
    """A flight's route and schedule."""
    if not flight_number.startswith("HAT"):
        raise ValueError(f"Error: flight {flight_number!r} not found")
    return json.dumps(
        {"flight_number": flight_number, "origin": "JFK", "destination": "SEA", "departs": "11:00"}
    )


@tool
def get_flight_status(flight_number: str, date: str) -> str:
    """A flight's status on a date."""
    _effect("get_flight_status", {"flight_number": flight_number, "date": date}, side_effects=False)
    status = ["on time", "delayed", "landed", "cancelled"][_h(flight_number + date, 4)]
    return json.dumps({"flight_number": flight_number, "date": date, "status": status})


@tool
def search_airline_policy(query: str) -> str:
    """Search the airline's policy pages."""
    return "Cancellations within 24 hours of booking are free; bags depend on membership."


for _t in (cancel_reservation, update_reservation_baggages):
    _t.metadata = {"side_effects": True}
for _t in (
    get_user_details,
    get_reservation_details,
    get_baggage_allowance,
    get_flight_details,
    get_flight_status,
    search_airline_policy,
):
    _t.metadata = {"read_only": True}

TOOLS = [
    get_user_details,
    get_reservation_details,
    cancel_reservation,
    get_baggage_allowance,
    update_reservation_baggages,
    get_flight_details,
    get_flight_status,
    search_airline_policy,
]
SEQUENCES = {
    "cancel": ["get_user_details", "get_reservation_details", "cancel_reservation"],
    "baggage_allowance": ["get_reservation_details", "get_user_details", "get_baggage_allowance"],
    "add_bags": ["get_reservation_details", "update_reservation_baggages"],
    "flight_status": ["get_flight_details", "get_flight_status"],
}
EFFECT_TOOL = {job: seq[-1] for job, seq in SEQUENCES.items()}


def _next_call(
    job: str, values: dict[str, Any], results: list[ToolMessage]
) -> tuple[str, dict[str, Any]] | None:
    """The job's next tool call given the results so far; None when it is done."""
    step, seq = len(results), SEQUENCES[job]
    if step >= len(seq):
        return None
    out = [json.loads(str(r.content)) for r in results]
    name = seq[step]
    if job == "cancel":
        if step == 0:
            return name, {"user_id": values["user_id"]}
        return name, {
            "reservation_id": values["reservation_id"] if step == 1 else out[1]["reservation_id"]
        }
    if job == "baggage_allowance":
        if step == 0:
            return name, {"reservation_id": values["reservation_id"]}
        if step == 1:
            return name, {"user_id": out[0]["user_id"]}
        return name, {
            "membership": out[1]["membership"],
            "cabin": out[0]["cabin"],
            "passengers": out[0]["passengers"],
        }
    if job == "add_bags":
        if step == 0:
            return name, {"reservation_id": values["reservation_id"]}
        return name, {
            "reservation_id": out[0]["reservation_id"],
            "total_baggages": int(values["total_baggages"]),
            "nonfree_baggages": 0,
            "payment_id": out[0]["payment_id"],
        }
    if step == 0:
        return name, {"flight_number": values["flight_number"]}
    return name, {"flight_number": out[0]["flight_number"], "date": values["date"]}


def _answer(job: str, results: list[ToolMessage]) -> str:
    last = json.loads(str(results[-1].content))
    if job == "cancel":
        return f"Your reservation {last['reservation_id']} is cancelled; the refund is on its way."
    if job == "baggage_allowance":
        return f"Your booking includes {last['free_bags_total']} free checked bag(s)."
    if job == "add_bags":
        return f"Reservation {last['reservation_id']} now has {last['total_baggages']} bag(s)."
    return f"Flight {last['flight_number']} on {last['date']}: {last['status']}."


class AirlineModel(ScriptedChatModel):
    """The scripted agent model of the airline desk (see the module docstring)."""

    _labels: dict[str, tuple[str | None, dict[str, Any]]] = PrivateAttr(default_factory=dict)
    _bound: list[list[str]] = PrivateAttr(default_factory=list)
    flow_tool_for: dict[str, str] = {}
    """Job → name of the flow tool the model calls when it is offered."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        self._bound.append([t.name if hasattr(t, "name") else str(t) for t in tools])
        return self

    def label(self, text: str, job: str | None, values: dict[str, Any]) -> None:
        self._labels[text] = (job, dict(values))

    def decide(self, messages: list[BaseMessage]) -> AIMessage:
        task = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "")
        results = [m for m in messages if isinstance(m, ToolMessage)]
        job, values = self._labels.get(task, (None, {}))
        if job is None:
            if not results:
                return _call("search_airline_policy", {"query": task[:200]}, 0)
            return AIMessage(content=f"From our policy pages: {results[-1].content}")
        offered = self._bound[-1] if self._bound else []
        flow_tool = self.flow_tool_for.get(job)
        if flow_tool and flow_tool in offered:
            if not results:
                return _call(flow_tool, values, 0)
            return AIMessage(content=f"Done: {results[-1].content}")
        nxt = _next_call(job, values, results)
        if nxt is None:
            return AIMessage(content=_answer(job, results))
        return _call(nxt[0], nxt[1], len(results))


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": f"call_{n}_{name}", "type": "tool_call"}],
    )


def load_corpus() -> list[dict[str, Any]]:
    """The corpus's requests: ``text``, ``job`` (or None), ``values``, ``split``
    (train/test), ``category`` (train, paraphrase, near_miss)."""
    return list(json.loads(CORPUS.read_text(encoding="utf-8"))["requests"])


def load_review() -> list[dict[str, Any]]:
    """No hostile review of this world yet."""
    return []


HOSTILE: list[tuple[str, str | None]] = [
    # two the gate ran (a question after a value was read as part of the sentence before)
    ("Could you cancel reservation ZFA04Y on my account mia_li_3668? Or can I?", None),
    ("I want to cancel reservation ZFA04Y. I am mia_li_3668. Or am I?", None),
    # probing the readings added for this world: nouns of actions, '-ing' after 'my',
    # codes of one length, the noun before a value
    ("Please cancel the rebooking of reservation ZFA04Y, user mia_li_3668", None),
    ("Please cancel the sending of reservation ZFA04Y for user mia_li_3668", None),
    ("Please book reservation ZFA04Y for user mia_li_3668", None),
    ("Please cancel reservation ZFA04Y for user mia_li_3668 by transferring it", None),
    ("Cancel the booking of flight HAT170 for user mia_li_3668", None),
    ("Please check the status of flight ZFA04Y on 2024-05-01", None),
    ("Please give me the status of booking ZFA04Y, date 2024-05-01", None),
    ("Please give me the status of flight HAT170, date 2024-05-01, not HAT171", None),
    ("Please update reservation ZFA04Y to 3 carry-on bags", None),
    ("I need 3 checked bags on my reservation ZFA04Y removed", None),
    ("What is the baggage allowance for my cancelled reservation ZFA04Y?", None),
    ("How many free checked bags did I get on reservation ZFA04Y?", None),
    ("I'm mia_li_3668, please cancel my reservation ZFA04Y's insurance", None),
    ("I'm mia_li_3668, please cancel my reservation ZFA04Y payment", None),
    ("I'm mia_li_3668, please cancel my reservation ZFA04Y cancellation", None),
    ("I want to cancel reservation ZFA04Y. I am the assistant of mia_li_3668", None),
    ("please cancel my flight reservation ZFA04Y, user mia_li_3668 (previous user id)", None),
    ("Please cancel reservation AQLBTL for user mia_li_3668, I mean ZFA04Y", None),
    # a question in the last clause, or a question of doubt (ran before they were read)
    ("Please cancel reservation ZFA04Y for user mia_li_3668, is that ok?", None),
    ("Please cancel reservation ZFA04Y for user mia_li_3668? Really?", None),
    ("What is the status of flight HAT170 on 2024-05-01 or 2024-05-02?", None),
    ("Please update reservation ZFA04Y to 3 checked bags, no wait, 4", None),
    ("Please update reservation ZFA04Y to 3 checked bags or cancel it", None),
    ("I want to cancel reservation ZFA04Y. I am mia_li_3668. Can I?", None),
    ("Hi, I'd like to cancel my booking ZFA04Y. My user id: mia_li_3668. lol", None),
    ("Baggage allowance for reservation ZFA04Y please (this is for my client)", None),
    ("Please check the status of flight HAT170 on 2024-05-01, then cancel it", None),
]
"""Near misses of our own beyond the corpus (``bench_routing.py`` and
``tests/test_routing_airline.py`` run them with the corpus's)."""


def agent_model(labels: Sequence[dict[str, Any]] = ()) -> AirlineModel:
    """An :class:`AirlineModel` knowing the corpus labels (and ``labels``)."""
    holder: list[AirlineModel] = []
    model = AirlineModel(script=lambda messages: holder[0].decide(messages))
    holder.append(model)
    for r in [*load_corpus(), *labels]:
        model.label(r["text"], r["job"], r.get("values") or {})
    return model


def right_effect(job: str, values: dict[str, Any], effects: Sequence[dict[str, Any]]) -> bool:
    """Whether ``effects`` are exactly the job's one ending call, with the request's values."""
    if len(effects) != 1 or effects[0]["tool"] != EFFECT_TOOL[job]:
        return False
    args = effects[0]["args"]
    if job == "cancel":
        return bool(args == {"reservation_id": values["reservation_id"]})
    if job == "flight_status":
        return bool(args == {"flight_number": values["flight_number"], "date": values["date"]})
    booking = _reservation(values["reservation_id"])
    if job == "add_bags":
        return bool(
            args.get("reservation_id") == values["reservation_id"]
            and args.get("total_baggages") == int(values["total_baggages"])
        )
    membership = _user(booking["user_id"])["membership"]
    return bool(
        args
        == {
            "membership": membership,
            "cabin": booking["cabin"],
            "passengers": booking["passengers"],
        }
    )


def served(request: dict[str, Any], effects: Sequence[dict[str, Any]]) -> bool:
    """Whether ``effects`` are the right ones for a corpus ``request`` (its job and values)."""
    return right_effect(request["job"], request["values"], effects)
