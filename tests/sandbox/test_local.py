"""Behaviour of worker-backed sessions (local = bubblewrap, process = plain subprocess)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from worldsmith.tools.sandbox import (PathOutsideWorkspace, SandboxClosed, SandboxConfig, SandboxUnavailable,
                                      SyncSandbox, open_sandbox)
from tests.sandbox.conftest import fast_config, needs_bwrap

pytestmark = pytest.mark.timeout(120)


async def test_state_persists_and_last_expression_is_echoed(backend: str, workspace: Path) -> None:
    async with open_sandbox(fast_config(backend), workspace) as sb:
        first = await sb.run("x = 40")
        second = await sb.run("x += 2\nx")
        assert first.ok and first.stdout == ""
        assert second.stdout == "42\n"
        assert sb.history == ["x = 40", "x += 2\nx"]


async def test_error_reports_type_message_and_cell_traceback(backend: str) -> None:
    async with open_sandbox(fast_config(backend)) as sb:
        r = await sb.run("def f(d):\n    return d['missing']\n\nf({})")
        assert not r.ok and r.error is not None
        assert r.error.type == "KeyError" and "missing" in r.error.message
        assert 'File "<cell-1>", line 2, in f' in r.error.traceback
        assert "worker.py" not in r.error.traceback  # the worker's own frames are hidden
        syntax = await sb.run("def broken(:\n")
        assert syntax.error is not None and syntax.error.type == "SyntaxError"
        assert "ast.py" not in syntax.error.traceback and "^" in syntax.error.traceback  # the caret, not the compiler
        assert (await sb.run("print('still alive')")).stdout == "still alive\n"


async def test_a_long_error_message_is_cut_in_the_middle(backend: str) -> None:
    """pandas' KeyError for `df[[df["a"], df["b"]]]` lists every value of both columns; the observation keeps the
    message's head and tail (what was looked up, and where) and says how much it left out."""
    async with open_sandbox(fast_config(backend)) as sb:
        r = await sb.run("raise KeyError('None of [' + ', '.join(str(i) for i in range(2000)) + '] are in the [columns]')")
        message = r.error.traceback[r.error.traceback.index("\nKeyError: ") + 1:]
        assert message.startswith("KeyError: 'None of [0, 1, 2,") and message.rstrip().endswith("are in the [columns]'")
        assert "characters of the message left out" in message and len(message) < 700  # 9,000 characters uncut
        assert r.error.type == "KeyError" and len(r.error.message) >= 2000  # the error record keeps more of it
        short = await sb.run("raise ValueError('short')")
        assert short.error.traceback.rstrip().endswith("ValueError: short")


async def test_a_library_error_shows_the_cells_line_and_the_raising_frame_only(backend: str) -> None:
    async with open_sandbox(fast_config(backend)) as sb:
        r = await sb.run("import json\ndoc = '{'\njson.loads(doc)")
        tb = r.error.traceback
        assert 'File "<cell-1>", line 3, in <module>' in tb and "json.loads(doc)" in tb
        frames = [line for line in tb.splitlines() if line.lstrip().startswith('File "')]
        assert len(frames) == 2 and frames[-1].lstrip().startswith('File "') and "decoder.py" in frames[-1]
        assert "  ..." in tb  # the library frames in between are elided
        assert tb.rstrip().splitlines()[-1].startswith("json.decoder.JSONDecodeError: Expecting property name")
        chained = await sb.run("try:\n    {}['a']\nexcept KeyError as e:\n    raise ValueError('no a') from e")
        assert "The above exception" not in chained.error.traceback and "ValueError: no a" in chained.error.traceback


async def test_a_keyerror_on_a_dataframe_reports_that_frames_columns(backend: str) -> None:
    async with open_sandbox(fast_config(backend)) as sb:
        setup = await sb.run("import pandas as pd\n"
                             "a = pd.DataFrame({'id': [1, 2], 'channel': ['web', 'shop'], 'v': [1.0, 2.0]})\n"
                             "b = pd.DataFrame({'id': [1, 2], 'channel': ['web', 'web']})\n"
                             "m = a.merge(b, on='id')")
        assert setup.ok
        grouped = await sb.run("m.groupby('channel')['v'].mean()")  # the merge renamed it channel_x / channel_y
        assert grouped.error.type == "KeyError" and grouped.error.columns == ["id", "channel_x", "v", "channel_y"]
        picked = await sb.run("a[['id', 'region']]")
        assert picked.error.columns == ["id", "channel", "v"]
        merged = await sb.run("a.merge(b.drop(columns='channel'), on=['id', 'channel'])")
        assert merged.error.columns == ["id"]  # the frame that lacks the key, not the one that has it
        plain = await sb.run("{'x': 1}['y']")  # a KeyError on no DataFrame: nothing to report
        assert plain.error.type == "KeyError" and plain.error.columns is None


