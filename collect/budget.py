"""Per-phase time budgets, so one full collect fits in one device command."""
from __future__ import annotations

import os


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
