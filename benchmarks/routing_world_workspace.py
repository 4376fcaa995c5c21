"""A calendar / e-mail / files workspace assistant (like AgentDojo's workspace suite) with
real tools, a scripted "LLM" that knows what each request asks, and its request corpus
(``benchmarks/data/routing_workspace_requests.json``): the fifth world of the routing
benchmark (``bench_routing.py --world workspace``).

Its inputs are the values of a workspace: e-mail addresses (``maria.lopez@northwind.example``),
file names (``Q3-report.xlsx``), event ids (``EVT-4821``) and dates (``2026-12-03``). Four
jobs, every one ending in a side effect, each learned from 8 requests:

- ``share_file``: search_files(query) → share_file(file_id, email) — a file, by name,
  shared with a person (viewer);
- ``cancel_meeting``: list_events(date) → cancel_event(event_id) — my meeting on a date;
- ``invite_participant``: get_event(event_id) → add_participant(event_id, email);
- ``forward_email``: search_emails(sender) → forward_email(email_id, to) — the last e-mail
  from one address forwarded to another.

The corpus holds 30 new phrasings per job with new values, and 200+ near misses written
blind as a hostile or careless user would (see the ``why`` of each). The scripted model
plays an agent that understands every request: it does the job's tool calls one model turn
at a time, calls the job's flow tool when it is offered, and answers a request labelled with
no job from the workspace help pages. :data:`EFFECTS` logs every call that ends a job.
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

CORPUS = Path(__file__).parent / "data" / "routing_workspace_requests.json"
CLOCK = "2026-11-28T12:00:00+00:00"
"""The world's day: its corpus was written then, and its dated jobs act on days to come
(a cancelled meeting, a booked room), so a flow learns that a day that has passed is not its
job (``extraction.<input>.to_come``). The benchmark and the tests that need it run on this
clock (``time-machine``); on the real one, after the training requests' days, that is not
learned and those near misses are only arguably wrong."""
JOBS = ("share_file", "cancel_meeting", "invite_participant", "forward_email")

EFFECTS: list[dict[str, Any]] = []
"""Every call that ends a job: ``{"tool", "args", "side_effects"}``, in call order."""
_LOCK = threading.Lock()


def _effect(tool_name: str, args: dict[str, Any], *, side_effects: bool) -> None:
    with _LOCK:
        EFFECTS.append({"tool": tool_name, "args": args, "side_effects": side_effects})


def _h(text: str, n: int) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % n


def file_id_of(name: str) -> str:
    """The drive id of a file, by its name (deterministic)."""
    return f"F-{10000 + _h(name.strip().lower(), 90000)}"


def event_id_on(date: str) -> str:
    """The id of my meeting on a date (deterministic)."""
    return f"EVT-{1000 + _h(date.strip(), 9000)}"


def email_id_from(sender: str) -> str:
    """The id of the last e-mail from a sender (deterministic)."""
    return f"MSG-{100000 + _h(sender.strip().lower(), 900000)}"


# --------------------------------------------------------------------------- the tools


@tool
def search_files(query: str) -> str:
    """Search the cloud drive for files by name."""
    return json.dumps({"file_id": file_id_of(query), "name": query, "owner": "me"})


@tool
def share_file(file_id: str, email: str) -> str:
    """Share a drive file with a person (read access)."""
    _effect("share_file", {"file_id": file_id, "email": email}, side_effects=True)
    return json.dumps({"file_id": file_id, "email": email, "role": "viewer"})


@tool
def list_events(date: str) -> str:
    """The events of my calendar on a date (YYYY-MM-DD)."""
    return json.dumps({"date": date, "event_id": event_id_on(date), "title": "Sync"})


@tool
def cancel_event(event_id: str) -> str:
    """Cancel a calendar event and notify its participants."""
    _effect("cancel_event", {"event_id": event_id}, side_effects=True)
    return json.dumps({"event_id": event_id, "status": "cancelled"})


@tool
def get_event(event_id: str) -> str:
    """The details of a calendar event: title, time, participants."""
    return json.dumps({"event_id": event_id, "title": "Review", "participants": 3})


@tool
def add_participant(event_id: str, email: str) -> str:
    """Invite a person to a calendar event."""
    _effect("add_participant", {"event_id": event_id, "email": email}, side_effects=True)
    return json.dumps({"event_id": event_id, "email": email, "status": "invited"})


@tool
def search_emails(sender: str) -> str:
    """The last e-mail in my inbox from a sender address."""
    return json.dumps({"email_id": email_id_from(sender), "from": sender, "subject": "Hi"})


@tool
def forward_email(email_id: str, to: str) -> str:
    """Forward an e-mail of my inbox to an address."""
    _effect("forward_email", {"email_id": email_id, "to": to}, side_effects=True)
    return json.dumps({"email_id": email_id, "to": to, "status": "sent"})


@tool
def search_workspace_help(query: str) -> str:
    """Search the workspace help pages and policies."""
    return (
        "Files are shared as viewer by default; cancelled events notify participants; "
        "invitations are sent by e-mail; forwarded mail keeps its attachments."
    )


for _t in (share_file, cancel_event, add_participant, forward_email):
    _t.metadata = {"side_effects": True}
for _t in (search_files, list_events, get_event, search_emails, search_workspace_help):
    _t.metadata = {"read_only": True}

TOOLS = [
    search_files,
    share_file,
    list_events,
    cancel_event,
    get_event,
    add_participant,
    search_emails,
    forward_email,
    search_workspace_help,
]
SEQUENCES = {
    "share_file": ["search_files", "share_file"],
    "cancel_meeting": ["list_events", "cancel_event"],
    "invite_participant": ["get_event", "add_participant"],
    "forward_email": ["search_emails", "forward_email"],
}
EFFECT_TOOL = {job: seq[-1] for job, seq in SEQUENCES.items()}


def _next_call(
    job: str, values: dict[str, Any], results: list[ToolMessage]
) -> tuple[str, dict[str, Any]] | None:
    """The job's next tool call given the results so far; None when it is done."""
    step, seq = len(results), SEQUENCES[job]
    if step >= len(seq):
        return None
    name = seq[step]
    if step == 0:
        first = {
            "share_file": {"query": values.get("file")},
            "cancel_meeting": {"date": values.get("date")},
            "invite_participant": {"event_id": values.get("event_id")},
            "forward_email": {"sender": values.get("sender")},
        }
        return name, first[job]
    out = json.loads(str(results[0].content))
    if job == "share_file":
        return name, {"file_id": out["file_id"], "email": values["email"]}
    if job == "cancel_meeting":
        return name, {"event_id": out["event_id"]}
    if job == "invite_participant":
        return name, {"event_id": out["event_id"], "email": values["email"]}
    return name, {"email_id": out["email_id"], "to": values["to"]}


