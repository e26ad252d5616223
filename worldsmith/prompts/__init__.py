"""Prompt templates, one file per agent role, loaded by name so packaging and tests see the same text.

Every model-facing string lives here. `template(name)` also gives the file's content hash, which a trajectory
records for each model call, so a training record says exactly which prompt version built its messages.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources


@dataclass(frozen=True)
class Template:
    """One prompt file: its name (the id a trajectory records), its text and `sha256:<hex>` of its bytes."""

    id: str
    text: str
    sha256: str

    @cached_property
    def sections(self) -> dict[str, str]:
        """A Markdown file of `## heading` sections as {heading (lower-case): body}; HTML comments are notes
        for maintainers and never reach the model."""
        text = re.sub(r"<!--.*?-->", "", self.text, flags=re.DOTALL)
        out: dict[str, str] = {}
        for block in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
            head, _, body = block.partition("\n")
            out[head.strip().lower()] = body.strip()
        return out

    def section(self, heading: str, **fields: str) -> str:
        """One section with its `{field}` placeholders filled in (write `{{`/`}}` for a literal brace). A missing
        heading or field is an error naming both."""
        try:
            body = self.sections[heading.lower()]
        except KeyError:
            raise KeyError(f"prompt template {self.id!r} has no section '## {heading}' "
                           f"(it has: {', '.join(self.sections) or 'none'})") from None
        try:
            return body.format(**fields)
        except KeyError as exc:
            raise KeyError(f"prompt template {self.id!r}, section {heading!r}: no value for placeholder {exc}") from None


@lru_cache(maxsize=None)
def template(name: str) -> Template:
    """The template `worldsmith/prompts/<name>` (e.g. 'analyst_system.md')."""
    try:
        data = resources.files(__package__).joinpath(name).read_bytes()
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"prompt template {name!r} is missing from worldsmith/prompts/") from exc
    return Template(id=name, text=data.decode("utf-8"), sha256="sha256:" + hashlib.sha256(data).hexdigest())


def versions(*names: str) -> dict[str, str]:
    """{template id: 'sha256:<hex>'} for the templates that built a message or conversation (the trajectory record)."""
    return {n: template(n).sha256 for n in names}


def load_prompt(name: str) -> str:
    """The text of `worldsmith/prompts/<name>`."""
    return template(name).text


def load_sections(name: str) -> dict[str, str]:
    """A Markdown file of `## heading` sections as {heading (lower-case): body}."""
    return template(name).sections