async def test_output_is_truncated_head_and_tail(backend: str) -> None:
    cfg = fast_config(backend, max_output_chars=1000)
    async with open_sandbox(cfg) as sb:
        r = await sb.run("print('HEAD' + 'x' * 50000 + 'TAIL')\nimport sys\n_ = sys.stderr.write('warned')")
        assert r.truncated and r.stdout.startswith("HEAD") and r.stdout.rstrip().endswith("TAIL")
        assert "[truncated 49" in r.stdout and len(r.stdout) < 1100
        assert r.stderr == "warned"
        raw = await sb.run("import os\nos.write(1, b'from C level\\n')")
        assert "from C level" in raw.stdout


async def test_plots_are_saved_and_reported(backend: str, workspace: Path) -> None:
    async with open_sandbox(fast_config(backend), workspace) as sb:
        r = await sb.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n"
                         "plt.figure()\nplt.bar(['a'], [1])", timeout=60)
        assert r.ok, r.to_observation()
        assert r.files_changed == ["figure_1.png", "figure_2.png"]
        png = await sb.download("figure_1.png")
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        again = await sb.run("print('no plot')")
        assert again.files_changed == []


async def test_files_changed_lists_created_and_modified_only(backend: str, workspace: Path) -> None:
    (workspace / "keep.txt").write_text("untouched")
    async with open_sandbox(fast_config(backend), workspace) as sb:
        r = await sb.run("import os\nos.makedirs('out', exist_ok=True)\nopen('out/a.csv', 'w').write('a,b\\n')")
        assert r.files_changed == ["out/a.csv"]
        r2 = await sb.run("open('out/a.csv', 'a').write('1,2\\n')")
        assert r2.files_changed == ["out/a.csv"]
        assert await sb.list_files() == ["keep.txt", "out/a.csv"]
    assert (workspace / "out" / "a.csv").read_text() == "a,b\n1,2\n"


async def test_upload_download_and_path_checks(backend: str, workspace: Path, tmp_path: Path) -> None:
    src = tmp_path / "local.txt"
    src.write_text("from the host")
    async with open_sandbox(fast_config(backend), workspace) as sb:
        await sb.upload(src, "in/copy.txt")
        await sb.upload(b"raw bytes", "raw.bin")
        r = await sb.run("print(open('in/copy.txt').read(), open('raw.bin').read())\n"
                         "_ = open('in/copy.txt', 'a').write('!')")
        assert r.stdout == "from the host raw bytes\n" and r.ok  # uploaded files stay writable for the cell
        assert await sb.download("in/copy.txt") == b"from the host!"
        for bad in ("../escape.txt", "/etc/passwd", "", "in/../../x"):
            with pytest.raises(PathOutsideWorkspace):
                await sb.download(bad)
        with pytest.raises(PathOutsideWorkspace):
            await sb.upload(b"x", "../outside.txt")
    assert not (workspace.parent / "outside.txt").exists()


