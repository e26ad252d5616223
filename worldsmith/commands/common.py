"""Shared CLI plumbing: the loaded settings, clean one-line errors, exit codes (0 ok / 1 failed / 2 bad usage)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import typer
from rich.console import Console

from worldsmith.core.config import ConfigError, Settings, load_settings, parse_overrides

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
console = Console()
err_console = Console(stderr=True)
T = TypeVar("T")


@dataclass
class CliState:
    config_file: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None

    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = load_settings(self.config_file, self.overrides)
            except ConfigError as exc:
                fail(str(exc), code=EXIT_USAGE)
        return self._settings


STATE = CliState()


def set_global_options(config_file: str | None, sets: list[str], provider: str | None, model: str | None,
                       base_url: str | None) -> None:
    try:
        overrides = parse_overrides(sets)
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE)
    default = overrides.setdefault("llm", {}).setdefault("default", {})
    for key, value in (("provider", provider), ("model", model), ("base_url", base_url)):
        if value is not None:
            default[key] = value
    if not default:
        overrides["llm"].pop("default")
    if not overrides["llm"]:
        overrides.pop("llm")
    STATE.config_file, STATE.overrides, STATE._settings = config_file, overrides, None


def fail(message: str, code: int = EXIT_FAILED) -> None:
    """One clear line on stderr, then exit. Never a traceback for an expected failure."""
    from rich.markup import escape  # a message may hold brackets ("[error] path: ..."); print them as text

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def friendly_errors(*expected: type[BaseException]) -> Iterator[None]:
    """Turn the expected error types of a command into one actionable line and exit 1."""
    try:
        yield
    except typer.Exit:
        raise
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE)
    except expected as exc:  # type: ignore[misc]
        fail(str(exc) or type(exc).__name__)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def runtime() -> Any:
    """LLM + sandboxes + the router's actions for the effective settings (built lazily: `--help` never loads a model)."""
    from worldsmith.app.runtime import make_runtime

    return make_runtime(STATE.settings())
