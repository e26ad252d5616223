"""A trajectory as one SFT example: the chat exactly as the model saw it, token ids, and a loss mask.

Only tokens of trainable messages (the model's own valid assistant turns; see `RecordedMessage.trainable`) carry
loss. Where they start and end is found by rendering the model's chat template on message prefixes and diffing the
token sequences (`messages[:i]` with the generation prompt vs `messages[:i+1]`), never by searching strings: the
trained span is exactly what the template adds for the assistant turn after its header (its content and closing
tokens), whatever the template looks like.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worldsmith.core.schemas import RecordedMessage, Trajectory
from worldsmith.tools.grammar import step_messages, to_chat_roles
from worldsmith.training.chat_tokenizers import ChatTokenizer

IGNORE_INDEX = -100  # the label of a token that carries no loss (PyTorch's cross-entropy default)


@dataclass(frozen=True)
class SFTExample:
    messages: list[dict[str, str]]  # roles system/user/assistant, interpreter turns as the user turns they were
    input_ids: list[int]
    loss_mask: list[int]  # 1 where the token trains
    labels: list[int] = field(default_factory=list)  # input_ids where trained, IGNORE_INDEX elsewhere

    def trained_spans(self) -> list[tuple[int, int]]:
        """[start, end) token ranges that carry loss, in order."""
        spans: list[tuple[int, int]] = []
        for i, m in enumerate(self.loss_mask):
            if m and (not spans or spans[-1][1] != i):
                spans.append((i, i + 1))
            elif m:
                spans[-1] = (spans[-1][0], i + 1)
        return spans


def conversation(traj: Trajectory) -> list[RecordedMessage]:
    """The messages to train on. A trajectory with recorded model calls gives them as sent; an engine-written one
    (oracle / reference solution: no model call to record) is rendered from its steps, its valid turns trainable."""
    if traj.calls:
        return traj.messages()
    if traj.label not in ("oracle", "reference"):
        raise ValueError(f"trajectory {traj.id}: no recorded model calls (written before calls were recorded?); "
                         "a model's trajectory without them is not a faithful training record")
    msgs = [RecordedMessage(role="system", content=traj.system_prompt, source="system")] if traj.system_prompt else []
    msgs.append(RecordedMessage(role="user", content=traj.user_prompt, source="task"))
    for step in traj.steps:
        for m in to_chat_roles(step_messages(step)):
            model_turn = m["role"] == "assistant"
            msgs.append(RecordedMessage(role=m["role"], content=m["content"],
                                        trainable=model_turn and step.action is not None,
                                        source=("model" if step.action else "model_void") if model_turn else "interpreter"))
    return msgs


def to_sft_example(traj: Trajectory, tokenizer: ChatTokenizer) -> SFTExample:
    """Messages plus per-token ids and loss mask for one trajectory. Raises ValueError, naming the message, when the
    template does not tokenize prefix-stably (its rendering of a prefix is not a prefix of the whole)."""
    recorded = conversation(traj)
    messages = [{"role": m.role, "content": m.content} for m in recorded]
    input_ids = tokenizer.encode(tokenizer.render(messages, add_generation_prompt=False))
    mask = [0] * len(input_ids)
    for i, m in enumerate(recorded):
        if not m.trainable:
            continue
        before = tokenizer.encode(tokenizer.render(messages[:i], add_generation_prompt=True))
        through = tokenizer.encode(tokenizer.render(messages[:i + 1], add_generation_prompt=False))
        for name, ids in (("the conversation before it", before), ("the conversation through it", through)):
            if input_ids[:len(ids)] != ids:
                raise ValueError(f"trajectory {traj.id}, message {i} ({m.role}): the chat template's tokens for "
                                 f"{name} are not a prefix of the whole conversation's; loss masks cannot be "
                                 "derived from prefixes for this template")
        if len(through) <= len(before):
            raise ValueError(f"trajectory {traj.id}, message {i}: the template adds no tokens for this assistant turn")
        for t in range(len(before), len(through)):
            mask[t] = 1
    labels = [tok if m else IGNORE_INDEX for tok, m in zip(input_ids, mask)]
    return SFTExample(messages=messages, input_ids=input_ids, loss_mask=mask, labels=labels)
