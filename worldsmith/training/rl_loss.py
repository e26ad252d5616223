"""Tensor pieces of the SFT+RL objective that need no trainer: the SFT term's masked NLL, the equal-reward group
test, right padding. Pure torch, so they are tested by hand-computed values."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def masked_nll(logits: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over masked positions of −log p(token | prefix). `mask[b, t]` = 1 when token t trains: it is predicted
    from the logits at t − 1, so position 0 never counts. Summed, not averaged: the caller normalises."""
    if logits.shape[:2] != input_ids.shape or input_ids.shape != mask.shape:
        raise ValueError(f"masked_nll: logits {tuple(logits.shape)}, ids {tuple(input_ids.shape)} and mask "
                         f"{tuple(mask.shape)} must agree on (batch, length)")
    return target_nll(logits[:, :-1, :], input_ids[:, 1:], mask[:, 1:])


def predicting_positions(mask: torch.Tensor) -> torch.Tensor:
    """The positions whose logits predict a trained token in some row (t − 1 for every masked t), ascending: only
    these need logits (`logits_to_keep`). An expert trajectory is mostly prompt and interpreter output, so this is
    a few hundred of its thousands of positions — full logits over a 152k vocabulary were the bulk of the SFT
    term's memory on CPU."""
    return mask[:, 1:].any(dim=0).nonzero().flatten()


def target_nll(pred_logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of −log p(target) where `mask` is 1; `pred_logits[b, k]` are the logits predicting `targets[b, k]`."""
    pred = pred_logits.float()
    nll = F.cross_entropy(pred.reshape(-1, pred.size(-1)), targets.reshape(-1), reduction="none")
    return (nll.view_as(targets) * mask.to(nll.dtype)).sum()


def equal_reward_groups(rewards: torch.Tensor, group_size: int, atol: float = 1e-6) -> torch.Tensor:
    """One bool per group of `group_size` consecutive rewards: True when they are all equal (within atol; NaN, an
    unscorable completion, is ignored). Such a group has no advantage signal."""
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.view(-1, group_size).float()
    scored = ~torch.isnan(grouped)
    hi = torch.where(scored, grouped, torch.full_like(grouped, -torch.inf)).max(dim=1).values
    lo = torch.where(scored, grouped, torch.full_like(grouped, torch.inf)).min(dim=1).values
    return ~(hi - lo > atol)  # a group with < 2 scored completions counts as equal (nothing to compare)


def pad_right(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    """A (len(rows), longest) long tensor, each row padded on the right with `value` (width ≥ 1)."""
    width = max([len(r) for r in rows] + [1])
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        if len(r):
            out[i, :len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    return out
