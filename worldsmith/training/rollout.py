"""Multi-turn rollouts in the action grammar, each `<code>` run in its own sandbox session — TRL's `rollout_func`.

One rollout is the analyst's loop (the same texts as inference: `agents.analyst`): the model writes a turn; a `<code>`
turn runs in the rollout's sandbox and its output comes back as an interpreter message; a void turn gets the void
feedback; an `<answer>` turn ends it; the last turn is told it is the last; at most `max_turns` turns and
`max_completion_length` completion tokens.

Tokens: the completion is the model's sampled tokens (env mask 1) interleaved with what the chat template puts
between turns — end of turn, the interpreter/feedback message, the next assistant header (env mask 0: these never
train). The in-between tokens come from rendering the template on a sentinel conversation, not from string
searches in the model's text.

Asynchronous interaction (DataMind): cells run on a private event-loop thread while the model generates for the
rollouts whose observations are already back, so sandbox time overlaps generation instead of adding to it.

Why `rollout_func`, not TRL's `environment_factory`: the latter speaks JSON tool calls through the chat template's
tool schema; our grammar is `<think>/<code>/<answer>` text, which SFT data and inference already use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from worldsmith.agents import setup_guard
from worldsmith.agents.analyst import (PRELUDE, empty_merge, last_turn_nudge, observation_text, repeat_nudge,
                                       same_output, void_feedback)
from worldsmith.agents.answer_guards import Cell, check_answer, profile_facts
from worldsmith.core.sandbox_config import SandboxConfig
from worldsmith.core.schemas import UNPAID_GUARDS
from worldsmith.tools.grammar import (ACTION_STOP_SEQUENCES, close_action, parse_turn_lenient, render_observation,
                                      to_chat_roles)
from worldsmith.tools.sandbox import Sandbox, SandboxError, SandboxPool, open_sandbox

T = TypeVar("T")
_SENTINEL = "\u00a7ASSISTANT-TURN\u00a7"


class TurnGenerator(Protocol):
    def __call__(self, contexts: list[list[int]]) -> list[list[int]]:
        """For each token context, the new tokens of one assistant turn (ending with EOS or a stop sequence)."""


class RolloutEvents(Protocol):
    def __call__(self, kind: str, /, **fields: Any) -> None:
        """`rollout_turns` after each generation round of a batch (turns generated, tokens, seconds, tally so far),
        `rollouts` when the batch is done (turns, cells, seconds, answered, void)."""


@dataclass
class RolloutConfig:
    max_turns: int = 10
    max_new_tokens: int = 512  # per turn
    max_observation_chars: int = 2000
    cell_timeout_s: float = 30.0
    prelude: bool = True  # run the analyst's import prelude in each fresh session, as inference does
    pool_size: int = 0  # warm sandbox sessions kept ready (0 = start each session on demand)
    restore_setup: bool = True  # run the setup again after a cell that undid it (as inference)
    # before generating for some rollouts while others' cells still run, wait up to this long for those cells so
    # their turns join the batch (a lone void-turn retry re-read its whole prompt alone: 25 s of a 0.5B on CPU)
    batch_wait_s: float = 5.0


@dataclass
class Rollout:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1 = sampled by the model (trains), 0 = environment
    messages: list[dict[str, str]] = field(default_factory=list)  # assistant / interpreter / user(feedback)
    void: bool = False  # some turn had no readable action
    answer: str | None = None
    turns: int = 0
    truncated: bool = False  # stopped by the token budget
    cells: int = 0
    cut_off: bool = False  # the latest turn hit max_new_tokens before it ended
    last_cell: tuple[str, str] | None = None  # (code, observation) of the latest cell, for the repeat note
    executed: list[Cell] = field(default_factory=list)  # every cell run, for the answer guards
    unsupported: str | None = None  # an unpaid answer guard's finding (no evidence, example copy, unshown)
    setup: str = ""  # the code its session ran before the first cell, when it ran without an error
    setup_probe: str = ""  # `df` as that setup left it (agents/setup_guard.py)
    restored: int = 0  # cells after which the setup ran again

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)


@dataclass
class RolloutTimings:
    generation_s: float = 0.0
    sandbox_s: float = 0.0  # session starts + cells, summed over rollouts (they overlap)
    sandbox_wait_s: float = 0.0  # time generation sat idle waiting for a cell: what the overlap could not hide

    def add(self, other: RolloutTimings) -> None:
        self.generation_s += other.generation_s
        self.sandbox_s += other.sandbox_s
        self.sandbox_wait_s += other.sandbox_wait_s


class _LoopThread:
    """An event loop in a daemon thread: sandbox sessions live on it across turns."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rollout-sandboxes", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class ChatFrame:
    """Token pieces the chat template puts around turns, found by rendering a sentinel conversation."""

    def __init__(self, tokenizer: Any) -> None:
        from worldsmith.training.chat_tokenizers import HFChatTokenizer

        self.tok = tokenizer if hasattr(tokenizer, "render") else HFChatTokenizer(tokenizer)
        eos = getattr(getattr(self.tok, "tokenizer", self.tok), "eos_token_id", None)
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}

    def prompt_ids(self, prompt: Sequence[dict[str, str]]) -> list[int]:
        return self.tok.encode(self.tok.render(to_chat_roles(list(prompt)), add_generation_prompt=True))

    def between_turns(self, *messages: str) -> list[int]:
        """Tokens from the end of an assistant turn's content to the start of the next one's, with `messages` as the
        user turns between (an interpreter message or feedback, and on the last turn the last-turn nudge)."""
        head = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}]
        before = self.tok.render(head, add_generation_prompt=False)
        after = self.tok.render(head + [{"role": "user", "content": m} for m in messages], add_generation_prompt=True)
        if not after.startswith(before) or _SENTINEL not in before:
            raise ValueError("the chat template does not render conversations prefix-stably (an assistant turn "
                             "renders differently once a user turn follows it); rollouts cannot splice turns")
        return self.tok.encode(before[before.rindex(_SENTINEL) + len(_SENTINEL):] + after[len(before):])

    def ended(self, ids: Sequence[int]) -> bool:
        return bool(ids) and ids[-1] in self.eos_ids


