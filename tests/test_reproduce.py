"""The Reproduce page and the footer when a run was written by more than one collect."""
import html
import re
import subprocess
from pathlib import Path

import pytest

import synthetic
from collect.schema.manifest import PhaseRecord
from render.pages.reproduce import ReproducePage, phase_commits
from render.provenance import provenance
from render.runs import Run


def run_with(phases, commit="c" * 40):
    m = synthetic.manifest("synthetic-20261129")
    m.git_commit, m.phases = commit, phases
    return Run(id="synthetic-20261129", path=Path("/nonexistent"), manifest=m, phases={})


def test_one_commit_gives_the_recorded_command():
    run = run_with([PhaseRecord(name="env", status="complete", git_commit="c" * 40),
                    PhaseRecord(name="bench", status="complete")])  # an older record: the run's commit
    page = ReproducePage(run, [run])
    assert phase_commits(run.manifest) == {"c" * 40: ["env", "bench"]}
    text = page.commands()
    assert text.count("git checkout") == 1 and run.manifest.command in text
    assert provenance(run)["commit"] == "c" * 12
    # On another GPU the collect names the run itself, so the line that serves it must be told that name.
    shown = html.unescape(re.sub(r"<[^>]+>", "", text))
    assert shown.strip().splitlines()[-1] == "REPORT_RUN=synthetic-20261129 make serve"
    assert "leave out --run-id (RUN_ID)" in shown and "REPORT_RUN below takes that name" in shown


def test_a_phase_run_again_alone_is_not_called_the_whole_collect():
    # As in run h200-20261201a: one commit, but the last command recorded ran only the decode phase.
    run = run_with([PhaseRecord(name="env", status="complete", file="manifest.json"),
                    PhaseRecord(name="decode", status="complete", file="decode.json")])
    run.manifest.profile = "full"
    run.manifest.command = "python -m collect decode --profile full --run-id synthetic-20261129"
    text = html.unescape(ReproducePage(run, [run]).commands())
    assert "is equivalent" not in text and text.count("git checkout") == 1
    assert text.index("make collect PROFILE=full RUN_ID=synthetic-20261129") < text.index("collect decode --profile")
    assert "it ran decode" in text
    # The collect refuses to overwrite the first pass's rows: the page moves that file aside first, and
    # only that one (the manifest holds every phase's record).
    move = "mv data/runs/synthetic-20261129/decode.json"
    assert text.index("make collect PROFILE=full") < text.index(move) < text.index("collect decode --profile")
    assert text.count("mv data/runs/") == 1


def test_phases_from_several_commits_are_replayed_each_at_its_own():
    run = run_with([PhaseRecord(name="env", status="complete", git_commit="a" * 40),
                    PhaseRecord(name="correctness", status="complete", git_commit="b" * 40),
                    PhaseRecord(name="bench", status="complete", git_commit="b" * 40),
                    PhaseRecord(name="decode", status="complete", git_commit="c" * 40)])
    page = ReproducePage(run, [run])
    text = page.commands()
    assert text.index("git checkout " + "a" * 40) < text.index("python -m collect env --profile")
    assert "python -m collect correctness bench --profile" in text and "git checkout " + "c" * 40 in text
    assert "b" * 12 in page.phase_table()
    assert provenance(run)["commit"].startswith("a" * 12 + ", " + "b" * 12 + ", " + "c" * 12)


def test_the_last_of_several_collects_replays_as_recorded_with_the_budget_it_overrode():
    # As in run h200-20261201f: the decode phase collected again alone, with no time budget, at a later commit.
    run = run_with([PhaseRecord(name="env", status="complete", git_commit="a" * 40),
                    PhaseRecord(name="bench", status="complete", git_commit="a" * 40),
                    PhaseRecord(name="decode", status="complete", git_commit="c" * 40)])
    run.manifest.profile = "full"
    run.manifest.command = "DECODE_BUDGET_S=0 python -m collect decode --profile full --run-id synthetic-20261129"
    text = html.unescape(ReproducePage(run, [run]).commands())
    assert "python -m collect env bench --profile full" in text  # the earlier collect: its phases at its commit
    assert text.index("git checkout " + "c" * 40) < text.index(run.manifest.command + "   # as recorded")
    assert "python -m collect decode --profile full" not in text.replace(run.manifest.command, "")


def test_the_manifest_notes_reach_the_reader_escaped():
    run = run_with([PhaseRecord(name="env", status="complete")])
    assert ReproducePage(run, [run]).notes() == ""
    run.manifest.notes = ["The commit fields were corrected by hand.", "<script>alert(1)</script>"]
    text = ReproducePage(run, [run]).notes()
    assert text.count("!!! note") == 2 and "corrected by hand" in text
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_the_wall_time_sum_says_when_a_phase_was_run_again_alone():
    # As in run h200-20261201e: the decode phase's record is from a later command that ran it alone.
    run = run_with([PhaseRecord(name="env", status="complete", file="manifest.json", duration_s=8.91),
                    PhaseRecord(name="bench", status="complete", file="bench.json", duration_s=211.46),
                    PhaseRecord(name="decode", status="complete", file="decode.json", duration_s=186.12)])
    run.manifest.command = "python -m collect decode --profile full --run-id synthetic-20261129"
    text = ReproducePage(run, [run]).total_sentence()
    assert "add up to 406 s" in text
    assert "includes the decode phase's 186 s from the later command that ran it again alone" in text
    assert "the other phases, from the first collect, took 220 s" in text
    run.manifest.command = "make collect PROFILE=full RUN_ID=synthetic-20261129"  # one collect ran every phase
    text = ReproducePage(run, [run]).total_sentence()
    assert text == "The phases' wall times add up to 406 s on this device."
    several = run_with([PhaseRecord(name="env", status="complete", git_commit="a" * 40, duration_s=3.0),
                        PhaseRecord(name="bench", status="complete", git_commit="b" * 40, duration_s=4.0)])
    assert "run by 2 collects at different commits" in ReproducePage(several, [several]).total_sentence()


