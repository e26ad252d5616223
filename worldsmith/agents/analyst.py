"""The analyst agent's pieces: prompts, one think/act decision, answer-format checks, observations.

Small typed functions; the control flow between them lives in graphs/analyst.py. Every model-facing string comes
from a named template in worldsmith/prompts/ (the ids below), so a trajectory can record which version built a turn.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from worldsmith.agents.answer_guards import DataFacts, documented_columns
from worldsmith.agents.line_fixes import assigned_back, parenthesized, refiltered
from worldsmith.core.schemas import Action
from worldsmith.prompts import template, versions  # noqa: F401  (versions: re-exported for callers)
from worldsmith.tools.files.names import documented_spelling
from worldsmith.tools.grammar import (ACTION_STOP_SEQUENCES, ParsedTurn, close_action, parse_turn_lenient,
                                      render_observation, render_turn, to_chat_roles)
from worldsmith.core.grading import decimals_by_name, extract_answers, parse_number

SYSTEM_TEMPLATE = "analyst_system.md"
EXAMPLE_TEMPLATE = "analyst_example.json"
USER_TEMPLATE = "analyst_user.md"
HINTS_TEMPLATE = "analyst_hints.md"
FEEDBACK_TEMPLATE = "analyst_feedback.md"
PRELUDE_TEMPLATE = "analyst_prelude.py.txt"

_NAME_RE = re.compile(r"@(\w+)\[")


def feedback(kind: str, **fields: str) -> str:
    """A harness message to the model (a section of analyst_feedback.md)."""
    return template(FEEDBACK_TEMPLATE).section(kind, **fields)


def system_prompt(extra: str | None = None) -> str:
    """The analyst's system prompt. It is the same for every task (task-specific notes go in the user turn), so
    the system prompt and the worked example form a prefix the model's KV cache reuses across questions."""
    parts = [template(SYSTEM_TEMPLATE).text.strip()]
    if extra:
        parts.append(extra.strip())
    return "\n\n".join(parts)


#: Run once in every fresh analyst sandbox, so the names the system prompt promises exist (pd, np, plt, and the
#: `profile()` helper that prints the column statistics the compact file profile leaves out).
PRELUDE = template(PRELUDE_TEMPLATE).text


def files_profile(files: list[str], max_chars: int, only: Collection[str] = ()) -> str:
    """The file list of the task turn: each input's exact load call, schema and a few rows, as the sandbox
    mounts it (by base name, and under a plain alias when the name is awkward). `only`: file base names; when
    some table's file is one of them, only those tables are shown (a goal naming files inside a folder input)."""
    return task_files(files, max_chars, only=only)[0]


def task_files(files: list[str], max_chars: int, request: str = "", only: Collection[str] = ()) -> tuple[str, str]:
    """The task turn's file list (`max_chars` for up to two tables, more for more: MAX_BUDGET_SCALE), and its
    notes placing the names the request writes in backticks: which tables hold each, a quoted value a column
    lacks, what the documents say about them (tools/files/names.py; empty for one table and no documents)."""
    profile, notes, _, _ = _task_files(files, max_chars, request, only)
    return profile, notes


def _task_files(files: list[str], max_chars: int, request: str = "",
                only: Collection[str] = ()) -> tuple[str, str, Any, Any]:
    """`task_files` plus the join the request asks for (tools/files/join_code.plan_join; None when it names no two
    linked tables) and the unit changes its notes document that `df` is brought back from
    (tools/files/unit_code.plan_units; None when none applies)."""
    if not files:
        return "(no files)", "", None, None
    from worldsmith.tools.files.join_code import plan_join
    from worldsmith.tools.files.names import request_notes
    from worldsmith.tools.files.unit_code import plan_units

    ws = mounted_profile(files, only)
    budget = int(max_chars * min(MAX_BUDGET_SCALE, max(1.0, len(ws.tables) / 2)))  # more tables, more room
    join = plan_join(ws, request) if request else None
    units = plan_units(ws, [Path(f) for f in files], request, join) if request else None
    return ws.to_prompt(max_chars=budget, compact=True), "\n".join(request_notes(request, ws)), join, units


def mounted_profile(files: list[str], only: Collection[str] = ()) -> Any:
    """The workspace profile of `files` as the sandbox mounts them; `only`: file base names — when some table's
    file is one of them, only those tables (and the joins between them) are kept."""
    from pathlib import Path

    from worldsmith.tools.files import profile_workspace

    ws = profile_workspace([Path(f) for f in files], as_mounted=True)
    if named := [t for t in ws.tables if Path(t.file).name in set(only)]:
        ws.tables = named
        ws.joins = [j for j in ws.joins if {j.left.file, j.right.file} <= {t.file for t in named}]
    return ws


#: The file list's budget grows with the number of tables past two (half a budget a table), up to this factor:
#: a data room of seven tables otherwise loses every column's values to the budget.
MAX_BUDGET_SCALE = 1.6


@dataclass(frozen=True)
class Opening:
    """The task turn that opens a question, and `setup`: code the session runs after the prelude and before the
    model's first cell ('' when none) — the join of the two tables the question names, and the unit changes a note
    documents brought back (tools/files/unit_code.py; with no join, after loading the one table asked about).
    Shown as a cell to copy, the 1.5B model copied it and ran on in the same cell past the turn's token budget (4
    of 14 join questions of generated-v1's several-files stratum at 4e12a29, and again at 5a930c0); run for it,
    `df` is there and the model's first cell is its own analysis. Shown, it is still copied into the first cell
    (19 of 25 setup questions at 6a8997e, 14 of the 25 solved); said in words instead (f099799), the model wrote a
    load of its own into every cell of the first 7 setup questions at 3750f22, losing the join, and solved none."""

    turn: str
    setup: str = ""


