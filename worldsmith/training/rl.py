"""SFT+RL: a TRL `GRPOTrainer` whose loss is γ(step)·L_SFT + (1−γ(step))·L_RL (DataMind's mixed objective).

L_RL is TRL's own loss (DAPO by default: token-level normalisation, clip ε_low 0.2 / ε_high 0.28, β = 0), computed by
the parent's `_compute_loss` on the batch after two masks this trainer adds when the batch is generated:

* a completion whose rollout had a void turn (the environment's `void` flag) gets a zero env mask and a zero
  advantage, so it moves neither loss nor the token count that normalises DAPO;
* a group whose rewards are all equal (no learning signal: DAPO's dynamic-sampling filter) is masked the same way,
  so such a prompt trains through its SFT term only.

L_SFT is the masked NLL of the expert trajectory for the same prompt (dataset columns `expert_input_ids` and
`expert_completion_mask`, built from the SFT dataset's `input_ids`/`completion_mask`), one example per prompt: it is
attached to the first completion of each group. It is normalised by the expert tokens of the whole generation
batch, the way TRL normalises DAPO, so gradient accumulation gives the gradient of one big batch.

Only TRL's extension points are used: `compute_loss`, `_generate_and_score_completions` (wrapped: super() then the
masks) and `_calculate_rewards` (wrapped: super(), keeping the rewards for the group filter). Rollouts come from a
`rollout_func` (see rollout.py), which reads the batch's dataset rows from `trainer.current_rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from worldsmith.training.rl_loss import equal_reward_groups, pad_right, predicting_positions, target_nll
from worldsmith.training.schedules import DEFAULT_SCHEDULE, parse_schedule

EXPERT_IDS, EXPERT_MASK, VOID = "expert_input_ids", "expert_completion_mask", "void"


@dataclass
class SFTRLConfig(GRPOConfig):
    """GRPOConfig with the SFT+RL defaults of the issue, plus the three knobs of the mixed objective."""

    loss_type: str = "dapo"
    epsilon: float = 0.2
    epsilon_high: float | None = 0.28
    beta: float = 0.0
    num_generations: int | None = 4
    gamma_schedule: str = field(default=DEFAULT_SCHEDULE, metadata={
        "help": "SFT weight over the run: cosine | cosine:<hi>:<lo> | linear | constant:<v> | sft-then-rl:<pct>"})
    mask_void: bool = field(default=True, metadata={
        "help": "a completion with any void turn contributes to neither loss"})
    filter_equal_groups: bool = field(default=True, metadata={
        "help": "a group whose rewards are all equal contributes SFT loss only"})

    def __post_init__(self) -> None:
        super().__post_init__()
        parse_schedule(self.gamma_schedule)  # fail at configuration time, not at the first step


#: GSPO as its paper trains it (Zheng et al. 2025, v2 §5.1; TRL's paper index gives the same GRPOConfig): one
#: importance ratio per sequence, the per-sequence mean loss (TRL warns that DAPO's token sum weights each sequence
#: by its length), and a clip range three orders of magnitude narrower, as a sequence ratio moves far less than a
#: token's.
GSPO_SETTINGS: dict[str, Any] = {"importance_sampling_level": "sequence", "loss_type": "grpo",
                                 "epsilon": 3e-4, "epsilon_high": 4e-4}


def objective_settings(gspo: bool) -> dict[str, Any]:
    """SFTRLConfig keyword arguments for the RL objective: DAPO (the config's defaults) or GSPO."""
    return dict(GSPO_SETTINGS) if gspo else {"importance_sampling_level": "token"}


class SFTRLTrainer(GRPOTrainer):
    """`GRPOTrainer` + the SFT term, γ schedule, group filter and void masking. Build it like a GRPOTrainer with an
    `SFTRLConfig` (a plain GRPOConfig gets the config defaults above)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gamma_schedule = parse_schedule(getattr(self.args, "gamma_schedule", DEFAULT_SCHEDULE))
        self.mask_void = bool(getattr(self.args, "mask_void", True))
        self.filter_equal_groups = bool(getattr(self.args, "filter_equal_groups", True))
        self.current_rows: list[dict[str, Any]] = []  # the dataset rows being rolled out (read by rollout_func)
        self._last_rewards: torch.Tensor | None = None
        #: called with one record per completion of each generation batch (`rollout_samples`): what the student
        #: wrote and saw, its rewards, and whether it trained L_RL
        self.sample_log: Callable[[list[dict[str, Any]]], None] | None = None

    # ---- the schedule ----------------------------------------------------------------------------------
    def gamma(self) -> float:
        """γ at the current optimizer step (the run's length is known once `train()` has started)."""
        return self.gamma_schedule(self.state.global_step, max(int(self.state.max_steps or 0), 1))

    # ---- batch preparation -----------------------------------------------------------------------------
    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> torch.Tensor:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards = rewards_per_func  # gathered over processes, (N, n_funcs): the group filter needs it
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.current_rows = inputs
        output = super()._generate_and_score_completions(inputs)
        return self.add_sft_and_masks(inputs, output)

    def add_sft_and_masks(self, rows: list[dict[str, Any]], output: dict[str, Any]) -> dict[str, Any]:
        """Mask void completions and equal-reward groups out of the RL term, and attach the expert examples."""
        device = output["completion_ids"].device
        mode = "train" if self.model.training else "eval"
        n = len(rows)
        group = self.num_generations if mode == "train" else self.num_generations_eval
        void = torch.tensor([bool(r.get(VOID, False)) for r in rows], device=device)
        filtered = torch.zeros(n, dtype=torch.bool, device=device)
        start = self.accelerator.process_index * n
        if self.filter_equal_groups and self._last_rewards is not None:
            weights = self.reward_weights.to(self._last_rewards.device)
            rewards = (self._last_rewards * weights.unsqueeze(0)).nansum(dim=1)
            equal = equal_reward_groups(rewards, group).repeat_interleave(group)
            filtered = equal[start:start + n].to(device)
        drop = filtered | void if self.mask_void else filtered
        keep = (~drop).to(output["completion_mask"].dtype)
        env_mask = output.get("tool_mask")
        env_mask = torch.ones_like(output["completion_mask"]) if env_mask is None else env_mask
        output["tool_mask"] = env_mask * keep.unsqueeze(1)
        output["advantages"] = output["advantages"] * keep.to(output["advantages"].dtype)
        trained = output["completion_mask"] * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(trained.sum()).sum()

        offset = self.accelerator.process_index * n  # a group may straddle processes: count globally
        first_of_group = [(offset + i) % group == 0 for i in range(n)]  # one expert example per prompt
        ids = [list(r.get(EXPERT_IDS) or []) if first else [] for r, first in zip(rows, first_of_group)]
        masks = [list(r.get(EXPERT_MASK) or []) if first else [] for r, first in zip(rows, first_of_group)]
        for i, (a, b) in enumerate(zip(ids, masks)):
            if len(a) != len(b):
                raise ValueError(f"row {i}: {EXPERT_IDS} has {len(a)} tokens but {EXPERT_MASK} has {len(b)}")
        pad_id = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        output["sft_input_ids"] = pad_right(ids, pad_id).to(device)
        output["sft_attention_mask"] = pad_right([[1] * len(a) for a in ids], 0).to(device)
        output["sft_mask"] = pad_right(masks, 0).to(device)
        output["sft_num_tokens"] = self.accelerator.gather(output["sft_mask"][:, 1:].sum()).sum()

        self._metrics[mode]["rl/void_rate"].append(self.accelerator.gather(void.float()).mean().item())
        self._metrics[mode]["rl/filtered_group_frac"].append(self.accelerator.gather(filtered.float()).mean().item())
        if self.sample_log is not None:
            self.sample_log(rollout_samples(rows, self._last_rewards, self.reward_func_names, start, void, filtered,
                                            output["advantages"], getattr(self.rollout_func, "last_rollouts", None)))
        return output

    # ---- the loss --------------------------------------------------------------------------------------
    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> torch.Tensor:
        if return_outputs:
            raise ValueError("SFTRLTrainer does not return outputs (like GRPOTrainer)")
        mode = "train" if self.model.training else "eval"
        gamma = self.gamma()
        # each term is already scaled for gradient accumulation; ×GA logs the accumulation window's value
        window = self.current_gradient_accumulation_steps if mode == "train" else 1
        loss = None
        if gamma < 1.0:
            rl = super()._compute_loss(model, inputs)
            self._metrics[mode]["rl/loss"].append(rl.detach().item() * window)
            loss = (1.0 - gamma) * rl
        if gamma > 0.0:
            sft = self.sft_loss(model, inputs)
            self._metrics[mode]["sft/loss"].append(sft.detach().item() * window)
            loss = gamma * sft if loss is None else loss + gamma * sft
        self._metrics[mode]["sft/gamma"].append(gamma)
        assert loss is not None
        return loss

    def sft_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        """Masked NLL of this micro-batch's expert tokens over the generation batch's expert-token count."""
        mask = inputs["sft_mask"]
        rows = mask.sum(dim=1) > 0
        if not bool(rows.any()):  # no expert example here: a zero that still belongs to the graph
            return sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0  # type: ignore[return-value]
        ids, mask = inputs["sft_input_ids"][rows], mask[rows]
        keep = predicting_positions(mask)  # logits only where a trained token is predicted
        logits = model(input_ids=ids, attention_mask=inputs["sft_attention_mask"][rows], logits_to_keep=keep).logits
        total = target_nll(logits, ids[:, keep + 1], mask[:, keep + 1])
        normalizer = inputs["sft_num_tokens"].clamp(min=1.0) / self.accelerator.num_processes
        if self.model.training:  # the generation batch is split over steps_per_generation micro-batches
            normalizer = normalizer * self.current_gradient_accumulation_steps / self.args.steps_per_generation
        return total / normalizer


def rollout_samples(rows: Sequence[dict[str, Any]], rewards: torch.Tensor | None, names: Sequence[str], start: int,
                    void: torch.Tensor, filtered: torch.Tensor, advantages: torch.Tensor,
                    rollouts: Sequence[Any] | None) -> list[dict[str, Any]]:
    """One record per completion: its task, each reward function's score, the advantage it trained with (0 when
    masked), why it was masked, and — when the rollout environment kept them — its messages, answer and the
    answer guards' finding. `rewards` is the gathered (all processes, functions) matrix; this process's rows
    start at `start`."""
    rollouts = list(rollouts or [])
    if len(rollouts) != len(rows):
        rollouts = [None] * len(rows)
    out = []
    for i, (row, r) in enumerate(zip(rows, rollouts)):
        rec: dict[str, Any] = {"task_id": row.get("task_id")}
        if rewards is not None:
            rec["rewards"] = {n: _number(rewards[start + i, k]) for k, n in enumerate(names)}
        rec.update(advantage=round(float(advantages[i]), 6), void=bool(void[i]), filtered=bool(filtered[i]))
        if r is not None:
            rec.update(answer=r.answer, unsupported=r.unsupported, turns=r.turns, messages=r.messages)
        out.append(rec)
    return out


def _number(x: torch.Tensor) -> float | None:
    v = float(x)
    return None if v != v else round(v, 6)  # NaN: the function did not score this completion


__all__ = ["EXPERT_IDS", "EXPERT_MASK", "SFTRLConfig", "SFTRLTrainer", "VOID", "rollout_samples"]
