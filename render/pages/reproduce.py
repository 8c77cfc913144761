"""Reproduce: the exact commands behind the narrated run and what each phase cost."""
from __future__ import annotations

import shlex
import subprocess
from functools import lru_cache
from pathlib import Path

import pandas as pd

from collect.schema import BUDGET_ENVS, FILE_SPECS

from .. import escape, fmt
from ..tables import table_html
from ..vocab import join
from .base import Page


class ReproducePage(Page):
    slug = "reproduce"
    phase = "env"

    def commands(self) -> str:
        m = self.run.manifest
        unknown = "<commit unknown: the collecting tree had no git metadata>"
        by_commit = phase_commits(m)
        lines = ["git clone <this repository> && cd <it>",
                 "pip install -e '.[collect,fa4]'   # torch, triton, transformers and FlashAttention-4 (fa4: sm80 and newer)",
                 *self._versions_line(),
                 "# Nsight Compute's ncu on PATH for the profile phase (without it that phase records why and measures nothing)",
                 "# on another kind of GPU, leave out --run-id (RUN_ID): the collect names the run after that GPU,"
                 " and REPORT_RUN below takes that name"]
        named = self.rerun_phases()
        if len(by_commit) <= 1 and named:
            # The last collect ran only some phases again (see the notes): the whole run first, then it.
            # The collect refuses to overwrite a phase's saved rows: move each file the re-run replaced
            # (not the manifest, the env phase's file, which holds every phase's record).
            files = [r.file for r in m.phases if r.name in named and r.file and r.file != FILE_SPECS["env"].filename]
            lines += [checkout(m.git_commit, unknown),
                      f"make collect PROFILE={m.profile} RUN_ID={self.run.id}   # every phase"]
            lines += [f"mv data/runs/{self.run.id}/{f} /tmp/   # the collect never overwrites saved rows" for f in files]
            lines.append(f"{runnable(m.command)}   # the last command recorded: it ran {', '.join(named)}"
                         + out_note(m.command))
        elif len(by_commit) <= 1:
            lines += [checkout(m.git_commit, unknown), f"{runnable(m.command)}   # as recorded{out_note(m.command)}"]
        else:
            # The run was written by several collects: replay each phase at the commit that ran it. The last
            # of them is recorded whole, with any budget it overrode (DECODE_BUDGET_S=0 runs rows a default
            # budget would skip), so its phases replay with that command.
            for commit, phases in by_commit.items():
                last = commit == m.git_commit and m.command and set(phases) == set(self._named_in(m.command))
                lines += [checkout(commit, unknown),
                          f"{runnable(m.command)}   # as recorded{out_note(m.command)}" if last else
                          f"python -m collect {' '.join(phases)} --profile {m.profile} --run-id {self.run.id}"]
        lines.append(f"REPORT_RUN={self.run.id} make serve")
        return escape.code_block("\n".join(lines), "bash") + "\n"  # the command is data: a fence in it must not end the block

    def _versions_line(self) -> list[str]:
        """'# this run's versions: torch 2.11.0+cu130, ...': what the run recorded of the packages that set its numbers,
        so a rebuild can match them (pip's resolution may pick newer ones); none where it recorded none."""
        sw = self.run.manifest.software
        keys = ("torch", "triton", "transformers", "flash-attn-4", "ncu")
        said = [f"{k} {str(sw[k]).split(' ')[0]}" for k in keys if sw.get(k)]
        return [f"# this run's versions: {', '.join(said)}; pin them to rebuild it as it was"] if said else []

    def notes(self) -> str:
        """What the collector (or whoever corrected the run) left in the manifest for the reader."""
        return "".join(map(escape.note, self.run.manifest.notes))

    def phase_table(self) -> str:
        recs = self.run.manifest.phases
        if not recs:
            return "_No phase records in this run._"
        df = pd.DataFrame([{"name": r.name, "status": r.status, "profile": r.profile or "", "file": r.file or "",
                            "commit": (r.git_commit or "")[:12], "rows": self.rows(r), "duration_s": r.duration_s,
                            "error": (r.error or "").splitlines()[0][:160] if r.error else ""} for r in recs])
        return table_html(df, {"name": "Phase", "status": "Status", "profile": "Profile", "file": "File",
                               "commit": "Commit", "rows": "Rows", "duration_s": "Wall time (s)", "error": "Error"},
                          {"duration_s": lambda v: fmt.num(v), "rows": lambda v: "" if v is None or pd.isna(v) else str(int(v))})

    def rows(self, rec) -> int | None:
        """Rows in the phase's table, counted in its data file where the run has it (the same count its page
        shows), else as the manifest recorded them."""
        spec, data = FILE_SPECS.get(rec.name), self.run.phase(rec.name)
        return spec.row_count(data) if spec is not None and data is not None else rec.rows

    def total_time(self) -> str:
        ds = [r.duration_s for r in self.run.manifest.phases if r.duration_s is not None]
        return fmt.num(sum(ds)) + " s" if ds else "n/a"

    def _named_in(self, command: str | None) -> list[str]:
        """The phases of this run a recorded command names."""
        ran = [r.name for r in self.run.manifest.phases]
        return [t for t in (command or "").split() if t in ran]

    def rerun_phases(self) -> list[str]:
        """Phases whose record comes from a later command that ran them alone: the last recorded command names
        only some of the phases (as commands() replays it)."""
        named = self._named_in(self.run.manifest.command)
        return named if named and set(named) != {r.name for r in self.run.manifest.phases} else []

    def total_sentence(self) -> str:
        """The sum of the phases' wall times, and what it adds up: one collect, or several commands."""
        recs = [r for r in self.run.manifest.phases if r.duration_s is not None]
        if not recs:
            return "This run recorded no phase's wall time."
        text = f"The phases' wall times add up to {self.total_time()} on this device."
        commits = phase_commits(self.run.manifest)
        again = self.rerun_phases()
        if len(commits) > 1:
            return text + (f" They were run by {len(commits)} collects at different commits (the Commit column), so "
                           "the sum is not the time of one collect.")
        if again:
            late = [r for r in recs if r.name in again]
            first = [r for r in recs if r.name not in again]
            many = len(late) > 1
            owner = "phases'" if many else "phase's"
            text += (f" That sum includes the {join(r.name for r in late)} {owner} "
                     f"{fmt.num(sum(r.duration_s for r in late))} s from the later command that ran "
                     f"{'them' if many else 'it'} again alone (the last collect command above), so it is not the time "
                     "of one collect")
            text += (f": the other phases, from the first collect, took {fmt.num(sum(r.duration_s for r in first))} s."
                     if first else ".")
        return text

    def skipped_sentence(self) -> str:
        """Rows the run skipped for time, per phase: which rows a rebuild holds depends on its host as well."""
        counts = {rec.name: n for rec in self.run.manifest.phases if (n := self.run.skipped_rows(rec.name)[0])}
        if not counts:
            return ""
        envs = join([f"`{BUDGET_ENVS[p]}=0`" for p in counts if p in BUDGET_ENVS])
        whose = "its time budget" if len(counts) == 1 else "their time budgets"
        return (f"This run skipped {join([f'{n} rows of its {p} phase' for p, n in counts.items()])} when {whose} "
                "ran out, so a rebuild on a faster or slower host holds other rows; "
                + (f"{envs} with " if envs else "") + "`--time-limit 0` runs them all.")

    def parts_left_out(self) -> str:
        """Parts of a phase that completed without them, in the phase file's own words (its top-level reason beside
        status ok: the profile phase's SASS hot spots, skipped for time): the phase table calls such a phase complete,
        and a rebuild inherits the gap."""
        out = []
        for rec in self.run.manifest.phases:
            obj = self.run.phase(rec.name)
            reason = getattr(obj, "reason", None)
            if reason and getattr(obj, "status", None) == "ok":
                out.append(f"The {escape.text(rec.name)} phase completed with a part left out: {escape.text(reason)}.")
        return " ".join(out)

    def clock_control(self) -> str:
        """What Nsight Compute did with the clocks, read from its recorded flags."""
        f = self.run.manifest.profiler_flags
        if not f:
            return ""
        value = f[f.index("--clock-control") + 1] if "--clock-control" in f[:-1] else None
        if value == "none":
            return "It left the clocks alone (`--clock-control none`) rather than locking them."
        if value:
            return f"It set the clocks itself ({escape.code(f'--clock-control {value}')})."
        return "No `--clock-control` flag was given, so Nsight Compute locked the clocks at base, its default."

    def flags(self) -> str:
        f = self.run.manifest.profiler_flags
        return escape.code(f"ncu {' '.join(f)}") if f else "not recorded (the profile phase did not run)"


