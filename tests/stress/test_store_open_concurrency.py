"""Opening a fresh store from many processes at once (issue 25, point 2): one creates the
schema, the others wait for it; every process then writes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from soloflow_core.store import Store
from soloflow_core.store.schema import SCHEMA_REVISION

pytestmark = pytest.mark.stress

PROCESSES = 16

OPENER = textwrap.dedent("""
    import sys, time
    url, start, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    from soloflow_core.models import TaskRun
    from soloflow_core.store import Store
    time.sleep(max(0.0, start - time.time()))  # every process opens at the same moment
    with Store.open(url) as store:
        assert store.add_run(TaskRun(run_id=name, user_id="u", agent_id="a", task=name))
    print("opened", name)
""")


def _cold_start(url: str, tmp_path: Path) -> list[subprocess.CompletedProcess[str]]:
    script = tmp_path / "opener.py"
    script.write_text(OPENER)
    start = time.time() + 4.0  # after every interpreter has imported SoloFlow
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, str(start), f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    done = []
    for p in procs:
        out, errors = p.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, errors))
    return done


def test_sixteen_processes_cold_start_a_fresh_store(db_url: str, tmp_path: Path) -> None:
    if db_url.startswith("sqlite"):
        assert not Path(db_url.removeprefix("sqlite:///")).exists()  # a fresh file
    else:
        engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.connect() as conn:  # a fresh schema: no table yet
            assert sa.inspect(conn).get_table_names() == []
        engine.dispose()
    results = _cold_start(db_url, tmp_path)
    failed = [(r.returncode, r.stderr[-2000:]) for r in results if r.returncode != 0]
    assert failed == []
    with Store.open(db_url) as store:
        assert store.count_runs(user_id="u", agent_id="a") == PROCESSES
        with store.engine.connect() as conn:
            version = conn.execute(sa.text("SELECT version_num FROM sf_alembic_version")).all()
    assert version == [(SCHEMA_REVISION,)]
