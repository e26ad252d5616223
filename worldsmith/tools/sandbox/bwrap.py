"""The `local` backend's launcher: the worker runs inside bubblewrap.

Isolation: new network (loopback only, nothing reachable), PID, IPC, UTS and cgroup namespaces; a root
filesystem that holds only read-only system paths, the interpreter's prefixes, the worker script, read-only
inputs at /data/<name>, the writable workspace at /workspace (the cwd) and a private size-capped /tmp;
`--clearenv` with a minimal environment; `--die-with-parent` and `--new-session`; rlimits set by the worker.

Fork bombs: RLIMIT_NPROC only binds a non-root kernel uid, and it counts per (user namespace, uid).
* Host not root: bwrap creates a user namespace per session (`--unshare-user --disable-userns`), so each
  session's processes are counted on their own and nested user namespaces are refused.
* Host root (CI containers): a user namespace would map the sandbox to kernel uid 0, which the kernel exempts
  from RLIMIT_NPROC. So bwrap runs privileged with every capability dropped except CAP_SETUID/CAP_SETGID, and
  the worker immediately becomes a per-session uid (`sandbox_uid_base + slot`, slots leased with file locks),
  checks its capability sets are empty, then applies the limits. Kernel uid unique per session = the count is
  per session, and a sandbox can signal nothing outside itself. The workspace is chowned to that uid for the
  session and handed back to its original owner on close (symlinks are never followed).
Killing the bwrap process group takes the PID namespace (and every process in it) down with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from worldsmith.tools.sandbox.base import SandboxError, SandboxUnavailable
from worldsmith.tools.sandbox.client import LaunchSpec
from worldsmith.tools.sandbox.launch import WORKER_FILE, Launcher, base_env, interpreter_prefixes, worker_settings
from worldsmith.tools.sandbox.workspace import chown_tree

INNER_WORKSPACE = "/workspace"
INNER_DATA = "/data"
INNER_TMP = "/tmp"
INNER_TOOLS = "/opt/worldsmith"

FIX_HINT = ("Fix: install bubblewrap (`apt-get install -y bubblewrap`), make sure user namespaces are enabled "
            "(sysctl user.max_user_namespaces > 0; kernel.unprivileged_userns_clone=1 where that exists), or set "
            "sandbox.backend='process' for trusted code (no isolation).")


def find_bwrap(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SandboxUnavailable(f"bubblewrap executable {name!r} not found on PATH. {FIX_HINT}")
    return path


@lru_cache(maxsize=4)
def bwrap_supports(path: str, option: str) -> bool:
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in out.stdout + out.stderr


class UidLease:
    """A uid from the pool, held (via an flock'ed slot file) for as long as the session lives."""

    def __init__(self, base: int, pool: int) -> None:
        lock_dir = Path(tempfile.gettempdir()) / "worldsmith-sandbox-uids"
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        start = os.getpid() % pool  # spread concurrent processes over the pool
        for i in range(pool):
            slot = (start + i) % pool
            fd = os.open(lock_dir / f"slot-{slot}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd, self.uid = fd, base + slot
            return
        raise SandboxError(f"all {pool} sandbox uids are in use; raise sandbox.uid_pool_size or close sessions")

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class BwrapLauncher(Launcher):
    name = "local"
    isolated = True
    pidns = True

    def __init__(self, config) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config)
        self.bwrap = find_bwrap(config.bwrap)
        self.as_root = os.geteuid() == 0
        self.lease: UidLease | None = None
        self._orig_owner: tuple[int, int] | None = None

    def prepare(self, workspace: Path, inputs: dict[str, Path]) -> None:
        super().prepare(workspace, inputs)
        if self.as_root:
            self.lease = UidLease(self.config.sandbox_uid_base, self.config.uid_pool_size)
            st = os.lstat(workspace)
            self._orig_owner = (st.st_uid, st.st_gid)
            chown_tree(workspace, self.lease.uid, self.lease.uid)
            for src in inputs.values():
                _check_readable_by_others(src)

    def owner(self) -> tuple[int, int] | None:
        return (self.lease.uid, self.lease.uid) if self.lease else None

    def link_target(self, name: str) -> str:
        return f"{INNER_DATA}/{name}"

    def teardown(self) -> None:
        if self.lease is not None:
            if self.workspace is not None and self._orig_owner is not None and self.workspace.exists():
                chown_tree(self.workspace, *self._orig_owner)
            self.lease.release()
            self.lease = None

    def spec(self) -> LaunchSpec:
        assert self.workspace is not None
        args = [self.bwrap]
        if self.as_root:
            args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args += ["--unshare-user"]
            if bwrap_supports(self.bwrap, "--disable-userns"):
                args += ["--disable-userns"]
        args += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                 "--die-with-parent", "--new-session", "--hostname", "sandbox"]
        tree = _Tree()
        for path in self.config.system_ro_paths:
            if os.path.islink(path):
                args += tree.parents(path) + ["--symlink", os.readlink(path), path]
            elif os.path.exists(path):
                args += tree.bind("--ro-bind", path, path)
        args += ["--proc", "/proc", "--dev", "/dev", "--perms", "01777"]
        if bwrap_supports(self.bwrap, "--size"):
            args += ["--size", str(self.config.tmp_size_mb * 1024 * 1024)]
        args += ["--tmpfs", INNER_TMP]
        tree.made.add(INNER_TMP)
        if bwrap_supports(self.bwrap, "--size"):  # a small /dev/shm so multiprocessing/joblib semaphores work
            args += ["--perms", "01777", "--size", str(min(64, self.config.tmp_size_mb) * 1024 * 1024),
                     "--tmpfs", "/dev/shm"]
        # after the private /tmp: an interpreter that lives under /tmp (a CI checkout there) stays visible
        for path in [*interpreter_prefixes(self.python), *map(str, self.config.extra_ro_binds)]:
            if not tree.covered(path):
                args += tree.bind("--ro-bind", path, path)
        args += tree.bind("--ro-bind", str(WORKER_FILE), f"{INNER_TOOLS}/worker.py")
        if self.seed is not None:
            args += tree.bind("--ro-bind", str(self.seed), f"{INNER_TOOLS}/mpl-seed")
        args += tree.bind("--bind", str(self.workspace), INNER_WORKSPACE)
        for name, src in self.inputs.items():
            args += tree.parents(f"{INNER_DATA}/{name}") + _input_binds(name, src)
        # no --chdir: bwrap would enter the workspace before the worker drops to the uid that owns it
        args += ["--remount-ro", "/", "--chdir", "/", "--clearenv"]
        env = base_env(self.config, self.python, INNER_TMP, f"{INNER_TMP}/.mpl")
        settings = worker_settings(self.config, pidns=True, cwd=INNER_WORKSPACE, uid=self.lease.uid if self.lease else None,
                                   mpl_seed=f"{INNER_TOOLS}/mpl-seed" if self.seed else None)
        env["WS_WORKER"] = json.dumps(settings)
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += [str(self.python), "-I", "-B", f"{INNER_TOOLS}/worker.py"]
        # bwrap itself gets an empty environment too: its pid-1 reaper's /proc/1/environ must hold no secrets
        return LaunchSpec(argv=args, env={"LANG": "C.UTF-8"}, cwd=self.workspace)


