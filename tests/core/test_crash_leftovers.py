"""What a killed writer leaves behind: torn ledger lines, temp files and folders, private modes (issue 12.3, 12.7)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from worldsmith.core.runs import RunDir
from worldsmith.core.store import StepLedger, append_jsonl, atomic_write_text, read_jsonl, remove_stale_temps


def test_a_torn_last_line_is_cut_before_the_next_append_three_resumes_in_a_row(tmp_path: Path) -> None:
    ledger = tmp_path / "steps.jsonl"
    ledger.write_bytes(b'{"key": "a", "outputs": {}}\n{"key": "b", "outp')  # killed mid-line
    for i in range(3):  # resume, record one step, get killed again mid-line, ...
        led = StepLedger(ledger)
        assert led.keys() == ["a", *[f"r{j}" for j in range(i)]]
        led.record(f"r{i}")
        with open(ledger, "ab") as fh:
            fh.write(b'{"key": "torn')
    assert [r["key"] for r in read_jsonl(ledger)] == ["a", "r0", "r1", "r2"]
    append_jsonl(ledger, {"key": "last"})
    lines = ledger.read_bytes().decode().splitlines()
    assert lines[-2:] == ['{"key": "r2", "outputs": {}}', '{"key": "last"}']


def test_a_file_with_one_torn_line_and_no_newline_at_all_starts_clean(tmp_path: Path) -> None:
    f = tmp_path / "events.jsonl"
    f.write_bytes(b'{"ev')
    append_jsonl(f, {"ev": 1})
    assert f.read_text() == '{"ev": 1}\n'


def test_kill_9_during_appends_then_resume(tmp_path: Path) -> None:
    ledger = tmp_path / "steps.jsonl"
    code = textwrap.dedent(f"""
        import os
        from worldsmith.core.store import append_jsonl
        i = 0
        while True:
            append_jsonl({str(ledger)!r}, {{"key": f"k{{i}}", "pad": "x" * 50000}})
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        import time

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not ledger.exists() or ledger.stat().st_size < 2_000_000):
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with open(ledger, "ab") as fh:  # make sure the tail is torn whatever moment the kill hit
        fh.write(b'{"key": "torn", "pad": "xx')
    before = read_jsonl(ledger)
    for i in range(3):
        append_jsonl(ledger, {"key": f"resume{i}"})
    after = read_jsonl(ledger)
    assert [r["key"] for r in after] == [r["key"] for r in before] + ["resume0", "resume1", "resume2"]


def test_resuming_a_run_removes_half_written_temps(tmp_path: Path) -> None:
    run = RunDir.create("eval", tmp_path)
    traj = run.path / "trajectories"
    traj.mkdir()
    (traj / ".t1-0.json.abcd1234.tmp").write_text("{half")
    (run.path / ".report.md.x1.tmp").write_text("half")
    atomic_write_text(traj / "t2-0.json", "{}")
    RunDir.open(run.path)
    assert sorted(p.name for p in run.path.rglob("*") if p.is_file() and p.name.startswith(".")) == []
    assert (traj / "t2-0.json").read_text() == "{}"
    assert run.events()[-1]["stale_temps_removed"] == 2


def test_stale_temps_of_one_target_only(tmp_path: Path) -> None:
    (tmp_path / ".w.tmp-abc").mkdir()
    (tmp_path / ".w.tmp-abc" / "data.csv").write_text("x")
    (tmp_path / ".w.1234.tmp").write_text("x")
    (tmp_path / ".other.tmp-abc").mkdir()
    (tmp_path / "w").mkdir()
    removed = remove_stale_temps(tmp_path, "w")
    assert sorted(p.name for p in removed) == [".w.1234.tmp", ".w.tmp-abc"]
    assert (tmp_path / ".other.tmp-abc").exists() and (tmp_path / "w").exists()


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import os
        os.umask(0o022)
        from worldsmith.core.store import atomic_write_text
        atomic_write_text({str(tmp_path / 'report.md')!r}, "hi")
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o644


def test_the_sweep_never_follows_links_out_of_the_run(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".precious.tmp").write_text("not ours")
    run = RunDir.create("ask", tmp_path / "runs")
    (run.path / "workspace").mkdir()
    (run.path / "workspace" / "escape").symlink_to(outside)  # what a hostile cell could plant
    RunDir.open(run.path)
    assert (outside / ".precious.tmp").exists()