async def test_inputs_are_readable_by_name_read_only_and_unlinked_on_close(backend: str, workspace: Path,
                                                                           data_dir: Path) -> None:
    csv = data_dir / "sales.csv"
    async with open_sandbox(fast_config(backend), workspace, inputs=[csv, data_dir]) as sb:
        r = await sb.run("import csv\nrows = list(csv.reader(open('sales.csv')))\nprint(len(rows), "
                         "open('inputs/sales.csv').read() == open('sales.csv').read())")
        assert r.stdout == "4 True\n", r.to_observation()
        assert await sb.list_files() == []  # input links are not workspace files
        assert await sb.list_files(include_inputs=True) == ["inputs/sales.csv", "sales.csv"]
        assert await sb.download("inputs/sales.csv") == csv.read_bytes()
        if backend == "local":
            w = await sb.run("_ = open('sales.csv', 'a').write('hacked')")
            assert w.error is not None and w.error.type in ("OSError", "PermissionError")
            m = await sb.run("print([ln.split()[5] for ln in open('/proc/self/mountinfo') if ' /data/' in ln])")
            assert m.stdout.count("ro") == 2 and "rw" not in m.stdout, m.stdout
            d = await sb.run("print(sorted(__import__('os').listdir('/data')))")
            assert d.stdout == "['inputs', 'sales.csv']\n"
    assert "hacked" not in csv.read_text()
    assert sorted(p.name for p in workspace.iterdir()) == []


async def test_forged_control_frames_never_pass_as_results(backend: str) -> None:
    forge = ("import os, json, struct\nfor fd in range(3, 64):\n    try:\n        if os.fstat(fd).st_mode & 0o170000 "
             "!= 0o010000:\n            continue\n        for i in range(1, 6):\n            b = json.dumps({'op': "
             "'result', 'stdout': 'FORGED', 'id': i}).encode()\n            os.write(fd, struct.pack('>I', len(b)) + b)"
             "\n    except OSError:\n        pass")
    async with open_sandbox(fast_config(backend)) as sb:
        results = [await sb.run(forge), await sb.run("print('real')"), await sb.run("print('real')")]
        assert all("FORGED" not in r.stdout for r in results[1:])
        assert results[-1].stdout == "real\n"


async def test_soft_timeout_keeps_state(backend: str) -> None:
    async with open_sandbox(fast_config(backend)) as sb:
        await sb.run("x = 7")
        r = await sb.run("import time\ntime.sleep(30)", timeout=0.5)
        assert r.timed_out and not r.restarted and not r.ok
        assert r.duration_s < 3
        assert (await sb.run("x")).stdout == "7\n"


async def test_crash_restarts_and_replay_rebuilds_state(backend: str) -> None:
    async with open_sandbox(fast_config(backend)) as sb:
        await sb.run("x = 1")
        await sb.run("x += 1")
        crash = await sb.run("import os\nos._exit(9)")
        assert crash.crashed and crash.restarted and not crash.ok
        assert "restarted" in crash.to_observation()
        gone = await sb.run("x")
        assert gone.error is not None and gone.error.type == "NameError"
        rebuilt = await sb.replay()
        assert rebuilt.ok
        assert (await sb.run("x")).stdout == "2\n"


async def test_restart_with_and_without_replay(backend: str) -> None:
    async with open_sandbox(fast_config(backend)) as sb:
        await sb.run("y = 'kept'")
        assert await sb.restart(replay=True) is not None
        assert (await sb.run("y")).stdout == "'kept'\n"
        await sb.restart()
        assert sb.history == []
        assert (await sb.run("y")).error is not None


async def test_replay_mode_runs_each_cell_fresh_from_successful_history(backend: str) -> None:
    async with open_sandbox(fast_config(backend), mode="replay") as sb:
        assert (await sb.run("x = 1")).ok
        failed = await sb.run("x = 5\nraise ValueError('not kept')")
        assert failed.error is not None and failed.error.type == "ValueError"
        r = await sb.run("print(x)")
        assert r.stdout == "1\n"  # a persistent session would print 5: the failed cell's effect is not replayed
        assert sb.history == ["x = 1", "print(x)"]
        assert sb._worker is None  # type: ignore[attr-defined]  # the process is released between cells
        spare = await sb._spare  # type: ignore[attr-defined]  # ...and the next one is started meanwhile
        assert spare.alive
    assert not spare.alive  # close() drops the spare too


async def test_replay_mode_without_prespawn_holds_no_process(backend: str) -> None:
    async with open_sandbox(fast_config(backend, replay_prespawn=False), mode="replay") as sb:
        assert (await sb.run("print('a')")).stdout == "a\n"
        assert sb._worker is None and sb._spare is None  # type: ignore[attr-defined]


