"""Persistent cell executor. Runs INSIDE the sandbox as a standalone script: stdlib only, never imports worldsmith.

Protocol: the host writes frames on our stdin and reads frames from our stdout. A frame is a 4-byte big-endian
length followed by that many bytes of UTF-8 JSON. At start-up the two pipes are moved to private descriptors;
fd 0 becomes /dev/null and fds 1/2 point at scratch files, so output written below Python (C libraries,
os.write) is captured too. Settings come in the WS_WORKER environment variable (JSON), removed on read.

Requests:  {"op": "exec", "code": str, "timeout": float, "silent": bool}   |   {"op": "ping"}
Replies:   {"op": "ready", ...} once, then one {"op": "result", ...} or {"op": "pong"} per request.
"""

import ast
import builtins
import collections
import importlib.util
import io
import json
import linecache
import os
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
import types

CFG = json.loads(os.environ.pop("WS_WORKER", "{}"))
MAIN_PID = os.getpid()
HEAD = struct.Struct(">I")
#: an exception's message longer than this is cut in the middle: pandas' KeyError for `df[[df["a"], df["b"]]]`
#: lists every value of both columns (2,400 characters for 300 rows), and at f4ca853 four such cells in a row
#: filled a 1.5B model's context before its note on the slip could be read
MESSAGE_CHARS = 600


class CellTimeout(BaseException):
    """Raised inside a cell when its wall-clock budget is spent (BaseException: `except Exception` won't eat it)."""


class CellCPULimit(BaseException):
    """Raised inside a cell when it used its CPU-seconds budget."""


class Capture(io.TextIOBase):
    """A text stream that keeps the first and last `limit/2` characters and counts the rest."""

    def __init__(self, limit):
        self.head_cap = limit // 2
        self.tail_cap = limit - self.head_cap
        self.head, self.head_len = [], 0
        self.tail, self.tail_len = collections.deque(), 0
        self.total = 0

    def writable(self):
        return True

    @property
    def encoding(self):
        return "utf-8"

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        self.total += n
        room = self.head_cap - self.head_len
        if room > 0:
            self.head.append(s[:room])
            self.head_len += min(room, n)
            s = s[room:]
        if s:
            self.tail.append(s)
            self.tail_len += len(s)
            if self.tail_len > 2 * self.tail_cap:
                joined = "".join(self.tail)[-self.tail_cap:]
                self.tail, self.tail_len = collections.deque([joined]), len(joined)
        return n

    def getvalue(self):
        head = "".join(self.head)
        tail = "".join(self.tail)[-self.tail_cap:] if self.tail_cap else ""
        dropped = self.total - len(head) - len(tail)
        if dropped > 0:
            return f"{head}\n... [truncated {dropped} chars] ...\n{tail}", True
        return head + tail, False


def read_frame(fd):
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, HEAD.unpack(head)[0])
    return None if body is None else json.loads(body)


def _read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def write_frame(fd, obj):
    body = json.dumps(obj, default=str).encode("utf-8", "replace")
    data = HEAD.pack(len(body)) + body
    while data:
        data = data[os.write(fd, data):]


def drop_privileges():
    """Root-host mode: bwrap starts us as root with only CAP_SETUID/CAP_SETGID; become the session's uid."""
    uid = CFG.get("uid")
    if uid is None or os.getuid() != 0:
        return
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    with open("/proc/self/status") as fh:
        caps = {k: v.strip() for k, v in (ln.split(":", 1) for ln in fh if ln.startswith("Cap"))}
    if os.getuid() != uid or int(caps.get("CapEff", "1"), 16) or int(caps.get("CapPrm", "1"), 16):
        sys.stderr.write(f"worker: failed to drop privileges (uid={os.getuid()}, caps={caps})\n")
        os._exit(3)


