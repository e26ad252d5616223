"""The executor agent: a goal → one complete script run in the sandbox → `analyze_node<i>.py`, an analysis log
and `execution_result.json` in the node's workdir.

The model writes the whole script in one turn of the project's action grammar (the analyst's `decide`), so the
file that is saved is exactly the code that produced the numbers and re-runs from the persisted inputs alone.
A failed script is sent back with its output (bounded); one that printed its numbers as labelled values
(`print("r:", r)`) is re-run with those prints as `RESULT name = value` lines (core/result_lines), and sent back
when that prints none either; then the model writes the result, whose conclusion may state only numbers the script printed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from worldsmith.agents.analyst import (LOOP_RESAMPLES, decide, decide_unlooped, echoed_output, files_profile,
                                       keyerror_keys, loop_cut, loop_temperature, mounted_profile, observation_notes)
from worldsmith.agents.answer_guards import profile_facts
from worldsmith.agents.asking import Outcome, ask, record_call, versions
from worldsmith.core.answer_spec import is_data_file
from worldsmith.core.claim_numbers import (
    misreadings,
    parse_results,
    named_numbers,
    printed_numbers,
    unbacked_numbers,
    unnumbered_comparisons,
)
from worldsmith.core.evolution_schemas import ExecutionResult, GoalPackage
from worldsmith.core.result_lines import as_result_lines
from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.core.store import atomic_write_text, write_model
from worldsmith.prompts import template
from worldsmith.tools.files.join_code import TEMPLATE as JOIN_TEMPLATE
from worldsmith.tools.files.join_code import plan_join
from worldsmith.tools.files.names import names_file
from worldsmith.tools.files.unit_code import plan_units
from worldsmith.tools.sandbox import ExecResult, open_sandbox

TEMPLATE = "evolve_executor.md"
RESULT_FILE = "execution_result.json"
LOG_FILE = "analysis_log.md"
OBSERVATION_CHARS = 4000
#: the compact file profile in the script prompt (load calls and columns first; rows are shed to fit)
PROFILE_CHARS = 3000


def named_inputs(goal: str, inputs: list[Path]) -> list[Path]:
    """The inputs a goal names by file name ("In orders_2024.csv, how …"); all of them when it names none."""
    named = [p for p in inputs if names_file(goal, p.name)]
    return named or list(inputs)


def named_files(goal: str, inputs: list[Path]) -> set[str]:
    """Base names of the files under folder inputs that the goal names (a task's `data/` folder holding
    orders_2023.csv for "… in the orders_2023.csv file")."""
    inside = {f.name for p in inputs if p.is_dir() for f in p.rglob("*") if f.is_file()}
    return {n for n in inside if names_file(goal, n)}


def files_read(script: str, inputs: list[Path]) -> list[str]:
    """Base names of the input files (and of the files inside folder inputs) that `script` names."""
    return sorted(named_files(script, inputs) | {p.name for p in inputs if p.is_file() and names_file(script, p.name)})


def _mentions(text: str, column: str) -> bool:
    """Whether `text` writes the column's name as a word (`income`, income; not 'incomes' nor `a.income`)."""
    return re.search(rf"(?<![\w.]){re.escape(column)}(?![\w.])", text, re.IGNORECASE) is not None


def linked_files(goal: str, inputs: list[Path], named: set[str]) -> dict[str, list[str]]:
    """Files the goal needs besides the ones it names (`named`, base names): a table linked to a named one by a key
    unique on its side (tools/files/join_code.lookup_join), or by an id and a date (a table of the same grain:
    `dated_join`), that alone holds a column the goal writes and no named
    table has, as {file base name: those columns}. v10's proposer wrote "the average income by region in the 2023
    orders using the `orders_2023.csv` file" for the director's "In crm.xlsx, what is the average income by
    region …": shown orders_2023.csv alone, every attempt of three such nodes failed on KeyError 'income' or
    'region'. Empty when the goal names no file, or every column it writes is in a named table."""
    if not named:
        return {}
    from worldsmith.tools.files.join_code import dated_join, lookup_join
    from worldsmith.tools.files.parts import table_parts

    ws = mounted_profile([str(p) for p in inputs])
    tables = {t.label: t for t in ws.tables}
    part_of = {label: i for i, g in enumerate(table_parts(ws.tables)) for label in g.labels}
    shown = [t for t in ws.tables if Path(t.file).name in named]
    have = {c.name.lower() for t in shown for c in t.columns}
    units = {part_of.get(t.label, t.label) for t in shown}  # a yearly part stands for its family's links
    pairs = []  # (a named table's side, the other side) of each link; both ways for tables of one grain
    for j in ws.joins:
        if (p := lookup_join(j, tables, part_of)) is not None:
            pairs.append((p.facts, p.lookup))
        elif (p := dated_join(j, tables, part_of)) is not None:
            pairs += [(p.facts, p.lookup), (p.lookup, p.facts)]
    linked = {other.label for own, other in pairs
              if part_of.get(own.label, own.label) in units and other not in shown}
    holders: dict[str, list[str]] = {}  # column the goal writes -> linked tables holding it
    for label in linked:
        for c in tables[label].columns:
            if c.name.lower() not in have and _mentions(goal, c.name):
                holders.setdefault(c.name, []).append(label)
    out: dict[str, list[str]] = {}
    for column, labels in holders.items():
        if len(labels) == 1:  # one linked table holds it: that is the one meant
            out.setdefault(Path(tables[labels[0]].file).name, []).append(column)
    return out


