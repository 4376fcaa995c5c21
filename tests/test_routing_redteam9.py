"""What the fourth blind probe (probe13) left running, through real ``create_agent`` agents on
both stores: a statement that takes the request back or answers it (``Cancel my meeting on
… I can make it``, ``… I need that reservation``, ``Reset my password. I reset it.``, ``…
It is here``, ``I know where it is``), an article where the job's texts name one particular
thing (``Refund an order on…``, ``cancel a meeting on…``), the value's thing as a verb's
object where the texts give the value itself (``add priya@…'s group to…``), asking to know
about a value or to be told (``I'd like to know paul@… invited…``, ``Tell me you track…``),
asking how or where to (``where to order``, ``… from?``), a second destination after a value
(``… to li.wang@… to me``), the job for the speaker alone (``just for me``), and several
messages where the job's texts name one (``the last emails``). Then what a fifth blind probe
(probe14, 7,636 requests) found running: the speaker as a second recipient (``Forward me the
last e-mail from X to Y``), a request for money sent as a payment (``send a request for
150…``, ``an invoice for 150``), two verbs offered (``request or send?``, ``(request
pls)``, ``s/send/request``) and a hesitant verb (``cancel? my meeting…``); ``transfer`` and
``pay``, which two of the bank's texts each use, now serve; a word only inside a training
text's quotes (``reference "Invoice 2022-118"``) is that free text's data, not the job's.
And what a sixth (probe15, 8,130 requests) found: the speaker's own value where the job is
for someone the request names without one (``I'm E-2468; please unlock the account of my
employee``, ``I'm maria@…, please add a participant to…``), the job's verb with no object
(``li.wang@… here, please invite to the meeting…``), and payments to the speaker's own IBAN
read as payments to it (``Show me all payments to my IBAN…``). The
negated statements and the other articles stay requests (``I can't make it``, ``I don't
need it anymore``, ``a meeting room``, ``a list of my payments``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from routing_support import AIRLINE, BANK, HELPDESK, SHOP, WORKSPACE, desk_checks, world

from soloflow_core.memory.asking import LOOSE_ENDS, loose_ends, value_objects
from soloflow_core.memory.evidence import THEN_VERBS, _quoted_only
from soloflow_core.memory.forms import LIKE_TO_KNOW
from soloflow_core.memory.reading import read_request
from soloflow_core.memory.which import other_people, owned_nouns, picked_out
from soloflow_core.store import Store

PAUL, EMMA = "paul.martin@northwind.example", "emma.rossi@northwind.example"
AISHA, LI = "aisha.khan@northwind.example", "li.wang@northwind.example"
FOUND = {
    AIRLINE: [
        "cancel reservation KQT8JM user chen_ahmed_4881. I need it",
        "cancel reservation KQT8JM user chen_ahmed_4881. We need that reservation",
        "cancel reservation KQT8JM user chen_ahmed_4881. I want that reservation",
        "cancel reservation KQT8JM user chen_ahmed_4881. I like my reservation",
        "Please cancel reservation KQT8JM for user chen_ahmed_4881. Actually, I still need it.",
    ],
    HELPDESK: [
        "Please add priya.shah@acme.example's group to eng-oncall",
        "Add jonas.weber@acme.example's team to the sre-admins group",
        "Please unlock the account of employee E-1042. I unlocked it.",
    ],
    SHOP: [
        "Please reset my password. alice.m@example.com. I reset it.",
        "Hi, I forgot my password, can you reset it? My email is carol.x@example.net. I reset it.",
        "refund my latest order please, bob.k@example.org. I want that order",
        "refund my latest order please, bob.k@example.org. I like it now",
        "track my order pls frank.z@example.co.uk. It is here",
        "where's my order bob.k@example.org? It's here",
        "Could you tell me where my order is? Account: eve.w@shop-user.io. My order is here.",
        "track my order pls frank.z@example.co.uk. I know where it is",
        "Where is my order? My email is alice.m@example.com, I know it arrived",
        "Tell me you track my order pls frank.z@example.co.uk",
        "Could you tell me where to order? Account: eve.w@shop-user.io",
        "Could you tell me where my order is from? Account: eve.w@shop-user.io",
        "Refund an order on chen.j@qq.com please",
        "Please refund any order of chen.j@qq.com",
    ],
    WORKSPACE: [
        "Cancel my meeting on 2026-12-07. We need it",
        "Cancel my meeting on 2026-12-07. I want that meeting",
        "Cancel my meeting on 2026-12-07. Now I can make it",
        "Cancel my meeting on 2026-12-07. I can make it now",
        "I can make it, please cancel my meeting on 2026-12-14",
        "Please cancel a meeting on 2026-12-03",
        "Please cancel my meeting on 2026-12-03 just for me",
        f"I'd like to know {PAUL} invited to the meeting EVT-7123",
        f"Forward the last email from {AISHA} to {LI} to me",
        f"Forward the last emails from {AISHA} to {LI}",
    ],
    BANK: [
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'. I did send it.",
    ],
}
ZOE, BEN = "zoe.martin@contoso.example", "ben.harris@contoso.example"
IBAN = "DE44500105175407324931"
FOUND[WORKSPACE] += [  # probe14: the speaker as a second recipient, a hesitant verb
    f"Forward me the last e-mail from {ZOE} to {BEN}",
    f"Could you forward me the most recent e-mail from {ZOE} to {BEN}",
    f"Forward it to me: the last e-mail from {ZOE} to {BEN}",
    f"Forward to me the last e-mail from {ZOE} to {BEN}",
    f"Forward. Me. The last e-mail from {ZOE} to {BEN}",
    f"I need the last email from {ZOE} to {BEN} forwarded to me",
    f"Invite me to the meeting EVT-5521, {ZOE}!",
    "cancel? my meeting on 2027-01-14",
]
FOUND[BANK] += [  # probe14: a request for money is no payment; two ways offered
    f"Please send an invoice for 150 to {IBAN} with the subject 'Rent'",
    f"send a request for 150 to {IBAN} with the subject 'Rent'",
    f"send a request of 150 to {IBAN}, subject 'Rent'",
    f"request or send? 150 to {IBAN} with the subject 'Rent'",
    f"send 150 to {IBAN} with the subject 'Rent' (request pls)",
    f"send 150 to {IBAN} with the subject 'Rent'. s/send/request",
    f"send/request 150 to {IBAN} with the subject 'Rent'",
    f"send? 150 to {IBAN} with the subject 'Rent'",
]
FOUND[SHOP] += [
    "Email or refund my latest order, bob.k@example.org",
    "refund? my latest order, bob.k@example.org",
]
MARIA = "maria.lopez@northwind.example"
FOUND[HELPDESK] += [  # probe15: the speaker's own value where the job is for someone else
    "I'm E-2468; please unlock the account of my employee",
    "E-9031 here, please order a replacement laptop for my employee",
    "Please unlock the account of E-2468's employee",
    "Unlock the account of the employee of E-7301",
]
FOUND[WORKSPACE] += [
    f"I'm {MARIA}, please add a participant to the meeting EVT-4821",
    f"{AISHA} here. I'd like a participant invited to the meeting EVT-3310",
    f"{LI} here, please invite to the meeting EVT-4821",
]
FOUND[BANK] += [
    f"Please list payments to me, my IBAN {IBAN}",
    f"Show me all payments to my IBAN {IBAN}",
    f"Please list payments to my account, IBAN {IBAN}",
    f"Show me all payments made to {IBAN}, my account",
]
GENUINE = {
    AIRLINE: ["Please cancel reservation KQT8JM for user chen_ahmed_4881"],
    HELPDESK: [
        "Please add priya.shah@acme.example to eng-oncall",
        "Please unlock the account of employee E-1042",
        "Unlock account E-5120 please",
        "We need a meeting room on 2027-01-11 — please book A4-112",
        "Would you unlock E-3708's account please?",
    ],
    SHOP: [
        "Please reset my password. alice.m@example.com",
        "I want a refund for my last order. alice.m@example.com",
        "Could you tell me where my order is? Account: eve.w@shop-user.io",
    ],
    WORKSPACE: [
        "Please cancel my meeting on 2026-12-03",
        f"I'd like {PAUL} invited to the meeting EVT-7123",
    ],
    BANK: [
        "Please send 250 to FR8011066580351737459081366 with the subject 'Rent'",
        "I'd like a list of my payments to ES0551343604230862142442",
        f"Transfer 250 EUR to {IBAN} with subject 'Rent'",  # `transfer`, `pay`: two texts each
        f"Pay 250 to {IBAN} with subject 'Rent'",
    ],
}


@pytest.mark.parametrize("name", [SHOP, WORKSPACE, AIRLINE, HELPDESK, BANK])
def test_probe13_leftovers_run_no_flow_and_the_genuine_forms_still_run(
    trained_store: Callable[[str], Store], name: str
) -> None:
    found = desk_checks(trained_store(name), world(name), genuine=GENUINE[name], found=FOUND[name])
    assert found == []


@pytest.mark.parametrize(
    "text",
    [
        "Cancel my meeting on 2026-12-07. I can make it now",
        "Cancel my meeting on 2026-12-07. We need that meeting",
        "I can make it, please cancel my meeting on 2026-12-14",
        "refund my latest order please, bob@example.org. I like my order",
        "Please reset my password. alice@example.com. I reset it.",
        "Please reset my password. I already reset it!",
        "where's my order bob@example.org? It is here",
        "Where is my order? It's arrived already.",
        "track my order pls frank@example.co.uk. I know where it is",
    ],
)
def test_a_statement_that_takes_the_request_back_is_a_loose_end(text: str) -> None:
    assert "taken back" in loose_ends(text, verbs=THEN_VERBS)


@pytest.mark.parametrize(
    "text",
    [
        "I can't make it, please cancel my meeting on 2026-12-14",
        "I can not make it, please cancel my meeting on 2026-12-14",
        "Refund my order, I don't need it anymore",
        "I want it refunded. bob@example.org",
        "Please reset it, I forgot it.",
        "I'll forward it. Send my latest invoice to bob@example.org",
        "Could you refund my most recent order? I changed my mind about it.",
        "I ordered a jacket a week ago and have no idea where it is.",
        "My email is here: a@b.com, please reset my password",
        "I know you're busy, but please reset my password for a@b.com",
        "I don't know where it is. Track my order for a@b.com",
        "My order arrived broken, please refund it",
        "I'd like that, thanks",
        "Please reset my password. I can reset it after that",
    ],
)
def test_a_statement_that_gives_a_reason_or_asks_is_no_taking_back(text: str) -> None:
    assert "taken back" not in loose_ends(text, verbs=THEN_VERBS)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Tell me you track my order pls frank@example.co.uk", "told"),
        (f"I'd like to know {PAUL} invited to the meeting EVT-7123", "told"),
        (f"I wonder whether {PAUL} is invited to EVT-7123", "told"),
        ("Could you tell me where to order? Account: eve@shop-user.io", "how to"),
        ("How to reset my password for a@b.com?", "how to"),
        ("Could you tell me where my order is from? Account: eve@shop-user.io", "how to"),
        (f"Forward the last email from {AISHA} to {LI} to me", "destination"),
        (f"Forward the last email from {AISHA} to {LI} to {EMMA}", "destination"),
        ("Please cancel my meeting on 2026-12-03 just for me", "only me"),
        ("Cancel my meeting on 2026-12-03 only for us", "only me"),
    ],
)
def test_probe13_kinds_of_loose_end(text: str, kind: str) -> None:
    assert kind in loose_ends(text, verbs=THEN_VERBS) and kind in LOOSE_ENDS


@pytest.mark.parametrize(
    "text",
    [
        "Could you tell me where my order is? Account: eve@shop-user.io",
        "I'd like to know how many free bags my booking 2B1R11 includes",
        "Can you tell me the status of flight HAT115 for 2024-05-19?",
        "Send 100 to FR7630006000011234567890189 to pay rent",
        "Please send a share link for hiring-plan.xlsx to emma.rossi@northwind.example",
        "How many bags can I check for free on 4JRRGO?",
        "Book me room D1-110 for 2026-12-22",
    ],
)
def test_the_jobs_own_questions_and_destinations_are_no_probe13_loose_end(text: str) -> None:
    assert not {"told", "how to", "destination", "only me"} & set(
        loose_ends(text, verbs=THEN_VERBS)
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"Forward me the last e-mail from {ZOE} to {BEN}", "destination"),
        (f"I need the last email from {ZOE} to {BEN} forwarded to me", "destination"),
        (f"Invite me to the meeting EVT-5521, {ZOE}!", "destination"),
        (f"request or send? 150 to {IBAN}", "otherwise"),
        (f"send 150 to {IBAN} (request pls)", "otherwise"),
        (f"send 150 to {IBAN}. s/send/request", "otherwise"),
        ("Refund (or email) my latest order, a@b.com", "otherwise"),
        ("Email or refund my latest order, a@b.com", "otherwise"),
        ("cancel? my meeting on 2027-01-14", "vague"),
        (f"send... 150 to {IBAN}", "vague"),
    ],
)
def test_probe14_kinds_of_loose_end(text: str, kind: str) -> None:
    assert kind in loose_ends(text, verbs=THEN_VERBS)


@pytest.mark.parametrize(
    "text",
    [
        "Could you send me my most recent invoice? I'm carol@example.net, thanks!",
        "Please send me my latest invoice to my email alice@example.com",
        "Book me room D1-110 for 2026-12-22",
        "Please update the rent payment (scheduled transaction 11) to 30",
        "I can't log in (locked out), please unlock E-1234",
        "Please pay 99 to PL89003996132921431749890776 (subject: Phone bill)",
        "Hello? Please reset my password a@b.com",
        "Hi... can you reset my password a@b.com",
        "where's my order? bob@example.org",
        "Can you unlock E-7764? Too many failed logins",
    ],
)
def test_probe14_genuine_forms_have_no_such_loose_end(text: str) -> None:
    assert not {"destination", "otherwise", "vague"} & set(loose_ends(text, verbs=THEN_VERBS))


@pytest.mark.parametrize(
    ("text", "only_quoted"),
    [
        ('Transfer 1200 to IBAN DE92866700672067904994, reference "Invoice 2022-118"', {"invoic"}),
        (
            "Can you transfer 42.50 EUR to GB12NWBK33111195106049? Subject 'Concert tickets'",
            {"concert", "ticket"},
        ),
        ("Please send 250 to FR80 with the subject \u2018Rent\u2019", {"rent"}),
        ("I'd like to cancel my booking SL1OQG, it's urgent", set()),
        ("Send the 'rent' money: rent is due", set()),  # said outside the quotes too
    ],
)
def test_words_only_inside_quotes_are_a_free_texts_data_not_the_jobs(
    text: str, only_quoted: set[str]
) -> None:
    assert _quoted_only(text) == only_quoted


@pytest.mark.parametrize(
    ("text", "people"),
    [
        ("Unlock the account of employee E-1042", ()),
        ("I'm locked out. Employee id E-3307, please unlock me", ()),
        ("Please cancel reservation CQT8JK for user chen_ahmed_4886", ()),
        (f"Add {LI} as a participant to EVT-4102", ()),
        ("I'm E-2468; please unlock the account of my employee", ("employee",)),
        ("Unlock the account of the employee of E-7301", ("employee",)),
        (f"I'm {MARIA}, please add a participant to the meeting EVT-4821", ("participant",)),
        ("Please send 75 to my landlord's account DE62088177869897716232", ("landlord's",)),
    ],
)
def test_a_word_for_a_person_before_its_value_is_a_label_and_otherwise_someone(
    text: str, people: tuple[str, ...]
) -> None:
    assert other_people(text, read_request(text).parties) == people


@pytest.mark.parametrize(
    "text",
    [
        f"Please list payments to me, my IBAN {IBAN}",
        f"Show me all payments to my IBAN {IBAN}",
        f"Please list payments to my account, IBAN {IBAN}",
        f"Show me all payments made to {IBAN}, my account",
        f"Please send 100 to my own IBAN {IBAN}",
    ],
)
def test_the_speakers_own_iban_or_payments_to_the_speaker_are_a_loose_end(text: str) -> None:
    assert "mine" in loose_ends(text, verbs=THEN_VERBS)


@pytest.mark.parametrize(
    "text",
    [
        "Please list my payments to IBAN DE30496577090601579357",
        "I'd like to see my payments to account DE63840246429256974061",
        "Show the payments from my account to AT863958913847307140",
        "Could you send 75 to my landlord's account DE62088177869897716232?",
    ],
)
def test_payments_to_another_account_are_no_such_loose_end(text: str) -> None:
    assert "mine" not in loose_ends(text, verbs=THEN_VERBS)


def test_the_values_thing_as_a_verbs_object_has_its_own_kind():
    assert value_objects("Please add priya@acme.example's group to eng-oncall", {"add"}) == {
        ("add", "'s")
    }
    assert value_objects("Please add priya@acme.example to eng-oncall", {"add"}) == {("add", "@")}


def test_an_article_names_one_of_several_and_a_possessive_one_particular_thing():
    assert ("an", "order") in picked_out("Refund an order on chen@qq.com please")
    assert ("a", "meet") in picked_out("Please cancel a meeting on 2026-12-03")
    assert {"most", "recent", "order"} <= owned_nouns("Refund my most recent order")
    assert "order" not in owned_nouns("Refund an order")


def test_like_to_know_before_a_value_asks_and_before_words_requests():
    assert LIKE_TO_KNOW.search(f"I'd like to know {PAUL} invited to the meeting EVT-7123") is None
    assert LIKE_TO_KNOW.search("I'd like to know E-1042 is unlocked") is None
    assert LIKE_TO_KNOW.search("I'd like to know the status of my order") is not None


@pytest.mark.parametrize(
    "text",
    [
        "now, " * 8_000 + "i",
        "and i can " * 4_000,
        "and i can now " * 3_000,
        "it is is is is " * 3_000,
        ", i know " * 5_000,
        "where to " * 5_000,
        "just for " * 5_000,
        "from ?" * 6_000,
        "forward me " * 4_000 + "to a@b.io",
        "send or " * 5_000,
        "(" * 20_000,
        "( request " * 4_000,
        "cancel? " * 5_000,
        "payments to " * 4_000,
        "a@b.io, my " * 4_000,
    ],
)
def test_the_new_loose_ends_read_a_long_hostile_text_in_linear_time(text: str) -> None:
    """40,000 characters within a second of CPU time (``now, `` repeated took 18 s before
    the soft words were bounded; ``and i can`` 2 s before a second action was found by the
    first verb's end instead of reading the text before each ``and``)."""
    start = time.process_time()
    loose_ends(text, verbs=THEN_VERBS)
    other_people(text, ["employee"])
    assert time.process_time() - start < 1.5
