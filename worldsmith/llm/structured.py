"""Structured output helpers: schema prompt, JSON extraction, validation and the repair message."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def json_schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise TypeError(f"schema must be a pydantic BaseModel subclass, got {schema!r}")
    return schema.model_json_schema()


def schema_instruction(schema_json: dict[str, Any]) -> str:
    return (
        "Respond with only a JSON object (no prose, no code fences) that conforms to this JSON schema:\n"
        + json.dumps(schema_json, separators=(",", ":"))
    )


def with_schema_instruction(messages: list[dict[str, str]], schema_json: dict[str, Any]) -> list[dict[str, str]]:
    """Append the schema instruction to the last user message (works with every chat template)."""
    out = [dict(m) for m in messages]
    instruction = schema_instruction(schema_json)
    for m in reversed(out):
        if m["role"] == "user":
            m["content"] = f"{m['content']}\n\n{instruction}"
            return out
    out.append({"role": "user", "content": instruction})
    return out


def extract_json(text: str) -> Any:
    """Parse the JSON value in a model reply: the whole text, a fenced block, or the outermost {...}."""
    stripped = text.strip()
    candidates = [stripped]
    fence = _FENCE.search(stripped)
    if fence:
        candidates.append(fence.group(1).strip())
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    last_error: json.JSONDecodeError | None = None
    for cand in candidates:
        # strict first; then raw newlines and tabs inside strings are accepted (small models put scripts in JSON
        # strings with literal line breaks: the value is unambiguous, only the escaping is missing)
        for strict in (True, False):
            try:
                return json.loads(cand, strict=strict)
            except json.JSONDecodeError as exc:
                last_error = exc
    assert last_error is not None
    raise last_error


def validate_reply(text: str, schema: type[BaseModel]) -> tuple[BaseModel | None, list[str]]:
    """Return (object, []) when ``text`` holds valid JSON for ``schema``, else (None, readable errors)."""
    try:
        data = extract_json(text)
    except json.JSONDecodeError as exc:
        snippet = text.strip()[:80].replace("\n", " ")
        return None, [f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} (reply starts {snippet!r})"]
    try:
        return schema.model_validate(data), []
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "<root>"
            errors.append(f"{loc}: {err['msg']}")
        return None, errors


def repair_messages(messages: list[dict[str, str]], reply: str, errors: list[str]) -> list[dict[str, str]]:
    """The conversation for the single repair retry: the model sees its own reply and what was wrong."""
    problems = "\n".join(f"- {e}" for e in errors)
    return [
        *messages,
        {"role": "assistant", "content": reply},
        {
            "role": "user",
            "content": "Your reply could not be used:\n"
            f"{problems}\n"
            "Reply again with only the corrected JSON object, conforming to the schema above.",
        },
    ]


def is_strict_compatible(schema: dict[str, Any]) -> bool:
    """True when every object in the schema lists all properties as required and forbids extras.

    OpenAI's ``strict: true`` mode accepts only such schemas; pydantic emits them for models with
    ``extra='forbid'`` and no defaulted fields.
    """

    def ok(node: Any) -> bool:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                if node.get("additionalProperties") is not False:
                    return False
                if set(node.get("required", [])) != set(node["properties"]):
                    return False
            return all(ok(v) for v in node.values())
        if isinstance(node, list):
            return all(ok(v) for v in node)
        return True

    return ok(schema)