def _profile(inputs: list[Path], max_chars: int, only: set[str] | None = None) -> str:
    """The inputs' tables as the analyst sees them: the exact load call, the columns and a few rows of each
    (a small model that guesses column names writes scripts that fail). `only`: file base names to keep."""
    tables = [p for p in inputs if p.is_file() or p.is_dir()]
    if not tables:
        return "(none)"
    return files_profile([str(p) for p in tables], max_chars, only=only or ())


def script_name(node: str | int) -> str:
    return f"analyze_node{node}.py"


class Joined(BaseModel):
    """The join of the two tables a goal names, run once: its code (the top of the model's script), the columns
    of `df`, and how many of its rows (one per row of the many side) matched a row of the other table."""

    code: str
    columns: list[str]
    rows: int
    of: int
    units: str = ""  # the clause saying which unit changes a note documents the code made good (unit_code.py)
    table: str = ""  # no join: the one table the code loads (to bring a unit change back), its label


_JOIN_PROBE = '\nprint("__JOINED__", json.dumps([str(c) for c in df.columns]))\nprint("__ROWS__", len(df))'


#: a finding states a few numbers: a script printing more RESULT lines than this (v14's dual-evidence solver printed
#: 330 daily means for a monthly question, and its draft of the result ran past max_tokens) is sent back
MAX_RESULTS = 40


def script_notes(run: ExecResult, inputs: list[Path], script: str, needed: set[str] | None = None) -> str:
    """The analyst's notes on a failed cell, for a failed script (`analyst.observation_notes`, from the inputs'
    profile): a KeyError's near-miss spelling, the tables that hold a column, the names a key has in the tables
    that link to it, the column a document names for it, a merge on ids the tables spell differently, a text a
    column does not hold, the wrong reader, pandas slips; then the data files the script reads that its goal does
    not need (`unneeded_note`; `needed`: the goal's files), and then no advice on how to merge them.
    v14's node 6 merged the orders on `customer_id`, a column only the crm table has, three times."""
    facts = profile_facts([str(p) for p in inputs])
    unneeded = unneeded_note(script, inputs, needed or set()) if not run.ok else ""
    if unneeded:
        facts = dataclasses.replace(facts, links={})
    return observation_notes(run, facts, script) + unneeded


def unneeded_note(script: str, inputs: list[Path], needed: set[str]) -> str:
    """After a failed script: the data files it reads that its goal neither names nor needs (`needed`: the base
    names of the files the goal names and the linked ones it needs). v14's solver was asked for the mean income by
    region "from the crm.xlsx file", merged the three yearly order files into it on a column they do not have, and
    failed three times. '' when the goal names no file or the script reads none besides."""
    if not needed:
        return ""
    extra = [n for n in files_read(script, inputs) if n not in needed and is_data_file(n)]
    own = sorted(n for n in needed if is_data_file(n))
    if not extra or not own:
        return ""
    return "\n" + template(TEMPLATE).section("unneeded files", named=", ".join(own), extra=", ".join(extra),
                                              verb="is" if len(own) == 1 else "are")


