"""On-disk response cache: one JSON file per entry, written atomically (temp file + rename).

Keyed by a SHA-256 of everything that determines the answer (provider, model, endpoint, messages, sampling
parameters, schema). Entries are plain JSON so they can be inspected and deleted by hand.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CACHE_FORMAT = 1


def cache_key(payload: dict[str, Any]) -> str:
    """Stable hash of a JSON-able payload (sorted keys, no whitespace)."""
    blob = json.dumps({"v": CACHE_FORMAT, **payload}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """A folder of ``<key[:2]>/<key>.json`` entries. Safe for concurrent readers and writers."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._dirs: set[Path] = set()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            with path.open("r", encoding="utf-8") as fh:
                entry = json.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            # A damaged entry is a miss; the fresh answer overwrites it.
            log.warning("LLM cache entry %s is unreadable (%s); treating as a miss", path, exc)
            return None
        if not isinstance(entry, dict) or entry.get("key") != key:
            log.warning("LLM cache entry %s does not belong to its key; treating as a miss", path)
            return None
        return entry.get("value")

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        if path.parent not in self._dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path.parent)
        data = json.dumps({"key": key, "value": value}, ensure_ascii=False).encode("utf-8")
        # unique per process and thread, so concurrent writers of the same key never share a temp file
        tmp = path.parent / f".{key[:16]}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("??/*.json")) if self.root.exists() else 0