def opening(question: str, files: list[str], profile_chars: int, names: list[str], hints: str = "") -> Opening:
    """The task turn that opens a question: the file list, the question, the notes placing its names, the join
    that has run, the hints and the answer format. The analyst graph and RL rollouts (training/rl_data.py,
    training/rollout.py) both open with it and run its `setup` in the session."""
    profile, notes, join, units = _task_files(files, profile_chars, question)
    setup = "\n".join(code for code in (join.code(cell=True) if join is not None else "",
                                        units.code() if units is not None else "") if code)
    if units is None:
        return Opening(user_prompt(question, profile, names, hints, notes, setup), setup)
    # the notes no longer quote a change the code made good: quoted, it read as one still to make
    notes = "\n".join(line for line in notes.splitlines() if not any(line.endswith(f.item) for f in units.fixes))
    return Opening(user_prompt(question, profile, names, hints, notes, setup, units.words(), units.table), setup)


def opening_turn(question: str, files: list[str], profile_chars: int, names: list[str], hints: str = "") -> str:
    """`opening(...).turn`."""
    return opening(question, files, profile_chars, names, hints).turn


def few_shot_messages() -> list[dict[str, str]]:
    """A worked example as real conversation turns, rendered by the one grammar module."""
    out: list[dict[str, str]] = []
    for turn in json.loads(template(EXAMPLE_TEMPLATE).text):
        if turn["role"] == "assistant":
            kind = "code" if "code" in turn else "answer"
            out.append({"role": "assistant", "content": render_turn(turn["thought"], Action(kind=kind, content=turn[kind]))})
        elif turn["role"] == "interpreter":
            out.append({"role": "interpreter", "content": render_observation(turn["output"])})
        else:
            out.append({"role": turn["role"], "content": turn["content"]})
    return out


def category_hints(categories: list[str]) -> str:
    sections = template(HINTS_TEMPLATE).sections
    picked = []
    for cat in categories:
        body = sections.get(cat.strip().lower())
        if body and body not in picked:
            picked.append(body)
    return "\n".join(picked)


#: analyst_hints.md sections a question asks for by its words, for a task none of whose categories has a section
#: (world and evolution tasks, `ask` requests): the methods' own vocabulary, never a dataset's names
_METHOD_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("regression", re.compile(r"\b(?:slope|least[- ]squares|regress(?:ion|ed)?|OLS)\b", re.IGNORECASE)),
    ("lagged values", re.compile(r"\blag(?:ged|s)?\b", re.IGNORECASE)),
    ("correlation analysis", re.compile(r"\bcorrelat", re.IGNORECASE)),
    ("repeated records", re.compile(r"\b(?:counted once|repeated (?:copies|records|rows)|duplicates?)\b",
                                    re.IGNORECASE)),
    ("shares and percentages", re.compile(r"\b(?:percent(?:age)?s?|percentage points?)\b|%", re.IGNORECASE)),
    ("group comparison", re.compile(r"\b(?:minus|gap|difference (?:between|in))\b", re.IGNORECASE)),
    ("time windows", re.compile(r"\b(?:on or after|before|after|from|until)\s+\d{4}-\d{2}-\d{2}\b", re.IGNORECASE)),
)


def method_hints(categories: list[str], question: str) -> str:
    """The method notes of a task turn: the sections its categories name (DABench's concepts), else the sections
    its question's words ask for. generated-v1's world tasks carry categories such as 'cause' that name no
    section, so they got none: at eb32daa four of its least-squares slopes were a ratio or a mean of `diff()`s, its
    lagged correlations were never lagged, and a share asked in percentage points came back as 0.2."""
    return category_hints(categories) or "\n".join(
        template(HINTS_TEMPLATE).section(name) for name, words in _METHOD_WORDS if words.search(question))


def required_names(instruction: str, declared: list[str] | None = None) -> list[str]:
    """Answer names the deliverable needs: declared ones, else every `@name[` the instruction shows."""
    if declared:
        return list(dict.fromkeys(declared))
    return list(dict.fromkeys(_NAME_RE.findall(instruction)))


def user_prompt(question: str, profile_text: str, names: list[str], hints: str = "", notes: str = "",
                join: str = "", units: str = "", table: str = "") -> str:
    """The task turn. The file list comes first and the question after it: questions on the same files then
    share the whole prompt up to the question, which the model's prefix cache reuses. `notes`: where the
    question's names are in the files (`task_files`); `join`: code joining the two tables the question names
    (written from their profiles: each table's load call, the key made alike on both sides, a many-to-one merge
    into `df`), which the session has run (`Opening.setup`). In the several-files stratum of generated-v1, 17 of
    27 answers came after no cell that touched the data had run; the executor, given the same code, verified the
    first cross-table finding. With `table` (what it loaded), `join` is the code that loaded the one table the
    question asks about into `df`; `units`: the clause saying which unit changes that code made good."""
    t = template(USER_TEMPLATE)
    parts = [t.section("files", profile=profile_text.strip())] if profile_text else []
    parts.append(t.section("task", question=question.strip()))
    if notes.strip():
        parts.append(t.section("names", notes=notes.strip()))
    if join.strip():
        parts.append(t.section("loaded", table=table, units=units, code=join.strip()) if table else
                     t.section("join", code=join.strip(), units=units))
    if hints:
        parts.append(t.section("method notes", hints=hints.strip()))
    if names:
        parts.append(t.section("answer format", tags=" ".join(f"@{n}[value]" for n in names)))
    parts.append(t.section("start"))
    return "\n\n".join(parts)


@dataclass
class Decision:
    """One parsed assistant turn and the model call that produced it."""

    turn: ParsedTurn
    raw: str  # the completion with a stop-consumed closing tag put back (what the parser read)
    completion: Any  # llm.types.Completion: text as returned, request_messages, sampling, usage, ...

    @property
    def reply(self) -> str:
        """The assistant message this turn adds to the conversation: the canonical form of a parsed turn, the raw
        text of a void one (so the model sees what it wrote, and the feedback says why it could not be read)."""
        return render_turn(self.turn.thought, self.turn.action) if self.turn.action is not None else self.raw