async def test_functions_defined_in_cells_work_with_multiprocessing(backend: str) -> None:
    async with open_sandbox(fast_config(backend)) as sb:
        r = await sb.run("import multiprocessing as mp\ndef sq(x):\n    return x * x\n"
                         "with mp.Pool(2) as pool:\n    print(pool.map(sq, range(4)))", timeout=60)
        assert r.stdout == "[0, 1, 4, 9]\n", r.to_observation()


async def test_concurrent_sessions_are_independent(backend: str) -> None:
    sessions = [open_sandbox(fast_config(backend)) for _ in range(4)]
    await asyncio.gather(*(s.start() for s in sessions))
    try:
        await asyncio.gather(*(s.run(f"v = {i}\nopen('mine.txt', 'w').write(str(v))") for i, s in enumerate(sessions)))
        results = await asyncio.gather(*(s.run("print(v, open('mine.txt').read())") for s in sessions))
        assert [r.stdout for r in results] == [f"{i} {i}\n" for i in range(4)]
    finally:
        await asyncio.gather(*(s.close() for s in sessions))


async def test_closed_session_refuses_work() -> None:
    sb = open_sandbox(fast_config("process"))
    with pytest.raises(SandboxClosed):
        await sb.run("1")
    async with sb:
        pass
    with pytest.raises(SandboxClosed):
        await sb.run("1")


async def test_precheck_refuses_before_running(backend: str, workspace: Path) -> None:
    async with open_sandbox(fast_config(backend), workspace) as sb:
        r = await sb.run("open('marker', 'w').write('ran')\nimport subprocess\nsubprocess.run(['ls'])")
        assert r.error is not None and r.error.type == "PrecheckRejected"
        assert "line 2" in r.error.message and "subprocess" in r.error.message
        assert not (workspace / "marker").exists()
        assert "[refused before running]" in r.to_observation()


def test_sync_wrapper_runs_cells() -> None:
    with SyncSandbox(open_sandbox(fast_config("process"))) as sb:
        assert sb.run("2 ** 10").stdout == "1024\n"
        sb.upload(b"hello", "h.txt")
        assert sb.download("h.txt") == b"hello"
        assert sb.workspace is not None and (sb.workspace / "h.txt").exists()


@needs_bwrap
async def test_missing_bwrap_names_the_fix() -> None:
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap.*backend='process'"):
        async with open_sandbox(fast_config("local", bwrap="no-such-bwrap-binary")):
            pass


async def test_process_backend_warns_loudly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        async with open_sandbox(fast_config("process")):
            pass
    assert any("does NOT isolate" in rec.message for rec in caplog.records)


@needs_bwrap
async def test_local_workspace_ownership_is_handed_back(workspace: Path) -> None:
    owner = (workspace.stat().st_uid, workspace.stat().st_gid)
    async with open_sandbox(fast_config("local"), workspace) as sb:
        await sb.run("import os\nos.makedirs('d')\nopen('d/f.txt', 'w').write('x')")
    for path in (workspace, workspace / "d", workspace / "d" / "f.txt"):
        assert (path.stat().st_uid, path.stat().st_gid) == owner


async def test_pandas_preloaded_session(workspace: Path, data_dir: Path) -> None:
    backend = "local" if __import__("shutil").which("bwrap") else "process"
    cfg = SandboxConfig(backend=backend)
    async with open_sandbox(cfg, workspace, inputs=[data_dir / "sales.csv"]) as sb:
        assert getattr(sb, "ready_info")["preload_failed"] == {}
        r = await sb.run("import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
                         "df.groupby('region')['amount'].sum().to_dict()", timeout=60)
        assert r.stdout == "{'north': 17, 'south': 5}\n", r.to_observation()


def test_config_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="extra"):
        SandboxConfig(memory=1)  # type: ignore[call-arg]


async def test_interpreter_under_tmp_stays_visible_behind_the_private_tmp(tmp_path) -> None:
    """CI may check the project out under /tmp: the sandbox's private /tmp must not hide the interpreter."""
    import shutil
    import subprocess
    import sys

    from worldsmith.tools.sandbox import SandboxConfig, open_sandbox

    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert str(venv).startswith("/tmp/")
    async with open_sandbox(SandboxConfig(python=venv / "bin" / "python", preload=[])) as sb:
        r = await sb.run("import sys\nprint(sys.prefix)")
    assert r.ok, r.to_observation()
    assert str(venv) in r.stdout
