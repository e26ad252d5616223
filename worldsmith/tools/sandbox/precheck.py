"""Static pre-check: refuse cells with obvious escape attempts before they run, with a message an agent can act on.

A second line of defence only (the sandbox contains what this misses); tuned for few false positives on
ordinary pandas/numpy/matplotlib analysis. Code that does not parse passes through, so the interpreter reports
the SyntaxError in the usual way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

NO_PROCESS = "there is no shell and no way to start programs in this sandbox; do the work in Python (pandas, numpy)"
NO_NETWORK = "the sandbox has no network; use the files in the working directory"
BANNED_MODULES = {
    "subprocess": NO_PROCESS, "pty": NO_PROCESS, "pexpect": NO_PROCESS, "sh": NO_PROCESS,
    "socket": NO_NETWORK, "ssl": NO_NETWORK, "requests": NO_NETWORK, "httpx": NO_NETWORK, "aiohttp": NO_NETWORK,
    "urllib3": NO_NETWORK, "http": NO_NETWORK, "ftplib": NO_NETWORK, "smtplib": NO_NETWORK, "telnetlib": NO_NETWORK,
    "xmlrpc": NO_NETWORK, "websocket": NO_NETWORK, "websockets": NO_NETWORK, "paramiko": NO_NETWORK,
    "ctypes": "native code loading (ctypes) is not allowed", "cffi": "native code loading (cffi) is not allowed",
    "pip": "packages cannot be installed at run time; use the pre-installed stack (pandas, numpy, scipy, "
           "statsmodels, scikit-learn, matplotlib)",
}
BANNED_SUBMODULES = {"urllib.request": NO_NETWORK, "urllib.error": NO_NETWORK, "multiprocessing.connection": NO_NETWORK}
OS_BANNED = {
    "system": NO_PROCESS, "popen": NO_PROCESS, "fork": NO_PROCESS, "forkpty": NO_PROCESS, "vfork": NO_PROCESS,
    "kill": "signalling processes is not allowed", "killpg": "signalling processes is not allowed",
    "setuid": "changing identity is not allowed", "setgid": "changing identity is not allowed",
    "chroot": "not allowed", "ptrace": "not allowed", "posix_spawn": NO_PROCESS, "posix_spawnp": NO_PROCESS,
}
OS_BANNED_PREFIXES = ("exec", "spawn")
ESCAPE_ATTRS = {"__subclasses__", "__globals__", "__builtins__", "__code__", "__closure__", "f_globals",
                "f_builtins", "gi_frame", "tb_frame", "f_back"}
DYNAMIC_CALLS = {"eval", "exec", "compile"}
WRITE_MODES = set("wax+")


@dataclass
class Violation:
    line: int
    rule: str
    message: str


@dataclass
class PrecheckReport:
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def message(self) -> str:
        lines = [f"line {v.line}: {v.message}" for v in self.violations[:5]]
        more = f" (+{len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
        return "Code refused by the sandbox pre-check: " + "; ".join(lines) + more + ". Rewrite the cell without it."


class _Scanner(ast.NodeVisitor):
    def __init__(self, roots: list[str], depth: int) -> None:
        self.roots = [r.rstrip("/") or "/" for r in roots]
        self.depth = depth
        self.found: list[Violation] = []
        self.os_aliases = {"os", "posix", "nt"}
        self.shutil_aliases = {"shutil"}

    def flag(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append(Violation(getattr(node, "lineno", 0), rule, message))

    def _module(self, node: ast.AST, name: str) -> None:
        top = name.split(".")[0]
        for sub, why in BANNED_SUBMODULES.items():
            if name == sub or name.startswith(sub + "."):
                self.flag(node, "import", f"`{name}`: {why}")
                return
        if top in BANNED_MODULES:
            self.flag(node, "import", f"`{name}`: {BANNED_MODULES[top]}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
            if alias.name in ("os", "posix", "shutil"):
                (self.shutil_aliases if alias.name == "shutil" else self.os_aliases).add(alias.asname or alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._module(node, module)
        for alias in node.names:
            self._module(node, f"{module}.{alias.name}")
            if module in ("os", "posix"):
                self._os_name(node, alias.name)

    def _os_name(self, node: ast.AST, name: str) -> None:
        if name in OS_BANNED:
            self.flag(node, "os", f"`os.{name}`: {OS_BANNED[name]}")
        elif name.startswith(OS_BANNED_PREFIXES):
            self.flag(node, "os", f"`os.{name}`: {NO_PROCESS}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.os_aliases:
            self._os_name(node, node.attr)
        if node.attr in ESCAPE_ATTRS:
            self.flag(node, "introspection", f"`.{node.attr}` is an interpreter-escape gadget and is not allowed")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.flag(node, "introspection", "`__builtins__` is not allowed; call builtins directly")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        first = node.args[0] if node.args else None
        literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if name == "__import__" or _dotted(func) in ("importlib.import_module", "importlib.__import__"):
            if literal is None:
                self.flag(node, "import", "dynamic imports need a literal module name; use a plain `import`")
            else:
                self._module(node, literal)
        elif name in DYNAMIC_CALLS:
            if literal is None:
                self.flag(node, "dynamic-code", f"`{name}()` of a computed string is not allowed; write the code "
                          "directly")
            elif self.depth < 3:
                inner = precheck(literal, self.roots, self.depth + 1)
                self.found += [Violation(node.lineno, v.rule, v.message) for v in inner.violations]
        elif name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            attr = node.args[1].value
            if isinstance(attr, str) and (attr in OS_BANNED or attr in ESCAPE_ATTRS or attr.startswith(("exec",
                                                                                                        "spawn"))):
                self.flag(node, "introspection", f"getattr(..., {attr!r}) is not allowed")
        elif name == "open" and literal is not None and _writes(node) and not self._allowed(literal):
            self.flag(node, "write", f"writing to {literal!r} is outside the workspace; write relative paths "
                      "(the working directory) or under /tmp")
        elif _dotted(func) in {f"{a}.rmtree" for a in self.shutil_aliases} and literal is not None:
            if not self._allowed(literal):
                self.flag(node, "write", f"deleting {literal!r} is outside the workspace")
        self.generic_visit(node)

    def _allowed(self, path: str) -> bool:
        if path.startswith("~"):
            return False
        if not path.startswith("/"):
            return ".." not in path.replace("\\", "/").split("/")
        return any(path == r or path.startswith(r + "/") for r in self.roots if r != "/")


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _writes(call: ast.Call) -> bool:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(WRITE_MODES & set(mode.value))
    return True  # a computed mode could be anything


def precheck(code: str, allowed_write_roots: list[str] | None = None, depth: int = 0) -> PrecheckReport:
    """Scan `code`; `allowed_write_roots` are absolute prefixes open(..., 'w') may target."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return PrecheckReport()
    scanner = _Scanner(allowed_write_roots or ["/workspace", "/tmp"], depth)
    scanner.visit(tree)
    return PrecheckReport(scanner.found)
