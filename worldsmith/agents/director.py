"""The director agent: reads the whole exploration graph and chooses what to explore next — an expansion of one
eligible node (up to k directions) or a composition of >= 2 verified findings from different nodes.

Only verified findings may be built on; repeats are refused through the caller's `seen(question)` (memory
similarity) and against the questions already in the graph.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from worldsmith.agents.asking import Outcome, ask, versions
from worldsmith.core.evolution_schemas import (
    Composition,
    CompositionOnly,
    Direction,
    DirectorOutput,
    DomainProfile,
    Expansion,
    ExpansionOnly,
    NodeRecord,
    WorkspaceProfile,
    is_verified,
)
from worldsmith.core.grading import normalise_text
from worldsmith.core.schemas import Finding
from worldsmith.llm.structured import validate_reply
from worldsmith.prompts import template
from worldsmith.tools.files.names import names_file

TEMPLATE = "evolve_director.md"


def eligible_parents(nodes: list[NodeRecord], max_depth: int) -> list[NodeRecord]:
    """Nodes that may be expanded: verified (or revised), not at the depth limit, with a verified finding."""
    return [n for n in nodes if n.status in ("verified", "revised") and n.depth < max_depth
            and any(is_verified(f) for f in n.findings)]


def verified_findings(nodes: list[NodeRecord]) -> dict[str, Finding]:
    return {f.id: f for n in nodes for f in n.findings if is_verified(f)}


def render_graph(nodes: list[NodeRecord], max_chars: int = 12_000) -> str:
    """One line per node and per finding. Past `max_chars` the unverified findings go first (they cannot be built
    on), then every statement is clipped: a big graph still shows every node and every verified finding id."""
    for keep_unverified, clip in ((True, None), (False, None), (False, 160), (False, 60)):
        lines = []
        for n in nodes:
            parents = ",".join(n.parents) or "-"
            lines.append(f"- node {n.id} (mode {n.mode}, depth {n.depth}, parents {parents}, status {n.status}): "
                         f"{_clip(n.goal, clip) or '(initial workspace)'}")
            lines += [f"    finding {f.id} [{'verified' if is_verified(f) else f.status}]: {_clip(f.statement, clip)}"
                      for f in n.findings if keep_unverified or is_verified(f)]
        text = "\n".join(lines) or "(empty)"
        if len(text) <= max_chars:
            break
    return text


def _names(question: str, column: str) -> bool:
    """Whether a question names a column: as written, or with its underscores read as spaces."""
    variants = {column, column.replace("_", " ")}
    return any(re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", question, re.IGNORECASE) for v in variants if len(v) > 1)


def _clip(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


class _Checker:
    """The deterministic rules a decision must satisfy; `problems` is fed back to the model."""

    def __init__(self, nodes: list[NodeRecord], domain: DomainProfile, k: int, max_depth: int,
                 seen: Callable[[str], bool], columns: Mapping[str, Sequence[str]] | None = None,
                 rows: Mapping[str, int] | None = None) -> None:
        self.columns = dict(columns or {})
        self.rows = dict(rows or {})
        self.nodes = {n.id: n for n in nodes}
        self.eligible = {n.id for n in eligible_parents(nodes, max_depth)}
        self.findings = verified_findings(nodes)
        depth = {n.id: n.depth for n in nodes}
        # the initial workspace's finding is only its overview: there is nothing in it to compose with; and a
        # composition is one deeper than its deepest source, so a finding at the depth limit composes past it (v13
        # composed two depth-3 findings into a depth-4 node under max depth 3)
        self.composable = {k: f for k, f in self.findings.items() if 0 < depth.get(f.node_id, 0) < max_depth}
        self.max_depth = max_depth
        self.finding_ids = {f.id for n in nodes for f in n.findings}
        self.work_modes = {normalise_text(w) for w in domain.work_modes}
        self.mode_names = list(domain.work_modes)
        self.asked = {normalise_text(n.goal) for n in nodes if n.goal}
        self.k, self.seen = k, seen

    def direction_problems(self, parent: str, d: Any, earlier: set[str]) -> list[str]:
        out = []
        f = self.findings.get(d.depends_on)
        if f is None or f.node_id != parent:
            out.append(f"direction {d.question!r}: depends_on {d.depends_on!r} is not a verified finding of node "
                       f"{parent!r}")
        if normalise_text(d.work_mode) not in self.work_modes:
            out.append(f"direction {d.question!r}: work_mode {d.work_mode!r} is not one of the domain's work modes")
        q = normalise_text(d.question)
        if q in self.asked or q in earlier or self.seen(d.question):
            out.append(f"direction {d.question!r} repeats a question already asked; ask something new")
        node = self.nodes.get(parent)
        if node is not None and node.depth == 0 and (spread := self.spread(d.question)):
            out.append(f"direction {d.question!r} needs columns from several tables ({spread}); from the initial "
                       "workspace ask what one table answers")
        return out

    def spread(self, question: str) -> str:
        """'col in table, …' when the columns a question names live in no single table (else empty)."""
        named = {c for cols in self.columns.values() for c in cols if _names(question, c)}
        if len(named) < 2 or any(named <= set(cols) for cols in self.columns.values()):
            return ""
        homes = {c: next(t for t, cols in self.columns.items() if c in cols) for c in sorted(named)}
        return ", ".join(f"{c!r} in {t}" for c, t in homes.items())

    def problems(self, out: DirectorOutput) -> list[str]:
        decision = out.decision
        if isinstance(decision, Expansion):
            if decision.parent not in self.eligible:
                return [f"parent {decision.parent!r} is not eligible; choose one of {sorted(self.eligible)}"]
            problems: list[str] = []
            earlier: set[str] = set()
            for d in decision.directions[: self.k]:  # more than k: the first k count, the rest are dropped
                problems += self.direction_problems(decision.parent, d, earlier)
                earlier.add(normalise_text(d.question))
            return problems
        return self.composition_problems(decision)

    def composition_problems(self, c: Composition) -> list[str]:
        def depth_of(f: Finding) -> int:
            return self.nodes[f.node_id].depth if f.node_id in self.nodes else 0

        missing = [s for s in c.sources if s not in self.composable]
        if missing:
            deep = [s for s in missing if s in self.findings and depth_of(self.findings[s]) > 0]
            if deep:
                return [f"sources {deep} are at the depth limit: a composition of them would be deeper than the "
                        f"max depth {self.max_depth}; compose findings of nodes above depth {self.max_depth}"]
            return [f"sources {missing} are not verified findings of analysis nodes"
                    + (" (the initial workspace's overview is not a finding to compose)"
                       if any(s in self.findings for s in missing) else "")]
        if len({self.findings[s].node_id for s in c.sources}) < 2:
            return ["a composition needs verified findings from at least two different nodes"]
        if normalise_text(c.objective) in self.asked or self.seen(c.objective):
            return [f"objective {c.objective!r} repeats a question already asked"]
        return []

    def salvage(self, out: DirectorOutput) -> DirectorOutput | None:
        """An expansion's acceptable directions when the model never got all of them right (up to k)."""
        decision = out.decision
        if not isinstance(decision, Expansion) or decision.parent not in self.eligible:
            return None
        kept, earlier = [], set()
        for d in decision.directions:
            if not self.direction_problems(decision.parent, d, earlier):
                kept.append(d)
                earlier.add(normalise_text(d.question))
        if not kept:
            return None
        return DirectorOutput(decision=decision.model_copy(update={"directions": kept[: self.k]}))

    def normalised(self, out: DirectorOutput) -> DirectorOutput:
        """What a small model meant (`_meant`), each direction's question naming the table it computes on
        (`located`)."""
        out = self._meant(out)
        decision = out.decision
        if not isinstance(decision, Expansion):
            return out
        directions = [d.model_copy(update={"question": self.located(d.question)}) for d in decision.directions]
        if [d.question for d in directions] == [d.question for d in decision.directions]:
            return out
        return DirectorOutput(decision=decision.model_copy(update={"directions": directions}))

    def located(self, question: str) -> str:
        """`question` with its table named ("In orders_2023.csv, how …") when it names no data file and the
        columns it names are all in one table — or, of several, the one whose name holds a number the question
        writes ("the 2023 orders"), else the one with ten times the rows of any other. Unchanged otherwise: the
        1.5B director wrote "How strongly is discount_pct and amount correlated?", the proposer's goal named no
        file either, and the executor, shown every table of the data room, merged them and failed."""
        files = {label: label.split("[", 1)[0] for label in self.columns}
        if any(names_file(question, f.rsplit("/", 1)[-1]) for f in files.values()):
            return question
        if normalise_text(question) in self.asked or self.seen(question):
            return question  # a repeat stays one (with a file named it would pass for a new question)
        named = {c for cols in self.columns.values() for c in cols if _names(question, c)}
        holders = [t for t, cols in self.columns.items() if named and named <= set(cols)]
        if len(holders) > 1:
            numbers = set(re.findall(r"\d+", question))
            by_number = [t for t in holders if numbers & set(re.findall(r"\d+", t))]
            by_rows = sorted(holders, key=lambda t: -self.rows.get(t, 0))
            if len(by_number) == 1:
                holders = by_number
            elif self.rows.get(by_rows[0], 0) >= 10 * max(1, self.rows.get(by_rows[1], 0)):
                holders = by_rows[:1]
        if len(holders) != 1:
            return question
        lead = question[:1].lower() if re.match(r"[A-Z][a-z]", question) else question[:1]  # "How", not "ROI"
        return f"In {files[holders[0]]}, {lead}{question[1:]}"

    def _meant(self, out: DirectorOutput) -> DirectorOutput:
        """What a small model meant: a work mode the domain does not list is its closest listed one; when every
        direction names a verified finding of another node, the first one's node (if eligible) is the parent; when
        the parent has exactly one finding, a depends_on that names no finding is that finding (the node id, '1',
        written for 'f1')."""
        decision = out.decision
        if isinstance(decision, Composition):
            sources = [self.finding_of_node(s) if s not in self.finding_ids else s for s in decision.sources]
            if sources == decision.sources:
                return out
            return DirectorOutput(decision=decision.model_copy(update={"sources": sources}))
        if any(normalise_text(d.work_mode) not in self.work_modes for d in decision.directions) and self.mode_names:
            # a work mode the domain profile does not list ('correlation analysis') is its closest listed one: it
            # labels the node, and refusing a round over a label cost an embedded run a round
            decision = decision.model_copy(update={"directions": [
                d if normalise_text(d.work_mode) in self.work_modes else d.model_copy(update={"work_mode": (
                    difflib.get_close_matches(d.work_mode.lower(), [m.lower() for m in self.mode_names], n=1,
                                              cutoff=0.0) or [self.mode_names[0]])[0]})
                for d in decision.directions]})
            out = DirectorOutput(decision=decision)
        owners = [self.findings[d.depends_on].node_id if d.depends_on in self.findings else None
                  for d in decision.directions]
        if owners and None not in owners and decision.parent not in owners and owners[0] in self.eligible:
            # every direction builds on a verified finding of another node: the first one's node is the parent it
            # meant (the 1.5B model kept the initial workspace as parent while naming nodes' findings); directions
            # on a third node's finding are then refused, and salvage keeps the rest
            return DirectorOutput(decision=decision.model_copy(update={"parent": owners[0]}))
        own = [f for f in self.findings.values() if f.node_id == decision.parent]
        if len(own) != 1 or all(d.depends_on in self.finding_ids for d in decision.directions):
            return out
        # an id that names no finding at all is re-pointed; one naming another (e.g. unverified) finding is not
        directions = [d if d.depends_on in self.finding_ids else d.model_copy(update={"depends_on": own[0].id})
                      for d in decision.directions]
        return DirectorOutput(decision=decision.model_copy(update={"directions": directions}))

    def finding_of_node(self, ref: str) -> str:
        """The verified finding of the node `ref` names ('2', 'n2', 'node 2'), when it has exactly one; else `ref`."""
        node = re.sub(r"^(?:node\s*|n)", "", ref.strip(), flags=re.IGNORECASE)
        own = [f.id for f in self.findings.values() if f.node_id in (ref.strip(), node)]
        return own[0] if len(own) == 1 else ref

    def from_ideas(self, ideas: Sequence[str]) -> DirectorOutput | None:
        """The first idea some eligible parent can take, as a one-direction expansion, for a round in which every
        reply was refused (a greedy model repeats its refused question word for word, and two empty rounds end the
        run). A one-table idea goes to the initial workspace; one that joins tables (never from the initial
        workspace) deepens the latest verified node whose question names one of its files, else the latest one."""
        def latest(p: str) -> int:
            return -int(p) if p.isdigit() else 0

        for q in ideas:
            files = set(re.findall(r"[\w.-]+\.[A-Za-z]\w*", q))
            if self.spread(q):
                order = sorted(self.eligible, key=lambda p: (
                    not any(f in self.nodes[p].goal for f in files), latest(p)))
            else:
                order = sorted(self.eligible, key=lambda p: (self.nodes[p].depth > 0, latest(p)))
            for parent in order:
                own = [f.id for f in self.findings.values() if f.node_id == parent]
                if not own:
                    continue
                d = Direction(question=q, mode="deepen", depends_on=own[0],
                              work_mode=self.mode_names[0] if self.mode_names else "exploration",
                              why="the strongest relation in the data not asked yet (every reply was refused)")
                if not self.direction_problems(parent, d, set()):
                    return DirectorOutput(decision=Expansion(parent=parent, directions=[d]))
        return None

    def trimmed(self, out: DirectorOutput) -> DirectorOutput:
        decision = out.decision
        if isinstance(decision, Expansion) and len(decision.directions) > self.k:
            return DirectorOutput(decision=decision.model_copy(update={"directions": decision.directions[: self.k]}))
        return out


