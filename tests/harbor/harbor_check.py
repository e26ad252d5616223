"""Run inside the Harbor venv (Python >= 3.12), never by pytest directly: `python harbor_check.py TASK_DIR...`.

Loads each task directory with Harbor's own models (TaskConfig, Task, Task.is_valid_dir), resolves the
verifier mode and reward path Harbor uses, and lints it with Harbor's default rules. Prints one JSON object:
{task_dir: {"valid": bool, "errors": [...], "lint": [{rule, path, message}], "verifier_mode": str,
"network_mode": str, "workdir": str, "reward_path": str, "verifier_env": {...}}}. worldsmith never imports harbor; its tests call this.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from harbor.lint import lint_task
from harbor.lint.models import DEFAULT_RULES
from harbor.models.task.config import TaskConfig
from harbor.models.task.task import Task
from harbor.models.task.verifier_mode import resolve_task_verifier_mode
from harbor.models.trial.paths import EnvironmentPaths
from harbor.utils.env import resolve_env_vars


def check(task_dir: Path) -> dict:
    out: dict = {"errors": []}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # a deprecated field is a finding too
        try:
            config = TaskConfig.model_validate_toml((task_dir / "task.toml").read_text())
            task = Task(task_dir)
        except Exception as exc:  # report every failure of Harbor's loaders, with its type
            out["errors"].append(f"{type(exc).__name__}: {exc}")
            return {**out, "valid": False, "lint": []}
    out["valid"] = Task.is_valid_dir(task_dir)
    out["verifier_mode"] = resolve_task_verifier_mode(task.config).value
    out["network_mode"] = config.environment.network_mode.value
    out["workdir"] = config.environment.workdir
    out["schema_version"] = config.schema_version
    out["reward_path"] = str(EnvironmentPaths().reward_text_path)
    out["verifier_env"] = resolve_env_vars(config.verifier.env)  # as Harbor resolves it from the host (may raise)
    out["lint"] = [f.model_dump(mode="json") for f in lint_task(task_dir, selected_rules=set(DEFAULT_RULES))]
    return out


if __name__ == "__main__":
    print(json.dumps({d: check(Path(d).resolve()) for d in sys.argv[1:]}, indent=2, default=str))
