"""The SFT weight γ over a run: L = γ(step)·L_SFT + (1−γ(step))·L_RL (DataMind: SFT steadies agentic RL early and
stifles it late, so γ decays).

A schedule is named by a short spec string, so a run's config records it as text:

    cosine              0.9 → 0.05 along a half cosine over the run (the default)
    cosine:<hi>:<lo>    the same between other endpoints
    linear              0.9 → 0.05 in a straight line
    linear:<hi>:<lo>
    constant:<v>        γ = v throughout (constant:0 is plain RL, constant:1 plain SFT)
    sft-then-rl:<pct>   γ = 1 for the first <pct>% of the steps, then 0 (the two-stage baseline)

`step` counts optimizer steps from 0; `total` is the number of steps of the run. The last step (total − 1) reaches
the low endpoint exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Kind = Literal["cosine", "linear", "constant", "sft-then-rl"]
DEFAULT_SCHEDULE = "cosine"
HIGH, LOW = 0.9, 0.05


@dataclass(frozen=True)
class GammaSchedule:
    kind: Kind
    high: float = HIGH
    low: float = LOW
    switch_pct: float = 0.0  # sft-then-rl only

    def __call__(self, step: int, total: int) -> float:
        if total < 1:
            raise ValueError(f"γ schedule: total steps must be ≥ 1, got {total}")
        step = min(max(step, 0), total - 1)
        progress = step / (total - 1) if total > 1 else 1.0
        if self.kind == "constant":
            return self.high
        if self.kind == "sft-then-rl":
            return 1.0 if step < math.ceil(total * self.switch_pct / 100.0) else 0.0
        if self.kind == "linear":
            return self.high + (self.low - self.high) * progress
        return self.low + (self.high - self.low) * 0.5 * (1.0 + math.cos(math.pi * progress))

    @property
    def spec(self) -> str:
        if self.kind == "constant":
            return f"constant:{self.high:g}"
        if self.kind == "sft-then-rl":
            return f"sft-then-rl:{self.switch_pct:g}"
        return f"{self.kind}:{self.high:g}:{self.low:g}"


def parse_schedule(spec: str) -> GammaSchedule:
    """A schedule from its spec string (see the module docstring); raises ValueError naming what is wrong."""
    head, *args = spec.strip().split(":")
    try:
        values = [float(a) for a in args]
    except ValueError as exc:
        raise ValueError(f"γ schedule {spec!r}: arguments after ':' must be numbers") from exc
    if head in ("cosine", "linear"):
        if len(values) not in (0, 2):
            raise ValueError(f"γ schedule {spec!r}: give no endpoints or both, as {head}:<high>:<low>")
        high, low = values or (HIGH, LOW)
        _check_unit(spec, high, low)
        return GammaSchedule(head, high, low)  # type: ignore[arg-type]
    if head == "constant":
        if len(values) != 1:
            raise ValueError(f"γ schedule {spec!r}: write constant:<v> with v in [0, 1]")
        _check_unit(spec, values[0])
        return GammaSchedule("constant", values[0], values[0])
    if head == "sft-then-rl":
        if len(values) != 1 or not 0.0 <= values[0] <= 100.0:
            raise ValueError(f"γ schedule {spec!r}: write sft-then-rl:<pct> with pct in [0, 100]")
        return GammaSchedule("sft-then-rl", 1.0, 0.0, values[0])
    raise ValueError(f"unknown γ schedule {spec!r}: use cosine, linear, constant:<v> or sft-then-rl:<pct>")


def _check_unit(spec: str, *values: float) -> None:
    for v in values:
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"γ schedule {spec!r}: γ must lie in [0, 1], got {v:g}")