class SandboxEnvironment:
    """Runs batches of rollouts; as TRL's `rollout_func` it is called as `env(prompts, trainer)`.

    Dataset rows (read from `trainer.current_rows`): `prompt` (system + user messages), `inputs` (paths of the
    task's data files, copied or bound into the session); other columns (e.g. `answers`) go on to the rewards."""

    def __init__(self, tokenizer: Any, config: RolloutConfig | None = None, sandbox: SandboxConfig | None = None,
                 generator: TurnGenerator | None = None, on_event: RolloutEvents | None = None) -> None:
        self.frame = ChatFrame(tokenizer)
        self.config = config or RolloutConfig()
        self.sandbox = sandbox or SandboxConfig()
        self.generator = generator
        self.on_event = on_event  # progress inside a batch: a CPU step's rollouts take many minutes
        self._event_fields: dict[str, Any] = {}  # added to every event (the optimizer step being rolled out)
        self.timings = RolloutTimings()  # cumulative, for benchmarks and logs
        self.last_timings = RolloutTimings()  # the last batch's, logged with its step
        self.last_rollouts: list[Rollout] = []  # the last batch, in its rows' order (the trainer's sample log)
        self._loop: _LoopThread | None = None
        self._pool: SandboxPool | None = None

    # ---- TRL entry point -------------------------------------------------------------------------------
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        rows = list(getattr(trainer, "current_rows", []) or [])
        if len(rows) != len(prompts):
            raise ValueError(f"rollout: {len(prompts)} prompts but {len(rows)} dataset rows in trainer.current_rows "
                             "(use SFTRLTrainer, which records the rows it rolls out)")
        inputs = [[Path(p) for p in (r.get("inputs") or [])] for r in rows]
        generate = self.generator or trainer_generator(trainer, self.config.max_new_tokens)
        names = [[str(a.get("name")) for a in _decoded(r.get("answers"))] for r in rows]
        setups = [str(r.get("setup") or "") for r in rows]
        state = getattr(trainer, "state", None)
        self._event_fields = {"step": int(state.global_step) + 1} if state is not None else {}
        rollouts = self.run(prompts, inputs, generate, int(trainer.args.max_completion_length), names, setups)
        self.last_rollouts = rollouts
        for name, value in (("rollout/turns", sum(r.turns for r in rollouts) / len(rollouts)),
                            ("rollout/cells", sum(r.cells for r in rollouts) / len(rollouts)),
                            ("rollout/unsupported", sum(r.unsupported is not None for r in rollouts) / len(rollouts)),
                            # where the step's rollout time went (seconds): generation, sandbox cells summed over
                            # sessions (they overlap generation), and generation idle waiting for a cell
                            ("rollout/generation_s", self.last_timings.generation_s),
                            ("rollout/sandbox_s", self.last_timings.sandbox_s),
                            ("rollout/sandbox_wait_s", self.last_timings.sandbox_wait_s)):
            trainer._metrics["train" if trainer.model.training else "eval"][name].append(value)
        return rollout_output(rollouts)

    # ---- rollouts --------------------------------------------------------------------------------------
    def run(self, prompts: Sequence[Sequence[dict[str, str]]], inputs: Sequence[Sequence[Path]],
            generate: TurnGenerator, max_completion_tokens: int,
            names: Sequence[Sequence[str]] | None = None, setups: Sequence[str] | None = None) -> list[Rollout]:
        """Roll out every prompt to an answer, `max_turns` turns, or the token budget; one sandbox session each.
        An answer is then checked by inference's own guards (agents/answer_guards.check_answer) and one that an
        unpaid guard (core/schemas.UNPAID_GUARDS) fires on — no cell that read the data; a copy of the worked example,
        or of its answer line's example value ("e.g. 12.35") that no output showed; a number or name no output showed
        — is marked `unsupported` (the rewards score it at most 0: a right guess must not pay). `names`: each prompt's
        requested answer names; `setups`: code each session runs after the prelude, before the first cell (the join
        its task turn says has run), as inference."""
        loop = self._ensure_loop()
        timings = RolloutTimings()
        rollouts = [Rollout(prompt_ids=self.frame.prompt_ids(p)) for p in prompts]
        set_up: set[int] = set()  # the rollouts whose setup ran without an error
        def on_setup(k: int, probed: str) -> None:
            set_up.add(k)
            rollouts[k].setup = setups[k] if setups is not None else ""
            rollouts[k].setup_probe = probed

        sessions = [loop.submit(self._open(list(paths), timings, setups[k] if setups is not None else "",
                                           lambda probed, k=k: on_setup(k, probed)))
                    for k, paths in enumerate(inputs)]
        pending: dict[int, concurrent.futures.Future[str]] = {}
        ready = list(range(len(rollouts)))
        waited = False  # this round already waited for cells to join its batch
        try:
            while ready or pending:
                for i, fut in list(pending.items()):
                    if fut.done():
                        del pending[i]
                        self._continue(rollouts[i], render_observation(fut.result()), max_completion_tokens, ready, i)
                if not ready:  # nothing to generate for: wait for the first cell
                    start = time.perf_counter()
                    concurrent.futures.wait(list(pending.values()), return_when=concurrent.futures.FIRST_COMPLETED)
                    timings.sandbox_wait_s += time.perf_counter() - start
                    continue
                if pending and not waited and self.config.batch_wait_s > 0:
                    # a smaller batch than could be: wait a short while for the running cells (a batch shares its
                    # prefixes' prefill and decodes rows together)
                    start = time.perf_counter()
                    concurrent.futures.wait(list(pending.values()), timeout=self.config.batch_wait_s)
                    timings.sandbox_wait_s += time.perf_counter() - start
                    waited = True
                    continue
                batch, ready, waited = ready, [], False
                start = time.perf_counter()
                outs = generate([rollouts[i].prompt_ids + rollouts[i].completion_ids for i in batch])
                seconds = time.perf_counter() - start
                timings.generation_s += seconds
                for i, new in zip(batch, outs):
                    code = self._take_turn(rollouts[i], list(new), max_completion_tokens, ready, i)
                    if code is not None:
                        pending[i] = loop.submit(self._cell(sessions[i], code, timings, rollouts[i], inputs[i]))
                self._emit("rollout_turns", generated=len(batch), tokens=sum(len(o) for o in outs),
                           generation_s=round(seconds, 2), **_tally(rollouts))
        finally:
            for fut in pending.values():
                fut.cancel()
            concurrent.futures.wait([loop.submit(self._close(s)) for s in sessions])
        for k, r in enumerate(rollouts):
            if r.answer is not None:
                wanted = list(names[k]) if names is not None else []
                ran = [Cell(code=setups[k], ok=True, observation="")] if setups is not None and k in set_up else []
                found = next((f for f in check_answer(r.answer, _task_text(prompts[k]), wanted, ran + r.executed,
                                                      [str(p) for p in inputs[k]]) if f.kind in UNPAID_GUARDS), None)
                r.unsupported = f"{found.kind}: {found.detail}" if found else None
        self.timings.add(timings)
        self.last_timings = timings
        self._emit("rollouts", turns=sum(r.turns for r in rollouts), cells=sum(r.cells for r in rollouts),
                   unsupported=sum(r.unsupported is not None for r in rollouts),
                   generation_s=round(timings.generation_s, 2), sandbox_s=round(timings.sandbox_s, 2),
                   **_tally(rollouts))
        return rollouts

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(kind, **self._event_fields, **fields)

    def _take_turn(self, r: Rollout, new: list[int], budget: int, ready: list[int], i: int) -> str | None:
        """Append one generated turn; returns the code to run, or None when the rollout continues without a cell
        (void turn: feedback) or ends (answer, turn limit, budget)."""
        room = budget - len(r.completion_ids)
        if len(new) > room:
            new, r.truncated = new[:room], True
        r.completion_ids += new
        r.env_mask += [1] * len(new)
        r.turns += 1
        text = self.frame.tok.decode([t for t in new if t not in self.frame.eos_ids])
        raw = text if self.frame.ended(new) or r.truncated else close_action(text)
        r.cut_off = not self.frame.ended(new) and len(new) >= self.config.max_new_tokens
        turn = parse_turn_lenient(raw)
        r.messages.append({"role": "assistant", "content": raw})
        if r.truncated:
            return None
        if turn.action is None:
            r.void = True
            self._continue(r, void_feedback(turn.error), budget, ready, i, feedback=True)
            return None
        if turn.action.kind == "answer":
            r.answer = turn.action.content
            if not self.frame.ended(new) and len(r.completion_ids) < budget:
                r.completion_ids.append(min(self.frame.eos_ids))  # close the turn (not sampled: env mask 0)
                r.env_mask.append(0)
            return None
        if r.turns >= self.config.max_turns:
            return None  # the cell would produce an observation no turn is left to read
        r.cells += 1
        return turn.action.content

    def _continue(self, r: Rollout, message: str, budget: int, ready: list[int], i: int,
                  feedback: bool = False) -> None:
        """Splice the in-between tokens (end of turn, `message`, next assistant header) and queue the next turn; when
        no turn or token is left for a reply, the message is not added (a rollout never ends on an unread message).
        Before the last turn the last-turn nudge follows as a user turn of its own, as inference sends it
        (graphs/analyst.act): without it every rollout that had not answered by then ended malformed, so a
        group's rewards were equal and it trained no RL term (SmolLM2-135M's SFT+RL run, 2026-12-05)."""
        last = 0 < r.turns == self.config.max_turns - 1
        said = [message, last_turn_nudge()] if last else [message]
        ids = self.frame.between_turns(*said)
        if self.frame.ended(r.completion_ids) and ids and ids[0] in self.frame.eos_ids:
            ids = ids[1:]  # the model closed its turn itself
        room = budget - len(r.completion_ids)
        if len(ids) >= room or r.turns >= self.config.max_turns:
            r.truncated = r.truncated or len(ids) >= room
            return
        r.messages.append({"role": "user" if feedback else "interpreter", "content": message})
        r.messages += [{"role": "user", "content": m} for m in said[1:]]
        r.completion_ids += ids
        r.env_mask += [0] * len(ids)
        ready.append(i)

    # ---- sandbox side (runs on the loop thread) --------------------------------------------------------
    def _ensure_loop(self) -> _LoopThread:
        if self._loop is None:
            self._loop = _LoopThread()
        return self._loop

    async def _open(self, inputs: list[Path], timings: RolloutTimings, setup: str = "",
                    on_setup: Callable[[str], None] | None = None) -> Sandbox:
        start = time.perf_counter()
        if self.config.pool_size > 0:
            if self._pool is None:
                self._pool = SandboxPool(self.sandbox, self.config.pool_size)
            sb = await self._pool.acquire(inputs)
        else:
            sb = open_sandbox(self.sandbox, inputs=inputs)
            await sb.start()
        if self.config.prelude:
            await sb.run(PRELUDE)
        if setup and (await sb.run(setup)).ok and on_setup is not None:
            # it counts as a cell that read the data, as in inference; the probe says what `df` is after it
            on_setup(await setup_guard.snapshot(sb) if self.config.restore_setup else "")
        timings.sandbox_s += time.perf_counter() - start
        return sb

    async def _cell(self, session: concurrent.futures.Future[Sandbox], code: str, timings: RolloutTimings,
                    r: Rollout, inputs: Sequence[Path]) -> str:
        """The cell's observation exactly as inference words it (graphs/analyst.py execute): the same hints after an
        error (column spellings, the tables that have a column, the right reader), the cut-off note and the repeat
        note. Inference's re-sampling of a repeated failed cell is not done here: RL learns from its own repeats."""
        sb = await asyncio.wrap_future(session)
        start = time.perf_counter()
        result = await sb.run(code, timeout=self.config.cell_timeout_s)
        timings.sandbox_s += time.perf_counter() - start
        facts = None
        if inputs and (result.error is not None or empty_merge(code, result.stdout or "")):
            facts = await asyncio.to_thread(profile_facts, [str(p) for p in inputs])
        text = observation_text(result, self.config.max_observation_chars, facts, code=code,
                                cut_off_at=self.config.max_new_tokens if r.cut_off else None)
        if r.setup and self.config.restore_setup and not result.restarted and \
                (again := await setup_guard.again(sb, code, r.setup, r.setup_probe)):
            text += "\n" + again  # as inference: the setup's work undone by the cell, done again
            r.restored += 1
        if r.last_cell is not None and r.last_cell[0] == code and same_output(r.last_cell[1], text):
            text += repeat_nudge()
        r.last_cell = (code, text)
        r.executed.append(Cell(code=code, ok=result.ok, observation=text))
        return text

    @staticmethod
    async def _close(session: concurrent.futures.Future[Sandbox]) -> None:
        try:
            sb = await asyncio.wrap_future(session)
        except (SandboxError, OSError, ValueError):  # it never opened: the rollout raised that error already
            return
        await sb.close()

    def close(self) -> None:
        """Stop the warm pool and the loop thread (a later run starts them again)."""
        if self._loop is None:
            return
        if self._pool is not None:
            self._loop.submit(self._pool.close()).result(timeout=60)
            self._pool = None
        self._loop.close()
        self._loop = None


