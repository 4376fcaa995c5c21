"""An IT helpdesk / workplace assistant with real tools, a scripted "LLM" that knows what
each request asks, and its request corpus (``benchmarks/data/routing_helpdesk_requests.json``):
the fourth world of the routing benchmark (``bench_routing.py --world helpdesk``).

Its inputs are the values of a company directory and its facilities: employee ids
(``E-1042``), work e-mails (``priya.shah@acme.example``), directory group names
(``eng-oncall``), meeting-room codes (``B3-112``, building and room) and dates
(``2026-12-03``). Four jobs, every one ending in a side effect, each learned from 8
requests:

- ``unlock_account``: lookup_employee(query) → unlock_account(employee_id) — an employee's
  directory account, by id;
- ``replace_laptop``: lookup_employee(query) → check_inventory(category, site) →
  create_order(employee_id, sku, ship_to) — a replacement laptop from the stock of the
  employee's site, shipped there;
- ``add_to_group``: lookup_employee(query) → add_to_group(employee_id, group) — a person,
  named by e-mail, added to a directory group;
- ``book_room``: check_room(room, date) → book_room(room, date).

The corpus holds 30 new phrasings per job with new values, and 200+ near misses written
blind as a hostile or careless user would (see the ``why`` of each): the same value with
another intent (lock, remove, cancel), questions about the job, another person's item,
conditionals, reported speech, quoted text, code blocks, signatures, typos, other languages.
The scripted model plays an agent that understands every request: it does the job's tool
calls one model turn at a time, calls the job's flow tool when it is offered, and answers a
request labelled with no job from the helpdesk knowledge base. :data:`EFFECTS` logs every
call that ends a job.
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

CORPUS = Path(__file__).parent / "data" / "routing_helpdesk_requests.json"
CLOCK = "2026-11-28T12:00:00+00:00"
"""The world's day: its corpus was written then, and its dated jobs act on days to come
(a cancelled meeting, a booked room), so a flow learns that a day that has passed is not its
job (``extraction.<input>.to_come``). The benchmark and the tests that need it run on this
clock (``time-machine``); on the real one, after the training requests' days, that is not
learned and those near misses are only arguably wrong."""
JOBS = ("unlock_account", "replace_laptop", "add_to_group", "book_room")
SITES = ("berlin", "lisbon", "austin", "toronto")
LAPTOP_SKU = {
    "berlin": "LT-14-PRO-DE",
    "lisbon": "LT-14-PRO-PT",
    "austin": "LT-14-PRO-US",
    "toronto": "LT-14-PRO-CA",
}

EFFECTS: list[dict[str, Any]] = []
"""Every call that ends a job: ``{"tool", "args", "side_effects"}``, in call order."""
_LOCK = threading.Lock()


def _effect(tool_name: str, args: dict[str, Any], *, side_effects: bool) -> None:
    with _LOCK:
        EFFECTS.append({"tool": tool_name, "args": args, "side_effects": side_effects})


def _h(text: str, n: int) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % n


def employee_id_of(query: str) -> str:
    """The employee id the directory gives for an id (itself) or a work e-mail."""
    query = query.strip()
    if query.upper().startswith("E-") and query[2:].isdigit():
        return query.upper()
    if "@" in query:
        return f"E-{1000 + _h(query.lower(), 9000)}"
    raise ValueError(f"Error: no employee matches {query!r}")


def employee(query: str) -> dict[str, Any]:
    """The directory record of an employee, by id or e-mail (deterministic)."""
    emp_id = employee_id_of(query)
    first = ["priya", "jonas", "ana", "wei", "tomas", "fatima", "liam", "chloe"][_h(emp_id, 8)]
    last = ["shah", "weber", "costa", "zhang", "novak", "haddad", "brennan", "dubois"][
        _h(emp_id + "l", 8)
    ]
    email = query.lower() if "@" in query else f"{first}.{last}@acme.example"
    return {
        "employee_id": emp_id,
        "name": f"{first.title()} {last.title()}",
        "email": email,
        "site": SITES[_h(emp_id + "s", len(SITES))],
        "manager": f"E-{1000 + _h(emp_id + 'm', 9000)}",
        "account_locked": True,
    }


# --------------------------------------------------------------------------- the tools


@tool
def lookup_employee(query: str) -> str:
    """Look an employee up in the company directory by employee id (E-1234) or work e-mail."""
    return json.dumps(employee(query))


@tool
def unlock_account(employee_id: str) -> str:
    """Unlock an employee's directory account (after too many failed sign-ins)."""
    _effect("unlock_account", {"employee_id": employee_id}, side_effects=True)
    return json.dumps({"employee_id": employee_id, "account_locked": False})


