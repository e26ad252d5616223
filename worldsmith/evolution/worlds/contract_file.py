"""User-written contracts: a JSON or YAML file -> a validated WorldContract, or every problem with its path.

`worldsmith world new OUT --contract FILE` reads the file here. Syntax errors name the file and line; schema and
semantic problems come back exactly as the LLM contract writer sees them (field path, message, fix), all at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from worldsmith.core.world_contract import WorldContract

from .problems import ContractError, ContractProblem
from .validate import parse_contract

YAML_SUFFIXES = (".yaml", ".yml")


def _syntax(path: Path, message: str, hint: str) -> ContractError:
    return ContractError([ContractProblem(code="syntax", path=str(path), message=message, hint=hint)])


def load_contract_data(path: str | Path) -> Any:
    """The file's data: YAML for .yaml/.yml, JSON otherwise (JSON is YAML too, but its errors read better)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"contract file {path} does not exist (give a .json, .yaml or .yml file)")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in YAML_SUFFIXES:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise _syntax(path, f"not valid YAML{where} ({getattr(err, 'problem', None) or err})",
                          "check the indentation and the `key: value` pairs around that line") from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise _syntax(path, f"not valid JSON at line {err.lineno}, column {err.colno} ({err.msg})",
                      "fix the JSON there, or write the contract as YAML in a .yaml file") from err


def read_contract_file(path: str | Path) -> tuple[WorldContract, list[ContractProblem]]:
    """(contract, warnings) of a user-written contract file; ContractError lists every error with its field path."""
    data = load_contract_data(path)
    if not isinstance(data, dict):
        raise _syntax(Path(path), f"the top level is {type(data).__name__}, not a mapping of contract fields",
                      "start the file with fields such as `id:`, `title:`, `domain:`, `entities:`")
    contract, problems = parse_contract(data)
    errors = [p for p in problems if p.severity == "error"]
    if contract is None or errors:
        raise ContractError(errors or problems)
    return contract, [p for p in problems if p.severity == "warning"]
