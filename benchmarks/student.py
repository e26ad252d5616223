"""The measured student: world tasks → teacher trajectories → SFT → GGUF → before/after eval (→ optional SFT+RL).

    python benchmarks/student.py --out runs/student-smollm2 --student smollm2-135m
    python benchmarks/student.py --out runs/student-qwen05 --student qwen2.5-coder-0.5b --lora --rl-steps 20 \\
        --dabench /work/shared/benchmarks/dabench-dev --limit 12

Stages, each writing under the run directory and skipped when its marker `stages/<name>.json` exists (rerun the
same command to resume; an interrupted eval continues where it stopped, a killed sft or rl run from its newest
checkpoint, saved every 10 minutes; a rerun with a larger --limit extends each eval by the questions it had not
reached):

  worlds   build the train and held-out worlds from fixed "template:seed" lists and write their tasks (engine
           templates, no LLM) into tasks/train and tasks/heldout; refused unless the two share no world.
  teacher  the analyst on the teacher model (default the embedded 1.5B) solves the train tasks (the eval harness).
  sft      `train sft` on the teacher's graded passes plus the worlds' oracle trajectories (training/data.py refuses
           benchmark tasks: no DABench question ever trains).
  base     the untrained student as the eval harness will serve it (GGUF export, or a checkpoint for `tiny`).
  export   the SFT (and RL) checkpoint back to GGUF (training/export.py; --export-type f16 or q8_0, the base's too);
           skipped with --no-export or for `tiny`.
  eval-*   base, SFT (and RL) student, and with --eval-teacher the teacher, on the held-out world tasks and the
           DABench dev share: pass@1, grammar-valid turn rate, void-turn rate (training/metrics.turn_rates).
  rl       with --rl-steps N: `train rl` continues from the SFT checkpoint on the train tasks.

report.md and summary.json (split, data, per-stage seconds, the eval table) are rewritten at the end of every run.
Exported students are served by llama.cpp (the embedded provider); without an export, by the `hf` provider.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from worldsmith.core.store import atomic_write_text

TRAIN_WORLDS = ("customer_pricing:11", "operations_supply_chain:12", "finance:13", "people:14",
                "commercial_growth:15", "risk_fraud:16")
HELDOUT_WORLDS = ("customer_pricing:101", "operations_supply_chain:102", "energy_iot:103", "education:104")
DABENCH_DEV = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "dabench-dev"
TEACHER = {"provider": "embedded", "model": "qwen2.5-coder-1.5b"}


@dataclass
class PipelineConfig:
    out: Path
    student: str = "smollm2-135m"
    train_worlds: tuple[str, ...] = TRAIN_WORLDS
    heldout_worlds: tuple[str, ...] = HELDOUT_WORLDS
    rows: int = 2000
    tasks_per_world: int = 4
    teacher: dict[str, Any] | None = field(default_factory=lambda: dict(TEACHER))
    """The teacher's endpoint (the agent role while it solves the train tasks); None: SFT on oracles only."""
    llm_default: dict[str, Any] | None = None
    """Every other role (judges, loaded only when a rubric needs one); None: the teacher's endpoint."""
    dabench: Path | None = None
    limit: int | None = None
    """At most N tasks of each eval set."""
    max_turns: int = 6
    max_tokens: int = 512
    lora: bool = False
    sft_steps: int = -1
    epochs: float = 2.0
    lr: float | None = None
    sft_max_tokens: int = 4096
    sft_max_turn_tokens: int | None = None
    """Trajectories with a longer assistant turn do not train (tokens); None: max_tokens, the budget a turn has at
    eval (a world oracle's whole reference script as one cell is thousands); 0: no limit."""
    export: bool = True
    export_type: str = "f16"
    """Tensor type of the exported GGUFs (base and trained alike): f16, or q8_0 (llama.cpp's quantizer; faster
    evals on CPU)."""
    rl_steps: int = 0
    rl_generations: int = 4
    rl_prompts: int = 2
    """Distinct train tasks per RL step."""
    rl_turns: int | None = None
    """Turns per RL rollout; None: max_turns (the eval's). On CPU a step is mostly prompt processing and decoding
    of G rollouts × turns, so a short rollout buys steps."""
    rl_tokens: int | None = None
    """Tokens per assistant turn in RL rollouts; None: max_tokens."""
    rl_expert_max_tokens: int | None = None
    """Longest expert for the RL run's SFT term (longer ones are dropped, not cut); None: sft_max_tokens."""
    eval_teacher: bool = False
    teacher_passes: int = 1
    """Teacher passes over the train tasks: the first greedy, each further one sampled (temperature 0.7, its own
    seed); every pass's graded passes train (rejection sampling)."""
    extra_data: tuple[Path, ...] = ()
    """Further SFT data: the teacher's eval runs (or trajectory folders) on worlds outside this run, e.g. an earlier
    run of the teacher over a generated benchmark. Their graded passes train like the teacher stage's; refused when
    one is about a held-out world (DABench runs are refused by training/data.py)."""
    seed: int = 0


