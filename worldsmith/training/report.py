"""Training run reports: curves as PNG images and a Markdown summary, written into the run directory.

Shared by SFT and RL: `plot_curves` draws any numeric series found in a Trainer's `log_history` (loss, lr, grad
norm, γ, rewards…), one panel per metric, against the global step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Log keys that are bookkeeping, not curves.
_NOT_CURVES = {"step", "epoch", "total_flos", "train_runtime", "train_samples_per_second", "train_steps_per_second"}


def series(history: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of one metric over a log history, skipping entries without it or with a non-finite value."""
    xs, ys = [], []
    for rec in history:
        v = rec.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            xs.append(float(rec.get("step", len(xs) + 1)))
            ys.append(float(v))
    return xs, ys


def curve_keys(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """Numeric metrics that appear in at least one log entry, in order of first appearance."""
    keys: list[str] = []
    for rec in history:
        for k, v in rec.items():
            if k not in _NOT_CURVES and k not in keys and isinstance(v, (int, float)) and not isinstance(v, bool):
                keys.append(k)
    return keys


def plot_curves(history: Sequence[Mapping[str, Any]], path: str | Path, *, keys: Sequence[str] | None = None,
                title: str = "") -> Path | None:
    """One PNG with a panel per metric (`keys`, default all numeric ones). None when there is nothing to plot."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers; must precede pyplot
    import matplotlib.pyplot as plt

    wanted = [k for k in (keys or curve_keys(history)) if series(history, k)[0]]
    if not wanted:
        return None
    cols = min(3, len(wanted))
    rows = math.ceil(len(wanted) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, key in zip(axes.flat, wanted):
        xs, ys = series(history, key)
        ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3)
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(wanted):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return path


def table(rows: Mapping[str, Any]) -> str:
    """A two-column Markdown table."""
    lines = ["| | |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in rows.items()]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def last_value(history: Sequence[Mapping[str, Any]], key: str) -> float | None:
    ys = series(history, key)[1]
    return ys[-1] if ys else None