async def decide(llm: Any, messages: list[dict[str, str]], *, role: str = "agent", max_tokens: int | None = None,
                 temperature: float | None = None, sample_index: int = 0) -> Decision:
    """One assistant turn: call the model (stopping before any self-written interpreter output) and parse it."""
    kwargs: dict[str, Any] = {"role": role, "stop": list(ACTION_STOP_SEQUENCES), "max_tokens": max_tokens}
    if temperature is not None:
        kwargs["temperature"] = temperature
    if sample_index:
        kwargs["sample_index"] = sample_index
    completion = await llm.acomplete(to_chat_roles(messages), **kwargs)
    raw = close_action(completion.text) if completion.finish_reason == "stop" else completion.text
    return Decision(turn=parse_turn_lenient(raw), raw=raw, completion=completion)


#: a span of 12 to 300 characters written four or more times in a row, running to the end of the reply (a last,
#: partial copy allowed): the degenerate loop a small model falls into under greedy decoding
_LOOP = re.compile(r"(.{12,300}?)\1{3,}(.{0,300})\Z", re.S)
#: a looping reply is sampled again this many times, at this temperature (greedy decoding would loop again)
LOOP_RESAMPLES = 2
LOOP_TEMPERATURE = 0.7


def loop_span(text: str) -> tuple[int, int] | None:
    """(start, length of the repeated unit) of the loop a reply ends in, or None. The reply must end in the loop:
    a table or a script with a few like lines is not one."""
    m = _LOOP.search(text)
    if m is None or not m.group(1).strip() or not m.group(2) == m.group(1)[:len(m.group(2))]:
        return None
    return m.start(), len(m.group(1))


def looping(d: Decision) -> str | None:
    """Why a turn is a degenerate repetition loop (it ran to the token budget repeating one span), or None. The
    1.5B model, told its script printed no RESULT line, wrote "The script is running and the results are being
    printed correctly." until its budget ran out, three turns in a row, and the dual-evidence solver was lost."""
    if d.completion.finish_reason != "length" or (span := loop_span(d.raw)) is None:
        return None
    start, unit = span
    return (f"the reply repeats a {unit}-character span from character {start} until its token budget ran out "
            f"({(len(d.raw) - start) // unit} times)")


def loop_cut(reply: str) -> str:
    """A looping reply as it goes back into the conversation: up to the loop's first copy and a note. Sent back
    whole, the next turn went on repeating it."""
    span = loop_span(reply)
    if span is None:
        return reply
    start, unit = span
    return reply[:start + unit].rstrip() + "\n" + feedback("loop cut")


async def unlooped(d: Decision, again: Callable[[int], Awaitable[Decision]],
                   resamples: int = LOOP_RESAMPLES) -> tuple[Decision, list[tuple[Decision, str]]]:
    """A turn that ends in a repetition loop replaced by `await again(k)` (the k-th new sample of the same turn) up
    to `resamples` times. Returns the turn kept and the dropped ones with why; a caller records the dropped calls
    (they cost tokens) and never puts them in the conversation."""
    dropped: list[tuple[Decision, str]] = []
    while len(dropped) < resamples and (why := looping(d)):
        dropped.append((d, why))
        d = await again(len(dropped))
    return d, dropped


def loop_temperature(temperature: float | None) -> float:
    """The temperature a looping turn is sampled again at: greedy decoding would loop again."""
    return max(temperature or 0.0, LOOP_TEMPERATURE)


async def decide_unlooped(llm: Any, messages: list[dict[str, str]], *, role: str = "agent",
                          temperature: float | None = None,
                          sample_index: int = 0) -> tuple[Decision, list[tuple[Decision, str]]]:
    """`decide`, with a turn that ends in a repetition loop sampled again (`unlooped`)."""
    first = await decide(llm, messages, role=role, temperature=temperature, sample_index=sample_index)
    return await unlooped(first, lambda k: decide(llm, messages, role=role, temperature=loop_temperature(temperature),
                                                  sample_index=100 + 10 * sample_index + k))


_PLACEHOLDER = re.compile(r"\be\.g\.|\bvalue in\b|^\s*value\s*$", re.I)


def answer_problems(answer: str, instruction: str, names: list[str]) -> list[str]:
    """What is wrong with a final answer's form (never its content): missing tags, empty values, rounding."""
    if not names:
        return []
    got = extract_answers(answer)
    problems = [f"@{n}[value] is missing" for n in names if n not in got]
    problems += [f"@{n}[] is empty" for n in names if n in got and not got[n].strip()]
    # the answer line's placeholder copied into the brackets: "@x[61.4 in points, e.g. 12.3]" grades as no number
    problems += [f"@{n}[{got[n]}] repeats the placeholder's words; put only the value inside the brackets"
                 for n in names if n in got and _PLACEHOLDER.search(got[n])]
    return problems + rounding_problems(answer, instruction, names)


def rounding_problems(answer: str, instruction: str, names: list[str]) -> list[str]:
    """The `answer_problems` that are a number with more decimals than its format clause asks for."""
    got = extract_answers(answer) if names else {}
    decimals = decimals_by_name(instruction, names)  # per sub-answer: each format clause asks for its own
    problems = []
    for n in names:
        v, places = got.get(n, ""), decimals.get(n)
        if places is not None and parse_number(v) is not None and "." in v and len(v.split(".")[-1].rstrip("%")) > places:
            problems.append(f"@{n}[{v}] has more than the {places} decimal places requested")
    return problems