def _tally(rollouts: Sequence[Rollout]) -> dict[str, int]:
    """Where a batch of rollouts stands: how many, answered and with a void turn so far."""
    return {"rollouts": len(rollouts), "answered": sum(r.answer is not None for r in rollouts),
            "void": sum(r.void for r in rollouts)}


def _task_text(prompt: Sequence[dict[str, str]]) -> str:
    """The task as the model read it: the prompt's user turns (the answer line is in the last)."""
    return "\n\n".join(str(m.get("content") or "") for m in prompt if m.get("role") == "user")


def rollout_output(rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """TRL's rollout_func result: token ids, env mask, and per-completion fields the trainer and rewards read."""
    return {
        "prompt_ids": [r.prompt_ids for r in rollouts],
        "completion_ids": [r.completion_ids for r in rollouts],
        "logprobs": None,  # recomputed by the trainer (no vLLM importance correction on this path)
        "env_mask": [r.env_mask for r in rollouts],
        "void": [r.void for r in rollouts],
        "rollout_messages": [r.messages for r in rollouts],
        "answer_tokens": [r.model_tokens for r in rollouts],
        "unsupported": [r.unsupported is not None for r in rollouts],
        "answered": [r.answer is not None for r in rollouts],
    }


def _decoded(answers: Any) -> list[dict[str, Any]]:
    """A dataset row's answers (JSON text in the RL dataset, or already a list); [] for report tasks."""
    if isinstance(answers, str):
        answers = json.loads(answers)
    return [a for a in answers or [] if isinstance(a, dict)]


def rollout_reward(base: Callable[..., list[float]]) -> Callable[..., list[float]]:
    """A TRL reward function scoring the rollout's structured messages (assistant turns and interpreter output as
    separate messages) rather than TRL's decoded completion text; `answers` given as JSON text are decoded. A
    rollout the answer guards left `unsupported` scores at most 0: no credit for an answer no data backs (a
    malformed one keeps its penalty). A rollout that never gave a readable `<answer>` is scored as an empty
    completion (DataMind: malformed, −0.1; closed-form: 0), whatever its turns' text: the base 0.5B's void last
    turn `@test_price_gap[12.35]` (the format line's example, within the answer's tolerance) was graded correct
    from the bare text, after a run whose every cell failed."""

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        messages = kwargs.pop("rollout_messages", None)
        unsupported = kwargs.pop("unsupported", None)
        answered = kwargs.pop("answered", None)
        if kwargs.get("answers") is not None:  # the RL dataset stores each row's answers as JSON text
            kwargs["answers"] = [_decoded(a) for a in kwargs["answers"]]
        if messages is not None and answered is not None:  # no answer given: scored as an empty completion
            messages = [m if ok else [{"role": "assistant", "content": ""}]
                        for m, ok in zip(messages, answered, strict=True)]
        scores = base(prompts, completions if messages is None else messages, **kwargs)
        if unsupported is None:
            return scores
        return [min(s, 0.0) if bad else s for s, bad in zip(scores, unsupported, strict=True)]

    reward.__name__ = getattr(base, "__name__", "reward")
    return reward


def trainer_generator(trainer: Any, max_new_tokens: int) -> TurnGenerator:
    """Sampling with the trainer's model and its generation settings (temperature, top_p)."""
    from trl.models import unwrap_model_for_generation

    args = trainer.args

    def generate(contexts: list[list[int]]) -> list[list[int]]:
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            return hf_generate(model, trainer.processing_class, contexts, max_new_tokens=max_new_tokens,
                               temperature=float(args.temperature), top_p=float(args.top_p),
                               top_k=int(args.top_k or 0), min_p=args.min_p,
                               repetition_penalty=float(args.repetition_penalty))

    return generate


def hf_generate(model: Any, tokenizer: Any, contexts: list[list[int]], *, max_new_tokens: int,
                temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, min_p: float | None = None,
                repetition_penalty: float = 1.0, share_prefixes: bool = True) -> list[list[int]]:
    """One assistant turn per context with `model.generate`, stopping at EOS or an action stop sequence.

    Every sampling setting is passed, so a checkpoint's own generation_config (Qwen2.5's ships top_k 20, top_p 0.8,
    repetition penalty 1.1) never changes what the rollouts sample from: the trainer's log-probabilities assume the
    configured distribution (TRL's defaults: temperature only).

    `share_prefixes`: contexts that share a long prefix (a group's G rollouts share their whole prompt) have it
    prefilled once and its KV cache copied to each row (`shared_prefix_plan`); only the rest of each context is
    prefilled per row. On CPU a turn's cost is mostly prefill (the 0.5B reads a 2,800-token prompt at ~140 tokens/s
    and decodes at ~5 rows × tokens/s), so a group of 4 re-reads its prompt once instead of 4 times a turn."""
    import torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    plan = shared_prefix_plan(contexts) if share_prefixes else None
    cache = None
    if plan is None:  # left padding: every row's new tokens start at `width`
        ids, attention = _padded([list(c) for c in contexts], [[] for _ in contexts], pad)
    else:
        groups, lengths = plan
        prefixes = [list(contexts[members[0]][:n]) for members, n in zip(groups, lengths)]
        row_group = [0] * len(contexts)
        for g, members in enumerate(groups):
            for i in members:
                row_group[i] = g
        cache = _prefill(model, *_padded(prefixes, [[] for _ in prefixes], pad), device)
        cache.reorder_cache(torch.as_tensor(row_group, device=device))  # one copy of its prefix per row
        ids, attention = _padded([prefixes[g] for g in row_group],
                                 [list(c[lengths[g]:]) for c, g in zip(contexts, row_group)], pad)
    width = ids.shape[1]
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(device), attention_mask=attention.to(device),
                             max_new_tokens=max_new_tokens, do_sample=temperature > 0,
                             temperature=temperature if temperature > 0 else None, top_p=top_p, top_k=top_k,
                             min_p=min_p, repetition_penalty=repetition_penalty,
                             stop_strings=list(ACTION_STOP_SEQUENCES), tokenizer=tokenizer, pad_token_id=pad,
                             **({"cache": cache} if cache is not None else {}))
    eos = tokenizer.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    turns = []
    for row in out[:, width:].tolist():
        end = next((k for k, t in enumerate(row) if t in eos_ids or t == pad), len(row))
        text = tokenizer.decode(row[:end], skip_special_tokens=False)
        stopped = any(text.rstrip().endswith(s) for s in ACTION_STOP_SEQUENCES)
        keep_eos = end < len(row) and row[end] in eos_ids and not stopped  # the model ended its turn itself
        turns.append(row[:end + 1] if keep_eos else row[:end])
    return turns