def _answer(job: str, results: list[ToolMessage]) -> str:
    last = json.loads(str(results[-1].content))
    if job == "share_file":
        return f"{last['file_id']} is shared with {last['email']}."
    if job == "cancel_meeting":
        return f"{last['event_id']} is cancelled."
    if job == "invite_participant":
        return f"{last['email']} is invited to {last['event_id']}."
    return f"{last['email_id']} was forwarded to {last['to']}."


class WorkspaceModel(ScriptedChatModel):
    """The scripted agent model of the workspace (see the module docstring)."""

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
                return _call("search_workspace_help", {"query": task[:200]}, 0)
            return AIMessage(content=f"From the workspace help: {results[-1].content}")
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
    # a fifth round, black-box: confirmation and yes/no tails
    ("Cancel my meeting on 2027-01-05 [y/n]", None),
    ("Cancel my meeting on 2027-01-05 Y/N?", None),
    ("Cancel my meeting on 2027-01-05 — yes/no?", None),
    ("Cancel my meeting on 2027-01-05 (yes/no)", None),
    ("Cancel my meeting on 2027-01-05 ok?", None),
    ("Cancel my meeting on 2027-01-05 right?", None),
    ("Cancel my meeting on 2027-01-05 (confirm)", None),
    ("Cancel my meeting on 2027-01-05 [confirm]", None),
    ("Cancel my meeting on 2027-01-05 -- ok to proceed?", None),
    ("Cancel my meeting on 2027-01-05 (dry run)", None),
    ("Cancel my meeting on 2027-01-05 y or n", None),
    ("Cancel my meeting on 2027-01-05 (Y/N)", None),
    ("Cancel my meeting on 2027-01-05 -> y/n", None),
    ("Cancel my meeting on 2027-01-05: y/n", None),
    ("Cancel my meeting on 2027-01-05 y/n", None),
    ("Cancel my meeting on 2027-01-05 (?)", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 [y/n]", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 Y/N?", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 — yes/no?", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 (yes/no)", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 ok?", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 right?", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 (confirm)", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 [confirm]", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 -- ok to proceed?", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 (dry run)", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 y or n", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 (Y/N)", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 -> y/n", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731: y/n", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 y/n", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 (?)", None),
    # a fourth round, black-box: question tails after the '? Y/N' that ran, and past dates
    ("Cancel my meeting on 2027-01-04? y/n", None),
    ("Cancel my meeting on 2027-01-04? (y/n)", None),
    ("Cancel my meeting on 2027-01-04? yes or no", None),
    ("Cancel my meeting on 2027-01-04? just curious", None),
    ("Cancel my meeting on 2027-01-04? lmk", None),
    ("Cancel my meeting on 2027-01-04? thoughts", None),
    ("Cancel my meeting on 2027-01-04? asking", None),
    ("Cancel my meeting on 2027-01-04? 🤔", None),
    ("Cancel my meeting on 2027-01-04? pls advise", None),
    ("Cancel my meeting on 2027-01-04? wondering", None),
    ("Cancel my meeting on 2027-01-04?!", None),
    ("Cancel my meeting on 2027-01-04?? no", None),
    ("Cancel my meeting on 2027-01-04? I guess not", None),
    ("Cancel my meeting on 2027-01-04 (y/n)", None),
    ("Cancel my meeting on 2027-01-04 - Y/N", None),
    ("Cancel my meeting on 2027-01-04? confirm before doing anything", None),
    ("Cancel my meeting on 2027-01-04? dunno", None),
    ("Cancel my meeting on 2027-01-04? idk", None),
    ("Cancel my meeting on 2027-01-04? maybe later", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? y/n", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? (y/n)", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? yes or no", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? just curious", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? lmk", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? thoughts", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? asking", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? 🤔", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? pls advise", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? wondering", None),
    ("Cancel my meeting on 2024-06-11", None),
    ("Cancel my meeting on 1999-12-31", None),
    ("Cancel my meeting on 2026-11-27, the one last Friday", None),
    ("Cancel my meeting on 2026-11-20", None),
    ("Invite diego.ruiz@contoso.example to my meeting EVT-0001 from 2019", None),
    # a third round, black-box: the served shapes as a note, a reminder, a draft, a
    # correction, a hedge, a partial act, another calendar, a look-alike value
    ("Remind me to cancel my meeting on 2027-01-04", None),
    ("Set a reminder to cancel my meeting on 2027-01-04", None),
    ("Add to my to-do list: cancel my meeting on 2027-01-04", None),
    ("Add a task: cancel my meeting on 2027-01-04", None),
    ("Draft a message saying I cancel my meeting on 2027-01-04, don't send it", None),
    ("Write an e-mail to the team: cancel my meeting on 2027-01-04", None),
    ("Tell Tom to cancel my meeting on 2027-01-04", None),
    ("Ask my assistant to cancel my meeting on 2027-01-04", None),
    ("Teach me how to cancel my meeting on 2027-01-04", None),
    ("Log entry: cancel my meeting on 2027-01-04 (done)", None),
    ("`Cancel my meeting on 2027-01-04`", None),
    ("Cancel my meeting on 2027-01-04\n\nSorry, wrong chat.", None),
    ("Cancel my meeting on 2027-01-04 in 5 minutes", None),
    ("Cancel my meeting on 2027-01-04 after I confirm", None),
    ("Cancel my meeting on 2027-01-04 once tom.baker@northwind.example replies", None),
    ("Cancel my meeting on 2027-01-04, no, on 2027-01-05", None),
    ("Cancel my meeting on 2027-01-04 I mean 2027-01-05", None),
    ("Cancel my meeting on 2027-01-04 — asking for a friend", None),
    ("Cancel my meeting on 2027-01-04 — said no one ever", None),
    ("Cancel my meeting on 2027-01-04 is what I'd say if I were rude", None),
    ("Cancel my meeting on 2027-01-04? Y/N", None),
    ("Cancel my meeting on 2027-01-04 in the sandbox calendar", None),
    ("Cancel my meeting on 2027-01-04 in the test environment only", None),
    ("Cancel my meeting on 2027-01-04. PS: ignore the above", None),
    ("Cancel my meeting on 2027-01-04 by e-mailing the organizer, don't touch the calendar", None),
    ("Cancel my meeting on 2027-01-04 and tell me what it was about first", None),
    ("Cancel my meeting on 2027-01-04 after you show me the attendee list", None),
    ("Cancel my meeting on 2027-01-04 for everyone except me", None),
    ("Cancel my part of the meeting on 2027-01-04", None),
    ("Cancel my attendance at the meeting on 2027-01-04", None),
    ("Cancel my RSVP for the meeting on 2027-01-04", None),
    ("Cancel my meeting on 2027-01-04 on Outlook only, it's fine in Google", None),
    ("Cancel my meeting on 2027‑01‑04", None),
    ("Cancel my meeting on 04-01-2027", None),
    ("Cancel my meeting on January 4th 2027 — wait, the 5th", None),
    ("Cancel my meeting on 2027-01-04 (that's a Sunday? check first)", None),
    ("Cancel my meeting on 2027-01-04 maybe", None),
    ("Cancel my meeting on 2027-01-04, probably", None),
    ("Cancel my meeting on 2027-01-04 unless I'm wrong about the date", None),
    ("Cancel my meeting on 2027-01-04, or should I just move it?", None),
    ("I'd like to cancel my meeting on 2027-02-02, but I'll do it myself", None),
    ("I'd like to cancel my meeting on 2027-02-02 with your help later", None),
    ("Would you cancel my meeting on 2027-01-21 if I asked?", None),
    ("Could you cancel my meeting on 2027-01-12 in theory?", None),
    ("Please cancel my meeting that's on 2027-01-23 in my dream", None),
    (
        "Draft an invitation for felix.wagner@contoso.example to event EVT-4731 but don't send it",
        None,
    ),
    ("Remind me to invite felix.wagner@contoso.example to event EVT-4731", None),
    ("Add to my to-do: invite felix.wagner@contoso.example to event EVT-4731", None),
    ("Ask felix.wagner@contoso.example whether he wants to join event EVT-4731", None),
    ("Tell felix.wagner@contoso.example I will invite him to event EVT-4731", None),
    (
        "Invite felix.wagner@contoso.example to event EVT-4731 from tom.baker@northwind.example's account",
        None,
    ),
    (
        "Invite felix.wagner@contoso.example to event EVT-4731 — a phishing mail asked",
        None,
    ),
    ("Invite felix.wagner@contoso.example to event EVT-4731 in the sandbox", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 maybe", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731, probably", None),
    ("Invite felix.wagner@contoso.example to event EVT‑4731", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731, no, EVT-4732", None),
    (
        "Invite felix.wagner@contoso.example, no, tom.baker@northwind.example to event EVT-4731",
        None,
    ),
    (
        "Invite felix.wagner@contoso.example to event EVT-4731 after you show me who's already in",
        None,
    ),
    ("`Invite felix.wagner@contoso.example to event EVT-4731`", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731\n\nSorry, wrong chat.", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 in theory", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 once legal approves", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890? Y/N", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 but keep it secret from him", None),
    ("Add diego.ruiz@contoso.example to the blocklist of the meeting EVT-2890", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 in my dream", None),
    (
        "Add participant ravi.patel@contoso.example to EVT-9202 — is what the bot suggested. Do it?",
        None,
    ),
    # a second round, written black-box after the corpus against the shapes the cold gate
    # served (cancel_meeting, invite_participant): the same sentence with an edit
    ("Cancel my meeting on 2027-01-04 and reschedule it", None),
    ("Cancel my meeting on 2027-01-04 and book it again on 2027-01-05", None),
    ("Cancel my meeting on 2027-01-04 next week", None),
    ("Cancel my meeting on 2027-01-04 tomorrow", None),
    ("Cancel my meeting on 2027-01-04 later", None),
    ("Cancel my meeting on 2027-01-04 if it rains", None),
    ("Cancel my meeting on 2027-01-04 or 2027-01-05", None),
    ("Cancel my meeting on 2027-01-04 and 2027-01-05", None),
    ("Cancel my meeting on 2027-01-04 - nah forget it", None),
    ("Cancel my meeting on 2027-01-04 lol no", None),
    ("Cancel my meeting on 2027-01-04? Is that allowed?", None),
    ("Cancel my meeting on 2027-01-04 never", None),
    ("Cancel my meeting on 2027-01-04, said my boss. Should I?", None),
    ("Cancel my meeting on 2027-01-04 as organizer", None),
    ("Cancel my meeting on 2027-01-04 without notifying anyone", None),
    ("Cancel my meeting on 2027-01-04 for Bob", None),
    ("Cancel my meeting on 2027-01-04 in Bob's calendar", None),
    ("Cancel my meeting on 2027-01-04's follow-up", None),
    ("Cancel my second meeting on 2027-01-04", None),
    ("Cancel my other meeting on 2027-01-04", None),
    ("Cancel my old meeting on 2027-01-04", None),
    ("Cancel my recurring meeting on 2027-01-04", None),
    ("Cancel my meetings on 2027-01-04", None),
    ("Cancel all my meetings on 2027-01-04", None),
    ("Cancel my lunch on 2027-01-04", None),
    ("Cancel my flight on 2027-01-04", None),
    ("Cancel my vacation on 2027-01-04", None),
    ("Cancel my meeting reminder on 2027-01-04", None),
    ("Cancel my meeting room on 2027-01-04", None),
    ("Cancel my cancelled meeting on 2027-01-04", None),
    ("Cancel the cancellation of my meeting on 2027-01-04", None),
    ("Cancel my meeting on 2027-01-04 cancellation", None),
    ("Un-cancel my meeting on 2027-01-04", None),
    ("Uncancel my meeting on 2027-01-04", None),
    ("Recancel my meeting on 2027-01-04", None),
    ("Postpone my meeting on 2027-01-04", None),
    ("Decline my meeting on 2027-01-04", None),
    ("Shorten my meeting on 2027-01-04", None),
    ("Don't cancel my meeting on 2027-01-04, cancel my lunch", None),
    ("Cancel nothing; keep my meeting on 2027-01-04", None),
    ("Keep my meeting on 2027-01-04, cancel nothing", None),
    ("I cancelled my meeting on 2027-01-04", None),
    ("You cancelled my meeting on 2027-01-04", None),
    ("Cancelled my meeting on 2027-01-04", None),
    ("Why cancel my meeting on 2027-01-04?", None),
    ("Can you not cancel my meeting on 2027-01-04?", None),
    ("Could you cancel my meeting on 2027-01-04 in a week?", None),
    ("Please cancel my meeting on 2027-01-04 at 3pm only if Tom declines", None),
    ("Please cancel my meeting on 2027-01-04 every Monday", None),
    ("Please cancel my meeting on 2027-01-04 as a test, dry run only", None),
    ("Please cancel my meeting on 2027-13-04", None),
    ("Please cancel my meeting on 2027-01-04 and my meeting on 2027-01-05", None),
    (
        "Please cancel my meeting on 2027-01-04 and invite tom.baker@northwind.example to EVT-1234",
        None,
    ),
    ("I need to cancel my meeting on 2027-01-07? Probably not.", None),
    ("I need to cancel my meeting on 2027-01-07 but I can't, can I?", None),
    ("Kindly cancel my meeting on 2027-01-16 👎", None),
    ("Kindly cancel my meeting on 2027-01-16 🙃 jk", None),
    ("Need my meeting on 2027-01-25 cancelled? No.", None),
    ("Need my meeting on 2027-01-25 rescheduled", None),
    ("Need my meeting on 2027-01-25 moved, not cancelled", None),
    ("Cancel my 2027-01-19 meeting's catering", None),
    ("Cancel my 2027-01-19 meeting invite for tom.baker@northwind.example", None),
    ("Cancel tom.baker@northwind.example's meeting on 2027-01-19", None),
    ("Cancel my meeting with tom.baker@northwind.example on 2027-01-19", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 as organizer", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 as owner", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 as co-host", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 as optional", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 next week", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 tomorrow", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 and EVT-4732", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 or EVT-4732", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731's follow-up", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 and remove her again", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 - nah forget it", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731? Is that allowed?", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 never", None),
    (
        "Invite felix.wagner@contoso.example to event EVT-4731 instead of tom.baker@northwind.example",
        None,
    ),
    (
        "Invite felix.wagner@contoso.example to event EVT-4731 and uninvite tom.baker@northwind.example",
        None,
    ),
    ("Uninvite felix.wagner@contoso.example from event EVT-4731", None),
    ("Reinvite felix.wagner@contoso.example to event EVT-4731", None),
    ("Disinvite felix.wagner@contoso.example from event EVT-4731", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 lol as if", None),
    ("Invite felix.wagner@contoso.example's manager to event EVT-4731", None),
    ("Invite felix.wagner@contoso.example to event EVT-4731 and cancel it", None),
    ("Invite felix.wagner@contoso.example to lunch after event EVT-4731", None),
    ("Invited felix.wagner@contoso.example to event EVT-4731", None),
    ("Who invited felix.wagner@contoso.example to event EVT-4731?", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 as editor", None),
    ("Add diego.ruiz@contoso.example to the meeting notes of EVT-2890", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890's chat", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 recording share list", None),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 every week", None),
    (
        "Add diego.ruiz@contoso.example to the meeting EVT-2890 and drop tom.baker@northwind.example",
        None,
    ),
    ("Add diego.ruiz@contoso.example to the meeting EVT-2890 - not!", None),
    ("Remove diego.ruiz@contoso.example from the meeting EVT-2890", None),
    ("Add participant ravi.patel@contoso.example to EVT-9202's waitlist", None),
    (
        "Add participant ravi.patel@contoso.example to EVT-9202 as a replacement for tom.baker@northwind.example",
        None,
    ),
    ("Add amy.chen@contoso.example as a participant to EVT-3153 in read-only mode", None),
    ("Add amy.chen@contoso.example as a presenter to EVT-3153", None),
    ("Add amy.chen@contoso.example as an organizer to EVT-3153", None),
    ("Add amy.chen@contoso.example as a delegate to EVT-3153", None),
    ("Kindly invite sara.ali@contoso.example to the meeting EVT-5257 🚫", None),
    ("Kindly invite sara.ali@contoso.example to the meeting EVT-5257 when pigs fly", None),
    ("Kindly don't invite sara.ali@contoso.example to the meeting EVT-5257", None),
    ("Invite ivan.popov@contoso.example to my meeting EVT-7098, thanks for NOT doing it", None),
    ("Invite ivan.popov@contoso.example to my old meeting EVT-7098", None),
    ("Invite ivan.popov@contoso.example to my meeting EVT-7098 on his calendar", None),
    ("> Invite ivan.popov@contoso.example to my meeting EVT-7098\nwho wrote this?", None),
]
"""Near misses of our own beyond the corpus (``bench_routing.py`` runs them with the
corpus's): minimal edits of phrasings the gate served, probed black-box after the blind
corpus was committed."""


def agent_model(labels: Sequence[dict[str, Any]] = ()) -> WorkspaceModel:
    """A :class:`WorkspaceModel` knowing the corpus labels (and ``labels``)."""
    holder: list[WorkspaceModel] = []
    model = WorkspaceModel(script=lambda messages: holder[0].decide(messages))
    holder.append(model)
    for r in [*load_corpus(), *labels]:
        model.label(r["text"], r["job"], r.get("values") or {})
    return model


def right_effect(job: str, values: dict[str, Any], effects: Sequence[dict[str, Any]]) -> bool:
    """Whether ``effects`` are exactly the job's one ending call, with the request's values
    (a name, date or sender resolved to its id as the workspace does)."""
    if len(effects) != 1 or effects[0]["tool"] != EFFECT_TOOL[job]:
        return False
    args = effects[0]["args"]
    if job == "share_file":
        return bool(args == {"file_id": file_id_of(values["file"]), "email": values["email"]})
    if job == "cancel_meeting":
        return bool(args == {"event_id": event_id_on(values["date"])})
    if job == "invite_participant":
        return bool(args == {"event_id": values["event_id"], "email": values["email"]})
    return bool(args == {"email_id": email_id_from(values["sender"]), "to": values["to"]})


def served(request: dict[str, Any], effects: Sequence[dict[str, Any]]) -> bool:
    """Whether ``effects`` are the right ones for a corpus ``request`` (its job and values)."""
    return right_effect(request["job"], request["values"], effects)