def joined_note(joined: Joined | None, run: ExecResult) -> str:
    """After a KeyError on a column the join put at the top of the script holds: that `df` holds it. v14's node 4
    looked `amount` up in the crm table and `income` in the orders table, three attempts, the columns of the frame
    it had used shown each time, while `df` held both."""
    error = run.error
    if joined is None or joined.table or error is None or error.type != "KeyError":
        return ""
    here = set(getattr(error, "columns", None) or ())
    keys = [k for k in keyerror_keys(error.message) if k in joined.columns and k not in here]
    if not keys:
        return ""
    return "\n" + template(TEMPLATE).section(
        "joined key", names=", ".join(f"`{k}`" for k in keys), verb="is a column" if len(keys) == 1 else "are columns",
        example=f"df[{keys[0]!r}]")


async def prepare_join(goal: str, shown: list[Path], only: set[str], inputs: list[Path], sandbox: SandboxConfig,
                       timeout_s: float | None = None) -> tuple[Joined | None, str]:
    """The join `goal` asks for (tools/files/join_code.py), run once in the sandbox: (the join, "") when it
    matches rows, else (None, why not; "" when the goal asks for no join of two tables). A goal over one table
    holding a column a note says changed unit from a date gets that table loaded and the change brought back
    (tools/files/unit_code.py) the same way: v18's node 2 correlated `weight_kg` over kilograms and pounds mixed
    (the validator rejected it), as v17's verified correlation of `usage_hours` had mixed hours and minutes."""
    named = only or {p.name for p in shown if names_file(goal, p.name)}
    if not named:
        return None, ""
    # every table of the shown inputs, not only the named ones: the profile keeps a family's links (orders_2023.csv,
    # orders_2024.csv → crm) on its first part, so a goal naming the 2024 part alone had no link left to join by
    ws = await asyncio.to_thread(mounted_profile, [str(p) for p in shown])
    plan = plan_join(ws, goal) if len(named) >= 2 else None
    # a column a note says changed unit from a date is made one unit after the join or the load
    units = await asyncio.to_thread(plan_units, ws, inputs, goal, plan)
    if plan is not None:
        code = plan.code() + ("\n" + units.code() if units is not None else "")
        what = f"the join of {plan.facts_label} and {plan.lookup.label}"
    elif units is not None:
        code = template(JOIN_TEMPLATE).section("imports") + "\n\n" + units.code()
        what = f"the load of {units.table}"
    else:
        return None, ""
    with tempfile.TemporaryDirectory(prefix="join-") as tmp:
        run = await run_script(code + _JOIN_PROBE, inputs, sandbox, Path(tmp), timeout_s)
    columns = re.search(r"^__JOINED__ (.+)$", run.stdout, re.MULTILINE) if run.ok else None
    counts = re.search(r"^joined: (\d+) of (\d+) rows|^__ROWS__ (\d+)$", run.stdout, re.MULTILINE)
    if columns is None or counts is None:
        return None, f"{what} failed: " + run.to_observation(600)
    rows, of = (counts.group(1), counts.group(2)) if plan is not None else (counts.group(3), counts.group(3))
    if not int(rows):
        return None, f"{what} matched no rows" if plan is not None else f"{what} has no rows"
    return Joined(code=code, columns=json.loads(columns.group(1)), rows=int(rows), of=int(of),
                  units=units.words() if units is not None else "",
                  table=units.table if units is not None else ""), ""  # "" after a join: the join loaded `df`


def with_join(joined: Joined | None, script: str) -> str:
    """The script that runs: the join's code (or the table's load), then the model's script — unless the model
    wrote every line of it that makes `df` itself (it copied the code)."""
    if joined is None:
        return script
    made = {line.strip() for line in joined.code.splitlines() if line.startswith("df")}
    if made <= {line.strip() for line in script.splitlines()}:
        return script
    return joined.code.rstrip() + "\n\n" + script.lstrip("\n")


class ResultDraft(BaseModel):
    observations: list[str] = Field(description="what the output shows, one item each")
    methodology: str = Field(description="what the script did, briefly")
    conclusion: str = Field(min_length=1, description="the answer to the goal, numbers inline as printed")


async def run_script(code: str, inputs: list[Path], sandbox: SandboxConfig, workspace: Path,
                     timeout_s: float | None = None) -> ExecResult:
    """One script in a fresh sandbox session whose cwd is `workspace` (inputs read-only by base name)."""
    async with open_sandbox(sandbox, workspace=workspace, inputs=inputs) as sb:
        return await sb.run(code, timeout=timeout_s)


