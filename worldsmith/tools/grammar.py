"""The action grammar — the one parser and the one renderer (DESIGN.md, Trajectory).

An assistant turn is `<think>…</think>` followed by exactly one of `<code>…</code>` or `<answer>…</answer>`.
The interpreter's result comes back as its own message: `<interpreter>…</interpreter>`.
SFT data, RL rollouts, chat and evaluation all go through this module, so the tags cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from worldsmith.core.schemas import Action, Step, Trajectory

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CODE_OPEN, CODE_CLOSE = "<code>", "</code>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
INTERP_OPEN, INTERP_CLOSE = "<interpreter>", "</interpreter>"
#: Generation stops here, so the model never writes its own interpreter output.
STOP_SEQUENCES = (INTERP_OPEN,)
#: Live agents also stop at the end of the action: nothing a model writes after it is ever used, and small
#: models tend to continue with imagined output. `close_action` puts the consumed closing tag back.
ACTION_STOP_SEQUENCES = (CODE_CLOSE, ANSWER_CLOSE, INTERP_OPEN)
_TAG_RE = re.compile(r"</?(think|code|answer|interpreter)>")
_TAG_NAMES = r"(?:think|code|answer|interpreter)"
_AMP_BEFORE_TAG_RE = re.compile(rf"&(?=(?:amp;)*lt;/?{_TAG_NAMES}>)")
_DEFUSED_TAG_RE = re.compile(rf"&lt;(/?{_TAG_NAMES}>)")
_ESCAPED_AMP_RE = re.compile(rf"&amp;((?:amp;)*lt;/?{_TAG_NAMES}>)")
_FENCE_RE = re.compile(r"^```[a-zA-Z0-9_+-]*[ \t]*\n(.*?)\n?```[ \t]*$", re.DOTALL)
_MD_CODE_RE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class GrammarError(ValueError):
    """A malformed assistant turn; the message says what was expected and where."""


@dataclass(frozen=True)
class ParsedTurn:
    thought: str
    action: Action | None
    error: str | None = None
    repaired: str | None = None  # what lenient parsing had to fix, if anything

    @property
    def void(self) -> bool:
        return self.action is None


def _pos(text: str, i: int) -> str:
    line = text.count("\n", 0, i) + 1
    return f"line {line}, char {i - (text.rfind(chr(10), 0, i) + 1) + 1}"


_LONE_FENCE_RE = re.compile(r"^[ \t]*```[a-zA-Z0-9_+-]*[ \t]*$")


def _strip_block(s: str) -> str:
    """A code block without the Markdown fence wrapping it, or a lone fence line opening or closing it (a line
    that is never Python: the 1.5B analyst ended four cells in a row with a stray closing fence, each a
    SyntaxError)."""
    s = s.strip("\n").rstrip()
    m = _FENCE_RE.match(s.strip())
    if m:
        return m.group(1).rstrip()
    lines = s.split("\n")
    if len(lines) > 1 and _LONE_FENCE_RE.match(lines[-1]):
        lines = lines[:-1]
    if len(lines) > 1 and _LONE_FENCE_RE.match(lines[0]):
        lines = lines[1:]
    return "\n".join(lines).strip("\n").rstrip()


#: The void reason of a turn whose completion had no text at all.
EMPTY_COMPLETION = "empty completion"


def close_action(text: str) -> str:
    """Re-append the closing tag that an ACTION_STOP_SEQUENCES stop consumed (a no-op on complete turns)."""
    s = text.rstrip()
    for open_, close in ((CODE_OPEN, CODE_CLOSE), (ANSWER_OPEN, ANSWER_CLOSE)):
        i = s.rfind(open_)
        if i >= 0 and s.find(close, i) < 0 and s.rfind(THINK_CLOSE) < i:
            other = ANSWER_OPEN if open_ == CODE_OPEN else CODE_OPEN
            if s.rfind(other) < i:  # the last opened action is this one
                return s + "\n" + close
    return text


def parse_turn(text: str) -> ParsedTurn:
    """Strict parse: whitespace-tolerant, structure-exact. Raises GrammarError with a precise message."""
    s = text.strip()
    if not s:  # the model sent nothing (an empty completion): say so, not that a tag is missing
        raise GrammarError(EMPTY_COMPLETION)
    if not s.startswith(THINK_OPEN):
        found = _TAG_RE.search(s)
        what = f"found {found.group(0)} at {_pos(s, found.start())}" if found else "found no tags at all"
        raise GrammarError(f"a turn must start with {THINK_OPEN}; {what}")
    end_think = s.find(THINK_CLOSE)
    if end_think < 0:
        raise GrammarError(f"{THINK_OPEN} is never closed: expected {THINK_CLOSE}")
    thought = s[len(THINK_OPEN):end_think].strip()
    nested = _TAG_RE.search(thought)
    if nested:
        raise GrammarError(f"{nested.group(0)} inside <think>: close {THINK_CLOSE} before acting")
    rest = s[end_think + len(THINK_CLOSE):].strip()
    if not rest:
        raise GrammarError(f"after {THINK_CLOSE} expected {CODE_OPEN}…{CODE_CLOSE} or {ANSWER_OPEN}…{ANSWER_CLOSE}; found nothing")
    for kind, open_, close in (("code", CODE_OPEN, CODE_CLOSE), ("answer", ANSWER_OPEN, ANSWER_CLOSE)):
        if rest.startswith(open_):
            end = rest.find(close)
            if end < 0:
                raise GrammarError(f"{open_} is never closed: expected {close}")
            body = rest[len(open_):end]
            trailing = rest[end + len(close):].strip()
            if trailing:
                raise GrammarError(f"unexpected text after {close}: {trailing[:40]!r} (one action per turn)")
            inner = _TAG_RE.search(body)
            if inner:
                raise GrammarError(f"{inner.group(0)} inside {open_}: one action per turn")
            content = _strip_block(body) if kind == "code" else body.strip()
            if not content:
                raise GrammarError(f"empty {open_}{close}")
            return ParsedTurn(thought, Action(kind=kind, content=content))
    raise GrammarError(f"after {THINK_CLOSE} expected {CODE_OPEN} or {ANSWER_OPEN}; found {rest[:40]!r}")


def parse_turn_lenient(text: str) -> ParsedTurn:
    """For live agents and weak models: salvage a turn when the intent is unambiguous, else a void turn.

    Fixes: missing <think> (text before the action becomes the thought), unclosed final tag (output cut at
    max tokens), text written after the action (the model imagining output), markdown fences instead of
    <code>. Never invents an action: with none at all it is a void turn with the reason; with several, the first one
    counts (code before an answer means: run the code, answer after seeing its output).
    """
    try:
        return parse_turn(text)
    except GrammarError as strict_error:
        reason = str(strict_error)
    s = text.strip()
    thought = ""
    if THINK_OPEN in s and THINK_CLOSE in s and s.find(THINK_OPEN) < s.find(THINK_CLOSE):
        # tags written inside <think> are dropped so the salvaged turn renders to a strictly valid one
        thought = _TAG_RE.sub("", s[s.find(THINK_OPEN) + len(THINK_OPEN): s.find(THINK_CLOSE)]).strip()
        body = s[s.find(THINK_CLOSE) + len(THINK_CLOSE):]
    else:
        body = s.replace(THINK_OPEN, "")
    candidates = []
    for kind, open_, close in (("code", CODE_OPEN, CODE_CLOSE), ("answer", ANSWER_OPEN, ANSWER_CLOSE)):
        i = body.find(open_)
        if i >= 0:
            j = body.find(close, i)
            content = body[i + len(open_): j if j >= 0 else len(body)]
            stray = _TAG_RE.search(content)  # an unclosed action runs into the next tag: stop there
            if stray:
                content = content[:stray.start()]
            candidates.append((i, kind, content))
    if not candidates:
        m = _MD_CODE_RE.search(body)
        if m:
            candidates.append((m.start(), "code", m.group(1)))
    if not candidates:
        return ParsedTurn(thought or _TAG_RE.sub("", s).strip(), None, error=reason)
    candidates.sort()  # code before an answer in one turn: run the code; the answer must follow its output
    i, kind, content = candidates[0]
    if not thought:
        thought = _TAG_RE.sub("", body[:i]).strip()
    content = _strip_block(content) if kind == "code" else content.strip()
    if not content:
        return ParsedTurn(thought, None, error=reason)
    return ParsedTurn(thought, Action(kind=kind, content=content), repaired=reason)


def render_turn(thought: str, action: Action | None = None, *, kind: Literal["code", "answer"] | None = None,
                content: str | None = None) -> str:
    """The canonical text of an assistant turn."""
    if action is None:
        if kind is None or content is None:
            raise ValueError("render_turn needs an action or kind + content")
        action = Action(kind=kind, content=content)
    for part, what in ((thought, "thought"), (action.content, action.kind)):
        tag = _TAG_RE.search(part)
        if tag:  # the parser would reject it: refuse to write a turn that cannot be read back
            raise GrammarError(f"cannot render a turn whose {what} contains the grammar tag {tag.group(0)}")
    open_, close = (CODE_OPEN, CODE_CLOSE) if action.kind == "code" else (ANSWER_OPEN, ANSWER_CLOSE)
    return f"{THINK_OPEN}\n{thought.strip()}\n{THINK_CLOSE}\n{open_}\n{action.content.strip()}\n{close}"


def render_observation(output: str) -> str:
    """The interpreter message. Tags inside the output are defused so data cannot fake a turn boundary."""
    safe = _AMP_BEFORE_TAG_RE.sub("&amp;", output.rstrip())  # keep literal '&lt;think>' text reversible
    safe = _TAG_RE.sub(lambda m: "&lt;" + m.group(0)[1:], safe)
    return f"{INTERP_OPEN}\n{safe}\n{INTERP_CLOSE}"


def parse_observation(text: str) -> str:
    s = text.strip()
    if not (s.startswith(INTERP_OPEN) and s.endswith(INTERP_CLOSE)):
        raise GrammarError(f"an interpreter message must be wrapped in {INTERP_OPEN}…{INTERP_CLOSE}")
    body = s[len(INTERP_OPEN): -len(INTERP_CLOSE)].strip("\n")
    # undo exactly what render_observation did; other '&lt;' in the data (HTML, 'a &lt; b') stays as it was
    body = _DEFUSED_TAG_RE.sub(r"<\1", body)
    return _ESCAPED_AMP_RE.sub(r"&\1", body)


def step_messages(step: Step) -> list[dict[str, str]]:
    """Messages for one step. A void step keeps its raw text (it is trained on never: see loss masks)."""
    text = render_turn(step.thought, step.action) if step.action is not None else step.raw
    msgs = [{"role": "assistant", "content": text}]
    if step.observation is not None:
        msgs.append({"role": "interpreter", "content": render_observation(step.observation)})
    return msgs


def trajectory_messages(traj: Trajectory) -> list[dict[str, str]]:
    """The whole conversation with roles system / user / assistant / interpreter."""
    msgs: list[dict[str, str]] = []
    if traj.system_prompt:
        msgs.append({"role": "system", "content": traj.system_prompt})
    msgs.append({"role": "user", "content": traj.user_prompt})
    for step in traj.steps:
        msgs.extend(step_messages(step))
    return msgs


def to_chat_roles(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Chat templates know system/user/assistant only: interpreter messages go in as user turns."""
    return [{"role": "user" if m["role"] == "interpreter" else m["role"], "content": m["content"]} for m in messages]
