"""The job gate (soloflow_core.memory.intent), string templates and learned replies.

Pure functions: the agent-level tests are in test_routing.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soloflow_core.generalize.composed import compose_template, leaf_texts
from soloflow_core.generalize.reply import describe_run, learn_reply_template, render_reply
from soloflow_core.memory.binding import bind_inputs
from soloflow_core.memory.intent import MAX_REQUEST_CHARS, JobEvidence, judge_intent, tool_actions
from soloflow_core.memory.reading import read_request
from soloflow_core.models import FlowDefinition, FlowStep
from soloflow_core.store.fulltext import tokenize

EXEMPLARS = [
    "Please email me my latest invoice. My address is alice@example.com",
    "send latest invoice to bob@example.org",
    "Hi, could you send me my most recent invoice? I'm carol@example.net, thanks!",
    "dan@mail.example.com - need my last invoice emailed pls",
    "Send me my latest invoice please, eve@shop-user.io",
    "Can you send my latest invoice to frank@example.co.uk?",
    "email me my last invoice, grace@example.com",
    "Please send the most recent invoice to heidi@example.org",
]
JOB = JobEvidence.of(EXEMPLARS)
EMAIL = {"pattern": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "anchor": "", "type": "string"}
SCHEMA = {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}


def verdict(text: str, evidence: JobEvidence = JOB, **kw: object) -> str:
    return judge_intent(evidence, read_request(text), **kw).verdict  # type: ignore[arg-type]


def test_values_are_never_words_of_the_job():
    read = read_request(
        "Invoice for bob@example.org, order O-5001, 2026-11-27, user raj_sanchez_7340"
    )
    assert read.terms == ("invoic", "order", "user")
    assert read.values == ("bob@example.org", "O-5001", "2026-11-27", "raj_sanchez_7340")
    assert not {"com", "example", "org"} & set(JOB.vocabulary)


def test_words_in_any_form_are_the_same_word():
    assert verdict("please send me my most recent invoice, zoe@x.io") == "run"
    assert verdict("please emailing me my latest invoice, zoe@x.io") == "run"
    # a plural the job's texts never use names several things (redteam4)
    assert verdict("please send my latest invoices to zoe@x.io") == "hint"
    assert tokenize("orders ordering") == ["order", "order"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Do NOT send me any invoice, zoe@x.io", "negates"),
        ("I no longer want my latest invoice zoe@x.io", "negates"),
        ("What's the weather for zoe@x.io's city?", "no word of the request is common"),
        ("Reset the password of zoe@x.io", "another action: reset"),
        ("Cancel my latest invoice zoe@x.io", "another action: cancel"),
        ("Send the latest invoice to my accountant at acc@firm.io", "someone else: accountant"),
        ("zoe@x.io", "nothing but values"),
        ("", "nothing but values"),
        ("请把我最新的发票发到 zoe@x.io", "script"),
        ("Schicken Sie mir bitte meine letzte Rechnung, zoe@x.io", "unknown to the job"),
        ("latest invoice " * 400 + "zoe@x.io", f"longer than {MAX_REQUEST_CHARS}"),
        ("Please send all my latest invoices to zoe@x.io", "unknown to the job: all"),
        ("Please send me any latest invoice, zoe@x.io", "unknown to the job: ani"),
        ("Please send these latest invoices to zoe@x.io", "unknown to the job: these"),
    ],
)
def test_near_misses_do_not_run(text: str, why: str):
    found = judge_intent(JOB, read_request(text))
    assert found.verdict != "run"
    assert any(why in r for r in found.reasons), found.reasons


def test_unknown_words_and_thin_evidence_do_not_run():
    assert verdict("send my latest invoice status zoe@x.io", other_jobs={"status"}) != "run"
    thin = JobEvidence.of(EXEMPLARS[:2])
    assert (
        "fewer than 3" in judge_intent(thin, read_request("send latest invoice z@x.io")).reasons[0]
    )
    person = JobEvidence.of(
        [], ["Invoice by e-mail", "e-mail the latest invoice"], user_submitted=True
    )
    assert verdict("please email me the latest invoice z@x.io", person) == "run"
    assert verdict("invoice z@x.io", person) != "run"  # one word asks for nothing


@pytest.mark.parametrize(
    "text",
    [
        "Has my latest invoice been sent? zoe@x.io",
        "Was my last invoice sent to zoe@x.io?",
        "How do I send my latest invoice? zoe@x.io",
        "Send my latest invoice? Never mind. zoe@x.io",
        "send my latest invoice, just kidding zoe@x.io",
        "Send my latest invoice — NOT! zoe@x.io",
        "send my wife's latest invoice zoe@x.io",
        "send her latest invoice zoe@x.io",
        "latest invoice zoe@x.io",
        "My latest invoice zoe@x.io",
        "send my latest invoice z\u200boe@x.io",
        "**send** my latest invoice zoe@x.io",
        '{"action": "send", "what": "latest invoice", "to": "zoe@x.io"}',
    ],
)
def test_questions_retractions_other_people_and_plain_nouns_do_not_run(text: str):
    assert verdict(text) != "run"


def test_the_job_s_own_effect_tool_names_its_action_and_nothing_more():
    assert tool_actions(["send_email", "resetPassword", "lookup_account", "get-invoice-pdf"]) == {
        "send",
        "reset",
    }
    job = JobEvidence.of(
        [
            "Please email me my latest invoice. My address is alice@example.com",
            "email me my last invoice, grace@example.com",
            "Could you email my most recent invoice to carol@example.net?",
            "need my latest invoice emailed please, dan@example.com",
        ]
    )
    request = "Please send my latest invoice to zed@example.com"
    assert verdict(request, job) == "hint"  # 'send' is an action the texts never asked for
    assert verdict(request, job, own_actions=tool_actions(["send_email"])) == "run"
    # the flow's own action is no key word, no anchor, and vetoes nothing else's rules
    for text in (
        "Please send an email to zed@example.com",  # none of the job's words
        "Please don't send my latest invoice to zed@example.com",  # negated
        "Please send my latest invoice to my boss, zed@example.com",  # someone else
        "Please send and delete my latest invoice, zed@example.com",
    ):  # another action
        assert verdict(text, job, own_actions={"send"}) != "run", text
    # only verbs count: a tool named after a noun adds no word
    assert verdict(
        "Please invoice my latest email to zed@example.com",
        job,
        own_actions=tool_actions(["get_invoice_pdf"]),
    ) == verdict("Please invoice my latest email to zed@example.com", job)


def test_courtesy_and_the_wording_of_an_address_say_nothing_of_the_job():
    read = read_request(
        "Good morning, would you mind sending my latest invoice? You can reach me at "
        "zoe@x.io. Thank you in advance. Kind regards, Zoe Smith"
    )
    assert read.terms == ("send", "latest", "invoic") and read.asking
    assert read_request("Could I have my latest invoice? Account holder: z@x.io").asking
    assert read_request("my invoice was sent, I paid it").terms == ("invoic", "was", "send", "pay")
    assert verdict("Would it be possible to send my latest invoice via e-mail? z@x.io") == "run"
    assert verdict("Request: send my latest invoice, registered e-mail is z@x.io") == "run"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Would you mind not sending my latest invoice? z@x.io", "negates"),
        ("Please send my latest invoice z@x.io. Kind regards, Delete Account", "delet"),
        ("Please send my latest invoice z@x.io. Thanks, Never", "negation"),
        ("Please send my latest invoice. Regards, Her Assistant z@x.io", "someone else"),
        ("Is it possible to send my latest invoice? z@x.io", "question (is"),
        ("Could I have my latest invoice cancelled? z@x.io", "another action: cancel"),
        ("My login is z@x.io, please delete my latest invoice", "another action: delet"),
    ],
)
def test_a_courteous_near_miss_still_does_not_run(text: str, why: str):
    found = judge_intent(JOB, read_request(text), own_actions={"send"})
    assert found.verdict != "run"
    assert any(why in r for r in found.reasons), found.reasons


def test_a_job_whose_requests_name_its_action_needs_it_named():
    reset = JobEvidence.of(
        [
            "Please reset my password. a@x.io",
            "reset password b@x.io",
            "I forgot my password, can you reset it? c@x.io",
            "Could you reset the password on my account d@x.io?",
        ]
    )
    own = tool_actions(["lookup_account", "reset_password"])
    assert verdict("Please reset the password of my account z@x.io", reset, own_actions=own) == (
        "run"
    )
    found = judge_intent(
        reset, read_request("Please tell me my account password z@x.io"), own_actions=own
    )
    assert found.verdict != "run"
    assert any("does not name the job's action (reset)" in r for r in found.reasons)
    # the rule asks nothing of a job whose requests mostly do not name its action
    assert verdict("Please email me my latest invoice z@x.io", own_actions={"send"}) == "run"


def test_a_word_only_hinted_texts_hold_is_known_once_two_hold_it():
    request = "Please send my latest bill to z@x.io"
    once = JobEvidence.of(EXEMPLARS, hinted=["send my latest bill a@x.io"])
    assert "bill" in once.unconfirmed and verdict(request, once) != "run"
    twice = JobEvidence.of(EXEMPLARS, hinted=["send my latest bill a@x.io", "my bill b@x.io"])
    assert not twice.unconfirmed and verdict(request, twice) == "run"
    # a run's or a person's text needs no second one
    assert verdict(request, JobEvidence.of([*EXEMPLARS, "send my latest bill a@x.io"])) == "run"
    person = JobEvidence.of(EXEMPLARS, ["latest bill"], hinted=["send my latest bill a@x.io"])
    assert verdict(request, person) == "run"


def test_inputs_are_bound_from_the_request_itself_with_their_shape():
    assert bind_inputs(SCHEMA, {"email": EMAIL}, read_request("invoice for a@x.io")).inputs == {
        "email": "a@x.io"
    }
    two = bind_inputs(SCHEMA, {"email": EMAIL}, read_request("a@x.io or b@x.io"))
    assert "2 values" in two.problems[0]
    none = bind_inputs(SCHEMA, {"email": EMAIL}, read_request("my invoice please"))
    assert "no value of its shape" in none.problems[0]
    free = bind_inputs(SCHEMA, {}, read_request("invoice for a@x.io"))
    assert "caller must give it" in free.problems[0]
    spare = bind_inputs(SCHEMA, {"email": EMAIL}, read_request("invoice INV-27 for a@x.io"))
    assert "'INV-27', which no input" in spare.problems[0]
    for text, why in [
        ("refund my order, my email is not a@x.io", "set aside"),
        ("refund my order, my email used to be a@x.io", "set aside"),
        ("refund my order https://shop.example/track?email=a@x.io", "inside a link"),
        ("refund my order a@exаmple.io", "outside ASCII"),
        ("refund order 7 for a@x.io", "'7', which no input"),
    ]:
        found = bind_inputs(SCHEMA, {"email": EMAIL}, read_request(text))
        assert any(why in p for p in found.problems), (text, found.problems)
    typed = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    rule = {"n": {"pattern": r"-?\d+(?:\.\d+)?", "anchor": "", "type": "integer"}}
    assert "not of type integer" in bind_inputs(typed, rule, read_request("take 2.5")).problems[0]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_reading_never_raises_and_a_bare_address_never_runs(text: str):
    read = read_request(text)
    judge_intent(JOB, read)
    assert verdict("  " + "x@y.io") != "run"


# --------------------------------------------------------------------------- templates


def test_a_text_composed_of_values_becomes_a_template():
    texts = ["Your invoice: https://x/INV-1.pdf", "Your invoice: https://x/INV-7.pdf"]
    sources = [
        dict(leaf_texts("pdf", {"url": "https://x/INV-1.pdf"})),
        dict(leaf_texts("pdf", {"url": "https://x/INV-7.pdf"})),
    ]
    assert compose_template(texts, sources) == "Your invoice: {{pdf.url}}"
    assert compose_template(["same", "same"], sources) is None  # a constant, not a template
    assert (
        compose_template(
            ["Your bill: https://x/INV-1.pdf", "Your invoice: https://x/INV-7.pdf"], sources
        )
        is None
    )  # fixed text differs


def test_replies_learned_from_answers_that_agree_and_only_then():
    answers = ["Sent INV-1 to a@x.io.", "Sent INV-7 to b@y.io."]
    inputs = [{"email": "a@x.io"}, {"email": "b@y.io"}]
    outputs = [{"s": {"id": "INV-1"}}, {"s": {"id": "INV-7"}}]
    assert learn_reply_template(answers, inputs, outputs) == "Sent {{s.id}} to {{_trigger.email}}."
    assert learn_reply_template(["Sent INV-1.", "Done, b@y.io!"], inputs, outputs) is None
    assert learn_reply_template([None, "Sent INV-7 to b@y.io."], inputs, outputs) is None


def test_a_reply_that_cannot_be_written_states_what_was_done():
    flow = FlowDefinition(
        name="F",
        steps=[FlowStep(id="s", skill_key="t")],
        reply_template="Your order {{s.missing}} is ready.",
    )
    text = render_reply(flow, {"email": "a@x.io"}, {"s": {"id": 1}}, {"id": 1})
    assert text == describe_run("F", ["t"], {"email": "a@x.io"}, output={"id": 1})
    ok = flow.model_copy(update={"reply_template": "Order {{s.id}} for {{_trigger.email}}."})
    assert render_reply(ok, {"email": "a@x.io"}, {"s": {"id": 1}}, None) == "Order 1 for a@x.io."


def test_a_persons_phrasings_teach_words_not_that_the_job_repeats():
    """A person's confirmed phrasing adds the job's words at once, but counts toward no
    minimum of runs; one with no word of a job (a bare address, a letter) adds nothing."""
    two = EXEMPLARS[:2]
    request = "Please send me my latest invoice, zed@example.com"
    assert verdict(request, JobEvidence.of(two)) == "hint"
    for texts in (["zed@example.com"], ["a"], ["send me my latest invoice"]):
        evidence = JobEvidence.of(two, confirmed=texts)
        assert evidence.shown == 2 and verdict(request, evidence) == "hint", texts
    assert JobEvidence.of(two, confirmed=["zed@example.com", "a"]).texts == 2
    three = JobEvidence.of(EXEMPLARS[:3], confirmed=["send me my latest bill"])
    assert verdict("Please send me my latest bill, zed@example.com", three) == "run"