def _rewrite_tags(answer: str, names: list[str], rewrite: Callable[[str, str], str | None]) -> str | None:
    """The answer with each requested @name[value] whose `rewrite(name, value)` gives a new value replaced by it, or
    None when none changed."""
    changed = False

    def fix(m: re.Match[str]) -> str:
        nonlocal changed
        new = rewrite(m.group(1), m.group(2)) if m.group(1) in names else None
        if new is None:
            return m.group(0)
        changed = True
        return f"@{m.group(1)}[{new}]"

    fixed = re.sub(r"@(\w+)\[([^\]]*)\]", fix, answer)
    return fixed if changed else None


def round_to_request(answer: str, instruction: str, names: list[str]) -> str | None:
    """The answer with each requested @name[number] rounded to the decimals the instruction asks for, or None when
    nothing needs it. Used once the model has ignored the rounding feedback: it changes the form of the model's own
    numbers, never their content."""
    decimals = decimals_by_name(instruction, names)
    if not decimals:
        return None

    def rounded(name: str, value: str) -> str | None:
        number, places = parse_number(value), decimals.get(name)
        if places is None or number is None or "." not in value or len(value.split(".")[-1]) <= places:
            return None
        return f"{number:.{places}f}"

    return _rewrite_tags(answer, names, rounded)


_LEADING_NUMBER = re.compile(r"^\s*(-?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?%?)")


def strip_placeholder(answer: str, names: list[str]) -> str | None:
    """The answer with each requested @name[value …placeholder words…] cut to the number it starts with
    (@x[61.4 in points, e.g. 12.3] → @x[61.4]), or None when nothing needs it. Used once the model has ignored the
    placeholder feedback: the number is the model's own, only the copied words go."""

    def cut(_: str, value: str) -> str | None:
        lead = _LEADING_NUMBER.match(value)
        return lead.group(1) if lead is not None and _PLACEHOLDER.search(value) else None

    return _rewrite_tags(answer, names, cut)


def format_feedback(problems: list[str], names: list[str]) -> str:
    return feedback("format", problems="; ".join(problems), tags=" ".join(f"@{n}[value]" for n in names))


def void_feedback(error: str | None) -> str:
    return feedback("void", error=error or "no action found")


#: quoted keys in a KeyError message: "'fare'", "['fare', 'Age'] not in index", "None of [Index(['fare'], ...)]"
_QUOTED = re.compile(r"'([^'\n]{1,80})'")


def keyerror_keys(message: str) -> list[str]:
    """The quoted keys a KeyError message names, once each, in order ("'fare'", "['fare', 'Age'] not in index",
    "None of [Index(['fare'], ...)]"; str(KeyError) of a message with quotes in it is quoted once more)."""
    if len(message) > 1 and message[0] == message[-1] == '"':
        message = message[1:-1]
    return list(dict.fromkeys(m.group(1) for m in _QUOTED.finditer(message)))


