"""Skills: a registered flow packaged as a versioned Agent Skills directory, and back.

:func:`export_skill` writes a flow version as a package (``SKILL.md``, ``flow.json``, its
recorded occurrences as fixtures, its provenance, a manifest of SHA-256 digests);
:func:`import_skill` checks a package from top to bottom, replays its fixtures and registers
its flow in the caller's namespace as user-submitted. Both take a :data:`Replay` callable:
replaying a flow needs LangGraph, which this package does not import —
``soloflow_langgraph.skills`` passes it. The format: :mod:`.package`; ``docs/serve.md``.
"""

from soloflow_core.skills.exporter import MAX_FIXTURES, ExportedSkill, Replay, export_skill
from soloflow_core.skills.importer import ImportedSkill, check_package, import_skill
from soloflow_core.skills.package import PACKAGE_FORMAT, Fixture, read_package, skill_name_for

__all__ = [
    "MAX_FIXTURES",
    "PACKAGE_FORMAT",
    "ExportedSkill",
    "Fixture",
    "ImportedSkill",
    "Replay",
    "check_package",
    "export_skill",
    "import_skill",
    "read_package",
    "skill_name_for",
]
