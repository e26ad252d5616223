"""Contract test of the e2b backend against a small in-process fake of the e2b-code-interpreter surface."""

from __future__ import annotations

import base64
import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from worldsmith.tools.sandbox import PathOutsideWorkspace, SandboxConfig, SandboxUnavailable, open_sandbox
from worldsmith.tools.sandbox.e2b import E2BSandbox

PNG = b"\x89PNG\r\n\x1a\nfake"


class TimeoutException(Exception):
    """Same name as the SDK's exception."""


@dataclass
class Logs:
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


@dataclass
class Result:
    text: str | None = None
    png: str | None = None
    is_main_result: bool = False


@dataclass
class ExecutionError:
    name: str
    value: str
    traceback: str


@dataclass
class Execution:
    results: list[Result]
    logs: Logs
    error: ExecutionError | None = None


@dataclass
class Entry:
    name: str
    type: str
    path: str
    size: int
    modified_time: int


class Files:
    def __init__(self) -> None:
        self.store: dict[str, bytes] = {}
        self.clock = 0

        self.stamp: dict[str, int] = {}

    def put(self, path: str, data: bytes) -> None:
        self.clock += 1
        self.store[path], self.stamp[path] = data, self.clock

    async def write(self, path: str, data: bytes | str) -> None:
        self.put(path, data.encode() if isinstance(data, str) else data)

    async def read(self, path: str, format: str = "text") -> bytes:
        return self.store[path]

    async def list(self, path: str, depth: int = 1) -> list[Entry]:
        return [Entry(p.rsplit("/", 1)[-1], "FileType.FILE", p, len(d), self.stamp[p])
                for p, d in self.store.items() if p.startswith(path + "/")]


class FakeE2B:
    created: list[dict[str, Any]] = []

    def __init__(self) -> None:
        self.files = Files()
        self.ns: dict[str, Any] = {}
        self.restarts = 0
        self.killed = False

    @classmethod
    async def create(cls, **kwargs: Any) -> FakeE2B:
        cls.created.append(kwargs)
        cls.last = cls()
        return cls.last

    async def create_code_context(self, cwd: str | None = None) -> str:
        return f"ctx:{cwd}"

    async def restart_code_context(self, ctx: str) -> None:
        self.ns, self.restarts = {}, self.restarts + 1

    async def kill(self) -> bool:
        self.killed = True
        return True

    async def run_code(self, code: str, context: Any = None, timeout: float | None = None) -> Execution:
        if "SLEEP" in code:
            raise TimeoutException("Execution timed out")
        if "PLOT" in code:
            return Execution([Result(png=base64.b64encode(PNG).decode())], Logs())
        if code.startswith("import os, stat"):  # the backend making uploaded inputs read-only
            self.chmod_calls = getattr(self, "chmod_calls", 0) + 1
            return Execution([], Logs())
        self.ns["write_file"] = self.files.put
        out = io.StringIO()
        lines = code.strip().splitlines()
        try:
            with contextlib.redirect_stdout(out):
                exec("\n".join(lines[:-1]), self.ns)
                try:
                    value = eval(lines[-1], self.ns)
                except SyntaxError:
                    exec(lines[-1], self.ns)
                    value = None
        except Exception as exc:
            return Execution([], Logs([out.getvalue()]), ExecutionError(type(exc).__name__, str(exc), "Traceback..."))
        results = [Result(text=repr(value), is_main_result=True)] if value is not None else []
        return Execution(results, Logs([out.getvalue()] if out.getvalue() else []))


def cfg(**kw: Any) -> SandboxConfig:
    return SandboxConfig(backend="e2b", e2b_api_key=SecretStr("e2b_test"), e2b_template="tpl", preload=[], **kw)


async def test_session_runs_cells_and_maps_results(tmp_path: Path) -> None:
    sb = E2BSandbox(cfg(), sdk=FakeE2B)
    async with sb:
        assert FakeE2B.created[-1] == {"timeout": 900, "api_key": "e2b_test", "template": "tpl"}
        assert (await sb.run("x = 2")).ok
        r = await sb.run("print('hi')\nx * 21")
        assert r.stdout == "hi\n42\n" and r.ok
        err = await sb.run("1 / 0")
        assert err.error is not None and err.error.type == "ZeroDivisionError"
        assert sb.workspace is None
    assert FakeE2B.last.killed


async def test_plots_are_written_to_the_remote_workdir() -> None:
    async with E2BSandbox(cfg(), sdk=FakeE2B) as sb:
        r = await sb.run("PLOT")
        assert r.files_changed == ["figure_1.png"]
        assert await sb.download("figure_1.png") == PNG


async def test_timeout_restarts_the_context_and_history_is_kept_for_replay() -> None:
    async with E2BSandbox(cfg(), sdk=FakeE2B) as sb:
        await sb.run("x = 5")
        r = await sb.run("SLEEP", timeout=1)
        assert r.timed_out and r.restarted and FakeE2B.last.restarts == 1
        assert sb.lost_history == ["x = 5"]
        assert (await sb.replay()).ok
        assert (await sb.run("x")).stdout == "5\n"


async def test_files_inputs_and_path_checks(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "start.txt").write_text("initial")
    data = tmp_path / "sales.csv"
    data.write_text("a,b\n1,2\n")
    async with E2BSandbox(cfg(), workspace=ws, inputs=[data], sdk=FakeE2B) as sb:
        await sb.upload(b"up", "dir/up.txt")
        assert await sb.list_files() == ["dir/up.txt", "start.txt"]
        assert await sb.list_files(include_inputs=True) == ["dir/up.txt", "sales.csv", "start.txt"]
        assert await sb.download("sales.csv") == b"a,b\n1,2\n"
        assert FakeE2B.last.chmod_calls == 1
        r = await sb.run("write_file('/home/user/new.txt', b'x')")
        assert r.files_changed == ["new.txt"]
        with pytest.raises(PathOutsideWorkspace):
            await sb.download("../../etc/passwd")


async def test_replay_mode_restarts_before_each_cell() -> None:
    async with E2BSandbox(cfg(), mode="replay", sdk=FakeE2B) as sb:
        await sb.run("x = 1")
        await sb.run("x = 9\nraise ValueError('dropped')")
        assert (await sb.run("x")).stdout == "1\n"
        assert FakeE2B.last.restarts == 3


async def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(SandboxUnavailable, match="E2B_API_KEY"):
        async with E2BSandbox(SandboxConfig(backend="e2b"), sdk=FakeE2B):
            pass


def test_factory_builds_the_e2b_backend_without_connecting() -> None:
    assert isinstance(open_sandbox(cfg()), E2BSandbox)
