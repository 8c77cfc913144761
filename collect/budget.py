"""Per-phase time budgets, so one full collect fits in one device command."""
from __future__ import annotations

import os
import time

from .schema import BUDGET_ENVS

# The whole collect's time limit per profile, scaled like the phase budgets: the full profile is
# sized so that one collect fits in 9 minutes on an H200 (a device command's limit). On 2026-12-01
# a full collect took 553 s on a host whose CPU ran the host-bound loops at half the speed of the
# day before: every phase's own budget held, and their sum did not. --time-limit overrides it.
# The decode phase runs last and gets what is left: 68 s in run h200-20261204a, too little for its
# token agreement. Spaced checkpoints and no gc.collect per input shape (collect/context.py,
# collect/calls.py) took the bench phase from 200 s to 159 and iterations from 57 to 46 in the next
# run (h200-20261204b, same H200 session), which left decode 117 s.
TIME_LIMIT_S = {"quick": None, "full": 530.0}
# The variable that overrides each phase's own budget. Which rows a run holds depends on them, so the
# command a run records names those that were set (collect/cli.py, recorded_command).
PHASE_BUDGET_ENVS = BUDGET_ENVS
# A phase that starts past the collect's limit still runs: it writes its file with every case
# skipped for time, so the report says why the phase is empty.
MIN_BUDGET_S = 1.0


def budget_seconds(env_var: str, defaults: dict[str, float], profile: str, scale: float = 1.0) -> float | None:
    """The phase's budget for this profile, its default times `scale` (a slower GPU's allowance,
    collect/device_choices.budget_scale); $env_var overrides it, and 0 there means no limit."""
    raw = os.environ.get(env_var)
    if raw is None:
        return defaults[profile] * scale
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{env_var} must be a number of seconds (0 for no limit), got {raw!r}") from None
    return value if value > 0 else None


def no_limit_hint(env_var: str) -> str:
    """How to lift a phase's time budget: its own variable and the collect's limit (either can cut it)."""
    return f"set {env_var}=0, and --time-limit 0, for no limit"


def collect_deadline(start: float, limit_s: float | None, scale: float = 1.0) -> float | None:
    """perf_counter time by which the collect that started at `start` should end: `limit_s` (None or
    0: no limit) times `scale`, the slower GPU's allowance (collect/device_choices.budget_scale)."""
    return start + limit_s * scale if limit_s else None


def fit_budget(budget: float | None, deadline: float | None, now: float | None = None) -> float | None:
    """A phase's budget (None: no limit), shrunk to what is left before the collect's deadline."""
    if deadline is None:
        return budget
    left = max(MIN_BUDGET_S, deadline - (time.perf_counter() if now is None else now))
    return left if budget is None else min(budget, left)
