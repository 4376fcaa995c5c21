"""How a request asks, and the courtesy around it that says nothing of its job.

:func:`~soloflow_core.memory.reading.read_request` reads a request's courtesy plainly before
its words: asking forms (``would you mind``, ``could I have``) as ``please``; greetings,
thanks, a closing with the writer's name (``Regards, Anna``) and the wording of its address
(``my login is``) left out.
"""

from __future__ import annotations

import re

__all__ = [
    "ASKING",
    "ASKS_IN",
    "COURTESY",
    "COURTESY_ASK",
    "DOUBTING",
    "ENDING",
    "NOUN_NEXT",
    "SIGN_OFF",
    "VALUE_WORDING",
    "WANTING",
    "WH_UNMARKED",
]

ASKING = re.compile(
    r"\b(?:please|pls|plz|kindly)\b|\b(?:can|could|would|will)\s+(?:you|u|ya|someone|somebody)\b"
    r"|\b(?:i|we)\s*(?:'d|would)?\s*(?:want|need|like|wish)\b|\bi'?d\s+like\b"
    r"|\b(?:i|we)\s+(?:am|are)\s+(?:requesting|asking)\b|\bcan\s+(?:i|we)\s+(?:get|have)\b",
    re.IGNORECASE,
)
"""Ways of asking for something (``please``, ``can you``, ``I'd like``)."""
COURTESY_ASK = re.compile(
    r"\bwould\s+you\s+(?:kindly\s+)?mind\b|\bwould\s+it\s+be\s+possible\s+(?:for\s+you\s+)?to\b"
    r"|\b(?:i\s+am|i'?m)\s+writing\s+to\s+(?:request|ask)(?:\s+(?:that|for|you\s+to))?\b"
    r"|\b(?:could|may|can)\s+(?:i|we)\s+(?:please\s+)?(?:get|have)\b|\bgo\s+ahead\s+and\b"
    r"|\b(?:(?:can|could|would|will)\s+(?:you|u)\s+)?help\s+(?:me|us)\s+(?:to\s+)?(?=[a-z])",
    re.IGNORECASE,
)
"""Courtesy forms of asking (``would you mind``, ``would it be possible to``, ``could I have``,
``go ahead and``, ``can you help me``): ``please``. Not ``is it possible to…`` (a rule?)."""
COURTESY = re.compile(
    r"\bgood\s+(?:morning|afternoon|evening|day)\b|\bhi\s+there\b"
    r"|\bthank(?:s|\s+you)(?:\s+(?:very|so)\s+much)?(?:\s+in\s+advance)?\b"
    r"|\b(?:much|greatly)\s+appreciated\b|\b(?:(?:kind|best|warm)\s+)?regards\b|"
    r"\b(?:the\s+)?(?:(?:e-?mail|address)\s+)?on\s+file\b",
    re.IGNORECASE,
)
"""Greetings, thanks and ``on file``: no intent in any request."""
SIGN_OFF = re.compile(
    r"\b(?i:(?:kind|best|warm)\s+regards|regards|sincerely|cheers|best\s+wishes|thanks|thank\s+you)"
    r"\s*[,.!-]?\s+(?P<name>[A-Z][a-z'-]+(?:\s+[A-Z][a-z'-]+)?)\s*[.!]?\s*$"
)
"""A closing and the writer's name (one or two capitalised words) ending the request."""
VALUE_WORDING = re.compile(
    r"\b(?:(?:you\s+can\s+)?reach\s+me\s+at|account\s+holder|registered\s+(?:(?:e-?mail|address)(?:\s+is)?|to)"
    r"|(?:my\s+)?login(?:\s+e-?mail)?(?:\s+is)?)\s*[:=-]?\s*(?=[\w.+-]+@[\w-]+\.)",
    re.IGNORECASE,
)
"""Words introducing the request's address (``reach me at``, ``my login is``): its wording."""
NOUN_NEXT = re.compile(r" (?:of|for|on|request)\b", re.IGNORECASE)
"""Right after a verb of request, a word that makes it a noun (``Refund for my order…``)."""
DOUBTING = frozenset("so but really seriously honestly actually truly".split())
"""Words that make a polite question doubt it (``So would you…?``, ``Would you really…?``)."""
ENDING = " \t\n.?!;"
"""The marks and spaces ending a sentence."""
WH_UNMARKED = frozenset("whats wheres hows whos whens".split())
"""Question words written without their apostrophe (``whats`` is ``what's``)."""
WANTING = frozenset("want wants like need needs wish love prefer".split())
"""After ``would I``, ``will we``, ``could you``: a question about wanting (``Would I like to
cancel…?``, ``Will I need to…?``), not a polite request (``Could I get…``)."""
ASKS_IN = re.compile(  # a sentence asked with these asks: `Could you…?`, `…, please?`
    r"\b(?:please|pls|plz|kindly)\b|\b(?:can|could|would|will|may)\s+(?:you|u|ya|i|we|someone|"
    r"somebody|anyone)\b",
    re.IGNORECASE,
)
