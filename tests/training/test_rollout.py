"""Rollout environment: scripted turns through a real sandbox session; the env mask keeps interpreter and template
tokens out of training; void turns, answers, turn and token limits."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from worldsmith.tools.sandbox import SandboxConfig  # noqa: E402
from worldsmith.training.rollout import RolloutConfig, SandboxEnvironment, rollout_output, rollout_reward  # noqa: E402

from tests.training.tiny_lm import tiny_tokenizer  # noqa: E402

BACKEND = "local" if shutil.which("bwrap") else "process"
CODE_TURN = "<think>\ncount rows\n</think>\n<code>\nprint(len(open('sales.csv').read().splitlines()))\n</code>"
ANSWER_TURN = "<think>\n4 lines\n</think>\n<answer>\n@rows[3]\n</answer>"


def _scripted(tok, turns_by_rollout):  # noqa: ANN001, ANN202
    """A generator that plays fixed turns per rollout, ending each with EOS (as a model that closes its turn).
    A rollout is recognised by its prompt: the first context it is called with."""
    prompts: list[list[int]] = []
    progress = [0] * len(turns_by_rollout)

    def generate(contexts):  # noqa: ANN001, ANN202
        out = []
        for ctx in contexts:
            i = next((k for k, p in enumerate(prompts) if ctx[:len(p)] == p), None)
            if i is None:
                prompts.append(list(ctx))
                i = len(prompts) - 1
            text = turns_by_rollout[i][progress[i]]
            progress[i] += 1
            out.append(tok.encode(text, add_special_tokens=False) + [tok.eos_token_id])
        return out

    return generate


@pytest.fixture
def env():  # noqa: ANN201
    tok = tiny_tokenizer()
    e = SandboxEnvironment(tok, RolloutConfig(max_turns=4, cell_timeout_s=20),
                           SandboxConfig(backend=BACKEND, preload=[], timeout_s=20))  # type: ignore[arg-type]
    yield tok, e
    e.close()


def _prompt(q: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "analyst"}, {"role": "user", "content": q}]


def test_code_runs_in_a_sandbox_and_interpreter_tokens_never_train(env, sales_csv: Path) -> None:  # noqa: ANN001
    tok, e = env
    gen = _scripted(tok, [[CODE_TURN, ANSWER_TURN]])
    [r] = e.run([_prompt("A: how many lines?")], [[sales_csv]], gen, 4096)
    assert [m["role"] for m in r.messages] == ["assistant", "interpreter", "assistant"]
    assert "<interpreter>" in r.messages[1]["content"] and "\n4\n" in r.messages[1]["content"]  # header + 3 rows
    assert r.answer == "@rows[3]" and not r.void and r.turns == 2 and r.cells == 1
    trained = tok.decode([t for t, m in zip(r.completion_ids, r.env_mask) if m])
    untrained = tok.decode([t for t, m in zip(r.completion_ids, r.env_mask) if not m])
    assert trained == CODE_TURN + "<|im_end|>" + ANSWER_TURN + "<|im_end|>"
    assert untrained == "\n<|im_start|>user\n" + r.messages[1]["content"] + "<|im_end|>\n<|im_start|>assistant\n"
    # the whole sequence is what the chat template renders for the same conversation
    full = tok.decode(r.prompt_ids + r.completion_ids)
    assert full == tok.apply_chat_template(_prompt("A: how many lines?") + [
        {"role": "assistant", "content": CODE_TURN}, {"role": "user", "content": r.messages[1]["content"]},
        {"role": "assistant", "content": ANSWER_TURN}], tokenize=False).rstrip("\n")
    assert e.last_timings.generation_s >= 0 and e.last_timings.sandbox_s > 0


def test_void_turn_gets_feedback_and_marks_the_rollout(env, sales_csv: Path) -> None:  # noqa: ANN001
    tok, e = env
    gen = _scripted(tok, [["I think the answer is 3.", ANSWER_TURN], [ANSWER_TURN]])
    void, clean = e.run([_prompt("A: q"), _prompt("B: q")], [[sales_csv], [sales_csv]], gen, 4096)
    assert void.void and void.messages[1]["role"] == "user" and void.answer == "@rows[3]"
    assert not clean.void and clean.turns == 1 and clean.cells == 0
    out = rollout_output([void, clean])
    assert out["void"] == [True, False]
    assert out["answer_tokens"] == [sum(void.env_mask), sum(clean.env_mask)]
    assert all(len(c) == len(m) for c, m in zip(out["completion_ids"], out["env_mask"]))


def test_each_generation_round_and_the_batch_end_are_reported(env, sales_csv: Path) -> None:  # noqa: ANN001
    tok, e = env
    seen: list[tuple[str, dict]] = []
    e.on_event = lambda kind, **fields: seen.append((kind, fields))
    # A: a void turn, then an answer; B: code, then an answer; C: an answer at once
    gen = _scripted(tok, [["no tags here", ANSWER_TURN], [CODE_TURN, ANSWER_TURN], [ANSWER_TURN]])
    e.run([_prompt("A: q"), _prompt("B: q"), _prompt("C: q")], [[sales_csv]] * 3, gen, 4096)
    rounds = [f for k, f in seen if k == "rollout_turns"]
    # round 1: three turns (C answers, A is void); A's retry is ready at once, but waits for B's cell: one batch of 2
    assert [r["generated"] for r in rounds] == [3, 2]
    assert (rounds[0]["answered"], rounds[0]["void"]) == (1, 1) and rounds[-1]["answered"] == 3
    assert [k for k, _ in seen][-1] == "rollouts"
    done = seen[-1][1]
    assert (done["rollouts"], done["answered"], done["void"], done["turns"], done["cells"]) == (3, 3, 1, 5, 1)
    # without the wait, A's retry goes alone while B's cell runs: rounds of 3, 1, 1
    seen.clear()
    e.config.batch_wait_s = 0
    gen = _scripted(tok, [["no tags here", ANSWER_TURN], [CODE_TURN, ANSWER_TURN], [ANSWER_TURN]])
    e.run([_prompt("A: q"), _prompt("B: q"), _prompt("C: q")], [[sales_csv]] * 3, gen, 4096)
    assert [f["generated"] for k, f in seen if k == "rollout_turns"] == [3, 1, 1]


def test_turn_and_token_limits(env, sales_csv: Path) -> None:  # noqa: ANN001
    tok, e = env
    many = _scripted(tok, [[CODE_TURN] * 10])
    [r] = e.run([_prompt("A: loop")], [[sales_csv]], many, 4096)
    assert r.turns == 4 and r.cells == 3 and r.answer is None  # no cell after the last turn
    # before the last turn, the nudge inference sends (graphs/analyst.act), a user turn of its own after the output
    assert [m["role"] for m in r.messages] == ["assistant", "interpreter"] * 3 + ["user", "assistant"]
    assert r.messages[6]["content"].startswith("This is your last turn. Give your final <answer> now")
    assert sum("last turn" in m["content"] for m in r.messages) == 1
    full = tok.decode(r.prompt_ids + r.completion_ids)
    assert full == tok.apply_chat_template(_prompt("A: loop") + [
        {"role": "user" if m["role"] == "interpreter" else m["role"], "content": m["content"]} for m in r.messages],
        tokenize=False).rstrip("\n")
    short = _scripted(tok, [[CODE_TURN] * 10])
    [r] = e.run([_prompt("A: loop")], [[sales_csv]], short, 40)
    assert len(r.completion_ids) == 40 and r.truncated and r.cells == 0


def test_observations_carry_the_same_hints_as_inference(env, sales_csv: Path) -> None:  # noqa: ANN001
    """One environment for training and inference: a misspelt column gets the data's spelling, a repeated failing
    cell the repeat note, exactly as the analyst graph words them (agents/analyst.py)."""
    tok, e = env
    wrong = "<think>\nmean\n</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['Amount'].mean())\n</code>"
    gen = _scripted(tok, [[wrong, wrong, ANSWER_TURN]])
    [r] = e.run([_prompt("A: mean?")], [[sales_csv]], gen, 4096)
    first, second = r.messages[1]["content"], r.messages[3]["content"]
    assert "KeyError" in first and "'Amount' → 'amount'. Use the exact name." in first
    assert "same code as in your previous turn" not in first
    assert "same code as in your previous turn" in second and "'Amount' → 'amount'" in second


def test_rewards_read_the_structured_rollout() -> None:
    seen = {}

    def base(prompts, completions, **kw):  # noqa: ANN001, ANN202
        seen.update(completions=completions, kw=kw)
        return [1.0]

    msgs = [[{"role": "assistant", "content": ANSWER_TURN}]]
    assert rollout_reward(base)(["p"], ["flattened text"], rollout_messages=msgs, answers=[[]]) == [1.0]
    assert seen["completions"] == msgs and "rollout_messages" not in seen["kw"]


def test_a_right_answer_no_cell_backs_earns_nothing(env, sales_csv: Path) -> None:  # noqa: ANN001
    """The blocking answer guards hold in RL as in inference: an answer after cells that all failed (or with no cell)
    is unsupported, and the reward of a correct unsupported answer is 0, not 1; a backed one keeps its credit."""
    from worldsmith.training.rewards import datamind_reward

    tok, e = env
    failing = "<think>\nload\n</think>\n<code>\nprint(open('nope.csv').read())\n</code>"
    gen = _scripted(tok, [[failing, ANSWER_TURN], [ANSWER_TURN], [CODE_TURN, ANSWER_TURN]])
    rollouts = e.run([_prompt("A"), _prompt("B"), _prompt("C")], [[sales_csv]] * 3, gen, 4096, [["rows"]] * 3)
    assert [r.answer for r in rollouts] == ["@rows[3]"] * 3
    assert rollouts[0].unsupported == "no_evidence: every code cell failed"
    assert rollouts[1].unsupported == "no_evidence: no code has run" and rollouts[2].unsupported is None
    out = rollout_output(rollouts)
    assert out["unsupported"] == [True, True, False]
    answers = [[{"name": "rows", "value": 3}]] * 3
    scores = rollout_reward(datamind_reward)(["A", "B", "C"], ["", "", ""], rollout_messages=out["rollout_messages"],
                                             unsupported=out["unsupported"], answers=answers, answer_tokens=[10] * 3)
    assert scores == [0.0, 0.0, 1.0]  # all three answers are right; only the backed one pays


def test_a_setup_runs_before_the_first_cell_and_counts_as_reading_the_data(env, sales_csv: Path) -> None:  # noqa: ANN001
    """A task turn that says the join has run (agents/analyst.Opening.setup): the rollout's session runs it, as
    inference does, so a first cell that starts from `df` works and an answer after it is backed by the data."""
    tok, e = env
    setup = "df = pd.read_csv('sales.csv')"
    if not e.config.prelude:
        setup = "import pandas as pd\n" + setup
    from_df = "<think>\ndf is loaded\n</think>\n<code>\nprint(len(df))\n</code>"
    gen = _scripted(tok, [[from_df, ANSWER_TURN], [from_df, ANSWER_TURN]])
    with_setup, without = e.run([_prompt("A"), _prompt("B")], [[sales_csv]] * 2, gen, 4096, [["rows"]] * 2,
                                [setup, ""])
    assert with_setup.executed[0].ok and with_setup.executed[0].observation.startswith("3")  # 3 rows, by hand
    assert with_setup.unsupported is None
    assert not without.executed[0].ok and without.unsupported == "no_evidence: every code cell failed"


def test_a_cell_undoing_the_setup_gets_it_back_as_in_inference(env, sales_csv: Path) -> None:  # noqa: ANN001
    """The setup guard of inference (agents/setup_guard.py) holds in rollouts too: one environment for both."""
    tok, e = env
    setup = "df = pd.read_csv('sales.csv')\ndf['twice'] = df['amount'] * 2"
    if not e.config.prelude:
        setup = "import pandas as pd\n" + setup
    reload = "<think>\nload\n</think>\n<code>\ndf = pd.read_csv('sales.csv')\nprint(len(df))\n</code>"
    from_df = "<think>\nfrom df\n</think>\n<code>\nprint(list(df.columns))\n</code>"
    gen = _scripted(tok, [[reload, from_df, ANSWER_TURN]])
    [r] = e.run([_prompt("A")], [[sales_csv]], gen, 4096, [["rows"]], [setup])
    assert "lost the columns `twice`" in r.executed[0].observation and r.restored == 1
    assert "'twice'" in r.executed[1].observation  # the setup's df, back


def test_a_setup_frame_cut_to_one_group_is_made_whole_again_as_in_inference(env, sales_csv: Path) -> None:  # noqa: ANN001
    tok, e = env
    setup = "df = pd.read_csv('sales.csv')"
    if not e.config.prelude:
        setup = "import pandas as pd\n" + setup
    cut = ("<think>\nsplit\n</think>\n<code>\ndf = df[df['region'] == 'north']\n"
           "print(len(df[df['region'] == 'south']))\n</code>")
    count = "<think>\ncount\n</think>\n<code>\nprint(len(df))\n</code>"
    gen = _scripted(tok, [[cut, count, ANSWER_TURN]])
    [r] = e.run([_prompt("A")], [[sales_csv]], gen, 4096, [["rows"]], [setup])
    assert "holds every row once more" in r.executed[0].observation
    assert r.executed[1].observation.startswith("3")  # sales.csv's 3 rows again


def test_a_rollout_without_a_readable_answer_is_malformed_whatever_its_last_text(
        env, sales_csv: Path) -> None:  # noqa: ANN001
    """The base 0.5B's last turn was a bare `@test_price_gap[12.35]` (no tags: a void turn, no answer) and the text
    grader found the right value in it; a rollout that never answered is malformed (−0.1), not correct."""
    from worldsmith.training.rewards import closed_form_reward, datamind_reward

    tok, e = env
    e.config.max_turns = 2
    gen = _scripted(tok, [[CODE_TURN, "@rows[3]"], [CODE_TURN, ANSWER_TURN]])
    bare, tagged = e.run([_prompt("A"), _prompt("B")], [[sales_csv]] * 2, gen, 4096, [["rows"]] * 2)
    assert bare.answer is None and bare.void and tagged.answer == "@rows[3]"
    out = rollout_output([bare, tagged])
    assert out["answered"] == [False, True]
    answers = [[{"name": "rows", "value": 3}]] * 2
    kw = {k: out[k] for k in ("rollout_messages", "unsupported", "answered")}
    scores = rollout_reward(datamind_reward)(["A", "B"], ["", ""], answers=answers, answer_tokens=[10] * 2, **kw)
    assert scores == [-0.1, 1.0]
    assert rollout_reward(closed_form_reward)(["A", "B"], ["", ""], answers=answers, **kw) == [0.0, 1.0]


def test_the_answer_lines_example_copied_earns_nothing_even_inside_the_tolerance(
        env, sales_csv: Path) -> None:  # noqa: ANN001
    """The base 0.5B answered @test_price_gap[12.35], its answer line's "e.g. 12.35", and the true 11.58 is within
    10% of it: a copy no output showed is unsupported (as inference's guard), so it scores 0, not 1. The same value
    printed by a cell is the model's own result and keeps its credit."""
    from worldsmith.training.rewards import datamind_reward

    tok, e = env
    q = "What is the gap? End your answer with @gap[value in USD, e.g. 12.35]"  # the two prompts differ in front
    copy = "<think>\nthe example\n</think>\n<answer>\n@gap[12.35]\n</answer>"
    shows = "<think>\nprint it\n</think>\n<code>\nprint(len(open('sales.csv').read()) * 0 + 12.35)\n</code>"
    gen = _scripted(tok, [[CODE_TURN, copy], [shows, copy]])
    copied, computed = e.run([_prompt("A: " + q), _prompt("B: " + q)], [[sales_csv]] * 2, gen, 4096, [["gap"]] * 2)
    assert copied.unsupported is not None and copied.unsupported.startswith("example_copy")
    assert computed.unsupported is None
    out = rollout_output([copied, computed])
    answers = [[{"name": "gap", "value": 11.58, "tolerance": {"rel": 0.1}}]] * 2  # |12.35 − 11.58| = 0.77 < 1.158
    kw = {k: out[k] for k in ("rollout_messages", "unsupported", "answered")}
    scores = rollout_reward(datamind_reward)(["", ""], ["", ""], answers=answers, answer_tokens=[10] * 2, **kw)
    assert scores == [0.0, 1.0]


def test_a_right_number_or_name_no_output_shows_earns_nothing(env, sales_csv: Path) -> None:  # noqa: ANN001
    """Inference keeps an unshown answer (one re-ask, then the grade decides); RL must not pay for it. sales.csv's
    amounts are 10, 20 and 30: a total of 60 and the largest region `east`, worked out by hand. Answered after a
    cell that printed only the line count, both are guesses and score 0; printed by a cell, they keep their credit."""
    from worldsmith.training.rewards import datamind_reward

    tok, e = env
    total = "<think>\nsum\n</think>\n<code>\nprint(pd.read_csv('sales.csv')['amount'].sum())\n</code>"
    biggest = ("<think>\nlargest\n</think>\n<code>\nd = pd.read_csv('sales.csv')\n"
               "print(d.loc[d['amount'].idxmax(), 'region'])\n</code>")
    if not e.config.prelude:
        total, biggest = (t.replace("<code>\n", "<code>\nimport pandas as pd\n") for t in (total, biggest))
    say_total = "<think>\nsum\n</think>\n<answer>\n@total[60]\n</answer>"
    say_east = "<think>\nlargest\n</think>\n<answer>\n@region[east]\n</answer>"
    gen = _scripted(tok, [[CODE_TURN, say_total], [total, say_total], [CODE_TURN, say_east], [biggest, say_east]])
    q = "Which region has the largest amount? @region[region_name] where region_name is a string"
    rollouts = e.run([_prompt("A: total?"), _prompt("B: total?"), _prompt("C: " + q), _prompt("D: " + q)],
                     [[sales_csv]] * 4, gen, 4096, [["total"], ["total"], ["region"], ["region"]])
    assert [r.unsupported for r in rollouts] == ["unshown: @total[60]", None, "unshown: @region[east]", None]
    out = rollout_output(rollouts)
    answers = [[{"name": "total", "value": 60}]] * 2 + [[{"name": "region", "value": "east"}]] * 2
    kw = {k: out[k] for k in ("rollout_messages", "unsupported", "answered")}
    scores = rollout_reward(datamind_reward)([""] * 4, [""] * 4, answers=answers, answer_tokens=[10] * 4, **kw)
    assert scores == [0.0, 1.0, 0.0, 1.0]