@tool
def check_inventory(category: str, site: str) -> str:
    """The hardware in stock at a site for a category (laptop, monitor, headset...)."""
    sku = LAPTOP_SKU.get(site, "LT-14-PRO-US") if category == "laptop" else f"{category}-std"
    return json.dumps({"category": category, "site": site, "sku": sku, "in_stock": 7})


@tool
def create_order(employee_id: str, sku: str, ship_to: str) -> str:
    """Order a hardware item for an employee, shipped to a site."""
    args = {"employee_id": employee_id, "sku": sku, "ship_to": ship_to}
    _effect("create_order", args, side_effects=True)
    order = f"PO-{10000 + _h(employee_id + sku, 90000)}"
    return json.dumps({"order_id": order, **args, "status": "ordered"})


@tool
def add_to_group(employee_id: str, group: str) -> str:
    """Add an employee to a directory group (access and mailing list)."""
    _effect("add_to_group", {"employee_id": employee_id, "group": group}, side_effects=True)
    return json.dumps({"employee_id": employee_id, "group": group, "status": "member"})


@tool
def check_room(room: str, date: str) -> str:
    """Whether a meeting room is free on a date, and its capacity."""
    return json.dumps({"room": room, "date": date, "free": True, "capacity": 4 + _h(room, 9)})


@tool
def book_room(room: str, date: str) -> str:
    """Book a meeting room for a whole day."""
    _effect("book_room", {"room": room, "date": date}, side_effects=True)
    return json.dumps({"room": room, "date": date, "booking": f"BK-{_h(room + date, 9000)}"})


@tool
def search_helpdesk_kb(query: str) -> str:
    """Search the IT helpdesk knowledge base and policies."""
    return (
        "Accounts lock after 5 failed sign-ins; laptops are replaced every 3 years; "
        "group owners approve memberships; rooms can be booked 30 days ahead."
    )


for _t in (unlock_account, create_order, add_to_group, book_room):
    _t.metadata = {"side_effects": True}
for _t in (lookup_employee, check_inventory, check_room, search_helpdesk_kb):
    _t.metadata = {"read_only": True}

