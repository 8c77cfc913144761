"""Pieces every data file shares: the schema version, row statuses and documented fields."""
from __future__ import annotations

import dataclasses
from typing import Any

SCHEMA_VERSION = 1

# A row that could not be measured keeps its place with one of these and a reason.
# `skipped`: a case not run for time (a budget), with the reason.
STATUSES = ("ok", "oom", "unsupported", "error", "skipped")


def doc(text: str, default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING):
    """A dataclass field whose description feeds the generated "Data format" page."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"doc": text})


# Pydantic reads this plain dict from each dataclass (no pydantic import needed here):
# unknown keys, NaN and infinity are data errors, and "3" is not silently an int.
STRICT = {"extra": "forbid", "allow_inf_nan": False, "strict": True}


def strict(cls):
    """Class decorator: attach the strict validation config that render/ enforces."""
    cls.__pydantic_config__ = STRICT
    return cls


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool) -> float:
    """FLOP counted for one attention call: 4*B*H*N*N*d (Q Kᵀ and P V, 2*N*N*d each per head),
    halved when causal. The convention every phase's `flops` field and every TFLOP/s use."""
    f = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return f / 2 if causal else f
