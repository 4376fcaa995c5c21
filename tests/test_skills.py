"""Skill packages: a learned flow exported from one store and imported into a fresh one runs
there and its fixtures replay; a tampered package is refused with the reason and nothing is
registered. Store tests on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import TOOLS, learn_demo_flow, submit
from typer.testing import CliRunner

from soloflow_core.errors import NotFoundError, SkillPackageError
from soloflow_core.learning.quality import flow_quality
from soloflow_core.skills import read_package
from soloflow_core.store import Store
from soloflow_langgraph.cli import app
from soloflow_langgraph.runtime.flow_runtime import FlowRuntime
from soloflow_langgraph.skills import export_skill, import_skill

DEMO_TOOLS = [t for t in TOOLS if t.name != "slow_echo"]


def _source(tmp_path: Path) -> tuple[Store, str]:
    store = Store.open(f"sqlite:///{tmp_path / 'source.db'}")
    return store, learn_demo_flow(store, "ann", "bot").name


def test_a_learned_flow_moves_between_stores_and_runs_there(store: Store, tmp_path: Path) -> None:
    source, name = _source(tmp_path)
    with source:
        exported = export_skill(source, name, tmp_path / "out", user_id="ann", agent_id="bot")
    pkg = exported.directory
    assert pkg.name == "auto-find-customer-list-orders-track-shipment-notify-customer"
    assert sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file()) == [
        "SKILL.md",
        "fixtures/0001.json",
        "fixtures/0002.json",
        "fixtures/0003.json",
        "fixtures/0004.json",
        "fixtures/0005.json",
        "flow.json",
        "manifest.json",
        "provenance.json",
    ]
    front = yaml.safe_load((pkg / "SKILL.md").read_text().split("---")[1])
    assert front["name"] == pkg.name and front["metadata"]["soloflow-flow"] == name
    assert front["allowed-tools"] == "find_customer list_orders track_shipment notify_customer"
    assert (
        "## When to use it" in (pkg / "SKILL.md").read_text()
        and "## Inputs" in (pkg / "SKILL.md").read_text()
    )
    provenance = json.loads((pkg / "provenance.json").read_text())
    assert (
        provenance["source"] == "auto-learned"
        and provenance["origin"]["candidate"]["fidelity"] == 1.0
    )
    assert [h["event"] for h in provenance["confidence_history"]] == ["registered", "exported"]
    assert "ann" not in json.dumps(provenance)  # the source namespace does not travel

    imported = import_skill(store, pkg, user_id="zed", agent_id="desk", tools=DEMO_TOOLS)
    assert imported.fixtures_replayed == 5 and imported.flow.name == name
    meta = store.get_flow_meta(name, user_id="zed", agent_id="desk")
    assert meta.source == "user-submitted" and meta.version == 1
    assert set(meta.trigger_keywords) >= {"order", "email"}  # the source's keywords came along
    with pytest.raises(NotFoundError):
        store.get_flow_meta(name, user_id="ann", agent_id="bot")  # never into another namespace
    with FlowRuntime(store, tools=DEMO_TOOLS, user_id="zed", agent_id="desk") as runtime:
        result = runtime.run(name, {"email": "dave@example.com"})
    assert (
        result.status == "completed"
        and result.output == "notified C-1004 that O-5004 is label created"
    )
    quality = flow_quality(store, meta, user_id="zed", agent_id="desk")
    assert quality.evidence.verified_occurrences == 5 and quality.evidence.distinct_tasks == 5

    # Exported again from the new store, it carries its fixtures and its history on.
    again = export_skill(store, name, tmp_path / "again", user_id="zed", agent_id="desk")
    assert again.fixtures == 5
    carried = json.loads((again.directory / "provenance.json").read_text())
    assert len(carried["imports"]) == 1 and carried["imports"][0]["fixtures_replayed"] == 5
    assert [h["event"] for h in carried["confidence_history"]] == [
        "registered",
        "exported",
        "registered",
        "exported",
    ]


def test_a_flow_exported_from_either_database_imports_into_a_fresh_store(
    store: Store, tmp_path: Path
) -> None:
    name = learn_demo_flow(store, "ann", "bot").name
    exported = export_skill(store, name, tmp_path, user_id="ann", agent_id="bot")
    with Store.open(f"sqlite:///{tmp_path / 'fresh.db'}") as fresh:
        imported = import_skill(
            fresh, exported.directory, user_id="ann", agent_id="bot", tools=DEMO_TOOLS
        )
        assert imported.fixtures_replayed == 5
        assert fresh.get_skill_import(name, user_id="ann", agent_id="bot", version=1) is not None


def test_a_user_flow_exports_without_fixtures(store: Store, tmp_path: Path) -> None:
    submit(
        store,
        "ann",
        "bot",
        {
            "name": "Lookup",
            "steps": [
                {
                    "id": "s",
                    "skill_key": "find_customer",
                    "input_map": {"email": "{{_trigger.email}}"},
                }
            ],
        },
    )
    exported = export_skill(store, "Lookup", tmp_path, user_id="ann", agent_id="bot")
    assert exported.fixtures == 0 and exported.skill_name == "lookup"
    with pytest.raises(SkillPackageError, match="the directory exists and is not empty"):
        export_skill(store, "Lookup", tmp_path, user_id="ann", agent_id="bot")
    imported = import_skill(
        store, exported.directory, user_id="bob", agent_id="bot", tools=DEMO_TOOLS
    )
    assert imported.flow.version == 1 and imported.fixtures_replayed == 0


# --------------------------------------------------------------------------- tampered packages


def _rehash(pkg: Path) -> None:
    """What a tamperer who rewrites the manifest too would do."""
    manifest = json.loads((pkg / "manifest.json").read_text())
    manifest["files"] = {
        p: hashlib.sha256((pkg / p).read_bytes()).hexdigest()
        for p in manifest["files"]
        if (pkg / p).is_file()
    }
    (pkg / "manifest.json").write_text(json.dumps(manifest))


def _edit_json(pkg: Path, path: str, change: Callable[[Any], None]) -> None:
    data = json.loads((pkg / path).read_text())
    change(data)
    (pkg / path).write_text(json.dumps(data))


def _wrong_tool(pkg: Path) -> None:
    _edit_json(pkg, "flow.json", lambda f: f["steps"][3].update(skill_key="wire_money"))
    _rehash(pkg)


def _bad_schema(pkg: Path) -> None:
    _edit_json(
        pkg, "flow.json", lambda f: f["input_schema"]["properties"]["email"].update(type="strng")
    )
    _rehash(pkg)


def _traversal(pkg: Path) -> None:
    (pkg.parent / "evil.json").write_text("{}")
    manifest = json.loads((pkg / "manifest.json").read_text())
    manifest["files"]["../evil.json"] = hashlib.sha256(b"{}").hexdigest()
    manifest["files"]["/etc/passwd"] = "0" * 64
    (pkg / "manifest.json").write_text(json.dumps(manifest))


def _symlink(pkg: Path) -> None:
    (pkg / "fixtures" / "0005.json").unlink()
    os.symlink(pkg.parent / "evil.json", pkg / "fixtures" / "0005.json")
    (pkg.parent / "evil.json").write_text("{}")
    _rehash(pkg)


def _unlisted(pkg: Path) -> None:
    (pkg / "fixtures" / "run.py").write_text("import os")


def _changed(pkg: Path) -> None:
    _edit_json(pkg, "fixtures/0002.json", lambda f: f.update(task=f["task"] + "!"))


def _replay_fails(pkg: Path) -> None:
    _edit_json(
        pkg, "fixtures/0003.json", lambda f: f["steps"][1].update(output=[{"order_id": "O-6666"}])
    )
    _rehash(pkg)


def _fixture_tools(pkg: Path) -> None:
    _edit_json(pkg, "fixtures/0001.json", lambda f: f["steps"][0].update(tool="delete_account"))
    _rehash(pkg)


def _front_matter(pkg: Path) -> None:
    text = (pkg / "SKILL.md").read_text().replace("\nname: auto-", "\nname: Auto_", 1)
    (pkg / "SKILL.md").write_text(
        text.replace("allowed-tools:", "run-me: rm -rf /\nallowed-tools:", 1)
    )
    _rehash(pkg)


TAMPERED: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    "wrong tool": (_wrong_tool, ["flow.json", "no executor registered for skill_key 'wire_money'"]),
    "bad schema": (
        _bad_schema,
        ["flow.json: input_schema.properties.email.type", "'strng' is not valid"],
    ),
    "path traversal": (
        _traversal,
        ["../evil.json: not a relative POSIX path", "/etc/passwd: not a relative"],
    ),
    "symbolic link": (_symlink, ["fixtures/0005.json: a symbolic link: refused"]),
    "unlisted file": (_unlisted, ["fixtures/run.py: not listed in manifest.json"]),
    "changed file": (_changed, ["fixtures/0002.json: changed after export"]),
    "replay fails": (
        _replay_fails,
        ["fixtures/0003.json: the flow does not reproduce this recorded occurrence"],
    ),
    "fixture tools": (
        _fixture_tools,
        ["fixtures/0001.json: steps[0]: records step 'step_1' calling 'delete_account'"],
    ),
    "front matter": (_front_matter, ["unknown field 'run-me'", "String should match pattern"]),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_package_is_refused_with_the_reason(
    case: str, tmp_path: Path, sqlite_store: Store
) -> None:
    source, name = _source(tmp_path)
    with source:
        pkg = export_skill(source, name, tmp_path / "out", user_id="ann", agent_id="bot").directory
    tamper, reasons = TAMPERED[case]
    tamper(pkg)
    with pytest.raises(SkillPackageError) as info:
        import_skill(sqlite_store, pkg, user_id="zed", agent_id="desk", tools=DEMO_TOOLS)
    for reason in reasons:
        assert reason in str(info.value), str(info.value)
    assert sqlite_store.list_flow_meta(user_id="zed", agent_id="desk") == []


def test_a_package_whose_tools_the_target_lacks_is_refused(
    tmp_path: Path, sqlite_store: Store
) -> None:
    source, name = _source(tmp_path)
    with source:
        pkg = export_skill(source, name, tmp_path, user_id="ann", agent_id="bot").directory
    read_package(pkg)  # the package itself is sound
    with pytest.raises(SkillPackageError) as info:
        import_skill(sqlite_store, pkg, user_id="zed", agent_id="desk", tools=DEMO_TOOLS[:2])
    message = str(info.value)
    assert "skill_key 'track_shipment'" in message and "skill_key 'notify_customer'" in message
    assert sqlite_store.list_flow_meta(user_id="zed", agent_id="desk") == []


def test_skills_commands(db_url: str, tmp_path: Path) -> None:
    with Store.open(db_url) as store:
        name = learn_demo_flow(store, "ann", "bot").name
    runner = CliRunner()
    out = runner.invoke(
        app,
        [
            "--db",
            db_url,
            "--user",
            "ann",
            "--agent",
            "bot",
            "skills",
            "export",
            name,
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    exported = json.loads(out.stdout)
    assert exported["fixtures"] == 5 and exported["version"] == 1
    target = f"sqlite:///{tmp_path / 'target.db'}"
    refused = runner.invoke(app, ["--db", target, "skills", "import", exported["directory"]])
    assert (
        refused.exit_code == 1
        and "no executor registered for skill_key 'find_customer'" in refused.stderr
    )
    done = runner.invoke(
        app,
        [
            "--db",
            target,
            "--user",
            "zed",
            "skills",
            "import",
            exported["directory"],
            "--tools",
            "serve_helpers:TOOLS",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {
        "flow": name,
        "version": 1,
        "skill": exported["skill"],
        "fixtures_replayed": 5,
        "package_digest": exported["package_digest"],
        "source": "user-submitted",
    }
    shown = runner.invoke(app, ["--db", target, "--user", "zed", "flows", "list", "--json"])
    (row,) = json.loads(shown.stdout)
    assert (
        row["source"] == "user-submitted"
        and row["quality"]["evidence"]["verified_occurrences"] == 5
    )
