"""Runs phases in order into data/runs/<run-id>/, keeping the manifest true at every moment."""
from __future__ import annotations

import datetime as dt
import os
import re
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from . import device_choices, fa4_precompile, spin_clock
from .budget import TIME_LIMIT_S, collect_deadline
from .context import PhaseUnsupported, RunContext
from .jsonio import remove_stale_temp_files, write_json_atomic
from .lock import run_lock
from .saved import SavedRowsError, read_saved
from .phases import PHASE_ORDER, filename, phase_module
from .schema import FILE_SPECS, SCHEMA_VERSION
from .schema.common import RUN_ID
from .schema.manifest import Manifest, PhaseRecord
from .schema.reader import GZIP_SUFFIX, DataFileError, read_json
from .stamp import STAMP, git_head, matches_tree, read_stamp

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CollectConfig:
    """Everything a collect run is parameterized by (the CLI flags)."""

    phases: list[str] = field(default_factory=lambda: list(PHASE_ORDER))
    profile: str = "quick"
    run_id: str | None = None
    out: Path = REPO_ROOT / "data" / "runs"
    resume: bool = False
    model_path: str | None = None
    force_portable: bool = False  # --force-portable: the kernels never take the Hopper path
    max_memory: int | None = None  # --max-memory, in bytes
    # --time-limit in seconds (0: none); None: the profile's default (collect/budget.TIME_LIMIT_S)
    time_limit_s: float | None = None

    def time_limit(self) -> float | None:
        return TIME_LIMIT_S.get(self.profile) if self.time_limit_s is None else (self.time_limit_s or None)


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def device_slug(name: str) -> str:
    """'NVIDIA H200' -> 'h200', 'Tesla T4' -> 't4', 'NVIDIA A100-SXM4-80GB' -> 'a100-sxm4-80gb'."""
    s = re.sub(r"^(nvidia|tesla|geforce|quadro)\s+", "", name.strip(), flags=re.I)
    s = re.sub(r"^(nvidia|tesla|geforce|quadro)\s+", "", s, flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "gpu"


def default_run_id(device_name: str | None) -> str:
    return f"{device_slug(device_name or 'gpu')[:60].strip('-')}-{dt.date.today():%Y%m%d}"


def check_run_id(run_id: str) -> None:
    """The pattern render/ holds run ids to: a run id is a folder under --out and part of a URL, so
    '../escaped' or '/tmp/x' would write outside --out."""
    if not re.match(RUN_ID, run_id):
        raise ValueError(f"run id {run_id!r} is not a short slug (letters, digits, '.', '_', '-'; at most 80, starting "
                         f"with a letter or digit: {RUN_ID}); it names a folder under --out. Nothing was written.")


def git_info() -> tuple[str | None, bool | None]:
    """The commit that collected: $COLLECT_GIT_COMMIT if set; else git where it finds the tree clean; else the stamp
    `make stamp` left (collect/stamp.py) where every file it lists still has the stamped content; else git's
    reading; else the stamp, unproven. A GPU box's copy of the tree can hold a git directory of an older checkout,
    which reads as that commit with changes (run h200-20261205a): a stamp that matches the tree outranks it."""
    if os.environ.get("COLLECT_GIT_COMMIT"):
        dirty = os.environ.get("COLLECT_GIT_DIRTY")
        return os.environ["COLLECT_GIT_COMMIT"], None if dirty is None else dirty == "1"
    head = git_head(REPO_ROOT)
    if head is not None and not head[1]:
        return head
    stamp = read_stamp(STAMP)
    if stamp is not None and matches_tree(stamp, REPO_ROOT):
        return stamp.commit, False
    if head is not None:
        return head
    if stamp is None:
        return None, None
    # Listed files that no longer match mean code the stamped commit does not hold.
    return stamp.commit, True if stamp.blobs else stamp.dirty


def load_or_new_manifest(run_dir: Path, run_id: str, profile: str, command: str) -> Manifest:
    path = run_dir / "manifest.json"
    if path.exists():
        from .manifest_io import read_manifest

        m = read_manifest(path)
        m.command, m.updated_utc = command, now_utc()
        m.git_commit, m.git_dirty = git_info()  # this invocation's code; earlier phases keep theirs
        m.kernel_version = kernel_version()
        return m
    commit, dirty = git_info()
    return Manifest(schema_version=SCHEMA_VERSION, run_id=run_id, created_utc=now_utc(), updated_utc=now_utc(),
                    profile=profile, command=command, git_commit=commit, git_dirty=dirty,
                    kernel_version=kernel_version(), hostname=socket.gethostname())


def kernel_version() -> str | None:
    """The recorded kernel version flash_attention ships in this code (None where the kernels cannot load)."""
    try:
        from kernels.attention.versions import FINAL_VERSION
    except Exception:  # noqa: BLE001 - provenance only: a missing field, never a failed collect
        return None
    return FINAL_VERSION


def _set_record(m: Manifest, rec: PhaseRecord) -> None:
    m.phases = [p for p in m.phases if p.name != rec.name] + [rec]
    m.phases.sort(key=lambda p: PHASE_ORDER.index(p.name) if p.name in PHASE_ORDER else 99)


def _row_count(name: str, result) -> int:
    """The phase's table of rows only: a file's notes and other lists are not rows."""
    return FILE_SPECS[name].row_count(result)


def limit_memory(device, limit: int | None) -> None:
    """Cap what this process may allocate on the GPU (--max-memory, or a rehearsed GPU's memory)."""
    fraction = device_choices.memory_fraction(device, limit)
    if fraction is not None and fraction < 1.0:
        import torch

        torch.cuda.set_per_process_memory_fraction(fraction)


def label_choices(m: Manifest, cfg: CollectConfig, rehearsal: str | None, cap) -> None:
    """Record in the manifest the options that changed what the phases chose."""
    notes = []
    if rehearsal:
        m.rehearsal = rehearsal
        notes.append(f"Rehearsal: every phase chose as on a {device_choices.REHEARSAL_DEVICES[rehearsal].name} "
                     f"({device_choices.REHEARSE_ENV}={rehearsal}), from that GPU's device facts; the timings are this "
                     "GPU's. Not a measurement of that GPU.")
    if cfg.force_portable and not rehearsal:
        notes.append("Our kernel was held to its portable path (--force-portable).")
    if cfg.max_memory is not None or rehearsal:
        notes.append(f"Allocations were capped at {cap.value} bytes ({cap.reason}).")
    prefixes = ("Rehearsal:", "Our kernel was held", "Allocations were capped")
    m.notes = [n for n in m.notes if not n.startswith(prefixes)] + notes


def _has_skipped_rows(path: Path) -> bool:
    """Whether a complete phase's file still holds rows skipped for time: --resume measures those."""
    try:
        return _skipped_in(read_json(path))
    except DataFileError:
        return False


def _skipped_in(data) -> bool:
    """Whether a phase file's parsed JSON holds a row skipped for time."""
    return any(isinstance(v, list) and any(isinstance(r, dict) and r.get("status") == "skipped" for r in v)
               for v in data.values()) if isinstance(data, dict) else False


def check_same_gpu(m: Manifest, device, run_dir: Path) -> None:
    """A run holds one GPU's measurements: refuse to add another GPU's to it."""
    if m.device is not None and m.device.name != device.name:
        raise RuntimeError(f"{run_dir}: run {m.run_id!r} was collected on {m.device.name!r}, and this GPU is "
                           f"{device.name!r}; refusing to add measurements from another GPU to it. Collect into a "
                           f"new --run-id (the default, {default_run_id(device.name)!r}, names this GPU).")


def _tool_never_ran(saved: dict | None) -> bool:
    """Whether a phase file says its tool could not run at all (a profile without ncu, or without access to the
    counters: a file-level status other than ok, with the fix to apply): its rows only say why, none holds a
    measurement, so a later collect of the phase writes over it, as that fix tells the user to do."""
    return isinstance(saved, dict) and saved.get("status") not in (None, "ok") and bool(saved.get("fix"))


def saved_rows_for(name: str, path: Path, prev: PhaseRecord | None, cfg: CollectConfig, run_id: str) -> dict | None:
    """The rows this phase already saved, when --resume continues it; refuses a run that would lose them. A file
    whose tool never ran holds nothing to lose (_tool_never_ran)."""
    saved = read_saved(path, run_id)
    if _tool_never_ran(saved):
        return None
    n = _row_count(name, saved) if saved else 0
    if not n:
        return None
    if not cfg.resume:
        raise SavedRowsError(f"{path} already holds {n} rows from an earlier collect; nothing was overwritten. Pass "
                             "--resume to continue an unfinished phase, or collect into a new --run-id (or move the "
                             "file away) to measure it again.")
    profile = prev.profile if prev is not None and prev.profile else saved.get("profile")
    if profile and profile != cfg.profile:
        raise SavedRowsError(f"{path}: its {n} saved rows were collected with --profile {profile}, not {cfg.profile}; "
                             f"resume with --profile {profile}, or collect into a new --run-id.")
    return saved


def refuse_compacted(run_dir: Path) -> None:
    """A run kept compressed (python -m collect compact) is finished: a collect writes plain phase files, which
    would stand beside the compressed ones as a second copy of each (the report refuses that)."""
    packed = sorted(p.name for p in run_dir.glob("*.json" + GZIP_SUFFIX)) if run_dir.is_dir() else []
    if packed:
        raise ValueError(f"{run_dir}: a finished run, kept compressed ({', '.join(packed)}); a collect into it would "
                         "leave a second copy of each file it writes. Collect into another --run-id.")


def run_collect(cfg: CollectConfig, command: str = "") -> int:
    """Run the phases; returns the number that failed. A failure never stops the others."""
    from . import env as env_phase

    unknown = [p for p in cfg.phases if p not in PHASE_ORDER]
    if unknown:
        raise ValueError(f"unknown phase(s) {unknown}; choose from {PHASE_ORDER}")
    if cfg.profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {cfg.profile!r}")

    collect_start = time.perf_counter()  # the collect's time limit counts from here
    fa4_precompile.enable_persistent_cache()  # before anything imports FA4: the pool and ncu's targets share it
    device = env_phase.describe_device()  # raises a clear error when there is no CUDA GPU
    rehearsal = device_choices.rehearsal_name()
    run_id = cfg.run_id or default_run_id(device.name + (f" rehearse {rehearsal}" if rehearsal else ""))
    check_run_id(run_id)
    cap = device_choices.memory_limit(device_choices.choice_facts(device), cfg.max_memory)
    limit_memory(device, cap.value if cfg.max_memory or rehearsal else None)
    run_dir = Path(cfg.out) / run_id
    refuse_compacted(run_dir)
    with run_lock(run_dir):  # everything below reads and writes the run: one collect at a time
        return _collect_into(run_dir, run_id, cfg, command, device, rehearsal, cap, collect_start)


def _collect_into(run_dir: Path, run_id: str, cfg: CollectConfig, command: str, device, rehearsal, cap,
                  collect_start: float) -> int:
    """run_collect's work once it holds the run's lock."""
    from . import env as env_phase

    manifest = load_or_new_manifest(run_dir, run_id, cfg.profile, command)
    check_same_gpu(manifest, device, run_dir)
    remove_stale_temp_files(run_dir)
    manifest.device = manifest.device or device
    manifest.software = env_phase.software_versions()  # the code that runs the phases below
    label_choices(manifest, cfg, rehearsal, cap)
    manifest_path = run_dir / "manifest.json"

    def save() -> None:
        manifest.updated_utc = now_utc()
        write_json_atomic(manifest_path, manifest)

    def on_flags(flags: list[str]) -> None:
        manifest.profiler_flags = flags
        save()

    save()
    print(RUN_STARTED.format(run_id=run_id, run_dir=run_dir, profile=cfg.profile), file=sys.stderr)
    ordered = [p for p in PHASE_ORDER if p in cfg.phases]
    to_run = [p for p in ordered if not _already_complete(p, manifest, cfg, run_dir)]
    failed = 0
    pool = None
    try:
        for name in ordered:
            if name not in to_run:
                print(f"collect: {name}: already complete, skipped (--resume)", file=sys.stderr)
                continue
            if name != "env" and pool is None:
                pool = start_compile_pool(to_run[to_run.index(name):], cfg, manifest, run_id, run_dir)
            if pool is not None and name not in UNTIMED_PHASES:
                pool.close()  # nothing may compete for the CPU while a phase times host speed
            failed += _run_phase(name, cfg, manifest, run_id, run_dir, save, on_flags, pool, collect_start,
                                 later=tuple(to_run[to_run.index(name) + 1:]))
    finally:
        if pool is not None:
            pool.close()
    return failed


# The line that names the run a collect writes; notebooks/collect.ipynb reads the run id from it.
RUN_STARTED = "collect: run {run_id} -> {run_dir} (profile {profile})"

# Phases that time nothing: the shared compile pool may keep working while they run.
UNTIMED_PHASES = ("correctness",)
SHARED_COMPILE_ENV = "COLLECT_SHARED_COMPILE"


def _already_complete(name: str, manifest: Manifest, cfg: CollectConfig, run_dir: Path) -> bool:
    """--resume: the phase finished in an earlier collect of this profile, its file reads back whole (one that
    does not is then refused by name, and kept), it has no rows skipped for time, and its tool ran."""
    prev = next((p for p in manifest.phases if p.name == name), None)
    if not (cfg.resume and prev is not None and prev.status == "complete" and prev.profile == cfg.profile):
        return False
    try:  # read once: one the manifest calls complete may have been cut or replaced since
        data = read_json(run_dir / filename(name))
    except DataFileError:
        return False
    return not _skipped_in(data) and not _tool_never_ran(data)


def start_compile_pool(phases: list[str], cfg: CollectConfig, manifest: Manifest, run_id: str, run_dir: Path):
    """One pool of compile workers for every listed phase that compiles kernels ahead (a module-level
    `compile_work(ctx)`), queued in phase order; None without a CUDA GPU, with nothing to compile, or
    with $COLLECT_SHARED_COMPILE=0 (each phase then compiles alone)."""
    if os.environ.get(SHARED_COMPILE_ENV, "1") == "0":
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    from .precompile import SharedCompilePool

    works = []
    for name in phases:
        try:
            make = getattr(phase_module(name), "compile_work", None)
            ctx = RunContext(run_id=run_id, out_dir=run_dir, profile=cfg.profile, manifest=manifest, phase=name,
                             filename=filename(name), model_path=cfg.model_path, max_memory=cfg.max_memory)
            work = make(ctx) if make is not None else None
        except Exception as exc:  # noqa: BLE001 - best effort: that phase compiles alone
            print(f"collect: {name}: no shared compilation ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        if work is not None and work.tasks:
            works.append(work)
    if not works:
        return None
    pool = SharedCompilePool(works)
    print(f"collect: compiling {sum(len(w.tasks) for w in works)} kernel variants for "
          f"{', '.join(w.label for w in works)} in {pool.workers} processes, ahead of the phases", file=sys.stderr)
    return pool


def _run_phase(name: str, cfg: CollectConfig, manifest: Manifest, run_id: str, run_dir: Path, save, on_flags,
               pool, collect_start: float | None = None, later: tuple[str, ...] = ()) -> int:
    """One phase, its record kept true in the manifest; returns 1 if it failed. `collect_start`: when
    the collect began (perf_counter), from which its time limit counts; `later`: the phases it runs after."""
    from . import env as env_phase

    failed = 0
    prev = next((p for p in manifest.phases if p.name == name), None)
    path = run_dir / filename(name)
    try:
        saved = None if name == "env" else saved_rows_for(name, path, prev, cfg, run_id)
    except SavedRowsError as exc:  # this phase is left as it was; the others still run
        print(f"collect: {name}: not run: {exc}", file=sys.stderr)
        return 1
    if saved is not None:
        print(f"collect: {name}: continuing from {_row_count(name, saved)} saved rows "
              "(--resume)", file=sys.stderr)
    started, t0 = now_utc(), time.perf_counter()
    rec = PhaseRecord(name=name, status="running", file=filename(name), started_utc=started, profile=cfg.profile,
                      git_commit=manifest.git_commit)
    _set_record(manifest, rec)
    save()
    ctx = RunContext(run_id=run_id, out_dir=run_dir, profile=cfg.profile, manifest=manifest, phase=name,
                     filename=filename(name), on_flags=on_flags, model_path=cfg.model_path,
                     max_memory=cfg.max_memory, saved=saved, compile_pool=pool)
    if collect_start is not None:  # the limit scales like the phase budgets, from the env phase's bandwidth
        scale = ctx.budget_scale()
        ctx.deadline = collect_deadline(collect_start, cfg.time_limit(), scale)
        ctx.reserved_after_s = reserved_seconds(later, cfg.profile, scale)
    spin_clock.reset_methods()
    try:
        result = phase_module(name).run(ctx)
        if name == "env":
            env_phase.merge_into_manifest(manifest, result)
            rec.rows = len(result.measured_ceilings)
        else:
            rec.rows = _row_count(name, ctx.checkpoint(result, force=True))  # saved rows not redone are kept too
        rec.status = "complete"
    except PhaseUnsupported as exc:
        rec.status, rec.reason = "unsupported", str(exc)
        print(f"collect: {name}: not applicable here: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        _flush(ctx, name)
        _stopped(rec, path, name, "interrupted (Ctrl-C)")
        rec.duration_s = round(time.perf_counter() - t0, 2)
        rec.sm_clock_method = _clock_method(prev, saved)
        save()
        raise
    except BaseException as exc:  # noqa: BLE001 - one phase's crash must not lose the others
        failed += 1
        _flush(ctx, name)
        _stopped(rec, path, name, f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=6))[-4000:])
        print(f"collect: {name} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
    rec.duration_s = round(time.perf_counter() - t0, 2)
    rec.sm_clock_method = _clock_method(prev, saved)
    save()
    print(f"collect: {name}: {rec.status} in {rec.duration_s:.1f} s", file=sys.stderr)
    return failed


def _clock_method(prev: PhaseRecord | None, saved) -> str | None:
    """How this phase's timed calls read the SM clock, counting the rows a resumed phase kept from its last run."""
    return spin_clock.methods_used(prev.sm_clock_method if prev is not None and saved is not None else None)


def _flush(ctx: RunContext, name: str) -> None:
    """Write the rows a stopped phase measured since its last checkpoint; a failure to write them is said,
    not raised, so the phase's record still lands."""
    try:
        ctx.flush_checkpoint()
    except Exception as exc:  # noqa: BLE001 - the rows already on disk stay; the record must still be saved
        print(f"collect: {name}: could not write the rows measured since the last checkpoint: {exc}", file=sys.stderr)


def reserved_seconds(phases, profile: str, scale: float) -> float:
    """The later phases' own budgets, summed (a phase without one, or whose budget is lifted, counts 0)."""
    total = 0.0
    for name in phases:
        try:
            budget = getattr(phase_module(name), "budget_seconds", None)
            total += (budget(profile, scale) or 0.0) if budget else 0.0
        except Exception:  # noqa: BLE001 - a phase that cannot import reserves nothing; it fails on its own
            continue
    return total


def _stopped(rec: PhaseRecord, path: Path, name: str, error: str) -> None:
    """A phase that stopped early: partial when its checkpoints saved rows (--resume continues it), else failed."""
    try:
        saved = read_json(path) if name != "env" and path.exists() else None
    except DataFileError:
        saved = None
    n = _row_count(name, saved) if saved else 0
    rec.status, rec.error = ("partial", error) if n else ("failed", error)
    if n:
        rec.rows = n
