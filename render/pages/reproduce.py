"""Reproduce: the exact commands behind the narrated run and what each phase cost."""
from __future__ import annotations

import pandas as pd

from collect.schema import FILE_SPECS

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
        lines = ["git clone <this repository> && cd <it>"]
        named = self.rerun_phases()
        if len(by_commit) <= 1 and named:
            # The last collect ran only some phases again (see the notes): the whole run first, then it.
            # The collect refuses to overwrite a phase's saved rows: move each file the re-run replaced
            # (not the manifest, the env phase's file, which holds every phase's record).
            files = [r.file for r in m.phases if r.name in named and r.file and r.file != FILE_SPECS["env"].filename]
            lines += [f"git checkout {m.git_commit or unknown}",
                      f"make collect PROFILE={m.profile} RUN_ID={self.run.id}   # every phase"]
            lines += [f"mv data/runs/{self.run.id}/{f} /tmp/   # the collect never overwrites saved rows" for f in files]
            lines.append(f"{m.command}   # the last command recorded: it ran {', '.join(named)}")
        elif len(by_commit) <= 1:
            lines += [f"git checkout {m.git_commit or unknown}",
                      f"{m.command}   # as recorded; make collect PROFILE={m.profile} RUN_ID={self.run.id} is equivalent"]
        else:
            # The run was written by several collects: replay each phase at the commit that ran it. The last
            # of them is recorded whole, with any budget it overrode (DECODE_BUDGET_S=0 runs rows a default
            # budget would skip), so its phases replay with that command.
            for commit, phases in by_commit.items():
                last = commit == m.git_commit and m.command and set(phases) == set(self._named_in(m.command))
                lines += [f"git checkout {commit or unknown}",
                          f"{m.command}   # as recorded" if last else
                          f"python -m collect {' '.join(phases)} --profile {m.profile} --run-id {self.run.id}"]
        lines.append(f"REPORT_RUN={self.run.id} make serve")
        return escape.code_block("\n".join(lines), "bash") + "\n"  # the command is data: a fence in it must not end the block

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
