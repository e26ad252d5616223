"""Contract problems: the list an LLM contract writer is shown to fix its contract."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ValidationError


class ContractProblem(BaseModel):
    code: str
    path: str
    message: str
    hint: str = ""
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        tail = f" Fix: {self.hint}" if self.hint else ""
        return f"[{self.severity}] {self.path}: {self.message}.{tail}"


class ContractError(ValueError):
    """Raised when a contract has errors; carries every problem, not only the first."""

    def __init__(self, problems: list[ContractProblem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"world contract has {len(problems)} problem(s):\n{lines}")


class Problems:
    """Accumulator used by the validators."""

    def __init__(self) -> None:
        self.items: list[ContractProblem] = []

    def add(self, code: str, path: str, message: str, hint: str = "", severity: str = "error") -> None:
        self.items.append(ContractProblem(code=code, path=path, message=message, hint=hint,
                                          severity=severity))  # type: ignore[arg-type]

    def warn(self, code: str, path: str, message: str, hint: str = "") -> None:
        self.add(code, path, message, hint, "warning")


def problems_from_validation_error(err: ValidationError) -> list[ContractProblem]:
    out = []
    for e in err.errors():
        path = ".".join(str(p) for p in e["loc"]) or "<root>"
        got = e.get("input")
        shown = json.dumps(got, default=str)[:80] if not isinstance(got, dict) else "an object"
        out.append(ContractProblem(code=f"schema:{e['type']}", path=path,
                                   message=f"{e['msg']} (got {shown})",
                                   hint="follow the JSON schema from contract_json_schema()"))
    return out


def format_problems(problems: list[ContractProblem]) -> str:
    """Numbered, one problem a line: the text shown to a contract writer."""
    if not problems:
        return "no problems"
    return "\n".join(f"{i}. {p}" for i, p in enumerate(problems, 1))


def as_data(obj: Any) -> Any:
    return json.loads(obj) if isinstance(obj, (str, bytes)) else obj
