"""A scripted model that plays every evolution agent from the prompts it receives, so a whole run is scripted.

The director follows a list of rounds: each round is ("expand", [(mode, question), ...]) — expanding the deepest
eligible node — or ("compose", objective). Questions steer the validator with tags: REJECT (every round
unsupported), RETRY (round 1 unsupported, round 2 supported), REVISE (revised with a restated claim); anything else
is supported. Executor scripts compute the total and mean of sales.csv's amount and write a small generated file.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from worldsmith.core.config import Settings
from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.graphs.runtime import GraphRuntime
from worldsmith.llm import LLM, LLMConfig
from worldsmith.llm.providers.scripted import Script, ScriptedRequest, register_script

SALES = "region,amount,units\nnorth,10,1\nsouth,20,2\nnorth,30,3\neast,40,4\nsouth,50,5\n"
MEMO = "# Q3 memo\n\nThe south region ran a promotion in September; expect its amounts to look inflated.\n"
TOTAL, MEAN = 150.0, 30.0

SCRIPT = ("import pandas as pd\ndf = pd.read_csv('sales.csv')\n"
          "df.groupby('region')[['amount', 'units']].sum().to_csv('by_region_{tag}.csv')\n"
          "print(f'RESULT mean = {{df.amount.mean()}}')\nprint(f'RESULT total = {{df.amount.sum()}}')\n"
          "print('RESULT variant = {k}000')\n")  # each node's own number (far from any count a check prints):
# findings that restate others' numbers make no task
#: a dual-evidence solver reads the task's data/ folder
SOLVER_SCRIPT = ("import pandas as pd\ndf = pd.read_csv('data/sales.csv')\n"
                 "print(f'RESULT mean = {df.amount.mean()}')\nprint(f'RESULT total = {df.amount.sum()}')\n")
SPEC = {"name": "mean", "quantity": "mean",
        "measure": {"variable": "amount", "description": "sale amount", "files": ["data/sales.csv"], "unit": "USD"},
        "population": "every sale, one row per sale", "filters": [], "window": {"all_dates": True},
        "aggregation": "the arithmetic mean of amount over all sales", "comparison": None, "scale": "unit",
        "unit_label": "USD", "factor": 1.0, "decimals": 2}
RUBRIC = {"dimensions": ["Numerical accuracy", "Interpretation", "Method transparency", "Presentation"],
          "criteria": [
              {"id": "c1", "dimension": "Numerical accuracy", "text": "States the mean amount of 30.0.",
               "type": "filter", "provenance": "gt", "expected_value": 30.0, "tolerance": 0.01},
              {"id": "c2", "dimension": "Interpretation", "text": "Says whether one region dominates the total.",
               "type": "preference", "provenance": "generated", "expected_value": None, "tolerance": None},
              {"id": "c3", "dimension": "Numerical accuracy", "text": "States a total amount of 999.",
               "type": "preference", "provenance": "generated", "expected_value": 999.0, "tolerance": 0.01},
              {"id": "c4", "dimension": "Method transparency", "text": "Explains how the mean was computed.",
               "type": "preference", "provenance": "generated", "expected_value": None, "tolerance": None}]}


def make_data(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "sales.csv").write_text(SALES)
    (root / "memo_q3.md").write_text(MEMO)
    return root


class Player:
    """Answers each agent's prompt; `rounds` scripts the director."""

    def __init__(self, rounds: list[tuple[str, Any]], script: str | None = None,
                 conclude: Any = None) -> None:
        """`script` (formatted with a unique `tag` and the executor call's number `k`) and `conclude(stdout) -> conclusion` replace the sales ones."""
        self.rounds = list(rounds)
        self.script, self.conclude = script or SCRIPT, conclude
        self.judged: dict[str, int] = {}
        self.round = 0
        self.executed = 0

    def __call__(self, req: ScriptedRequest) -> Any:
        system = req.messages[0]["content"]
        user = req.last_user
        if "profiler of a data-analysis workspace" in system:
            return {"workspace": {"overview": "Sales by region with a quarterly memo.",
                                  "artifacts": [{"path": "sales.csv", "role": "one row per sale"}]},
                    "domain": {"domain": "retail", "work_modes": ["descriptive", "diagnostic"]}}
        if "research director" in system:
            return self.direct(req.text)
        if "split a compound data-analysis objective" in system:
            objective = re.search(r"Compound objective: (.*)", user).group(1)
            return {"parts": [f"{objective} (part one: totals)", f"{objective} (part two: averages)"]}
        if "turn a research direction into a goal" in system:
            question = re.search(r"Direction \([^)]*\): (.*)", user).group(1)
            ids = re.findall(r"^- (f\d+):", user, re.MULTILINE)
            return {"goal": f"{question} Use sales.csv.", "depends_on": ids, "context_summary": ""}
        if "You are a data analyst" in system:
            if "The script ran. Its output" in user:
                conclusion = (self.conclude(user) if self.conclude else
                              "The total amount is 150.0 and the mean amount is 30.0.")
                return {"observations": ["numbers printed"], "methodology": "one script", "conclusion": conclusion}
            if "The folder `data/` holds the files" in user:  # a dual-evidence solver run of a report task
                return f"<think>sum</think>\n<code>\n{SOLVER_SCRIPT}</code>"
            tag = uuid.uuid4().hex[:6]
            self.executed += 1
            return f"<think>sum</think>\n<code>\n{self.script.format(tag=tag, k=self.executed)}</code>"
        if "sceptical but fair reviewer" in system:
            return self.judge(req.text, user)
        if "exact specification of one number" in system:
            return SPEC
        if "You write grading rubrics" in system:
            return RUBRIC
        if "You check one rubric criterion" in system:
            total = "Expected value: 999" in user
            return {"grounded": True, "observable": True, "well_formed": True, "reason": "from the cards",
                    "code": "import pandas as pd\ndf = pd.read_csv('data/sales.csv')\n"
                            f"print(f'RESULT value = {{df.amount.{'sum' if total else 'mean'}()}}')",
                    "revision": None}
        if "careful data analyst" in system:
            return self.analyst(req)
        if "grade a data-analysis deliverable" in system:
            ids = re.findall(r'\{"id": "([^"]+)"', user)
            shown = user.split("## Deliverable\n", 1)[-1].strip().splitlines()[0][:60]
            return {"verdicts": [{"id": i, "met": True, "evidence": f'"{shown}"'} for i in ids]}
        raise AssertionError(f"no scripted answer for: {system[:80]}")

    def direct(self, text: str) -> Any:
        kind, arg = self.rounds[min(self.round, len(self.rounds) - 1)]
        self.round += 1
        if kind == "compose":
            ids = re.findall(r"finding (f\d+) \[verified\]", text)
            nonroot = [i for i in ids if i != "f1"]
            return {"decision": {"kind": "composition", "sources": nonroot[-2:], "relation": "same sales",
                                 "objective": arg, "why": "both matter"}}
        eligible = re.search(r"Eligible parents: ([^.]*)\.", text).group(1).split(", ")
        parent = max(eligible, key=int)
        return {"decision": {"kind": "expansion", "parent": parent, "directions": [
            {"question": q, "mode": mode, "depends_on": f"f{parent}", "work_mode": "descriptive", "why": "it matters"}
            for mode, q in arg]}}

    def analyst(self, req: ScriptedRequest) -> str:
        if "RESULT mean" not in req.last_user:
            return f"<think>compute</think>\n<code>\n{SOLVER_SCRIPT}</code>"
        if "@mean[" in req.text:
            return "<think>done</think>\n<answer>The mean sale amount is 30.00 USD. @mean[30.00]</answer>"
        return ("<think>done</think>\n<answer>The mean amount is 30.0 and the total is 150.0; south and north "
                "each hold 60.0 and 40.0 of it, so no region dominates. I computed the mean of the amount column."
                "</answer>")

    def judge(self, text: str, user: str) -> Any:
        if "Propose one alternative check" in user or "Your check did not run" in user:
            data = "orders_2023.csv" if "orders_2023.csv" in text else "sales.csv"
            return ("<think>how many sales carry the claim: a handful would make it fragile</think>\n<code>\n"
                    f"import pandas as pd\ndf = pd.read_csv('{data}')\nprint(f'RESULT rows = {{len(df)}}')\n</code>")
        goal = re.search(r"Goal: (.*)", user).group(1)
        claim = re.search(r"Claim: (.*)", user).group(1)
        n = self.judged[goal] = self.judged.get(goal, 0) + 1
        if "REJECT" in goal or ("RETRY" in goal and n == 1):
            return {"verdict": "unsupported", "issues": ["the median (30.0) tells another story"]}
        if "REVISE" in goal:
            return {"verdict": "revised", "ground_truth": "The total amount is 150.0 (mean 30.0, median 30.0).",
                    "issues": ["state the median too"]}
        return {"verdict": "supported", "ground_truth": claim}


def scripted_runtime(tmp_path: Path, player: Player, *, delay_s: float = 0.0) -> tuple[Script, GraphRuntime]:
    name = f"evolve-{uuid.uuid4().hex[:8]}"
    script = register_script(name, Script(delay_s=delay_s)).fallback(player)
    llm = LLM(LLMConfig(default={"provider": "scripted", "model": name}, cache=False,
                        roles={"embed": {"provider": "scripted", "model": name, "extra_body": {"embed_dim": 64}}}),
              home=tmp_path / "home")
    settings = Settings(runs_dir=tmp_path / "runs", home=tmp_path / "home",
                        sandbox=SandboxConfig(backend="process", preload=[], timeout_s=60, kill_grace_s=1.0))
    return script, GraphRuntime.from_settings(settings, llm=llm)
