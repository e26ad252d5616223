"""`worldsmith sandbox selftest`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from worldsmith.commands.common import STATE, friendly_errors

app = typer.Typer(help="The sandbox that runs model-written code.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="sandbox")


@app.command("selftest")
def selftest(attack: Annotated[Optional[list[str]], typer.Option("--attack", help="Run only these attacks (repeatable).")] = None,
             json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Run the attack set (network, host files, fork bomb, memory, CPU, output flood, timeouts, symlinks, secrets…)
    against the configured backend; prints "N/N contained" and exits 1 unless all are."""
    from worldsmith.tools.sandbox import SandboxError
    from worldsmith.tools.sandbox.selftest import selftest_main

    with friendly_errors(SandboxError):
        code = selftest_main(STATE.settings().sandbox, attack or None, json_out)
    raise typer.Exit(code)
