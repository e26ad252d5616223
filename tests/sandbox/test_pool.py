"""SandboxPool: hands out started, unused sessions with the inputs copied in, refills itself, closes everything."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from worldsmith.tools.sandbox import SandboxPool

from tests.sandbox.conftest import fast_config


def test_pool_hands_out_fresh_ready_sessions(backend: str, data_dir: Path) -> None:
    async def main() -> None:
        async with SandboxPool(fast_config(backend), size=2) as pool:
            await pool.wait_ready()
            start = time.perf_counter()
            a = await pool.acquire([data_dir / "sales.csv"])
            took = time.perf_counter() - start
            b = await pool.acquire([])
            r = await a.run("x = 1\nprint(open('sales.csv').read().count('north'))")
            assert r.ok and r.stdout.strip() == "2"
            assert (await b.run("print('x' in globals())")).stdout.strip() == "False"  # sessions share nothing
            assert await b.list_files() == []
            assert took < 1.0, f"a warm session took {took:.2f} s to hand out"
            await pool.release(a)
            await pool.release(b)
            c = await pool.acquire([])  # refilled in the background
            assert (await c.run("print(2 + 2)")).stdout.strip() == "4"
            await pool.release(c)
            assert len(pool._ready or []) == 2
        assert pool._ready is not None and len(pool._ready) == 0

    asyncio.run(main())


def test_empty_pool_starts_sessions_on_demand(data_dir: Path) -> None:
    async def main() -> None:
        async with SandboxPool(fast_config("process"), size=0) as pool:
            sb = await pool.acquire([data_dir / "sales.csv"])
            assert (await sb.list_files()) == ["sales.csv"]
            await pool.release(sb)
            folder = await pool.acquire([data_dir])  # a folder input keeps its layout under its name
            assert (await folder.list_files()) == [f"{data_dir.name}/sales.csv"]
            await pool.release(folder)

    asyncio.run(main())