def test_what_the_profiler_did_with_the_clocks_comes_from_its_flags():
    run = run_with([PhaseRecord(name="env", status="complete")])
    page = ReproducePage(run, [run])
    assert page.clock_control() == ""  # the profile phase did not run
    run.manifest.profiler_flags = ["--clock-control", "none", "--nvtx"]
    assert "left the clocks alone" in page.clock_control()
    run.manifest.profiler_flags = ["--clock-control", "base", "--nvtx"]
    assert "set the clocks itself" in html.unescape(page.clock_control()) and "alone" not in page.clock_control()
    run.manifest.profiler_flags = ["--nvtx"]
    assert "locked the clocks at base, its default" in page.clock_control()


def test_a_recorded_out_folder_is_dropped_so_the_run_lands_where_serve_reads_it():
    run = run_with([PhaseRecord(name="env", status="complete")], commit=None)
    run.manifest.command = "python -m collect --profile full --run-id synthetic-20261129 --out /root/out/runs"
    text = html.unescape(ReproducePage(run, [run]).commands())
    assert "python -m collect --profile full --run-id synthetic-20261129   # as recorded" in text
    assert "(there with --out /root/out/runs; without it the run lands in data/runs)" in text
    assert "is equivalent" not in text


def test_a_commit_missing_from_the_history_is_flagged_on_the_checkout_line(monkeypatch):
    from render.pages import reproduce
    monkeypatch.setattr(reproduce, "in_history", lambda c: c != "d" * 40)
    run = run_with([PhaseRecord(name="env", status="complete")], commit="d" * 40)
    text = html.unescape(ReproducePage(run, [run]).commands())
    assert "git checkout " + "d" * 40 + "   # not a commit of this repository" in text
    run = run_with([PhaseRecord(name="env", status="complete")], commit="e" * 40)
    assert "not a commit" not in html.unescape(ReproducePage(run, [run]).commands())


def test_the_history_lookup_knows_this_repositorys_head():
    from render.pages.reproduce import in_history
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    if head.returncode != 0 or in_history(head.stdout.strip()) is None:
        pytest.skip("no git history here")
    assert in_history(head.stdout.strip()) is True and in_history("0" * 40) is False


def test_rows_skipped_for_time_are_counted_with_how_to_run_them_all():
    from types import SimpleNamespace
    run = run_with([PhaseRecord(name="env", status="complete"), PhaseRecord(name="decode", status="complete")])
    assert ReproducePage(run, [run]).skipped_sentence() == ""
    rows = [SimpleNamespace(status=s) for s in ("ok", "skipped", "skipped", "unsupported")]
    run.phases["decode"] = SimpleNamespace(rows=rows)
    text = ReproducePage(run, [run]).skipped_sentence()
    assert "skipped 2 rows of its decode phase when its time budget ran out" in text
    assert "`DECODE_BUDGET_S=0` with `--time-limit 0` runs them all" in text


def test_a_recorded_command_the_shell_cannot_split_is_shown_as_recorded():
    run = run_with([PhaseRecord(name="env", status="complete")], commit=None)
    run.manifest.command = "python -m collect --run-id 'unclosed --out /x"
    text = html.unescape(ReproducePage(run, [run]).commands())
    assert "python -m collect --run-id 'unclosed --out /x   # as recorded" in text


def test_a_part_a_completed_phase_left_out_is_said_in_its_files_words():
    """Run h100-20261205b: the profile phase completed without its SASS hot spots (skipped for time), which only
    its file's top-level reason records; the phase table called it complete and said nothing more."""
    from committed import latest_run

    run = latest_run("profile.json")
    page = ReproducePage(run, [run])
    prof = run.phase("profile")
    said = page.parts_left_out()
    if prof.status == "ok" and prof.reason:
        assert said.startswith("The profile phase completed with a part left out: ")
        assert html.unescape(said).rstrip(".").endswith(prof.reason.rstrip("."))
    else:
        assert "profile phase" not in said
    # A phase file with no such reason adds nothing.
    for rec in run.manifest.phases:
        if not getattr(run.phase(rec.name), "reason", None):
            assert f"The {rec.name} phase" not in said


def test_the_commands_install_the_packages_and_name_the_versions_the_run_recorded():
    from pathlib import Path

    from render.pages.reproduce import ReproducePage
    from render.runs import load_runs

    runs = load_runs(Path(__file__).resolve().parent.parent / "data")
    run = next(r for r in runs if r.id == "h200-20261206a")
    import html

    text = html.unescape(ReproducePage(run, runs).commands()).replace("&#95;", "_")
    assert "pip install -e '.[collect,fa4]'" in text
    sw = run.manifest.software
    assert f"torch {sw['torch']}, triton {sw['triton']}, transformers {sw['transformers']}" in text
    assert "ncu on PATH" in text
    run.manifest.software = {}
    assert "this run's versions" not in ReproducePage(run, runs).commands()
