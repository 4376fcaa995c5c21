"""A trace as a tree: tokens and cost rolled up from the model calls, the critical path,
and the JSON form of ``soloflow runs trace --json``."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from soloflow_core.tracing.spans import Span

__all__ = ["COST", "INPUT_TOKENS", "OUTPUT_TOKENS", "TraceNode", "build_tree", "tree_json"]

INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
COST = "soloflow.cost_usd"
"""A priced model call's cost in USD (a decimal string: exact)."""
UNPRICED = "soloflow.unpriced"
"""True on a model call no price table knows."""


@dataclass(slots=True)
class TraceNode:
    """A span with its children and what it holds, counted over its whole subtree."""

    span: Span
    children: list[TraceNode] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    """The sum over the subtree's priced model calls."""
    unpriced: int = 0
    """Model calls in the subtree that no price table knows: ``cost`` leaves them out."""
    critical: bool = False
    """On the critical path: among siblings, the one that ends last and, back from it, each
    one that ended last before the next began; inside each, the same (what to make faster
    to make the run faster)."""

    @property
    def cost_text(self) -> str:
        """``$0.0035``, ``unpriced``, or ``$0.0035 + unpriced`` when some calls are unknown."""
        if self.unpriced and not self.cost:
            return "unpriced"
        text = f"${self.cost.normalize():f}" if self.cost else "$0"
        return f"{text} + unpriced" if self.unpriced else text


def build_tree(spans: list[Span]) -> list[TraceNode]:
    """The roots of ``spans`` (a span whose parent is not among them is a root), children in
    start order, with roll-ups and the critical path filled in."""
    nodes = {s.id: TraceNode(s) for s in spans}
    roots: list[TraceNode] = []
    for node in nodes.values():
        parent = nodes.get(node.span.parent) if node.span.parent else None
        (parent.children if parent is not None else roots).append(node)
    for node in nodes.values():
        node.children.sort(key=lambda n: n.span.start)
    roots.sort(key=lambda n: n.span.start)
    for root in roots:
        _roll_up(root)
    if roots:
        _mark_critical(roots)
    return roots


def _roll_up(node: TraceNode) -> None:
    a = node.span.attributes
    node.input_tokens = int(a.get(INPUT_TOKENS) or 0)
    node.output_tokens = int(a.get(OUTPUT_TOKENS) or 0)
    node.cost = Decimal(str(a[COST])) if a.get(COST) is not None else Decimal(0)
    node.unpriced = int(bool(a.get(UNPRICED)))
    for child in node.children:
        _roll_up(child)
        node.input_tokens += child.input_tokens
        node.output_tokens += child.output_tokens
        node.cost += child.cost
        node.unpriced += child.unpriced


def _ends(node: TraceNode) -> float:
    end = node.span.end
    return end.timestamp() if end is not None else node.span.start.timestamp()


def _mark_critical(level: list[TraceNode]) -> None:
    """Mark, among ``level`` (siblings), the chain that ends last: the last to end, then the
    sibling that ended last before it started, and so on back; then the same inside each."""
    if not level:
        return
    node: TraceNode | None = max(level, key=_ends)
    while node is not None:
        node.critical = True
        _mark_critical(node.children)
        begin = node.span.start.timestamp()
        before = [n for n in level if not n.critical and _ends(n) <= begin]
        node = max(before, key=_ends) if before else None


def tree_json(roots: list[TraceNode]) -> list[dict[str, Any]]:
    """The tree as JSON data: each span's fields, its roll-ups, and its children."""
    return [_node_json(n) for n in roots]


def _node_json(node: TraceNode) -> dict[str, Any]:
    s = node.span
    return {
        "trace_id": s.trace_id,
        "span_id": s.id,
        "parent_id": s.parent,
        "name": s.name,
        "kind": s.kind,
        "start": s.start.isoformat(),
        "duration_ms": s.duration_ms,
        "status": s.status,
        "error": s.error,
        "attributes": s.attributes,
        "input_tokens": node.input_tokens,
        "output_tokens": node.output_tokens,
        "cost_usd": str(node.cost) if not (node.unpriced and not node.cost) else None,
        "unpriced_calls": node.unpriced,
        "critical": node.critical,
        "children": [_node_json(c) for c in node.children],
    }
