"""What a phase gets from the runner: run identity, profile, device facts and safe writes."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from . import device_choices
from .budget import fit_budget
from .saved import saved_rows, write_phase_file
from .schema.manifest import DeviceFacts, Manifest


# Seconds between two checkpoints of a phase's file. Each one serialises every row so far, so writing
# after every row grew with the square of the rows: 13 s of a 436-row bench phase on a two-core host,
# time a 9-minute collect took from its last phase. A crash the runner sees still writes the rows
# since the last checkpoint (flush_checkpoint); only a kill -9 can lose them, at most this long's work,
# and --resume measures those again.
CHECKPOINT_EVERY_S = 5.0


class PhaseUnsupported(Exception):
    """Raised by a phase that does not apply to this device: the runner records the phase as
    `unsupported` with this reason (not as failed)."""


@dataclass
class RunContext:
    """Handed to every phase's `run(ctx)`."""

    run_id: str
    out_dir: Path
    profile: str  # "quick" or "full"
    manifest: Manifest
    phase: str = ""
    filename: str = ""
    model_path: str | None = None  # decode: a local GPT-2 checkpoint instead of random weights
    max_memory: int | None = None  # --max-memory: the phases allocate at most this many bytes
    on_flags: Callable[[list[str]], None] | None = field(default=None, repr=False)
    saved: dict | None = field(default=None, repr=False)  # --resume: this phase's file as an unfinished collect left it
    # The collect's shared compile pool (collect/precompile.py), when one runs: a phase waits for its
    # own work there instead of compiling alone.
    compile_pool: Any = field(default=None, repr=False)
    # perf_counter time by which the whole collect should end (--time-limit); None: no limit.
    deadline: float | None = None
    # Seconds the phases this collect runs after this one may take by their own budgets: optional work
    # (the profile's hot-spot run) starts only if it leaves them that much of the collect's time limit.
    reserved_after_s: float = 0.0
    checkpoint_every_s: float = CHECKPOINT_EVERY_S
    clock: Callable[[], float] = field(default=time.perf_counter, repr=False)  # what spaces the checkpoints
    _pending: Any = field(default=None, init=False, repr=False)  # the newest result not yet written
    _written_at: float | None = field(default=None, init=False, repr=False)

    def budget_scale(self, copy_bytes_per_s: float | None = None) -> float:
        """How much longer than its defaults a phase (and the whole collect) may run on this GPU
        (device_choices.budget_scale): from the env phase's measured copy bandwidth, or from
        `copy_bytes_per_s` where the phase measured its own."""
        measured = copy_bytes_per_s if copy_bytes_per_s is not None else self.measured("copy_bandwidth")
        return device_choices.budget_scale(measured).value

    def own_budget(self, budget_seconds: Callable[[str, float], float | None],
                   copy_bytes_per_s: float | None = None) -> float | None:
        """A phase's time budget: what its `budget_seconds(profile, scale)` gives for this profile,
        scaled to this GPU (budget_scale), then shrunk to what is left of the collect's time limit
        (phase_budget)."""
        return self.phase_budget(budget_seconds(self.profile, self.budget_scale(copy_bytes_per_s)))

    def phase_budget(self, budget: float | None) -> float | None:
        """This phase's own budget (None: no limit), shrunk to what is left of the collect's time limit;
        says so on stderr when it shrinks."""
        fitted = fit_budget(budget, self.deadline)
        if fitted is not None and (budget is None or fitted < budget):
            print(f"collect: {self.phase}: {fitted:.0f} s left of the collect's time limit (--time-limit 0 for "
                  f"none); the phase's own budget is {'none' if budget is None else f'{budget:.0f} s'}",
                  file=sys.stderr)
        return fitted

    def optional_seconds(self, phase_left_s: float | None) -> float | None:
        """Seconds this phase may spend on optional work: what is left of its own budget (`phase_left_s`,
        None: no budget) and of the collect's time limit once the later phases' budgets are set aside."""
        if self.deadline is None:
            return phase_left_s
        collect_left = self.deadline - time.perf_counter() - self.reserved_after_s
        return collect_left if phase_left_s is None else min(phase_left_s, collect_left)

    @property
    def quick(self) -> bool:
        return self.profile == "quick"

    @property
    def facts(self) -> DeviceFacts | None:
        """The device facts every device-dependent choice is made from (collect/device_choices.py):
        this GPU's, or in a rehearsal ($COLLECT_REHEARSE_DEVICE) the rehearsed GPU's."""
        return device_choices.choice_facts(self.manifest.device)

    @property
    def memory_limit_bytes(self) -> int | None:
        """What a case may allocate: the device's memory, or the --max-memory cap if smaller."""
        return device_choices.memory_limit(self.facts, self.max_memory).value

    def unsupported(self, reason: str):
        """End the phase as not applicable to this device, with the reason the report shows."""
        raise PhaseUnsupported(reason)

    def progress(self, iterable: Iterable[Any], total: int | None = None, desc: str | None = None):
        """A tqdm bar on stderr, one per phase; plain iteration where tqdm is missing."""
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover - tqdm is on every GPU image we target
            return iterable
        return tqdm(iterable, total=total, desc=desc or self.phase, file=sys.stderr, dynamic_ncols=True, leave=True)

    def checkpoint(self, result: Any, force: bool = False) -> dict | None:
        """Write the phase's file as it stands, so a crash later keeps the rows measured so far. Saved
        rows (see `saved`) this collect has not redone are written too: a file never loses rows.
        At most once per `checkpoint_every_s` unless `force`: a call in between only remembers `result`
        for the next write or flush_checkpoint, and returns None; a write returns what it wrote."""
        now = self.clock()
        if not force and self._written_at is not None and now - self._written_at < self.checkpoint_every_s:
            self._pending = result
            return None
        self._pending, self._written_at = None, now
        return write_phase_file(self.out_dir / self.filename, result, self.saved, self.phase)

    def flush_checkpoint(self) -> None:
        """Write what the last checkpoint call left unwritten (the runner calls this when a phase stops
        early, so the rows measured since the last write are kept)."""
        if self._pending is not None:
            self.checkpoint(self._pending, force=True)

    def saved_cases(self, row_cls, table: str = "rows") -> dict:
        """--resume: the rows of `table` that an unfinished earlier collect of this phase measured (ok, oom
        or unsupported), as `row_cls` objects keyed by its CASE_KEY; {} otherwise. A phase opts in to
        resuming by using the saved row of a case found here instead of measuring the case again."""
        return saved_rows(self.saved, row_cls, table)

    def measured(self, name: str) -> float | None:
        """A measured ceiling's median rate (bytes/s or FLOP/s) from the env phase, if it ran."""
        for c in self.manifest.measured_ceilings:
            if c.name == name and c.status == "ok":
                return c.per_s_median
        return None

    def record_profiler_flags(self, flags: list[str]) -> None:
        """The profile phase reports the ncu flags it used; they go into the manifest."""
        if self.on_flags is not None:
            self.on_flags(list(flags))