def shared_prefix_plan(contexts: Sequence[Sequence[int]], min_shared: int = 64
                       ) -> tuple[list[list[int]], list[int]] | None:
    """Contexts grouped by a shared prefix of at least `min_shared` tokens: (groups of context indices, each group's
    prefix length), every context in exactly one group; a prefix always leaves its contexts ≥ 1 token to prefill.
    None when no two contexts share such a prefix (nothing to gain). Sorting makes contexts with a common prefix
    neighbours, so one pass finds the groups."""
    order = sorted(range(len(contexts)), key=lambda i: list(contexts[i]))
    groups: list[list[int]] = []
    lengths: list[int] = []
    for i in order:
        ctx = contexts[i]
        if groups:
            head = contexts[groups[-1][0]]
            common = _common_prefix(head[:lengths[-1]], ctx)
            if common >= min_shared:
                groups[-1].append(i)
                lengths[-1] = common
                continue
        groups.append([i])
        lengths.append(len(ctx))
    if all(len(g) == 1 for g in groups):
        return None
    lengths = [min(n, min(len(contexts[i]) for i in g) - 1) for g, n in zip(groups, lengths)]
    return groups, lengths


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    return next((k for k in range(n) if a[k] != b[k]), n)


def _padded(heads: list[list[int]], tails: list[list[int]], pad: int) -> tuple[Any, Any]:
    """Rows of `head + tail`, each part right-aligned in its own width (heads left-padded, tails padded between the
    two), with the attention mask that hides the padding; positions follow from the mask (model.generate)."""
    import torch

    wh = max(len(h) for h in heads)
    wt = max(len(t) for t in tails)
    ids = torch.full((len(heads), wh + wt), pad, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for row, (h, t) in enumerate(zip(heads, tails)):
        if h:
            ids[row, wh - len(h):wh] = torch.as_tensor(h)
            attention[row, wh - len(h):wh] = 1
        if t:
            ids[row, wh + wt - len(t):] = torch.as_tensor(t)
            attention[row, wh + wt - len(t):] = 1
    return ids, attention


def _prefill(model: Any, ids: Any, attention: Any, device: Any) -> Any:
    """The KV cache of a left-padded batch (positions from the mask, as generate computes them); no logits kept."""
    import torch

    positions = (attention.long().cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = model(input_ids=ids.to(device), attention_mask=attention.to(device), position_ids=positions.to(device),
                    use_cache=True, logits_to_keep=1)
    return getattr(out, "cache", None) or out.past_key_values