class _Tree:
    """Tracks the sandbox's root tree so every parent directory bwrap would create is made 0755 first
    (bwrap makes them 0700, which the unprivileged sandbox uid could not traverse)."""

    def __init__(self) -> None:
        self.made: set[str] = {"/"}
        self.bound: list[str] = []

    def covered(self, path: str) -> bool:
        return any(path == b or path.startswith(b + "/") for b in self.bound)

    def parents(self, path: str) -> list[str]:
        out: list[str] = []
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            if d not in self.made and not self.covered(d):
                out += ["--perms", "0755", "--dir", d]
                self.made.add(d)
        return out

    def bind(self, how: str, src: str, dest: str) -> list[str]:
        out = self.parents(dest) + [how, src, dest]
        self.bound.append(dest)
        return out


def _input_binds(name: str, src: Path) -> list[str]:
    dest = f"{INNER_DATA}/{name}"
    src_s = str(src.absolute())
    if src.is_dir() and os.stat(src).st_mode & 0o005 != 0o005:
        # a private top directory (e.g. a mkdtemp dir): bind its children so the sandbox uid can reach them
        out = ["--perms", "0755", "--dir", dest]
        for child in sorted(os.listdir(src)):
            out += ["--ro-bind", os.path.join(src_s, child), f"{dest}/{child}"]
        return out
    return ["--ro-bind", src_s, dest]


def _check_readable_by_others(src: Path) -> None:
    """Root-host sessions run as an unprivileged uid: inputs must be world-readable below their top dir."""
    for count, path in enumerate(_walk(src)):
        if count >= 10_000:
            return
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(path)
            need = 0o005 if stat.S_ISDIR(st.st_mode) else 0o004
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & need != need:
                raise SandboxError(f"input {path} (mode {stat.S_IMODE(st.st_mode):04o}) is not readable by the "
                                   "sandbox's unprivileged uid; make it world-readable (chmod -R o+rX) or "
                                   "upload() it into the workspace instead")


def _walk(src: Path):  # type: ignore[no-untyped-def]
    if not src.is_dir():
        yield src
        return
    for root, dirs, files in os.walk(src):
        for name in dirs + files:
            yield os.path.join(root, name)
