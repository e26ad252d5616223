"""Model code reading hostile files inside the sandbox: the session's own budgets (address space, CPU, wall clock) end
the cell with an error in seconds, the host is untouched, and the session keeps working (issue 12, item 5's last
clause). The readers' byte budgets (`FileLimits`) guard worldsmith's own reads; a cell's pandas call is bounded here."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.files.hostile_corpus import deep_json, gzip_bomb, one_line_csv
from tests.sandbox.conftest import fast_config, needs_bwrap
from worldsmith.tools.sandbox import open_sandbox

pytestmark = [needs_bwrap, pytest.mark.security, pytest.mark.timeout(120)]

CELLS = {
    "gzip_bomb.csv.gz": "import pandas as pd\ndf = pd.read_csv('gzip_bomb.csv.gz')\nprint(len(df))",
    "one_line.csv": "import pandas as pd\ndf = pd.read_csv('one_line.csv')\nprint(df.shape)",
    "deep.json": "import json\nprint(len(json.load(open('deep.json'))))",
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    d.chmod(0o755)
    gzip_bomb(d / "gzip_bomb.csv.gz", b"a,b\n", b"1,2\n" * (1 << 18), total=4 * 1024**3)
    one_line_csv(d / "one_line.csv")
    deep_json(d / "deep.json")
    return d


@pytest.mark.parametrize("name", sorted(CELLS))
async def test_a_hostile_read_in_a_cell_ends_within_the_session_budgets(hostile: Path, name: str) -> None:
    cfg = fast_config(memory_mb=768, cpu_seconds=20).model_copy(update={"preload": ["pandas"]})
    async with open_sandbox(cfg, inputs=[hostile / name]) as sb:
        t0 = time.monotonic()
        r = await sb.run(CELLS[name], timeout=15)
        took = time.monotonic() - t0
        after = await sb.run("print(6 * 7)")
    assert took < 30, f"{name}: the cell ran {took:.1f} s"
    # the read fails inside the session's budgets (address space, recursion, CPU or wall clock), never a host hang
    assert not r.ok and r.error is not None, r.stdout[-300:]
    assert r.error.type in ("MemoryError", "RecursionError", "TimeoutError", "WorkerCrashed", "CPUTimeExceeded"), r.error
    assert "42" in after.stdout, "the session must keep working after a hostile read (restarted if it had to be)"
