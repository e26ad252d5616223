"""Containment of hostile cells by the `local` backend (bubblewrap). The attacks live in
worldsmith.tools.sandbox.selftest (also `worldsmith sandbox selftest`); each asserts containment from the host
side and that the next cell in a fresh or restarted session works. The static pre-check is off here."""

from __future__ import annotations

import os

import pytest

from worldsmith.tools.sandbox import SandboxConfig, open_sandbox
from worldsmith.tools.sandbox.selftest import ATTACKS, format_results, selftest_async
from tests.sandbox.conftest import needs_bwrap

pytestmark = [pytest.mark.security, needs_bwrap, pytest.mark.timeout(180)]


@pytest.mark.parametrize("name", sorted(ATTACKS))
async def test_attack_is_contained(name: str) -> None:
    results = await selftest_async(SandboxConfig(preload=[]), [name])
    assert len(results) == 1
    result = results[0]
    assert result.contained, format_results(results)
    assert result.next_cell_ok


async def test_selftest_refuses_the_process_backend() -> None:
    with pytest.raises(ValueError, match="does not isolate"):
        await selftest_async(SandboxConfig(backend="process"), ["network"])


async def test_secret_in_parent_env_is_invisible_with_precheck_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret-123")
    async with open_sandbox(SandboxConfig(preload=[])) as sb:
        r = await sb.run("import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))")
        assert "sk-parent-secret-123" not in r.stdout and "OPENAI_API_KEY" not in r.stdout.splitlines()[0]
        assert r.stdout.splitlines()[1] == "None"
    assert os.environ["OPENAI_API_KEY"] == "sk-parent-secret-123"
