"""Reproduce: the exact commands behind the narrated run and what each phase cost."""
from __future__ import annotations

import pandas as pd

from collect.schema import FILE_SPECS

from .. import escape, fmt
from ..tables import table_html
from .base import Page


class ReproducePage(Page):
    slug = "reproduce"
    phase = "env"

    def commands(self) -> str:
        m = self.run.manifest
        unknown = "<commit unknown: the collecting tree had no git metadata>"
        by_commit = phase_commits(m)
        lines = ["git clone <this repository> && cd <it>"]
        ran = [p.name for p in m.phases]
        named = [t for t in (m.command or "").split() if t in ran]  # phases the recorded command listed
        if len(by_commit) <= 1 and named and set(named) != set(ran):
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
            # The run was written by several collects: replay each phase at the commit that ran it.
            for commit, phases in by_commit.items():
                lines += [f"git checkout {commit or unknown}",
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