def apply_limits():
    def lim(kind, value):
        if value:
            _, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (value, value))

    lim(resource.RLIMIT_AS, CFG.get("memory_bytes"))
    lim(resource.RLIMIT_NPROC, CFG.get("max_processes"))
    lim(resource.RLIMIT_NOFILE, CFG.get("max_open_files"))
    lim(resource.RLIMIT_FSIZE, CFG.get("max_file_bytes"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if CFG.get("pdeathsig"):  # process backend: die with the host (bwrap does this itself for `local`)
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(0)


def arm_cpu_budget(seconds):
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(used.ru_utime + used.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = spent + int(seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


class FigureSaver:
    """Saves open matplotlib figures as PNG files in the cwd; plt.show() flushes them like a notebook."""

    def __init__(self):
        self.counter = 0
        self.saved = []
        self.enabled = bool(CFG.get("save_figures", True))
        sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            shown = module.show

            def show(*args, **kwargs):
                if not self.enabled:
                    return shown(*args, **kwargs)
                self.flush()

            module.show = show

        spec.loader.exec_module = exec_module
        return spec

    def flush(self, discard=False):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None or not self.enabled:
            return
        nums = plt.get_fignums()
        if not nums:
            return
        for num in nums if not discard else []:
            self.counter += 1
            name = f"figure_{self.counter}.png"
            try:
                plt.figure(num).savefig(name, dpi=CFG.get("figure_dpi", 100), bbox_inches="tight")
                self.saved.append(name)
            except Exception as exc:  # a broken figure must not hide the cell's own result
                sys.stderr.write(f"[could not save figure {num}: {type(exc).__name__}: {exc}]\n")
        plt.close("all")


class Worker:
    def __init__(self, ctl_in, ctl_out):
        self.ctl_in, self.ctl_out = ctl_in, ctl_out
        # cells run in a fresh module installed as __main__ (as in a notebook), so functions they define
        # pickle by reference for multiprocessing/joblib; the worker keeps its own globals untouched
        main_module = types.ModuleType("__main__")
        main_module.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main_module
        self.ns = main_module.__dict__
        self.cells = 0
        self.limit = int(CFG.get("max_output_chars", 20000))
        self.raw = [tempfile.TemporaryFile(buffering=0) for _ in range(2)]
        os.dup2(self.raw[0].fileno(), 1)
        os.dup2(self.raw[1].fileno(), 2)
        self.figures = FigureSaver()
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.signal(signal.SIGXCPU, self._on_xcpu)

    @staticmethod
    def _on_alarm(signum, frame):
        raise CellTimeout()

    @staticmethod
    def _on_xcpu(signum, frame):
        raise CellCPULimit()

    def _drain_raw(self, index, sink):
        """Move what was written to fd 1/2 during the cell into the capture (head and tail only)."""
        fd = self.raw[index].fileno()
        size = os.lseek(fd, 0, os.SEEK_END)
        if size:
            half = self.limit
            os.lseek(fd, 0, os.SEEK_SET)
            if size <= 2 * half:
                sink.write(os.read(fd, size).decode("utf-8", "replace"))
            else:
                sink.write(os.read(fd, half).decode("utf-8", "replace"))
                sink.write(f"\n... [truncated {size - 2 * half} bytes of raw output] ...\n")
                os.lseek(fd, size - half, os.SEEK_SET)
                sink.write(os.read(fd, half).decode("utf-8", "replace"))
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)

    def _error(self, exc, timeout=0.0):
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
        if isinstance(exc, (CellTimeout, CellCPULimit)):
            kind, what = ("TimeoutError", f"{timeout:g} s wall-clock") if isinstance(exc, CellTimeout) else \
                ("CPUTimeLimit", "CPU-time")
            message = f"cell exceeded its {what} limit and was interrupted"
            text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames[-3:])) + \
                f"{kind}: {message}\n"
            return {"type": kind, "message": message, "traceback": text}
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        text = self._short_traceback(exc, tb)
        if len(text) > self.limit:
            cut = Capture(self.limit)
            cut.write(text)
            text = cut.getvalue()[0]
        out = {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback": text}
        if isinstance(exc, KeyError):
            columns = self._frame_columns(tb)
            if columns is not None:
                out["columns"] = columns
        return out

    @staticmethod
    def _frame_columns(tb, limit=60):
        """The columns of the DataFrame a KeyError was raised on (innermost frame first): the frame that looked the
        key up has it as `self` or `obj`. A merged frame's `channel_x` / `channel_y` is then in plain sight."""
        found = None
        while tb is not None:
            for name in ("self", "obj"):
                value = tb.tb_frame.f_locals.get(name)
                if type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas"):
                    found = value
                    break
            tb = tb.tb_next
        if found is None:
            return None
        try:
            return [str(c) for c in list(found.columns)[:limit]]
        except Exception:  # noqa: BLE001 - a broken frame: no columns, the error stands on its own
            return None

    @staticmethod
    def _short_traceback(exc, tb):
        """The cell's own frames and the library frame that raised, then the exception: no chained causes, no
        library internals in between (a pandas KeyError is 15 lines of index internals otherwise)."""
        if isinstance(exc, SyntaxError):  # raised by the compiler: the caret under the cell's line says it all
            return "".join(traceback.format_exception_only(type(exc), exc))
        stack = traceback.extract_tb(tb)
        own = [i for i, f in enumerate(stack) if f.filename.startswith("<")]
        keep = sorted(set(own) | ({len(stack) - 1} if stack else set()))
        frames = []
        for i in keep:
            if frames and i - keep[keep.index(i) - 1] > 1:
                frames.append("  ...\n")
            frames.extend(traceback.StackSummary.from_list([stack[i]]).format())
        head = "Traceback (most recent call last):\n" if frames else ""
        message = "".join(traceback.format_exception_only(type(exc), exc))
        if len(message) > MESSAGE_CHARS:
            cut = len(message) - MESSAGE_CHARS
            message = (message[:MESSAGE_CHARS * 2 // 3] + f" … [{cut} characters of the message left out] … "
                       + message[-(MESSAGE_CHARS // 3):])
        return head + "".join(frames) + message

    def _execute(self, code, filename):
        tree = ast.parse(code, filename, "exec")
        last = None
        if CFG.get("echo_last_expr", True) and tree.body and isinstance(tree.body[-1], ast.Expr):
            last = compile(ast.Expression(tree.body.pop().value), filename, "eval")
        exec(compile(tree, filename, "exec"), self.ns)
        if last is not None:
            value = eval(last, self.ns)
            if value is not None:
                print(repr(value))

    def exec_cell(self, req):
        self.cells += 1
        code, silent = req.get("code", ""), bool(req.get("silent"))
        filename = f"<cell-{self.cells}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        out, err = Capture(self.limit), Capture(self.limit)
        sys.stdout, sys.stderr = out, err
        self.figures.saved = []
        error, timed_out = None, False
        timeout = float(req.get("timeout") or 0)
        start = time.perf_counter()
        try:
            try:
                arm_cpu_budget(CFG.get("cpu_seconds", 300))
                if timeout > 0:
                    signal.setitimer(signal.ITIMER_REAL, timeout)
                self._execute(code, filename)
                self.figures.flush(discard=silent)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                if os.getpid() != MAIN_PID:  # a forked child returned from the cell: never answer for the parent
                    os._exit(0)
        except BaseException as exc:  # the cell's own failure, reported to the caller
            timed_out = isinstance(exc, CellTimeout)
            error = self._error(exc, timeout)
            try:
                self.figures.flush(discard=True)
            except BaseException:
                pass
        duration = time.perf_counter() - start
        self._reap_strays()
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        self._drain_raw(0, out)
        self._drain_raw(1, err)
        stdout, t1 = out.getvalue()
        stderr, t2 = err.getvalue()
        if silent:
            stdout, stderr, t1, t2 = "", "", False, False
        return {"op": "result", "stdout": stdout, "stderr": stderr, "error": error, "duration_s": duration,
                "truncated": t1 or t2, "timed_out": timed_out, "figures": list(self.figures.saved)}

    def _reap_strays(self):
        """Kill processes a cell left behind. Only inside our own PID namespace as a non-root user."""
        if not CFG.get("pidns") or os.getuid() == 0 or os.getpid() > 16:
            return
        if sum(1 for p in os.listdir("/proc") if p.isdigit()) > 2:
            try:
                os.kill(-1, signal.SIGKILL)  # every process of our uid in this namespace except ourselves
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass

    def serve(self):
        while True:
            req = read_frame(self.ctl_in)
            if req is None:
                return
            op = req.get("op")
            if op == "exec":
                reply = self.exec_cell(req)
            elif op == "ping":
                reply = {"op": "pong"}
            else:
                reply = {"op": "error", "message": f"unknown op {op!r}"}
            reply["id"] = req.get("id")
            write_frame(self.ctl_out, reply)


def seed_font_cache():
    """Copy matplotlib's font list, built once on the host, so the first plot doesn't rebuild it (~1 s)."""
    seed, target = CFG.get("mpl_seed"), os.environ.get("MPLCONFIGDIR")
    if not seed or not target or not os.path.isdir(seed):
        return
    import shutil

    os.makedirs(target, exist_ok=True)
    for name in os.listdir(seed):
        if name.startswith("fontlist") and not os.path.exists(os.path.join(target, name)):
            shutil.copyfile(os.path.join(seed, name), os.path.join(target, name))


def main():
    drop_privileges()
    if CFG.get("cwd"):
        os.chdir(CFG["cwd"])
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    apply_limits()
    sys.path.insert(0, "")  # like a notebook: modules written to the workspace are importable
    seed_font_cache()
    worker = Worker(ctl_in, ctl_out)
    start = time.perf_counter()
    failed = {}
    for name in CFG.get("preload", []):
        try:
            __import__(name)
        except Exception as exc:  # reported to the host, which decides how loud to be
            failed[name] = f"{type(exc).__name__}: {exc}"
    worker._drain_raw(0, io.StringIO())
    worker._drain_raw(1, io.StringIO())
    write_frame(ctl_out, {"op": "ready", "pid": os.getpid(), "uid": os.getuid(), "preload_s":
                          time.perf_counter() - start, "preload_failed": failed, "python": sys.version.split()[0]})
    worker.serve()


if __name__ == "__main__":
    main()