def partly_ran(run: ExecResult, joined: bool) -> bool:
    """A script that failed after printing something of its own (beyond the join's one line): v11's join node
    printed both segment means, then failed on an extra correlation it was not asked for, and lost the node by
    rewriting the whole script twice."""
    if run.ok or run.error is None or run.error.type == "PrecheckRejected":
        return False
    own = [line for line in run.stdout.splitlines() if line.strip() and not (joined and line.startswith("joined:"))]
    return bool(own)


def report_problems(draft: ResultDraft, stdout: str, goal: str = "") -> list[str]:
    """Numbers the conclusion states that the script did not print (numbers the goal itself states, years or
    thresholds, may be repeated), numbers it reads wrong (`claim_numbers.misreadings`), and comparisons it makes
    without a number (`claim_numbers.unnumbered_comparisons`)."""
    bad = unbacked_numbers(draft.conclusion, printed_numbers(stdout) + named_numbers(goal))
    bare = [f"the conclusion compares without a number ({s!r}): state the printed numbers it compares, or leave "
            "the comparison out when the output did not print both sides"
            for s in unnumbered_comparisons(draft.conclusion)]
    return ([f"the conclusion states {', '.join(bad)}, which the script did not print; use the printed numbers"]
            if bad else []) + misreadings(draft.conclusion, parse_results(stdout)) + bare


#: a line of prose: words with at most light punctuation, no code characters
_WORD = re.compile(r"^[A-Za-z][A-Za-z'’-]*[,.;:!?]?$")


def prose_script(code: str) -> bool:
    """True when `code` is not Python but a description in words: it does not compile and its first line is a
    sentence (six words or more, at least four in five of them plain words). A script with one slip compiles no
    better, but its first line is code."""
    try:
        compile(code, "<script>", "exec")
        return False
    except (SyntaxError, ValueError):
        pass
    first = next((line.strip() for line in code.splitlines() if line.strip()), "")
    words = first.split()
    return len(words) >= 6 and sum(bool(_WORD.match(w)) for w in words) >= 0.8 * len(words)


def not_code(code: str) -> str | None:
    """What a <code> block holds instead of a script (a description in words, the interpreter's output pasted
    back), or None when it is code."""
    if prose_script(code):
        return "a description in words"
    return "the interpreter's output" if echoed_output(code) else None


class _Log:
    """The analysis log, written as Markdown: every draft, its output and what was decided."""

    def __init__(self, goal: str) -> None:
        self.parts = [f"# Analysis log\n\nGoal: {goal}\n"]

    def add(self, heading: str, body: str, fence: str | None = "") -> None:
        """A fenced section (fence = the code language), or `body` as it is when fence is None."""
        self.parts.append(f"## {heading}\n\n```{fence}\n{body.rstrip()}\n```\n" if fence is not None else body)

    def text(self) -> str:
        return "\n".join(self.parts)


