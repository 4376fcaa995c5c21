"""Each package's public face: its ``__all__`` is pinned, and every name in it resolves.

``soloflow_core.__all__`` is pinned in ``tests/test_layering.py``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC = {
    "soloflow_langgraph": [
        "FlowRunResult",
        "FlowRuntime",
        "SoloFlowCallbackHandler",
        "SoloFlowMiddleware",
        "compile_flow",
        "flow_hints",
        "flow_node",
        "flow_tool",
        "inputs_from_task",
        "run_flow",
        "verify_candidate",
    ],
    "soloflow_langgraph.compile": ["build_flow_graph", "compile_flow", "flow_mermaid"],
    "soloflow_langgraph.runtime": [
        "FlowRunResult",
        "FlowRuntime",
        "check_inputs",
        "inputs_from_task",
        "run_flow",
    ],
    "soloflow_langgraph.routing": [
        "FLOW_RUN_TOOL",
        "SoloFlowMiddleware",
        "flow_args_schema",
        "flow_hint",
        "flow_hints",
        "flow_node",
        "flow_tool",
        "flow_tool_name",
    ],
    "soloflow_langgraph.testing": ["ScriptedChatModel"],
    "soloflow_core.store": [
        "ApiToken",
        "FlowHit",
        "FlowMeta",
        "FlowRecord",
        "FlowRunRecord",
        "IssuedToken",
        "NamespaceCost",
        "RunSequence",
        "RunSummary",
        "SkillImport",
        "StepRunRecord",
        "Store",
        "ToolNameColumns",
        "Transition",
        "default_database_path",
        "resolve_database_url",
    ],
    "soloflow_core.tracing": [
        "PriceTable",
        "Span",
        "SpanKind",
        "SpanListener",
        "SpanRecorder",
        "SpanStatus",
        "TraceNode",
        "active_listener",
        "build_tree",
        "configure_tracing",
        "configure_tracing_from_env",
        "current_span",
        "new_span_id",
        "otlp_json",
        "trace_id_for",
        "tree_json",
    ],
    "soloflow_core.mining": [
        "DEFAULT_TOKENS_PER_STEP",
        "DetectionWatcher",
        "IncrementalDetector",
        "MiningProgress",
        "Pattern",
        "PatternOccurrence",
        "RankedPattern",
        "RankingOptions",
        "detect_candidates",
        "mine_closed_patterns",
        "mine_ranked",
        "rank_runs",
        "with_measured_savings",
    ],
    "soloflow_core.ledger": [
        "MAX_TOKENS",
        "IngestReport",
        "ProgressCallback",
        "dump_run",
        "ingest",
        "parse_record",
        "read_ledger",
        "token_usage",
    ],
    "soloflow_core.generalize": [
        "FlowProposal",
        "Generalization",
        "Occurrence",
        "data_dependencies",
        "extract_inputs",
        "find_occurrence",
        "find_occurrences",
        "generalize",
        "propose",
        "propose_flow",
        "side_effects_from_calls",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_api_is_pinned(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__ == PUBLIC[package]
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("package", ["soloflow_langgraph", "soloflow_core.mining"])
def test_lazy_faces_load_nothing_heavy_until_a_name_is_used(package: str) -> None:
    """``soloflow --help`` imports ``soloflow_langgraph``; capture imports the miner's watcher."""
    heavy = {
        "soloflow_langgraph": "langgraph",
        "soloflow_core.mining": "soloflow_core.mining.pipeline",
    }
    probe = f"import sys, {package}; print({heavy[package]!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_unknown_name_is_an_attribute_error() -> None:
    import soloflow_langgraph

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        soloflow_langgraph.nope  # noqa: B018
