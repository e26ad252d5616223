"""Safe aliases for input files whose names are awkward to type in code.

A sandbox mounts every input under its own name and, when that name holds anything beyond ASCII letters, digits,
`_`, `-` and `.` (spaces, `=`, `+`, quotes, unicode, ...), also under an alias such as `file_2.csv`. The profile
names both, so a model that mangles `a=b+c d.csv` can still open the file. Sandboxes and the profiler call the
one function here on the same ordered list of names, so they always agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_SAFE_SUFFIX = re.compile(r"(?:\.[A-Za-z0-9]{1,10}){1,2}$")


def is_safe_name(name: str) -> bool:
    """True when `name` is plain enough to need no alias (ASCII letters, digits, `_`, `-`, `.`)."""
    return _SAFE.fullmatch(name) is not None


def input_aliases(names: Sequence[str]) -> dict[str, str]:
    """{name: alias} for the inputs that need one, in input order.

    The alias is `file_<position><suffix>` (position 1-based in `names`, suffix such as `.csv` or `.csv.gz` kept
    when it is itself safe, so format detection by extension still works). An alias never equals another input's
    name or alias: on a clash it takes the next free `file_<position>_<k>`.
    """
    taken = set(names)
    out: dict[str, str] = {}
    for position, name in enumerate(names, start=1):
        if is_safe_name(name):
            continue
        m = _SAFE_SUFFIX.search(name)
        suffix = m.group(0).lower() if m else ""
        alias, k = f"file_{position}{suffix}", 1
        while alias in taken:
            k += 1
            alias = f"file_{position}_{k}{suffix}"
        taken.add(alias)
        out[name] = alias
    return out


def input_mounts(paths: Sequence[Path]) -> list[tuple[str, Path]]:
    """(name as mounted, source) for sandboxes that copy inputs: every input by its base name, then each awkward
    name once more under its alias."""
    aliases = input_aliases([p.name for p in paths])
    return [(p.name, p) for p in paths] + [(aliases[p.name], p) for p in paths if p.name in aliases]
