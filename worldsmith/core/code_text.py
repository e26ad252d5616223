"""Python scripts read as text (the model's analysis scripts, which the product never imports or runs in process)."""

from __future__ import annotations


def without_comments(script: str) -> str:
    """The script with its `#` comments cut: a name, date or call in a comment is no code that computes on it.
    Crude on purpose (a `#` inside a string cuts the rest of its line too), and never wrong the other way."""
    return "\n".join(line.split("#", 1)[0] for line in script.splitlines())
