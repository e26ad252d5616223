"""Prompt templates, one file per agent role. Loaded by name so packaging and tests see the same text."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The text of `worldsmith/prompts/<name>` (e.g. 'analyst_system.md')."""
    try:
        return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"prompt template {name!r} is missing from worldsmith/prompts/") from exc


@lru_cache(maxsize=None)
def load_sections(name: str) -> dict[str, str]:
    """A Markdown file of `## heading` sections as {heading (lower-case): body}."""
    text = re.sub(r"<!--.*?-->", "", load_prompt(name), flags=re.DOTALL)
    out: dict[str, str] = {}
    for block in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        head, _, body = block.partition("\n")
        out[head.strip().lower()] = body.strip()
    return out