class Pipeline:
    def __init__(self, cfg: PipelineConfig, *, log: Callable[[str], None] = print) -> None:
        self.cfg, self.log = cfg, log
        self.root = Path(cfg.out)
        (self.root / "stages").mkdir(parents=True, exist_ok=True)

    # -- stage bookkeeping ------------------------------------------------------------------------------------------
    def done(self, name: str) -> dict[str, Any] | None:
        marker = self.root / "stages" / f"{name}.json"
        return json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else None

    def stage(self, name: str, fn: Callable[[], dict[str, Any]], *, scope: dict[str, Any] | None = None
              ) -> dict[str, Any]:
        """Run `fn` unless its marker exists; the marker (result + seconds) is written atomically when it succeeds.

        scope: what the stage's result depends on beyond its inputs (an eval's --limit). A marker written under
        another scope runs the stage again, and its seconds add up over the runs: an eval continues its folder, so
        a rerun with a larger --limit solves only the questions the earlier run did not reach."""
        prior = self.done(name)
        if prior is not None and prior.get("scope") == scope:
            self.log(f"[{name}] done earlier ({prior['seconds']:.1f} s), skipped")
            return prior
        self.log(f"[{name}] …" if prior is None
                 else f"[{name}] done earlier for {prior.get('scope')}, now {scope} …")
        t0 = time.monotonic()
        result = fn()
        seconds = time.monotonic() - t0 + (prior["seconds"] if prior is not None else 0.0)
        record = {"stage": name, "seconds": round(seconds, 2), "result": result,
                  **({"scope": scope} if scope is not None else {})}
        atomic_write_text(self.root / "stages" / f"{name}.json", json.dumps(record, indent=2, default=str))
        self.log(f"[{name}] {record['seconds']:.1f} s")
        return record

    def fresh(self, rel: str) -> Path:
        """A stage's output folder, emptied of a failed earlier attempt."""
        path = self.root / rel
        if path.exists():
            shutil.rmtree(path)
        return path

    def settings(self, agent: dict[str, Any]) -> Any:
        from worldsmith.core.config import load_settings

        default = self.cfg.llm_default or self.cfg.teacher or TEACHER
        return load_settings(overrides={
            "runs_dir": str(self.root / "scratch"),
            "llm": {"default": default, "roles": {"agent": agent}, "cache": False},
            "analyst": {"max_turns": self.cfg.max_turns, "max_tokens_per_turn": self.cfg.max_tokens}})

    # -- stages -----------------------------------------------------------------------------------------------------
    def worlds(self) -> dict[str, Any]:
        from worldsmith.core.taskpkg import TaskCollection
        from worldsmith.evolution.worlds.templates import load_template
        from worldsmith.evolution.worlds.world import build_world
        from worldsmith.graphs.runtime import GraphRuntime, SandboxSessions
        from worldsmith.graphs.world import write_world_tasks

        overlap = set(self.cfg.train_worlds) & set(self.cfg.heldout_worlds)
        if overlap:
            raise ValueError(f"worlds: {sorted(overlap)} listed both for training and held out")
        settings = self.settings(self.cfg.teacher or TEACHER)
        out: dict[str, Any] = {}
        for split, specs in (("train", self.cfg.train_worlds), ("heldout", self.cfg.heldout_worlds)):
            tasks_dir = self.fresh(f"tasks/{split}")
            ids: list[str] = []
            for spec in specs:
                template, seed = parse_world(spec)
                world_dir = self.fresh(f"worlds/{template}-s{seed}")
                build_world(load_template(template, rows=self.cfg.rows), seed, world_dir)
                rt = GraphRuntime(settings=settings, llm=None, sessions=SandboxSessions(settings))
                written, _ = asyncio.run(write_world_tasks(
                    rt, self.fresh(f"worlds/.steps-{template}-s{seed}"), world_dir, tasks_dir,
                    max_tasks=self.cfg.tasks_per_world, seed=seed, use_llm=False, on_event=lambda e: None))
                ids += written
            out[split] = {"worlds": sorted({e.group for e in TaskCollection(tasks_dir).entries()}), "tasks": ids}
        shared = set(out["train"]["worlds"]) & set(out["heldout"]["worlds"])
        if shared:
            raise ValueError(f"worlds: held-out worlds {sorted(shared)} also have train tasks; split is not disjoint")
        return out

    def teacher(self) -> dict[str, Any]:
        if self.cfg.teacher is None:
            return {"skipped": "no teacher: SFT on the worlds' oracle trajectories only"}
        return self.evaluate(self.cfg.teacher, self.root / "tasks" / "train", "teacher", limit=None)

    def teacher_sampled(self, k: int) -> dict[str, Any]:
        """A further teacher pass over the train tasks, sampled (temperature 0.7, seed k): more graded passes."""
        agent = {**(self.cfg.teacher or TEACHER), "temperature": 0.7, "seed": k}
        return self.evaluate(agent, self.root / "tasks" / "train", f"teacher-{k}", limit=None)

    def expert_data(self) -> list[Path]:
        """SFT data: the teacher's eval runs (their graded passes) and the train collection (its oracles)."""
        teacher = [self.root / "teacher", *(self.root / f"teacher-{k}" for k in range(2, self.cfg.teacher_passes + 1))
                   ] if self.cfg.teacher is not None else []
        return [*teacher, *self.cfg.extra_data, self.root / "tasks" / "train"]

    def check_extra_data(self) -> None:
        """No trajectory of the extra data may be about a held-out world (task ids start with their world's id)."""
        from worldsmith.graphs.world_tasks import is_world_task
        from worldsmith.training.data import load_trajectories

        if not self.cfg.extra_data:
            return
        record = json.loads((self.root / "stages" / "worlds.json").read_text(encoding="utf-8"))
        worlds = record["result"]["heldout"]["worlds"]
        trajs, _ = load_trajectories(self.cfg.extra_data)
        leaked = sorted({t.task_id for t in trajs if any(is_world_task(t.task_id, w) for w in worlds)})
        if leaked:
            raise ValueError(f"sft: --extra-data holds trajectories of held-out worlds ({', '.join(leaked[:3])}"
                             f"{' …' if len(leaked) > 3 else ''}); the student would be evaluated on worlds it saw")

    def train_run(self, name: str, start: Callable[[Path], dict[str, Any]],
                  resume: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """A training stage's run in `<root>/<name>`: a killed one resumes from its newest checkpoint; one that
        cannot (it finished before the stage marker was written, or its data changed) starts over."""
        out = self.root / name
        if (out / "events.jsonl").is_file():
            try:
                return resume(out)
            except ValueError as exc:
                self.log(f"[{name}] not resumed ({exc}); starting over")
        return start(self.fresh(name))

    def sft(self) -> dict[str, Any]:
        from worldsmith.app.train import SFTRequest, resume_sft, sft_from_paths

        self.check_extra_data()
        train = self.root / "tasks" / "train"
        req = SFTRequest(data=self.expert_data(), tasks=[train], model=self.cfg.student,
                         out=None, epochs=self.cfg.epochs, max_steps=self.cfg.sft_steps, lr=self.cfg.lr,
                         lora=self.cfg.lora, max_tokens=self.cfg.sft_max_tokens, overflow="truncate",
                         max_turn_tokens=self.cfg.max_tokens if self.cfg.sft_max_turn_tokens is None
                         else self.cfg.sft_max_turn_tokens,
                         validation_fraction=0.0, seed=self.cfg.seed)
        settings = self.settings(self.cfg.teacher or TEACHER)
        summary = self.train_run("sft", lambda out: sft_from_paths(settings, replace(req, out=out)),
                                 lambda out: resume_sft(settings, out))
        keep = ("steps", "final_loss", "data_train", "data_rejected", "checkpoint", "seconds")  # seconds: all legs
        return {k: summary.get(k) for k in keep} | {"data": json.loads((self.root / "sft" / "data_stats.json")
                                                                        .read_text(encoding="utf-8"))}

    def exportable(self) -> bool:
        from worldsmith.llm.models import REGISTRY

        return self.cfg.export and self.cfg.student in REGISTRY

    def base(self) -> dict[str, Any]:
        """The untrained student in the form the harness serves: a GGUF written the same way as the trained one (so
        base and SFT differ only in training, not in quantization), or an HF checkpoint."""
        from worldsmith.training.models import embedded_gguf, load_student

        model, tok = load_student(self.cfg.student, seed=self.cfg.seed)
        if self.exportable():
            from worldsmith.training.export import export_gguf

            target = self.root / "export" / "base.gguf"
            target.unlink(missing_ok=True)
            path = export_gguf(model, base_gguf=embedded_gguf(self.cfg.student, None), out=target,
                               out_type=self.cfg.export_type)  # type: ignore[arg-type]
            return {"gguf": str(path), "out_type": self.cfg.export_type}
        folder = self.fresh("base/checkpoint")
        model.save_pretrained(str(folder))
        tok.save_pretrained(str(folder))
        return {"checkpoint": str(folder)}

    def export(self, label: str, checkpoint: Path) -> dict[str, Any]:
        from worldsmith.training.export import export_checkpoint

        if not self.exportable():
            return {"skipped": f"{self.cfg.student!r} has no base GGUF" if self.cfg.export else "--no-export"}
        target = self.root / "export" / f"{label}.gguf"
        target.unlink(missing_ok=True)
        return {"gguf": str(export_checkpoint(checkpoint, out=target, base=self.cfg.student,
                                              out_type=self.cfg.export_type))}  # type: ignore[arg-type]

    def rl(self) -> dict[str, Any]:
        from worldsmith.app.train_rl import RLRequest, resume_rl, rl_from_paths

        train = self.root / "tasks" / "train"
        req = RLRequest(tasks=[train], data=self.expert_data(), model=str(self.root / "sft" / "checkpoint"),
                        out=None, max_steps=self.cfg.rl_steps, prompts_per_step=self.cfg.rl_prompts,
                        num_generations=self.cfg.rl_generations,
                        max_turns=self.cfg.rl_turns or self.cfg.max_turns,
                        max_new_tokens=self.cfg.rl_tokens or self.cfg.max_tokens, lora=self.cfg.lora,
                        expert_max_tokens=self.cfg.rl_expert_max_tokens or self.cfg.sft_max_tokens,
                        expert_max_turn_tokens=self.cfg.sft_max_turn_tokens,
                        seed=self.cfg.seed)
        settings = self.settings(self.cfg.teacher or TEACHER)
        summary = self.train_run("rl", lambda out: rl_from_paths(settings, replace(req, out=out)),
                                 lambda out: resume_rl(settings, out))
        if not summary.get("steps"):
            raise RuntimeError(f"rl: no step trained ({summary.get('tasks')} usable train tasks for "
                               f"{self.cfg.rl_prompts} prompts per step); lower --rl-prompts or add train worlds")
        keep = ("steps", "tasks", "with_expert", "final_reward", "final_gamma", "final_sft_loss", "final_rl_loss",
                "void_rate", "checkpoint", "seconds")
        return {k: summary.get(k) for k in keep}

    def student_endpoint(self, label: str, checkpoint: Path) -> dict[str, Any]:
        """The exported GGUF on llama.cpp (the embedded provider serves a .gguf path) when there is one, else the
        checkpoint on the `hf` provider."""
        gguf = self.root / "export" / f"{label}.gguf"
        if not gguf.is_file():
            return {"provider": "hf", "model": str(checkpoint)}
        return {"provider": "embedded", "model": str(gguf)}

    def evaluate(self, agent: dict[str, Any], tasks: Path, rel: str, *, limit: int | None) -> dict[str, Any]:
        """The eval harness in `<run>/<rel>` (continued when an earlier attempt stopped); metrics + turn rates."""
        from worldsmith.app.eval import evaluate_path
        from worldsmith.app.runtime import make_runtime
        from worldsmith.core.runs import RunDir
        from worldsmith.core.schemas import Trajectory
        from worldsmith.training.metrics import turn_rates

        settings = self.settings(agent)
        folder = self.root / rel
        if not (folder / "events.jsonl").exists():
            self.fresh(rel)
            RunDir.create_at("eval", settings.runs_dir, folder, settings.masked())
        result = asyncio.run(evaluate_path(make_runtime(settings), tasks, limit=limit, run_path=folder))
        # the selected questions' trajectories only: the folder may hold more from a run with a larger --limit
        trajs = [Trajectory.model_validate_json(p.read_text(encoding="utf-8")) for task_id in result["task_ids"]
                 for p in sorted((folder / "trajectories" / task_id).glob("*.json"))]
        o = result["overall"]
        return {"agent": agent, "tasks": str(tasks), "n_tasks": o["n_tasks"], "pass_at_1": o["pass_at_1"],
                "errors": o["n_errors"], **turn_rates(trajs).model_dump()}

    # -- the whole run ----------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, t0 = self.cfg, time.monotonic()
        base = (self.done("base") or {}).get("result", {})
        made = base.get("out_type", "f16")  # a run begun before --export-type existed exported f16
        if base.get("gguf") and made != cfg.export_type:
            raise SystemExit(f"{self.root}: its GGUFs and evals are {made}, not {cfg.export_type}; give "
                             f"--export-type {cfg.export_type} its own --out")
        self.stage("worlds", self.worlds)
        self.stage("teacher", self.teacher)
        if cfg.teacher is not None:
            for k in range(2, cfg.teacher_passes + 1):
                self.stage(f"teacher-{k}", lambda k=k: self.teacher_sampled(k))
        self.stage("sft", self.sft)
        base = self.stage("base", self.base)["result"]
        sft_ckpt = self.root / "sft" / "checkpoint"
        self.stage("export-sft", lambda: self.export("sft", sft_ckpt))
        students = {"base": Path(base.get("checkpoint", "")), "sft": sft_ckpt}
        if cfg.rl_steps > 0:
            self.stage("rl", self.rl)
            self.stage("export-rl", lambda: self.export("rl", self.root / "rl" / "checkpoint"))
            students["rl"] = self.root / "rl" / "checkpoint"
        # DABench first, and each set through every model before the next set: a run stopped part way (an eval of
        # the 0.5B on 65 questions takes about an hour on 2 cores) has whole before/after pairs on the headline set
        sets = {"dabench": Path(cfg.dabench)} if cfg.dabench is not None else {}
        sets["heldout"] = self.root / "tasks" / "heldout"
        agents = {label: (lambda label=label, ckpt=ckpt: self.student_endpoint(label, ckpt))
                  for label, ckpt in students.items()}
        if cfg.eval_teacher and cfg.teacher is not None:
            agents["teacher"] = lambda: dict(cfg.teacher or {})
        for set_name, path in sets.items():
            for label, agent in agents.items():
                self.stage(f"eval-{label}-{set_name}",
                           lambda agent=agent, path=path, label=label, set_name=set_name:
                           self.evaluate(agent(), path, f"eval/{label}-{set_name}", limit=cfg.limit),
                           scope={"limit": cfg.limit})
        summary = self.summary(time.monotonic() - t0)
        atomic_write_text(self.root / "summary.json", json.dumps(summary, indent=2, default=str))
        atomic_write_text(self.root / "report.md", render_report(summary))
        return summary

    def eval_summaries(self) -> Callable[[str], dict[str, Any]]:
        """`load(key)`: the summary of eval/<key> (its trajectories read), read once however often it is asked for
        (the base's by each student's paired test, the held-out ones again by `heldout_kinds`)."""
        from worldsmith.training.bench_summary import load_summary

        loaded: dict[str, dict[str, Any]] = {}

        def load(key: str) -> dict[str, Any]:
            if key not in loaded:
                loaded[key] = load_summary(self.root / "eval" / key)
            return loaded[key]

        return load

    def paired(self, evals: dict[str, Any], load: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """Each trained student against the base on the same questions (`worldsmith compare`'s numbers): the
        questions gained and lost and the exact McNemar p-value."""
        from worldsmith.training.bench_summary import paired_comparison

        out: dict[str, Any] = {}
        for key in evals:
            label, _, set_name = key.partition("-")
            if label in ("base", "teacher") or f"base-{set_name}" not in evals:
                continue
            try:
                p = paired_comparison(load(f"base-{set_name}"), load(key))
            except (FileNotFoundError, ValueError) as exc:
                out[key] = {"error": str(exc)}
                continue
            out[key] = {k: p[k] for k in ("n", "before", "after", "gained", "lost", "p_value")}
        return out

    def heldout_kinds(self, evals: dict[str, Any], load: Callable[[str], dict[str, Any]]) -> dict[str, Any] | None:
        """The held-out tasks whose question kind (the task id less its world's) trained on another world of the same
        template (the SFT run's examples.jsonl), and each model's held-out passes among those and among the rest: a
        pass on a seen kind is a seen recipe on new data and numbers, one on an unseen kind is more. None when the
        SFT run wrote no manifest."""
        from worldsmith.graphs.world_tasks import is_world_task, world_task_id
        from worldsmith.training.bench_summary import first_outcomes
        from worldsmith.training.data import read_manifest

        try:
            trained = [e["task_id"] for e in read_manifest(self.root / "sft") if e["outcome"] == "train"]
        except FileNotFoundError:
            return None
        held = json.loads((self.root / "stages" / "worlds.json").read_text(encoding="utf-8"))["result"]["heldout"]
        seen = {}
        for task_id in held["tasks"]:
            prefix = world_task_id(next(w for w in held["worlds"] if is_world_task(task_id, w)))
            kind = re.compile(rf"{re.escape(prefix.rsplit('-s', 1)[0])}-s\d+-{re.escape(task_id[len(prefix) + 1:])}")
            seen[task_id] = any(kind.fullmatch(t) for t in trained)
        out: dict[str, Any] = {"seen": sorted(t for t, v in seen.items() if v),
                               "unseen": sorted(t for t, v in seen.items() if not v), "passes": {}}
        for key in evals:
            label, _, set_name = key.partition("-")
            if set_name == "heldout":
                solved = first_outcomes(load(key))
                out["passes"][label] = {"seen": sum(solved.get(t, False) for t in out["seen"]),
                                        "unseen": sum(solved.get(t, False) for t in out["unseen"])}
        return out

    def summary(self, wall_s: float) -> dict[str, Any]:
        stages = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((self.root / "stages").glob("*.json"))}
        evals = {name[len("eval-"):]: rec["result"] for name, rec in stages.items() if name.startswith("eval-")}
        load = self.eval_summaries()
        config = {k: (str(v) if isinstance(v, Path) else [str(p) for p in v] if k == "extra_data" else v)
                  for k, v in asdict(self.cfg).items()}
        return {"config": config, "split": stages["worlds"]["result"], "teacher": stages["teacher"]["result"],
                "teacher_sampled": [v["result"] for k, v in sorted(stages.items()) if k.startswith("teacher-")],
                "sft": stages["sft"]["result"], "rl": stages.get("rl", {}).get("result"),
                "export": {k: v["result"] for k, v in stages.items() if k.startswith(("base", "export"))},
                "eval": evals, "paired": self.paired(evals, load), "heldout_kinds": self.heldout_kinds(evals, load),
                "stage_seconds": {k: v["seconds"] for k, v in stages.items()},
                "wall_s_this_invocation": round(wall_s, 1)}


def parse_world(spec: str) -> tuple[str, int]:
    template, _, seed = spec.partition(":")
    if not template or not seed.isdigit():
        raise ValueError(f"world {spec!r}: expected TEMPLATE:SEED, e.g. customer_pricing:11")
    return template, int(seed)


def _rl_line(s: dict[str, Any]) -> list[str]:
    """The SFT+RL stage in one sentence (none when the run had no RL)."""
    rl, c = s.get("rl"), s["config"]
    if not rl:
        return []

    def num(key: str) -> str:
        return "—" if rl.get(key) is None else f"{rl[key]:.4g}"

    return ["", f"SFT+RL from the SFT checkpoint: {rl['steps']} step(s) of {c['rl_prompts']} prompts × "
                f"{c['rl_generations']} rollouts (≤ {c.get('rl_turns') or c['max_turns']} turns × "
                f"{c.get('rl_tokens') or c['max_tokens']} tokens), {rl.get('tasks')} train tasks "
                f"({rl.get('with_expert')} with an expert for the SFT term); last step: reward {num('final_reward')}, "
                f"γ {num('final_gamma')}, SFT loss {num('final_sft_loss')}, RL loss {num('final_rl_loss')}, void-turn "
                f"rate {num('void_rate')}."]


def render_report(s: dict[str, Any]) -> str:
    train, held, teacher, sft = s["split"]["train"], s["split"]["heldout"], s["teacher"], s["sft"]
    lines = [f"# Measured student: {s['config']['student']}", "",
             f"Train worlds ({len(train['worlds'])}, {len(train['tasks'])} tasks): {', '.join(train['worlds'])}",
             f"Held-out worlds ({len(held['worlds'])}, {len(held['tasks'])} tasks): {', '.join(held['worlds'])}", "",
             (("No teacher stage; " if "skipped" in teacher else
               f"Teacher ({teacher['agent'].get('model')}) on the train tasks: pass@1 {teacher['pass_at_1']:.1%}; ")
              + "".join(f"sampled pass: pass@1 {t['pass_at_1']:.1%}; " for t in s.get("teacher_sampled") or [])
              + f"SFT on {sft['data_train']} examples ({sft['data_rejected']} rejected), {sft['steps']} steps, "
              f"final loss {sft['final_loss']:.4f}."),
             *([f"Extra SFT data (the teacher's runs on other worlds): {', '.join(s['config']['extra_data'])}."]
               if s["config"].get("extra_data") else []), *_rl_line(s), "",
             "| model | eval set | tasks | pass@1 | grammar-valid turns | void turns | turns | errors |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, e in s["eval"].items():
        label, _, set_name = key.partition("-")
        lines.append(f"| {label} | {set_name} | {e['n_tasks']} | {e['pass_at_1']:.1%} | {e['grammar_valid_rate']:.1%} "
                     f"| {e['void_rate']:.1%} | {e['turns']} | {e['errors']} |")
    paired = {k: p for k, p in (s.get("paired") or {}).items() if "error" not in p}
    if paired:
        lines += ["", "Against the base on the same questions (exact McNemar test over the questions one of the two "
                      "solved; `worldsmith compare eval/base-SET eval/MODEL-SET`):", "",
                  "| model | eval set | base | model | gained | lost | p |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for key, p in paired.items():
            label, _, set_name = key.partition("-")
            lines.append(f"| {label} | {set_name} | {p['before']}/{p['n']} | {p['after']}/{p['n']} | "
                         f"{len(p['gained'])} | {len(p['lost'])} | {p['p_value']:.3g} |")
    kinds = s.get("heldout_kinds")
    if kinds and kinds["passes"]:
        n_seen, n_unseen = len(kinds["seen"]), len(kinds["unseen"])
        lines += ["", f"Held-out tasks whose question kind trained on another world of the same template: {n_seen} of "
                      f"{n_seen + n_unseen}. Passes on those / on the rest: "
                      + "; ".join(f"{label} {p['seen']}/{n_seen}, {p['unseen']}/{n_unseen}"
                                  for label, p in kinds["passes"].items()) + "."]
    lines += ["", "| stage | seconds |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.1f} |" for k, v in s["stage_seconds"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="run directory (rerun the same command to resume)")
    ap.add_argument("--student", default="smollm2-135m", help="smollm2-135m | qwen2.5-coder-0.5b | tiny")
    ap.add_argument("--teacher", default=TEACHER["model"], help="embedded model that writes the trajectories")
    ap.add_argument("--no-teacher", action="store_true", help="SFT on the worlds' oracle trajectories only")
    ap.add_argument("--train-worlds", nargs="+", default=list(TRAIN_WORLDS), metavar="TEMPLATE:SEED")
    ap.add_argument("--heldout-worlds", nargs="+", default=list(HELDOUT_WORLDS), metavar="TEMPLATE:SEED")
    ap.add_argument("--rows", type=int, default=2000, help="rows per world")
    ap.add_argument("--tasks-per-world", type=int, default=4)
    ap.add_argument("--dabench", type=Path, default=DABENCH_DEV if DABENCH_DEV.is_dir() else None)
    ap.add_argument("--limit", type=int, default=None, help="at most N tasks per eval set")
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=512, help="tokens per assistant turn")
    ap.add_argument("--lora", action="store_true", help="LoRA adapters (merged on save) instead of full SFT")
    ap.add_argument("--sft-steps", type=int, default=-1, help="optimizer steps (-1: --epochs)")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--no-export", action="store_true", help="evaluate checkpoints with the hf provider instead")
    ap.add_argument("--export-type", choices=("f16", "q8_0"), default="f16",
                    help="tensor type of the GGUFs the evals serve, base and trained alike")
    ap.add_argument("--rl-steps", type=int, default=0, help="SFT+RL steps after SFT (0: none)")
    ap.add_argument("--rl-prompts", type=int, default=2, help="distinct train tasks per RL step")
    ap.add_argument("--rl-generations", type=int, default=4, help="rollouts per prompt (the group size G)")
    ap.add_argument("--rl-turns", type=int, default=None, help="turns per RL rollout (default: --max-turns)")
    ap.add_argument("--rl-tokens", type=int, default=None, help="tokens per turn in RL rollouts (default: --max-tokens)")
    ap.add_argument("--eval-teacher", action="store_true", help="also evaluate the teacher (reference row)")
    ap.add_argument("--teacher-passes", type=int, default=1,
                    help="teacher passes over the train tasks (the first greedy, the rest sampled at 0.7)")
    ap.add_argument("--extra-data", type=Path, nargs="+", default=[], metavar="RUN",
                    help="further SFT data: the teacher's eval runs on other worlds (their graded passes train)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.dabench is None:  # the default share is looked for beside the repository: say when it is not there
        print(f"no DABench share at {DABENCH_DEV}: DABench evals skipped (give --dabench DIR)", flush=True)
    elif not a.dabench.is_dir():
        ap.error(f"--dabench {a.dabench}: no such folder")
    teacher = None if a.no_teacher else {"provider": "embedded", "model": a.teacher}
    cfg = PipelineConfig(out=a.out, student=a.student, teacher=teacher,
                         train_worlds=tuple(a.train_worlds), heldout_worlds=tuple(a.heldout_worlds), rows=a.rows,
                         tasks_per_world=a.tasks_per_world, dabench=a.dabench, limit=a.limit, max_turns=a.max_turns,
                         max_tokens=a.max_tokens, lora=a.lora, sft_steps=a.sft_steps, epochs=a.epochs, lr=a.lr,
                         export=not a.no_export, export_type=a.export_type, rl_steps=a.rl_steps,
                         rl_prompts=a.rl_prompts, rl_generations=a.rl_generations, rl_turns=a.rl_turns,
                         rl_tokens=a.rl_tokens, eval_teacher=a.eval_teacher, teacher_passes=a.teacher_passes,
                         extra_data=tuple(a.extra_data), seed=a.seed)
    summary = Pipeline(cfg).run()
    print(render_report(summary))
    print(f"report: {Path(cfg.out) / 'report.md'}")


if __name__ == "__main__":
    main()