def phase_commits(m) -> dict:
    """Commit -> the phases it ran, in phase order; phases recorded without a commit (older runs)
    count under the run's own commit."""
    out: dict = {}
    for r in m.phases:
        out.setdefault(r.git_commit or m.git_commit, []).append(r.name)
    return out


def _words(command: str | None) -> list[str] | None:
    """A recorded command's words as the shell would split them; None where it cannot (a manifest is data, and a
    hand-edited one may hold anything)."""
    try:
        return shlex.split(command or "")
    except ValueError:
        return None


def _out_path(command: str | None) -> str | None:
    """The folder a recorded command wrote its run to, where it named one (`--out`)."""
    words = _words(command) or []
    for i, w in enumerate(words):
        if w == "--out" and i + 1 < len(words):
            return words[i + 1]
        if w.startswith("--out="):
            return w.split("=", 1)[1]
    return None


def runnable(command: str | None) -> str:
    """A recorded command as a reader runs it: without its `--out`, so the run lands in data/runs, where
    `make serve` reads it (the GPU host wrote to a folder that came back to this machine)."""
    words = _words(command)
    if words is None:
        return command or ""
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w == "--out":
            skip = True
        elif not w.startswith("--out="):
            out.append(w)
    return shlex.join(out) if out else (command or "")


def out_note(command: str | None) -> str:
    path = _out_path(command)
    return f" (there with --out {path}; without it the run lands in data/runs)" if path else ""


@lru_cache(maxsize=None)
def in_history(commit: str) -> bool | None:
    """Whether this checkout's git history has `commit`; None where it cannot tell (no git, or a shallow
    clone)."""
    root = Path(__file__).resolve().parents[2]
    try:
        shallow = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-shallow-repository"],
                                 capture_output=True, text=True, timeout=10)
        if shallow.returncode != 0 or shallow.stdout.strip() != "false":
            return None
        found = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{commit}^{{commit}}"],
                               capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found.returncode == 0


def checkout(commit: str | None, unknown: str) -> str:
    """The checkout line, warned where the recorded commit is not in this repository's history."""
    if not commit:
        return f"git checkout {unknown}"
    line = f"git checkout {commit}"
    return line + ("   # not a commit of this repository: the run recorded it wrongly, or from another fork"
                   if in_history(commit) is False else "")
