"""The trajectory as a training record: old records still load; the conversation comes from the last call."""

from __future__ import annotations

import json

from worldsmith.core.schemas import Action, ModelCall, RecordedMessage, Trajectory


def test_a_trajectory_written_before_calls_were_recorded_still_loads() -> None:
    old = {"schema_version": "1", "id": "t-0", "task_id": "t", "model": "m", "user_prompt": "q",
           "steps": [{"index": 0, "raw": "<think>x</think><answer>@a[1]</answer>", "thought": "x",
                      "action": {"kind": "answer", "content": "@a[1]"}}],
           "final_answer": "@a[1]", "status": "answered",
           "metadata": {"answer_rounded_by_agent": False}}
    traj = Trajectory.model_validate_json(json.dumps(old))
    assert traj.calls == [] and traj.postprocess == [] and traj.graded_answer is None
    assert traj.answer_to_grade == "@a[1]" and traj.steps[0].call is None
    assert traj.messages() == []


def test_the_conversation_is_the_last_calls_messages_plus_its_reply() -> None:
    sent = [RecordedMessage(role="system", content="s", source="system"),
            RecordedMessage(role="user", content="q", source="task")]
    void = ModelCall(index=0, messages=sent, completion="hmm", reply="hmm", void_reason="no tags")
    answer = ModelCall(index=1, messages=[*sent, RecordedMessage(role="assistant", content="hmm", source="model_void"),
                                          RecordedMessage(role="user", content="use tags", source="feedback")],
                       completion="<think>x</think><answer>@a[1]", reply="<think>\nx\n</think>\n<answer>\n@a[1]\n</answer>",
                       action=Action(kind="answer", content="@a[1]"))
    traj = Trajectory(id="t", task_id="t", model="m", calls=[void, answer])
    msgs = traj.messages()
    assert [(m.role, m.content, m.trainable) for m in msgs] == [
        ("system", "s", False), ("user", "q", False), ("assistant", "hmm", False), ("user", "use tags", False),
        ("assistant", "<think>\nx\n</think>\n<answer>\n@a[1]\n</answer>", True)]
    # a void last call adds its reply untrained
    assert traj.model_copy(update={"calls": [void]}).messages()[-1].trainable is False