async def execute(llm: Any, goal: GoalPackage, *, node: str | int, workdir: Path, inputs: list[Path],
                  sandbox: SandboxConfig, role: str = "agent", max_script_attempts: int = 3, report_retries: int = 2,
                  timeout_s: float | None = None, feedback: str | None = None,
                  profile_chars: int = PROFILE_CHARS, temperature: float | None = None,
                  scope: str | None = None) -> Outcome[ExecutionResult]:
    """Run `goal` and write the node's three files into `workdir`. `feedback`: a reviewer's issues with an
    earlier attempt (the review loop's revision round); `temperature`: the script turns' sampling temperature (None:
    the role's own); `scope`: the text whose named files are shown and joined (default: the goal) — a task's
    instruction also names the files of the earlier questions it builds on, which its own quantity does not read.
    The result is returned even when it failed."""
    if max_script_attempts < 1:
        raise ValueError(f"executor: max_script_attempts must be at least 1, got {max_script_attempts}")
    workdir.mkdir(parents=True, exist_ok=True)
    # the files the goal names only (all when it names none): shown every file of a data room, the 1.5B model
    # read each one (read_csv on README.md) or merged them into one-table questions and failed (KeyError on a
    # suffixed column, str vs int keys). The sandbox still mounts every input.
    scope = goal.goal if scope is None else scope
    t, shown, names = template(TEMPLATE), named_inputs(scope, inputs), [p.name for p in inputs]
    only = named_files(scope, shown)
    named = only or {p.name for p in shown if names_file(scope, p.name)}
    extra = await asyncio.to_thread(linked_files, scope, inputs, named)
    if extra:  # the table that holds the goal's columns is shown and joined too
        shown += [p for p in inputs if p.name in extra and p not in shown]
        only = only | set(extra) if only else only
    join_text = scope + "".join(f"\n{name}" for name in extra)
    joined, why = await prepare_join(join_text, shown, only, inputs, sandbox, timeout_s)
    log = _Log(goal.goal)
    for name, columns in extra.items():
        log.add("A file the goal needs", f"the goal's {', '.join(f'`{c}`' for c in columns)} "
                                         f"{'is' if len(columns) == 1 else 'are'} in {name}, which it does not "
                                         "name: that file is shown and joined too")
    if joined is not None:
        log.add(f"The {'load' if joined.table else 'join'} put at the top of the script", joined.code, "python")
    elif why:
        log.add("No join put in", why)
    user = t.section("user", goal=goal.goal, context=goal.context_summary or "(nothing yet)",
                     files="\n".join(f"- {p.name}" for p in shown) or "(none)",
                     profile=await asyncio.to_thread(_profile, shown, profile_chars, only),
                     joined="" if joined is None else "\n\n" + t.section(
                         "loaded" if joined.table else "joined", code=joined.code, rows=str(joined.rows),
                         of=str(joined.of), units=joined.units, table=joined.table, columns=", ".join(joined.columns)))
    if feedback:
        user += "\n\n" + t.section("review feedback", issues=feedback)
    messages = [{"role": "system", "content": t.section("system")}, {"role": "user", "content": user}]
    used, out = versions(TEMPLATE, *((JOIN_TEMPLATE,) if joined is not None else ())), Outcome[ExecutionResult](None)
    script, run, error = "", None, "no script was written"
    void = False  # the last reply had no <code> block
    for attempt in range(1, max_script_attempts + 1):
        # after a reply with no script, greedy decoding wrote the same tagless plan again (v13's node 11, three
        # times): that turn is sampled
        d, dropped = await decide_unlooped(llm, messages, role=role, temperature=loop_temperature(temperature)
                                           if void else temperature, sample_index=attempt if void else 0)
        while (script and d.turn.action is not None and d.turn.action.kind == "code" and len(dropped) < LOOP_RESAMPLES
               and with_join(joined, d.turn.action.content).strip() == script.strip()):
            # greedy decoding wrote the script that just failed once more (v14's node 2 three times, the same
            # KeyError each time, the frame's columns shown after each): it would fail again, so it is sampled
            dropped.append((d, "it is the script that just failed, written again"))
            d = await decide(llm, messages, role=role, temperature=loop_temperature(temperature),
                             sample_index=200 + 10 * attempt + len(dropped))
        for gone, why in dropped:
            out.calls.append(record_call(len(out.calls), gone.completion, used, reply=gone.reply, sent=messages,
                                         void_reason=gone.turn.error, dropped=why))
            log.add(f"Attempt {attempt}: a reply sampled again", f"{why}\n\n{loop_cut(gone.raw)}")
        reply = d.reply if d.turn.action is not None else loop_cut(d.reply)
        out.calls.append(record_call(len(out.calls), d.completion, used, reply=reply, sent=messages,
                                     action=d.turn.action, void_reason=d.turn.error if d.turn.action is None else None))
        messages.append({"role": "assistant", "content": reply})
        void = d.turn.action is None or d.turn.action.kind != "code"
        if not void and (what := not_code(d.turn.action.content)):
            # v14's teacher solver put a description of its script inside <code>, three attempts (its analyst
            # pasted error output back as code, eight turns): nothing to run, and the next turn is sampled like
            # a reply with no script
            void, error = True, f"attempt {attempt}: the <code> block holds {what}, not a script"
            log.add(f"Attempt {attempt}: {what}, not a script", d.turn.action.content)
            out.errors.append(error)
            messages.append({"role": "user", "content": t.section("prose, not code", what=what)})
            continue
        if void:
            error = f"attempt {attempt}: no <code> block ({d.turn.error or 'the reply was an answer, not a script'})"
            log.add(f"Attempt {attempt}: unreadable reply", loop_cut(d.raw))
            out.errors.append(error)
            messages.append({"role": "user", "content": t.section("script failed", observation=error)})
            continue
        written = with_join(joined, d.turn.action.content)
        repeated = written.strip() == script.strip()  # greedy decoding rewrites a failed script as is
        script = written
        with tempfile.TemporaryDirectory(prefix="executor-") as tmp:
            run = await run_script(script, inputs, sandbox, Path(tmp), timeout_s)
            results = parse_results(run.stdout) if run.ok else {}
            failed = not results or len(results) > MAX_RESULTS
            observation = (run.to_observation(OBSERVATION_CHARS)
                           + (await asyncio.to_thread(script_notes, run, inputs, script, named | set(extra))
                              if failed else "")
                           + joined_note(joined, run)
                           + ("\n" + t.section("repeated script") if repeated and not run.ok else "")
                           + ("\n" + t.section("partly ran") if partly_ran(run, joined is not None) else ""))
            log.add(f"Attempt {attempt}: script", script, "python")
            log.add(f"Attempt {attempt}: output", observation)
            if not failed:
                generated = _keep_generated(Path(tmp), run.files_changed, workdir, node)
                break
        if run.ok and not parse_results(run.stdout):
            relabelled, n = as_result_lines(script)
            if n:  # it printed its numbers its own way: the same script with RESULT prints, run afresh
                with tempfile.TemporaryDirectory(prefix="executor-") as tmp:
                    again = await run_script(relabelled, inputs, sandbox, Path(tmp), timeout_s)
                    rewritten = parse_results(again.stdout) if again.ok else {}
                    if len(rewritten) > MAX_RESULTS:  # v14: 330 labelled daily means became 330 RESULT lines
                        results = rewritten
                    elif rewritten:
                        log.add(f"Attempt {attempt}: its {n} labelled print(s) rewritten as RESULT lines",
                                relabelled, "python")
                        log.add(f"Attempt {attempt}: output of the rewritten script",
                                again.to_observation(OBSERVATION_CHARS))
                        script, run = relabelled, again
                        generated = _keep_generated(Path(tmp), run.files_changed, workdir, node)
                        break
        section = "script failed" if not run.ok else "too many results" if results else "no results"
        why = f": {run.error.type}: {run.error.message[:200]}" if run.error is not None else ""
        error = f"attempt {attempt}: " + (f"the script failed{why}" if not run.ok else
                                          f"{len(results)} RESULT lines printed (at most {MAX_RESULTS})" if results
                                          else "no RESULT lines printed")
        out.errors.append(error)
        messages.append({"role": "user", "content": t.section(section, observation=observation, n=str(len(results)),
                                                              most=str(MAX_RESULTS))})
        run = None
    base: dict[str, Any] = {"node": str(node), "goal": goal.goal, "script": script_name(node), "log": LOG_FILE,
                            "inputs": names, "attempts": attempt}
    atomic_write_text(workdir / script_name(node), script)
    if run is None:
        result = ExecutionResult(**base, status="failed", error=error)
        log.add("Outcome", f"Failed after {attempt} attempt(s): {error}\n", None)
        return _finish(out, result, workdir, log)
    messages.append({"role": "user", "content": t.section("report", stdout=run.stdout[-OBSERVATION_CHARS:])})
    report = await ask(llm, messages, ResultDraft, role=role, templates=used, retries=report_retries,
                       check=lambda r: report_problems(r, run.stdout, goal.goal), first_index=len(out.calls))
    out.calls += report.calls
    out.errors += report.errors
    numbers = parse_results(run.stdout)
    if report.value is None:
        result = ExecutionResult(**base, status="failed", numbers=numbers, generated_files=generated,
                                 error="the model gave no usable result: " + "; ".join(report.errors[-3:]))
    else:
        result = ExecutionResult(**base, status="completed", numbers=numbers, generated_files=generated,
                                 observations=report.value.observations, methodology=report.value.methodology,
                                 conclusion=report.value.conclusion)
    log.add("Outcome", f"Status: {result.status}\n\nConclusion: {result.conclusion or result.error}\n", None)
    return _finish(out, result, workdir, log)


def _finish(out: Outcome[ExecutionResult], result: ExecutionResult, workdir: Path, log: _Log) -> Outcome[ExecutionResult]:
    atomic_write_text(workdir / LOG_FILE, log.text())
    write_model(workdir / RESULT_FILE, result)
    out.value = result
    return out


def _keep_generated(workspace: Path, changed: list[str], workdir: Path, node: str | int) -> list[str]:
    """Copy what the script wrote into the workdir (same relative paths); the node's own files are never
    overwritten by a script's output."""
    reserved = {script_name(node), LOG_FILE, RESULT_FILE}
    kept = []
    for rel in changed:
        src = workspace / rel
        if rel in reserved or not src.is_file():
            continue
        dst = workdir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        kept.append(rel)
    return kept
