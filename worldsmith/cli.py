"""`worldsmith <noun> <verb>` — the command line. Sub-commands live in worldsmith/commands/."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from worldsmith import __version__
from worldsmith.commands.common import STATE, console, emit_json, set_global_options

app = typer.Typer(name="worldsmith", help="Manufacture verified data-analysis tasks and the agents that solve them.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")


def _version(value: bool) -> None:
    if value:
        console.print(f"worldsmith {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    config: Annotated[Optional[str], typer.Option("--config", "-c", help="TOML config file (default: $WORLDSMITH_CONFIG or ./worldsmith.toml).")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="Override a setting: --set analyst.max_turns=5 (repeatable).")] = [],  # noqa: B006
    provider: Annotated[Optional[str], typer.Option(help="LLM provider for every role: embedded | openai | scripted | hf.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model name for every role (embedded registry name or endpoint model).")] = None,
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint URL, e.g. http://localhost:8000/v1.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """Global options apply to every command; precedence: flags > WORLDSMITH_* env > worldsmith.toml > defaults."""
    set_global_options(config, set_, provider, model, base_url)


@config_app.command("show")
def config_show(json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Print the effective configuration with secrets masked."""
    data = STATE.settings().masked()
    if json_out:
        emit_json(data)
        return
    import tomli_w

    console.print(tomli_w.dumps(_drop_none(data)), highlight=False, markup=False)


def _drop_none(obj):  # TOML has no null
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def _register() -> None:
    from worldsmith.commands import llm as llm_cmd

    app.add_typer(llm_cmd.app, name="llm")
    for name in ("sandbox", "world", "evaluate", "chat", "task", "grade", "train", "evolve"):
        try:
            module = __import__(f"worldsmith.commands.{name}", fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name != f"worldsmith.commands.{name}":
                raise
            continue
        module.register(app)


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