async def direct(llm: Any, nodes: list[NodeRecord], workspace: WorkspaceProfile, domain: DomainProfile, *,
                 seen: Callable[[str], bool], k: int = 3, max_depth: int = 4, role: str = "teacher",
                 retries: int = 2, tables: str = "", columns: Mapping[str, Sequence[str]] | None = None,
                 refused: Sequence[str] = (), ideas: Sequence[str] = (),
                 rows: Mapping[str, int] | None = None) -> Outcome[DirectorOutput]:
    """The next expansion or composition. `seen(question)` says whether memory already holds a similar question;
    `tables` lists the data's tables and columns (so questions name what can be computed); `columns` (table →
    its column names) lets the checker refuse a first-level question that needs a join; `refused`: why the
    previous round's plan was refused (said in the prompt, so a greedy model does not repeat it word for word);
    `ideas`: one-table questions not asked yet, offered as starting points; `rows`: table → its rows."""
    if k < 1:
        raise ValueError(f"director: k must be at least 1, got {k}")
    checker = _Checker(nodes, domain, k, max_depth, seen, columns, rows)
    can_compose = len({f.node_id for f in checker.composable.values()}) >= 2
    if not checker.eligible and not can_compose:
        return Outcome(None, errors=[("no node can be expanded (none verified below the depth limit) and fewer "
                                      "than two nodes have verified findings to compose")])
    t = template(TEMPLATE)
    asked = sorted({n.goal for n in nodes if n.goal})
    messages = [{"role": "system", "content": t.section("system")},
                {"role": "user", "content": t.section(
                    "user", overview=workspace.overview, tables=tables.strip() or "(see the workspace overview)",
                    work_modes=", ".join(domain.work_modes),
                    graph=render_graph(nodes), asked="\n".join(f"- {q}" for q in asked) or "(none)", k=str(k),
                    eligible=", ".join(sorted(checker.eligible)) or "(none: compose)")
                    + (("\n\n" + t.section("ideas", ideas="\n".join(f"- {q}" for q in ideas))) if ideas else "")
                    + (("\n\n" + t.section("refused", problems="\n".join(f"- {p}" for p in refused[-3:])))
                       if refused else "")}]
    # what is possible shapes the grammar: a small model offered a composition with one verified node takes it
    schema = DirectorOutput if checker.eligible and can_compose else ExpansionOnly if checker.eligible \
        else CompositionOnly
    def check(o: Any) -> list[str]:
        return checker.problems(checker.normalised(_general(o)))

    asked_for = await ask(llm, messages, schema, role=role, templates=versions(TEMPLATE), check=check,
                          retries=retries)
    if asked_for.value is None and schema is DirectorOutput and asked_for.calls \
            and all(isinstance(d.decision, Composition) for d in _decisions(asked_for)):
        # every reply was a refused composition: a small model keeps to it, so the last try offers only expansions
        retry = await ask(llm, messages, ExpansionOnly, role=role, templates=versions(TEMPLATE), check=check,
                          retries=0, first_index=len(asked_for.calls))
        asked_for = Outcome(retry.value, calls=asked_for.calls + retry.calls, errors=asked_for.errors + retry.errors)
    outcome = Outcome[DirectorOutput](None if asked_for.value is None else checker.normalised(_general(asked_for.value)),
                                      calls=asked_for.calls, errors=asked_for.errors)
    if outcome.value is not None:
        outcome.value = checker.trimmed(outcome.value)
    elif outcome.calls:  # no reply passed every rule: the latest expansion with acceptable directions, if any
        outcome.value = next((kept for d in _decisions(outcome)
                              if (kept := checker.salvage(checker.normalised(d))) is not None), None)
        if outcome.value is None and (taken := checker.from_ideas(ideas)) is not None:
            outcome.value = taken
            d = taken.decision.directions[0]  # type: ignore[union-attr]
            outcome.errors.append(f"every reply was refused: took the idea {d.question!r} on node "
                                  f"{taken.decision.parent}")  # type: ignore[union-attr]
    return outcome


def _general(out: Any) -> DirectorOutput:
    return out if isinstance(out, DirectorOutput) else DirectorOutput(decision=out.decision)


def _decisions(outcome: Outcome[DirectorOutput]) -> list[DirectorOutput]:
    """The schema-valid decisions the model gave, latest first (the replies of the recorded calls)."""
    out = []
    for call in reversed(outcome.calls):
        value, _ = validate_reply(call.reply, DirectorOutput)
        if value is not None:
            out.append(value)  # type: ignore[arg-type]
    return out
