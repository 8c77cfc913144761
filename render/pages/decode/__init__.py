"""Decode: step time against the bandwidth floor, where a step's time goes, token agreement, peak
memory of the int8 caches, and the decode-attention microbenchmark. Every outcome word is chosen
here, from the data.

The page is assembled from one module per section of docs/decode.md; a reader starts at data.py (the
rows as frames, the labels, targets and words the sections share) and then reads the section the page shows:

    summary.py    what this run shows, what a step must read, the run and its models
    baselines.py  transformers' loops: how each ran, its first pass, model.generate
    step_time.py  where a step's time goes at the key shapes, the launch trials, the int8 step
    roles.py      kernel by kernel: each of a layer's kernels against its bytes
    context.py    step time against context, throughput against batch
    agreement.py  do the variants predict the same tokens?
    memory.py     peak memory of the int8 cache
    micro.py      decode attention alone (the microbenchmark)
    targets.py    the targets, judged against this run
    rows.py       all rows, and the rows that did not run

Each section is a class over DecodeData; a section asks another for what it needs through `self` (the
opening findings quote the baselines and the agreement), so the page is their union.
"""
from __future__ import annotations

from .agreement import Agreement
from .baselines import Baselines
from .context import Context
from .memory import Memory
from .micro import Micro
from .roles import Roles
from .rows import Rows
from .step_time import StepTime
from .summary import Summary
from .targets import Targets


class DecodePage(Summary, Baselines, StepTime, Roles, Context, Agreement, Memory, Micro, Targets, Rows):
    """The Decode page's context (`{{ decode.time_figure() }}`): every section's methods."""
