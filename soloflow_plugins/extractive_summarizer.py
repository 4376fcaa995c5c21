"""Built-in context summariser: deterministic, structure-preserving extractive reduction.

Answers ``soloflow_summarize_context`` last (``trylast``), so any user plugin that returns a
summary wins; block it with ``SOLOFLOW_BLOCK_PLUGINS=extractive_summarizer``.

The text is read as Markdown blocks (headings, list items, paragraphs, tables, fenced code)
and kept by priority until the token budget is spent:

1. every heading;
2. the first sentence of every paragraph and list item, and each table's header row;
3. the second sentences, and the first table rows; then code blocks with the third
   sentences and rows; and so on, each round in document order, so that detail is spread
   over the whole document rather than spent on its beginning. A paragraph's sentences
   stay contiguous: once one does not fit, the rest of that paragraph is dropped.

What is kept is printed in the original order with the original markers (``#``, ``-``,
``1.``, indentation, blank lines), so the outline survives even at a tenth of the size.
A text already within the budget is returned unchanged. Tokens are counted with
:func:`soloflow_langgraph.sequential.tokens.default_token_counter` (tiktoken when it is
available offline, else four characters per token).

Example:
    >>> from soloflow_langgraph.sequential.tokens import ESTIMATE
    >>> text = "# Auth\\n\\nUsers log in. Sessions last a day. Tokens rotate.\\n\\n- Hash passwords. Use argon2."
    >>> print(summarize_extractive(text, 12, counter=ESTIMATE))
    # Auth
    <BLANKLINE>
    Users log in.
    <BLANKLINE>
    - Hash passwords.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from soloflow_core import hookimpl
from soloflow_langgraph.sequential.tokens import TokenCounter, default_token_counter

__all__ = ["summarize_extractive", "soloflow_summarize_context"]

_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_ITEM = re.compile(r"^(\s*(?:[-*+]|\d{1,4}[.)])(?:\s+\[[ xX]\])?\s+)(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE = re.compile(r"^\s*\|")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}")
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")

HEADINGS, FIRST_SENTENCES, SECOND_SENTENCES, CODE = 1, 2, 3, 4


@dataclass(slots=True)
class _Piece:
    tier: int
    text: str
    selected: bool = False


@dataclass(slots=True)
class _Block:
    kind: str  # heading | item | paragraph | table | code
    sep: str  # what precedes the block in the output: "" (first), "\n" or "\n\n"
    prefix: str = ""  # a list item's marker and indentation
    joiner: str = " "  # between pieces of the block: sentences " ", lines "\n"
    pieces: list[_Piece] = field(default_factory=list)
    closed: bool = False  # a piece did not fit: nothing after it in this block

    def render(self) -> str:
        return self.prefix + self.joiner.join(p.text for p in self.pieces if p.selected)

    @property
    def started(self) -> bool:
        return any(p.selected for p in self.pieces)


def _sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE.split(text)) if s]


def _parse(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines = text.splitlines()
    blank_before = False
    i = 0

    def sep() -> str:
        return "" if not blocks else ("\n\n" if blank_before else "\n")

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            blank_before = True
            i += 1
            continue
        if _FENCE.match(line):
            fence = _FENCE.match(line).group(1)  # type: ignore[union-attr]
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            body = "\n".join(lines[i : j + 1])
            blocks.append(_Block("code", sep(), joiner="\n", pieces=[_Piece(CODE, body)]))
            i = j + 1
        elif _HEADING.match(line):
            blocks.append(_Block("heading", sep(), pieces=[_Piece(HEADINGS, line.rstrip())]))
            i += 1
        elif _TABLE.match(line):
            j = i
            while j < len(lines) and _TABLE.match(lines[j]):
                j += 1
            rows = [r.rstrip() for r in lines[i:j]]
            head = rows[:2] if len(rows) > 1 and _TABLE_RULE.match(rows[1]) else rows[:1]
            pieces = [_Piece(FIRST_SENTENCES, "\n".join(head))]
            pieces += [_Piece(SECOND_SENTENCES + k, r) for k, r in enumerate(rows[len(head) :])]
            blocks.append(_Block("table", sep(), joiner="\n", pieces=pieces))
            i = j
        else:
            item = _ITEM.match(line)
            prefix, body = (item.group(1), item.group(2)) if item else ("", line.strip())
            j = i + 1
            # Continuation lines: not blank and not the start of another block.
            while (
                j < len(lines)
                and lines[j].strip()
                and not (
                    _ITEM.match(lines[j])
                    or _HEADING.match(lines[j])
                    or _FENCE.match(lines[j])
                    or _TABLE.match(lines[j])
                )
            ):
                body += " " + lines[j].strip()
                j += 1
            parts = _sentences(body) or [body]
            pieces = [_Piece(FIRST_SENTENCES + k, part) for k, part in enumerate(parts)]
            kind = "item" if item else "paragraph"
            blocks.append(_Block(kind, sep(), prefix=prefix, pieces=pieces))
            i = j
        blank_before = False
    return blocks


def _render(blocks: list[_Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if block.started:
            out.append((block.sep if out else "") + block.render())
    return "".join(out)


def summarize_extractive(
    context: str, token_budget: int, *, counter: TokenCounter | None = None
) -> str:
    """``context`` reduced to at most ``token_budget`` tokens, keeping its structure.

    Deterministic: the same text, budget and tokenizer always give the same summary.

    Args:
        context: the text, usually Markdown.
        token_budget: the most tokens the result may have.
        counter: the tokenizer; default :func:`default_token_counter`.
    """
    counter = counter or default_token_counter()
    if token_budget <= 0 or not context.strip():
        return ""
    if counter.count(context) <= token_budget:
        return context
    blocks = _parse(context)
    order: list[tuple[_Block, _Piece]] = []  # selection order, to undo from the end
    spent = 0
    last_tier = max((p.tier for b in blocks for p in b.pieces), default=HEADINGS)
    for tier in range(HEADINGS, last_tier + 1):
        for block in blocks:
            for index, piece in enumerate(block.pieces):
                if piece.tier != tier or piece.selected or block.closed:
                    continue
                if index and not block.pieces[index - 1].selected:
                    break  # keep a block's pieces contiguous from its start
                glue = (block.sep + block.prefix) if not block.started else block.joiner
                cost = counter.count(glue + piece.text)
                if spent + cost > token_budget:
                    block.closed = True
                    break
                piece.selected = True
                spent += cost
                order.append((block, piece))
    summary = _render(blocks)
    # Token counts of parts need not add up exactly with a real tokenizer: check the whole.
    while order and counter.count(summary) > token_budget:
        order.pop()[1].selected = False
        summary = _render(blocks)
    if not summary:  # not even one heading or sentence fits: cut the text itself
        summary = counter.truncate(context.strip(), token_budget)
    return summary


@hookimpl(trylast=True)
def soloflow_summarize_context(context: str, token_budget: int) -> str | None:
    return summarize_extractive(context, token_budget)