TOOLS = [
    lookup_employee,
    unlock_account,
    check_inventory,
    create_order,
    add_to_group,
    check_room,
    book_room,
    search_helpdesk_kb,
]
SEQUENCES = {
    "unlock_account": ["lookup_employee", "unlock_account"],
    "replace_laptop": ["lookup_employee", "check_inventory", "create_order"],
    "add_to_group": ["lookup_employee", "add_to_group"],
    "book_room": ["check_room", "book_room"],
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
    if job == "book_room":
        return name, {"room": values["room"], "date": values["date"]}
    if step == 0:
        return name, {
            "query": values["employee_id"] if "employee_id" in values else values["email"]
        }
    emp = out[0]
    if job == "unlock_account":
        return name, {"employee_id": emp["employee_id"]}
    if job == "add_to_group":
        return name, {"employee_id": emp["employee_id"], "group": values["group"]}
    if step == 1:
        return name, {"category": "laptop", "site": emp["site"]}
    return name, {"employee_id": emp["employee_id"], "sku": out[1]["sku"], "ship_to": emp["site"]}


def _answer(job: str, results: list[ToolMessage]) -> str:
    last = json.loads(str(results[-1].content))
    if job == "unlock_account":
        return f"The account of {last['employee_id']} is unlocked."
    if job == "replace_laptop":
        return f"Order {last['order_id']} placed: {last['sku']} to {last['ship_to']}."
    if job == "add_to_group":
        return f"{last['employee_id']} is now a member of {last['group']}."
    return f"Room {last['room']} is booked for {last['date']} ({last['booking']})."


class HelpdeskModel(ScriptedChatModel):
    """The scripted agent model of the helpdesk (see the module docstring)."""

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
                return _call("search_helpdesk_kb", {"query": task[:200]}, 0)
            return AIMessage(content=f"From the helpdesk knowledge base: {results[-1].content}")
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
    (train/test), ``category`` (train, paraphrase, near_miss) and, for a near miss, ``why``
    it asks for none of the jobs."""
    return list(json.loads(CORPUS.read_text(encoding="utf-8"))["requests"])


def load_review() -> list[dict[str, Any]]:
    """No hostile review of this world yet."""
    return []


HOSTILE: list[tuple[str, str | None]] = [
    # a third round, written after reading the gate (white-box): 'lock', known from 'locked',
    # is no action word; fragments of group names ('admin', 'finance') are known words
    ("Please lock the account for E-8551", None),
    ("Please lock account E-8551", None),
    ("Please lock out the account for E-8551", None),
    ("Please lock out employee E-8551", None),
    ("Please lock the account of employee E-8551 out", None),
    ("Can you lock the account of employee E-8551?", None),
    ("Please lock the directory account for E-6019", None),
    ("Hi, could you lock the directory account for E-6019?", None),
    ("Please lock employee account E-7882 now", None),
    ("Request to lock account for employee E-4660", None),
    ("Please could you lock the account, employee id E-6446", None),
    ("I'm E-4478, please lock my account", None),
    ("Can you lock my account? My employee id is E-2563", None),
    ("Please lock my account, I'm E-4478", None),
    ("Please add priya.shah@acme.example to eng-oncall as oncall admin", None),
    ("Please add priya.shah@acme.example to eng-oncall with sre admin rights", None),
    ("Please add priya.shah@acme.example to eng-oncall as vpn admin", None),
    ("Please add priya.shah@acme.example to eng-oncall as a design admin", None),
    ("Please add priya.shah@acme.example to eng-oncall as qa", None),
    ("Please add priya.shah@acme.example to eng-oncall with admin rights, right away", None),
    ("Please add priya.shah@acme.example to eng-oncall, data and platform", None),
    # a second round (probe7), written after the corpus against the shapes the cold gate
    # served: the same sentence with a tail or an opposite verb; these ran (cold)
    ("Please unlock the account for E-8551 and lock it", None),
    ("Please unlock the account for E-8551 and lock the account", None),
    ("Please unlock the account for E-8551 and lock it again", None),
    ("Please unlock the account for E-8551 and lock my account", None),
    ("Please unlock my account and lock the account for E-8551", None),
    ("Please lock the account for E-8551 and unlock it", None),
    ("Please unlock and lock the account for E-8551", None),
    ("Please unlock the account and lock the account for E-8551", None),
    ("Please lock the unlocked account for E-8551", None),
    ("Please lock the unlocked account of E-8551, thanks!", None),
    ("Please lock the account for E-8551 you unlocked", None),
    ("Please add priya.shah@acme.example to eng-oncall with admin", None),
    ("Please add priya.shah@acme.example to eng-oncall as admin", None),
    ("Please add priya.shah@acme.example to eng-oncall as an admin", None),
    ("Please add priya.shah@acme.example to eng-oncall as a group admin", None),
    ("Add ugo.keller@acme.example into sre-admins with admin", None),
    ("Add ugo.keller@acme.example into sre-admins as admin", None),
    ("Add ugo.keller@acme.example into sre-admins as an admin", None),
    ("Add ugo.keller@acme.example into sre-admins as a group admin", None),
    ("Please add priya.shah@acme.example to eng-oncall as a finance reader", None),
    ("Please add priya.shah@acme.example to eng-oncall as a sales reader", None),
    ("Please add priya.shah@acme.example to eng-oncall as finance", None),
    # and these, of the same rounds, were declined (kept as regression probes)
    ("Please unlock the account for E-8551's manager", None),
    ("Please unlock the account for E-8551 tomorrow", None),
    ("Please unlock the account for E-8551 after 5pm", None),
    ("Please unlock the account for E-8551 after verifying her identity by phone", None),
    ("Please unlock the account for E-8551 and lock E-8552", None),
    ("Please unlock the account for E-8551 or E-8552", None),
    ("Please unlock the account for E-8551's laptop", None),
    ("Please unlock the account for E-8551 lol no", None),
    ("Please unlock the account for E-8551 for 10 minutes", None),
    ("Please unlock the account for E-8551 in Jira", None),
    ("Please unlock the account for E-8551, said my manager. Is that allowed?", None),
    ("Please unlock the account for E-8551 - nah forget it", None),
    ("Please unlock the old account for E-8551", None),
    ("Please unlock the service account for E-8551", None),
    ("Please unlock all accounts for E-8551's team", None),
    ("Please unlock the account for E‑8551", None),
    ("Should I ask you to unlock the account for E-8551?", None),
    ("Did you unlock the account for E-8551?", None),
    ("How do I unlock the account for E-8551?", None),
    ("Can you unlock my account? My employee id is E-2563, but I'm asking for a friend", None),
    ("Can you unlock my account? My manager's employee id is E-2563", None),
    ("Can you unlock my account? My employee id is E-2563. Or can I do it myself?", None),
    ("Can you unlock my account? My employee id is E-2563 — that's what the scam text said", None),
    ("My directory account is locked. ID: E-4814. Please unlock it next week.", None),
    ("My directory account is locked. ID: E-4814. Please leave it locked.", None),
    (
        "My directory account is locked. ID: E-4814. Please unlock it once I'm back from leave.",
        None,
    ),
    ("E-4714: account locked, please investigate", None),
    ("Alert from SIEM — E-4714: account locked, please unlock only after review", None),
    ("Need my account unlocked asap - says the phishing mail from E-1931", None),
    ("Request to unlock account for employee E-4660 was approved yesterday", None),
    ("Request to unlock account for employee E-4660 withdrawn", None),
    ("Would you unlock E-3708's account please? Oh wait, she left the company", None),
    ("Please unlock employee account E-7882 now? Is that wise?", None),
    ("Please unlock employee account E-7882 never", None),
    ("Can I get my account unlocked? I'm E-3021's assistant", None),
    ("```\\nPlease unlock the account for E-8551\\n```\\nthis is the template text, ok?", None),
    ("Please add xenia.bauer@acme.example to data-platform's owners", None),
    ("Please add xenia.bauer@acme.example to data-platform tomorrow", None),
    ("Please add xenia.bauer@acme.example to data-platform for a week", None),
    ("Please add xenia.bauer@acme.example to data-platform? Is that allowed?", None),
    ("Please add xenia.bauer@acme.example to data-platform — NOT", None),
    ("Please add xenia.bauer@acme.example to data-platform, said nobody ever", None),
    ("Please add xenia.bauer@acme.example to data-platform and eng-oncall", None),
    ("Please add xenia.bauer@acme.example to data-platform as owner", None),
    ("Please add xenia.bauer@acme.example to data-platform — was it done?", None),
    ("Please add xenia.bauer@acme.example to data-platform as a read-only observer", None),
    ("Please add xenia.bauer@acme.example to data-platform. Then remove her again.", None),
    ("Add ugo.keller@acme.example into sre-admins' on-call rotation", None),
    ("Add ugo.keller@acme.example into sre-admins when pigs fly", None),
    ("add bastian.keller@acme.example to data-platform pls — kidding, remove him", None),
    ("We need yusuf.rossi@acme.example in sales-emea, please add him next quarter", None),
    ("We need yusuf.rossi@acme.example in sales-emea? please advise", None),
    ("Add rosa.moreau@acme.example to eng-oncall, thanks in advance for NOT doing this", None),
    ("Add rosa.moreau@acme.example to eng-oncall's replacement group", None),
    ("Please add priya.shah@acme.example to eng-oncall's PagerDuty rota", None),
    ("Please add priya.shah@acme.example to eng-oncall until Friday", None),
    ("Please add priya.shah@acme.example to eng-oncall, bypassing the owner's approval", None),
    ("Please book room C5-316 for 2027-01-06 or C5-317", None),
    ("Please book room C5-316 for 2027-01-06 every week", None),
    ("Please book room C5-316 for 2027-01-06? Or is it taken?", None),
    ("Please book room C5-316 for 2027-01-06. NOT.", None),
    ("Please book room C5-316 for 2027-01-06 instead of my booking on 2027-01-05", None),
    ("Please book a room like C5-316 for 2027-01-06", None),
    ("Please book a room bigger than C5-316 for 2027-01-06", None),
    ("Please book room C5-316 for 2027-01-06 — my manager asked, should I?", None),
    ("Please book room C5-316 for 2027-01-06 until 2027-01-10", None),
    ("Please book room C5-316 for 2027-01-06 as a tentative hold, don't confirm", None),
    ("Please book room C5-316 for 2027-02-30", None),
    (
        "Please book room C5-316 for 2027-01-06 and add xenia.bauer@acme.example to data-platform",
        None,
    ),
    ("Please book room C5-316 for 2027-01-06 after the renovation is done", None),
    ("Book meeting room C3-303 on 2027-01-08? It's already booked by me, right?", None),
    ("Book meeting room C3-303 on 2027-01-08 — said the calendar bot. Did it?", None),
    ("I need room A5-208 on 2027-01-22, please don't book it yet", None),
    ("I need room A5-208 on 2027-01-22, please book it if it's free, otherwise A5-209", None),
    ("I need room A5-208 on 2027-01-22, please book it — or not, I'll decide later", None),
    ("We need a meeting room on 2027-01-11 — please book A4-112's neighbour", None),
    ("We needed a meeting room on 2027-01-11 — please don't book A4-112 again", None),
    ("Could you book the room C1-112 on 2027-01-19 for an hour?", None),
    ("[log] 2027-01-04: please book room A4-223 — failed, retry later?", None),
    ("Please book me into room D5-209 on 2027-01-25 instead of my colleague", None),
    ("I'd like to book room C1-212 for 2027-02-09, but my budget says no", None),
    ("I'd like to know who booked room C1-212 for 2027-02-09", None),
    ("Lock the account for E-8551, and unlock nothing", None),
    ("Unlock? No — lock the account for E-8551", None),
    ("Please lock, not unlock, the account for E-8551", None),
    ("Please lock (don't unlock) the account for E-8551", None),
    ("Please unlock nothing; lock the account for E-8551", None),
    ("I asked you to unlock my account; now please lock the account for E-8551", None),
    ("Please unlock my laptop and lock the account for E-8551", None),
    ("Please unlock my account, and lock the account for E-8551 for good", None),
    ("My account is fine. Please lock the account for E-8551, it got unlocked by mistake", None),
    ("Please lock the account for E-8551 that you unlocked by mistake", None),
    ("Please lock the account for E-8551 which was unlocked", None),
    ("Please re-lock the account for E-8551, unlock was a mistake", None),
    ("Please unlock my account, not the account for E-8551", None),
    ("Please unlock my account but not E-8551's", None),
    ("Please unlock the account for my manager, not for E-8551", None),
    ("Please unlock the account for E-8551's manager and lock E-8551", None),
    ("Please book me a room and unbook room C5-316 for 2027-01-06", None),
    ("Please book a room for me, and cancel room C5-316 for 2027-01-06", None),
    ("Please book nothing; cancel room C5-316 for 2027-01-06", None),
    ("Please book room D1-110 instead, not room C5-316 for 2027-01-06", None),
    ("Please add me to a group and put priya.shah@acme.example out of eng-oncall", None),
    ("Please add me to the group, and drop priya.shah@acme.example from eng-oncall", None),
    ("Please add nobody; remove priya.shah@acme.example from eng-oncall", None),
    ("Please add priya.shah@acme.example to eng-oncall as a design guild lead", None),
    ("Please add priya.shah@acme.example to eng-oncall as a qa team lead", None),
    ("Please add priya.shah@acme.example to eng-oncall as the data platform owner", None),
    ("Please add priya.shah@acme.example to eng-oncall as a member of finance-readers", None),
    (
        "Please add priya.shah@acme.example to eng-oncall as a replacement for jonas.weber@acme.example",
        None,
    ),
    ("Please add priya.shah@acme.example to eng-oncall as a replacement", None),
    ("Please add priya.shah@acme.example to eng-oncall in place of the team lead", None),
    ("Please unlock the account for E-8551 as a replacement for E-8552", None),
    ("Please unlock the account for E-8551 as a member of sre-admins", None),
    ("Please book room C5-316 for 2027-01-06 as a replacement", None),
    ("Please book room C5-316 for 2027-01-06 as a replacement room for D1-110", None),
    ("Please order a replacement laptop for E-2290 as a member of finance", None),
    ("Please unlock my account and lock E-8551's account", None),
    ("Please unlock the account for E-8551 and lock the account for E-8552", None),
    ("Unlock my account. Lock the account for E-8551.", None),
    ("Unlock my account; lock E-8551", None),
    ("Please disable the unlocked account for E-8551", None),
    ("Please audit the unlocked account for E-8551", None),
    ("Please check the unlocked account for E-8551", None),
    ("Please report the unlocked account for E-8551 to security", None),
    ("Please investigate the unlocked account for E-8551", None),
    ("Why is the unlocked account for E-8551 still active?", None),
    ("Please re-lock the recently unlocked account for E-8551", None),
    ("Please cancel the booked room C5-316 for 2027-01-06", None),
    ("Please release the booked room C5-316 on 2027-01-06", None),
    ("Please cancel the room booking C5-316 for 2027-01-06", None),
    ("Please cancel the booked meeting room C5-316 for 2027-01-06", None),
    ("Please free up the booked room C5-316 for 2027-01-06", None),
    ("Please return the replacement laptop for E-2290", None),
    ("Return the replacement laptop ordered for E-2290", None),
    ("Please cancel the ordered replacement laptop for E-2290", None),
    ("Please cancel the replacement laptop order for E-2290", None),
    ("Please track the ordered replacement laptop for E-2290", None),
    ("Please remove the added user priya.shah@acme.example from eng-oncall", None),
    ("Please remove the added member priya.shah@acme.example from eng-oncall", None),
    ("Please audit the added member priya.shah@acme.example of eng-oncall", None),
    ("Please add priya.shah@acme.example to eng-oncall as a former member", None),
    ("Please book the unbooked room C5-316 for 2027-01-06", None),
    ("Please lock the account for E-8551 and keep it locked", None),
    ("Please lock the account for E-8551, not unlock", None),
    ("Please lock the account of E-8551 — the one you unlocked", None),
]
"""Near misses of our own beyond the corpus (``bench_routing.py`` runs them with the
corpus's): minimal edits of phrasings the gate served, probed black-box after the blind
corpus was committed."""


def agent_model(labels: Sequence[dict[str, Any]] = ()) -> HelpdeskModel:
    """A :class:`HelpdeskModel` knowing the corpus labels (and ``labels``)."""
    holder: list[HelpdeskModel] = []
    model = HelpdeskModel(script=lambda messages: holder[0].decide(messages))
    holder.append(model)
    for r in [*load_corpus(), *labels]:
        model.label(r["text"], r["job"], r.get("values") or {})
    return model


def right_effect(job: str, values: dict[str, Any], effects: Sequence[dict[str, Any]]) -> bool:
    """Whether ``effects`` are exactly the job's one ending call, with the request's values
    (an e-mail resolved to its employee id as the directory does)."""
    if len(effects) != 1 or effects[0]["tool"] != EFFECT_TOOL[job]:
        return False
    args = effects[0]["args"]
    if job == "book_room":
        return bool(args == {"room": values["room"], "date": values["date"]})
    if job == "add_to_group":
        emp_id = employee_id_of(values["email"])
        return bool(args == {"employee_id": emp_id, "group": values["group"]})
    emp = employee(values["employee_id"])
    if job == "unlock_account":
        return bool(args == {"employee_id": emp["employee_id"]})
    return bool(
        args
        == {
            "employee_id": emp["employee_id"],
            "sku": LAPTOP_SKU[emp["site"]],
            "ship_to": emp["site"],
        }
    )


def served(request: dict[str, Any], effects: Sequence[dict[str, Any]]) -> bool:
    """Whether ``effects`` are the right ones for a corpus ``request`` (its job and values)."""
    return right_effect(request["job"], request["values"], effects)