def missing_columns(message: str, columns: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(key, the data's columns it most likely meant) for every key a KeyError names that is not a column but is
    close to one: the same letters in another case first, then near spellings. Keys near no column give nothing,
    so a dict lookup or a wrong file is left to the error itself."""
    known = list(dict.fromkeys(columns))
    lowered: dict[str, list[str]] = {}
    for c in known:
        lowered.setdefault(c.casefold(), []).append(c)
    out: list[tuple[str, list[str]]] = []
    for key in keyerror_keys(message):
        if key in known:
            continue
        same_case = lowered.get(key.casefold())
        if same_case:
            out.append((key, same_case))
            continue
        near = difflib.get_close_matches(key.casefold(), list(lowered), n=3, cutoff=0.75)
        if near:
            out.append((key, [c for n in near for c in lowered[n]]))
    return out


def columns_elsewhere(message: str, tables: Mapping[str, Sequence[str]]) -> list[str]:
    """For every key a KeyError names that is a column of some input tables but not of others: which tables have
    it and which lack it (with their columns), in words — the model looked it up in a table that lacks it (a merge
    on a key only one side has, say). Nothing with fewer than two tables, or for keys no table has."""
    if len(tables) < 2:
        return []
    out: list[str] = []
    for key in keyerror_keys(message):
        having = [t for t, cols in tables.items() if key in cols]
        lacking = [t for t, cols in tables.items() if key not in cols]
        if having and lacking:
            out.append(f"{key!r} is a column of {', '.join(having)} only; " + "; ".join(
                f"{t} has {', '.join(tables[t])}" for t in lacking))
    return out


#: what an empty or unmatched merge prints: NaN, an empty frame, a (0, n) shape
_EMPTY_RESULT = re.compile(r"\b(?:nan|NaN|NaT)\b|Empty DataFrame|Series\(\[\]|\(0, \d+\)")
#: errors numpy/pandas/scipy raise on no rows (np.polyfit: "expected non-empty vector for x")
_EMPTY_ERROR = re.compile(r"non-empty|zero-size array|empty (?:vector|array|sequence|DataFrame|Series)|of an empty")
_MERGE_CALL = re.compile(r"\.merge\(|\bpd\.merge\(|\.join\(")


def empty_merge(code: str, stdout: str, error: Any = None) -> bool:
    """A cell that merges tables without rebuilding ids (no `extract`) and shows what an unmatched merge gives:
    it prints NaN, an empty frame or no rows, or it failed on having no rows (`error`: the cell's ExecError).
    Worth the data facts, to see whether its key is spelled differently."""
    if not _MERGE_CALL.search(code) or "extract(" in code:
        return False
    if error is not None:
        return bool(_EMPTY_ERROR.search(f"{error.type}: {error.message}"))
    return bool(_EMPTY_RESULT.search(stdout))


def respelled_merges(code: str, stdout: str, respelled: Mapping[str, str], error: Any = None) -> list[str]:
    """The id columns an `empty_merge` cell names that the inputs spell differently (DataFacts.respelled)."""
    if not respelled or not empty_merge(code, stdout, error):
        return []
    return [c for c in respelled if re.search(rf"""(['"]){re.escape(c)}\1""", code)]


#: what pandas raises for `df[df.a > 1 & df.b == 2]` (& binds before the comparisons) or `and`/`or` on Series
_BOOL_COMBINE = re.compile(r"unsupported operand type\(s\) for [&|]|'r?(?:and|or)_'"
                           r"|truth value of a (?:Series|DataFrame) is ambiguous")


def bool_combine_error(code: str, error: Any) -> bool:
    """A failed cell that combined conditions with &, |, `and` or `or` and got pandas' precedence/truth error."""
    return (error is not None and bool(_BOOL_COMBINE.search(f"{error.type}: {error.message}"))
            and bool(re.search(r"[&|]|\band\b|\bor\b", code)))


#: what pandas raises for `.dt` on a column of text (dates read from CSV/JSON are strings until parsed)
_TEXT_DATES = re.compile(r"Can only use \.dt accessor with datetimelike values")
#: a date method called on text: a column of dates never parsed, or a loop over a DataFrame's `.items()`, which
#: walks its column names (v14's solver looped over a one-column frame of monthly means and called `.strftime`)
_TEXT_NOT_DATE = re.compile(r"'str' object has no attribute '(?:strftime|year|month|day|to_period|date|weekday|"
                            r"quarter|isoformat)'")
#: a column of dates written as text compared with a date (`df["date"] >= pd.Timestamp("2024-02-01")`): at f4ca853
#: the 1.5B model then loaded the file again to parse the column, undoing the session's unit change
_TEXT_VS_DATE = re.compile(r"Invalid comparison between dtype=(?:str|object|string)\S* and (?:Timestamp|datetime)"
                           r"|not supported between instances of '(?:str|Timestamp|datetime\.datetime)' and "
                           r"'(?:Timestamp|datetime\.datetime|str)'")
#: what pandas raises for `.resample()` on an index of text (dates never parsed or never made the index) or for
#: the month frequency "M", which pandas 3 spells "ME" (six failed evolution scripts)
_RESAMPLE = re.compile(r"Only valid with DatetimeIndex, TimedeltaIndex or PeriodIndex|Invalid frequency: M\b")
#: what pd.to_datetime raises when a format= does not fit every value (files that write dates in other ways)
_DATE_FORMAT = re.compile(r"time data .{0,80}? (?:doesn't|does not) match format|unconverted data remains")
#: what pandas raises when a text column reaches a numeric operation (`df.corr()` over a frame with an id column,
#: a mean of every column, a group mean over text columns), in pandas 3 and in earlier versions
_TEXT_IN_NUMBERS = re.compile(r"could not convert string to float|Cannot perform reduction '\w+' with string dtype"
                              r"|dtype '(?:str|object|string)' does not support operation|agg function failed"
                              r"|Could not convert .{0,200} to numeric", re.IGNORECASE)
#: pandas 3's warning for `df["col"].fillna(v, inplace=True)`, which changes a copy and leaves `df` as it was
_CHAINED_INPLACE = re.compile(r"ChainedAssignmentError|chained assignment using an inplace method")
#: a Series or DataFrame method called on one number: a mean or median over a whole column is a scalar (v14's
#: validator check took `df["amount"].median()` and looped over its `.items()` to compare months)
_ONE_NUMBER = re.compile(r"'(?:numpy\.)?(?:float|int)(?:64|32)?' object (?:has no attribute '\w+'"
                         r"|is not (?:iterable|subscriptable))|invalid index to scalar variable")
#: `.str` on a column pandas already read as numbers (v16's check cleaned `amount` with `.str.replace(",", "")`)
_STR_ON_NUMBERS = re.compile(r"Can only use \.str accessor with string values, not (?:floating|integer|boolean)")
#: what scikit-learn raises when a classification metric gets a regressor's continuous predictions
_CONTINUOUS_LABELS = re.compile(r"Classification metrics can't handle a mix of \w+ and continuous")
#: error patterns and the feedback section each one gets, in the order the notes are written
_ERROR_NOTES = ((_TEXT_DATES, "text dates"), (_DATE_FORMAT, "date formats"), (_TEXT_NOT_DATE, "text not a date"),
                (_TEXT_VS_DATE, "text compared with a date"), (_RESAMPLE, "resample"),
                (_TEXT_IN_NUMBERS, "text in numbers"), (_ONE_NUMBER, "one number"),
                (_STR_ON_NUMBERS, "str on numbers"), (_CONTINUOUS_LABELS, "continuous labels"))
#: a frame indexed by a list of its own columns (`df[[df["a"], df["b"]]]` for `df[["a", "b"]]`): pandas looks the
#: columns' values up as column names. With a table loaded before its first cell, the 1.5B model wrote it for a
#: slope's two columns in 2 of 9 generated questions and wrote the failing cell again until its context was full.
_SERIES_LIST = re.compile(r"\b(?P<frame>[A-Za-z_]\w*)\[\[\s*(?P=frame)\s*\[(?P<inner>[^\n]*?)\]\s*\]")
#: a call given an argument it does not take (`s.corr(t, ddof=0)`: three embedded validator checks crashed on it)
UNKNOWN_ARGUMENT = re.compile(r"(?P<call>[\w.]+)\(\) got an unexpected keyword argument '(?P<name>\w+)'")
#: a write into the read-only inputs (v18's synthesis solver made `data/metrics` three times, so its target had
#: fewer than two solver runs and was dropped)
_READ_ONLY = re.compile(r"\[Errno (?:30|13)\] (?:Read-only file system|Permission denied): '(?P<path>[^'\n]+)'")


def pandas_notes(code: str, error: Any) -> str:
    """Notes for pandas slips a small model repeats as written, however often the error comes back: conditions
    combined without parentheses (or with `and`/`or`), `.dt` on a column of text dates, a `format=` that does
    not fit every date (tables that write dates differently), a date method called on text, `.resample()` on
    text dates or with pandas 3's retired "M", a text column in a numeric operation (the 1.5B model ran `df.corr()`
    over a joined frame with its id columns four times), a Series method on one number, `.str` on a column of
    numbers, a classification metric given a regressor's continuous predictions, an argument a call does not
    take, columns picked by a list of the frame's own columns (`df[[df["a"], df["b"]]]`), and a file written into
    the read-only inputs' folder. '' otherwise."""
    text = ""
    if bool_combine_error(code, error):
        text += "\n" + feedback("combined conditions")
        if lines := parenthesized(code):
            text += "\n" + feedback("conditions rewritten", lines="\n".join(lines))
    if error is None:
        return text
    raised = f"{error.type}: {error.message}"
    text += "".join("\n" + feedback(section) for pattern, section in _ERROR_NOTES if pattern.search(raised))
    if (error.type == "KeyError" or "unhashable type: 'Series'" in raised) and (m := _SERIES_LIST.search(code)):
        frame = m.group("frame")  # every quoted name in the brackets: df[[df["a"], "b"]] too (a TypeError then)
        names = re.findall(r"""(['"])([^'"\n]+)\1""", m.group(0))
        if names:
            text += "\n" + feedback("columns by name", frame=frame,
                                    names=", ".join(f'"{name}"' for _, name in names))
    if m := UNKNOWN_ARGUMENT.search(raised):
        text += "\n" + feedback("unknown argument", call=m.group("call"), name=m.group("name"))
    if m := _READ_ONLY.search(raised):
        path = m.group("path")
        text += "\n" + feedback("read-only inputs", path=path, name=Path(path.rstrip("/")).name or "out.csv")
    return text


#: a column compared with a text literal: df["col"] == "v", df.col != 'v', df["col"].isin(["a", "b"])
_LITERAL_CMP = re.compile(r"""(?:\[\s*(['"])(?P<col>[^'"\n]{1,64})\1\s*\]|\.(?P<attr>[A-Za-z_]\w*))\s*"""
                          r"""(?:[!=]=\s*(?P<q>['"])(?P<val>[^'"\n]{0,64})(?P=q)|\.isin\(\s*\[(?P<many>[^\]\n]{0,400})\])""")
_QUOTED_ITEM = re.compile(r"""(['"])([^'"\n]{0,64})\1""")


def compared_literals(code: str) -> list[tuple[str, str]]:
    """(column, text) for every column the code compares with a quoted text (==, != or .isin([...]))."""
    out: list[tuple[str, str]] = []
    for m in _LITERAL_CMP.finditer(code):
        col = m.group("col") or m.group("attr")
        texts = [m.group("val")] if m.group("val") is not None else [
            t for _, t in _QUOTED_ITEM.findall(m.group("many") or "")]
        out += [(col, t) for t in texts]
    return list(dict.fromkeys(out))


def unheld_values(code: str, values: Mapping[str, Sequence[str]],
                  documents: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """'text' is not a value of `col` (its values: …) for each quoted text the code compares a column with that
    the column, all of whose values the profile knows, does not hold (a label for the data's code, another case),
    and which value stands for it when a document item says so (`documents`: each document → its list items)."""
    out = []
    for col, text in compared_literals(code):
        known = values.get(col)
        if known and text not in known:
            shown = ", ".join(repr(v) for v in known[:8]) + (", …" if len(known) > 8 else "")
            if said := documented_spelling(text, known, documents or {}):
                out.append(feedback("unheld value spelled", text=repr(text), column=col, values=shown,
                                    file=said[1], code=repr(said[0])))
            else:
                out.append(feedback("unheld value", text=repr(text), column=col, values=shown))
    return out


#: a pandas reader called on a quoted path: pd.read_csv("data/x.xlsx", ...)
_READ_CALL = re.compile(r"\b(?:pd|pandas)\.(read_\w+)\(\s*[rf]?(['\"])(.+?)\2")


def wrong_readers(code: str, loads: dict[str, str], missing: str | None = None) -> list[str]:
    """The exact load call of every input file `code` reads with another pandas reader than its own (a workbook
    through read_csv, say), and of the file a FileNotFoundError could not find (`missing`) when an input by that
    name is mounted elsewhere (`orders.csv` for `data/orders.csv`: v14's dual-evidence solver read the task's files
    without their folder, three attempts): 'path → load call'. Files the profile does not know are left alone."""
    by_name = {PurePosixPath(k).name: v for k, v in loads.items()}
    out = []
    for m in _READ_CALL.finditer(code):
        func, path = m.group(1), m.group(3)
        want = loads.get(path) or loads.get(path.removeprefix("./")) or by_name.get(PurePosixPath(path).name)
        right = re.search(r"\bpd\.(read_\w+)\(", want or "")
        if right is not None and (right.group(1) != func or path == missing) and f"{path} → {want}" not in out:
            out.append(f"{path} → {want}")
    return out


def missing_file(error: Any) -> str | None:
    """The path a FileNotFoundError names ("[Errno 2] No such file or directory: 'orders.csv'"), else None."""
    if error is None or error.type != "FileNotFoundError":
        return None
    m = re.search(r"""No such file or directory: (['"])(.+?)\1""", error.message)
    return m.group(2) if m else None


#: the longest cell a note gives back whole, with its fix (characters)
_ECHO_MAX = 1500
#: the name a NameError reports: "name 'df' is not defined"
_UNDEFINED_NAME = re.compile(r"name '(\w+)' is not defined")
#: what a cell does with a DataFrame: look a column up, or call a frame's method or attribute
_FRAME_USE = (r"\b{name}\s*\[|\b{name}\.(?:loc|iloc|columns|dtypes|shape|head|tail|describe|info|groupby|"
              r"dropna|fillna|corr|mean|median|sum|count|value_counts|sort_values|merge|query|apply|plot|to_)")


def unloaded_input(code: str, error: Any, loads: dict[str, str]) -> str:
    """The note for a cell that never reached the task's files: a FileNotFoundError for a file that is not an input
    by any name (`people.csv` mostly, the few-shot example's file: Qwen2.5-Coder-0.5B read a file that does not
    exist in 8 of its first 12 DABench questions, several turns each), or a NameError for a DataFrame no cell has
    made yet (`df[...]` in a first cell). Both name the inputs' exact load calls; '' otherwise, and when the
    profile knows no load call."""
    calls = list(dict.fromkeys(loads.values()))
    if error is None or not calls:
        return ""
    path = missing_file(error)
    if path is not None and PurePosixPath(path).name not in {PurePosixPath(k).name for k in loads}:
        # one input: the cell again with its read of the missing file made the input's load (told only which
        # file to read, the 0.5B model ran the same cell four more times)
        read = re.compile(r"\b(?:pd|pandas)\.read_\w+\(\s*[rf]?(['\"])" + re.escape(path) + r"\1[^()]*\)")
        if len(calls) == 1 and len(code) <= _ECHO_MAX and read.search(code):
            return "\n" + feedback("no such file, one file", path=path, load=calls[0],
                                     lines=read.sub(lambda _: calls[0], code.strip()))
        return "\n" + feedback("no such file", path=path, loads="; ".join(calls))
    m = _UNDEFINED_NAME.search(error.message or "") if error.type == "NameError" else None
    if m and re.search(_FRAME_USE.format(name=re.escape(m.group(1))), code):
        name = m.group(1)
        if len(calls) == 1 and len(code) <= _ECHO_MAX:
            # the whole cell again, the load put first: told only to load, the 0.5B model replaced its first line
            # with the load and lost the column that line made
            return "\n" + feedback("not loaded, one file", name=name, lines=f"{name} = {calls[0]}\n{code.strip()}")
        loads = f"{name} = {calls[0]}" if len(calls) == 1 else "; ".join(calls)
        return "\n" + feedback("not loaded", name=name, loads=loads)
    return ""


def frame_columns_note(result: Any) -> str:
    """After a KeyError on a DataFrame: a line with that DataFrame's columns (the sandbox reports them), so a merge's
    `name_x` / `name_y` or a column dropped earlier is in plain sight; '' otherwise."""
    error = getattr(result, "error", None)
    columns = getattr(error, "columns", None) if error is not None else None
    if error is None or error.type != "KeyError" or columns is None:
        return ""
    return "\n" + feedback("frame columns", columns=", ".join(columns) or "(none)")


def observation_text(result: Any, max_chars: int, facts: DataFacts | None = None, *, code: str = "",
                     cut_off_at: int | None = None) -> str:
    """The interpreter output the model sees for one executed cell, with a nudge after errors: for a KeyError, the
    columns of the DataFrame it was looked up in (when the sandbox reports them), and with the inputs' `facts` the
    data's spelling of a near-miss column name, for a column only some tables have, those tables and the
    others' columns, and for a name no table has, the document items that name the column holding it; for a file
    read with the wrong pandas reader, its exact load call; for a merge on ids the tables spell differently that
    matched nothing, how to merge them; for a column compared with a text it does not hold, the values it has
    (:func:`unheld_values`); for pandas slips, how pandas wants them (:func:`pandas_notes`); for a cell cut off at
    the turn's token budget (`cut_off_at`), that it was cut."""
    text = result.to_observation(max_chars)
    error = getattr(result, "error", None)
    if cut_off_at is not None:
        text += "\n" + feedback("cut off", tokens=str(cut_off_at))
    text += observation_notes(result, facts or DataFacts(), code)
    if error:
        text += "\n" + feedback("code failed")
    elif not text.strip():
        text = feedback("no output")
    return text


def observation_notes(result: Any, facts: DataFacts, code: str) -> str:
    """The notes :func:`observation_text` puts after a cell's output, from the error, the code and the inputs'
    `facts` (the executor puts them after a script's output too); '' when none applies. A cell that ran can get
    one too: an in-place method on one column that pandas 3 applied to a copy gets its lines assigned back."""
    error = getattr(result, "error", None)
    text = frame_columns_note(result)
    if error and error.type == "KeyError" and (missing := missing_columns(error.message, facts.columns)):
        text += "\n" + feedback("missing column", names="; ".join(
            f"{key!r} → {' or '.join(repr(c) for c in near)}" for key, near in missing))
    if error and error.type == "KeyError" and (elsewhere := columns_elsewhere(error.message, facts.tables)):
        text += "\n" + feedback("column elsewhere", where=". ".join(elsewhere))
    if error and error.type == "KeyError" and (linked := [k for k in keyerror_keys(error.message) if k in facts.links]):
        key = linked[0]
        where = facts.links[key]
        text += "\n" + feedback("linked key", key=key, where=", ".join(f"`{c}` in {t}" for t, c in where),
                                 other=where[0][1])
    if error and error.type == "KeyError" and (said := [line for key in keyerror_keys(error.message)
                                                        if key not in facts.columns
                                                        for line in documented_columns(key, facts)]):
        text += "\n" + feedback("documented column", lines=" ".join(said))
    if merged := respelled_merges(code, getattr(result, "stdout", "") or "", facts.respelled, error):
        text += "\n" + feedback("respelled merge", columns=", ".join(map(repr, merged)), column=merged[0],
                                spellings="; ".join(facts.respelled[c] for c in merged))
    if unheld := unheld_values(code, facts.values, facts.documents):
        text += "\n" + feedback("value not held", values="; ".join(unheld))
    if error and (wrong := wrong_readers(code, facts.loads, missing_file(error))):
        text += "\n" + feedback("wrong reader", loads="; ".join(wrong))
    elif error:
        text += unloaded_input(code, error, facts.loads)
    if error and echoed_output(code):
        text += "\n" + feedback("echoed output")
    if cut := refiltered(code):
        text += "\n" + feedback("refiltered", frame=cut[0], column=cut[1])
    if _CHAINED_INPLACE.search(getattr(result, "stderr", "") or "") and (lines := assigned_back(code)):
        text += "\n" + feedback("assigned back", lines="\n".join(lines))
    text += pandas_notes(code, error)
    if not error and not text and nan_result(getattr(result, "stdout", "") or ""):
        calls = scipy_calls(code)
        text += "\n" + (feedback("nan from scipy", call=calls[-1].function, line=calls[-1].fix()) if calls
                        else feedback("nan result"))
    return text


#: a nan printed as a value: alone, after a space, `=`, `:`, `(` or `,`, and ending the line or followed by `,` or `)`
_NAN_VALUE = re.compile(r"(?:^|[\s=:(,])nan(?=$|[,)])", re.IGNORECASE)


def nan_result(stdout: str) -> bool:
    """Whether a cell's last printed line shows a nan value (`nan`, `gap: nan`, `r=nan, p=nan`, scipy's
    `PearsonRResult(statistic=np.float64(nan), …)`): at eb32daa, 11 of generated-v1's failed questions printed a
    nan result, most of them several times over, with nothing to say where the rows went."""
    last = (stdout.strip().splitlines() or [""])[-1]
    return _NAN_VALUE.search(last.strip()) is not None


#: scipy functions whose samples pair row by row: a blank in either column drops the row from both
_PAIRED = frozenset({"pearsonr", "spearmanr", "kendalltau", "linregress", "pointbiserialr", "ttest_rel", "wilcoxon"})


@dataclass(frozen=True)
class ScipyCall:
    """One `stats.<function>(…)` call of a cell: its positional arguments, and the frame and columns they are
    when every one is a column of one frame (`stats.pearsonr(df['a'], df['b'])`)."""

    function: str
    args: tuple[str, ...]
    frame: str = ""
    columns: tuple[str, ...] = ()

    def fix(self) -> str:
        """The call again on its data without blanks: one `dropna` over a paired call's columns together (so the
        rows stay aligned), each sample's own `.dropna()` otherwise."""
        if self.function in _PAIRED and self.frame:
            pick = ", ".join(f"d[{c!r}]" for c in self.columns)
            return f"d = {self.frame}[{list(self.columns)!r}].dropna()\nstats.{self.function}({pick})"
        if self.function in _PAIRED:
            return f'd = df[["x", "y"]].dropna()  # the columns the call uses\nstats.{self.function}(d["x"], d["y"])'
        samples = [f"*[g.dropna() for g in {a[1:]}]" if a.startswith("*") else
                   f"{a}.dropna()" if re.fullmatch(r"[\w.\[\]'\"]+", a) else f"({a}).dropna()" for a in self.args]
        return f"stats.{self.function}({', '.join(samples) or 'a.dropna(), b.dropna()'})"


def _column(arg: ast.expr) -> tuple[str, str] | None:
    """(frame, column) for an argument `df['a']`, `df['a'].values` or `df['a'].to_numpy()`; else None."""
    if isinstance(arg, ast.Call) and not arg.args and not arg.keywords and isinstance(arg.func, ast.Attribute) \
            and arg.func.attr == "to_numpy":
        arg = arg.func.value
    elif isinstance(arg, ast.Attribute) and arg.attr == "values":
        arg = arg.value
    if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) and isinstance(arg.slice, ast.Constant) \
            and isinstance(arg.slice.value, str):
        return arg.value.id, arg.slice.value
    return None


def scipy_calls(code: str) -> list[ScipyCall]:
    """The cell's `stats.<function>(…)` calls, in the order they appear (keyword arguments are not samples). scipy's
    functions propagate a blank (NaN) where pandas' `.corr()` and `.mean()` skip it, so a column with blanks gives
    a nan statistic and a nan p-value."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and isinstance(n.func.value, ast.Name) and n.func.value.id == "stats"]
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        args = tuple(ast.unparse(a) for a in node.args)
        cols = [c for a in node.args if (c := _column(a))]
        frames = {f for f, _ in cols}
        if cols and len(cols) == len(args) and len(frames) == 1:
            found.append(ScipyCall(node.func.attr, args, frames.pop(), tuple(dict.fromkeys(c for _, c in cols))))
        else:
            found.append(ScipyCall(node.func.attr, args))
    return found


#: the interpreter's output pasted back as a cell: a traceback's first line or a `File "<cell-N>", line K` frame
_ECHOED = re.compile(r'''^\s*(?:Traceback \(most recent call last\)|File "<cell-\d+>", line \d+)''')


def echoed_output(code: str) -> bool:
    """Whether a code cell is the interpreter's error output written back as code (v14's teacher pasted each
    SyntaxError back as its next cell, eight turns, each failing on the pasted `File "<cell-N>"` line)."""
    return _ECHOED.match(code) is not None


def repeat_nudge() -> str:
    """Appended to an observation when the model re-ran the same failing cell (weak models loop on it)."""
    return "\n" + feedback("repeat")


def same_output(before: str, now: str) -> bool:
    """Two observations equal up to the interpreter's cell numbering (tracebacks name <cell-N>) and the repeat note."""
    nudge = repeat_nudge()
    norm = lambda t: re.sub(r"<cell-\d+>", "<cell>", t.split(nudge)[0])  # noqa: E731
    return norm(before) == norm(now)


def restart_note(replay_error: str | None) -> str:
    """Appended to an observation after a timeout or crash restarted the interpreter and replayed earlier cells."""
    return "\n" + (feedback("restarted") if replay_error is None else feedback("restarted, replay failed", error=replay_error))


def last_turn_nudge() -> str:
    return feedback("last turn")
