"""The README states what the repository holds: the scripts that exist, and a full collect's time
taken from the committed run it names."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_names_every_script_and_only_scripts_that_exist():
    named = set(re.findall(r"`(?:scripts/)?([\w-]+\.(?:py|sh))`", README))
    present = {p.name for p in (ROOT / "scripts").iterdir() if p.is_file()}
    assert present <= named, f"scripts the README does not name: {sorted(present - named)}"
    in_layout = set(re.findall(r"`([\w-]+\.(?:py|sh))`", next(ln for ln in README.splitlines()
                                                               if ln.startswith("| `scripts/`"))))
    assert in_layout <= present, f"the README's layout names scripts that do not exist: {sorted(in_layout - present)}"


def _one_full_collect(manifest: dict) -> bool:
    """Whether one full collect wrote every phase of a run: one commit, every phase complete, and a command that
    named no phase (a command naming some ran only those, after another collect)."""
    from collect.schema import PHASES

    every = {p.name for p in PHASES}
    phases = manifest["phases"]
    return (manifest["profile"] == "full" and {p["name"] for p in phases} == every
            and all(p["status"] == "complete" for p in phases)
            and len({p.get("git_commit") or manifest.get("git_commit") for p in phases}) == 1
            and not every & set(manifest["command"].split()))


def test_the_full_collect_time_is_the_named_runs_own():
    m = re.search(r"on an H200, run `([\w-]+)` \(the newest\s+committed run that one full collect produced\s+"
                  r"there\) took (\d+) s, about ([\d.]+) minutes", README)
    assert m, "the README states one full-collect time, with the run it comes from"
    run, seconds, minutes = m.group(1), int(m.group(2)), float(m.group(3))
    manifests = {d.name: json.loads((d / "manifest.json").read_text())
                 for d in (ROOT / "data" / "runs").iterdir() if (d / "manifest.json").is_file()}
    manifest = manifests[run]
    phases = manifest["phases"]
    assert _one_full_collect(manifest)
    h200 = [r for r, x in manifests.items() if "H200" in x["device"]["name"] and _one_full_collect(x)]
    assert max(h200, key=lambda r: manifests[r]["created_utc"]) == run, "a newer H200 run is one full collect"
    total = sum(p["duration_s"] for p in phases)
    assert seconds == round(total) and minutes == round(total / 60 * 2) / 2  # to the half minute
    times = re.findall(r"about ([\d.]+) minutes on an H200", README)
    assert times and set(times) == {m.group(3)}, f"every full-collect time in the README is the same: {times}"


def test_every_readme_section_the_code_points_to_exists():
    sections = set(re.findall(r"^#+ (.+)$", README, flags=re.M))
    files = [ROOT / "Makefile", *(p for d in ("kernels", "collect", "render", "scripts", "tests", ".github", ".ci")
                                  for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix in ("", ".py", ".yml", ".sh"))]
    pointers = {(p.relative_to(ROOT).as_posix(), name) for p in files
                for name in re.findall(r'README[,:]\s+"([^"]+)"', p.read_text(errors="replace"))}
    assert pointers, "the pattern finds the pointers (pages.yml has one)"
    missing = sorted((path, name) for path, name in pointers if name not in sections)
    assert not missing, f"README sections that do not exist: {missing}"


def _code_spans() -> list[str]:
    """What the README puts in code: its fenced blocks and its inline spans (an inline span may wrap a line)."""
    fenced = re.findall(r"^```\w*\n(.*?)^```", README, flags=re.M | re.S)
    prose = re.sub(r"^```\w*\n.*?^```", "", README, flags=re.M | re.S)
    return fenced + re.findall(r"`([^`]+)`", prose)


def test_every_make_target_and_variable_the_readme_uses_is_the_makefiles():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.M))
    variables = set(re.findall(r"^([A-Z_]+)\s*[?:]?=", makefile, flags=re.M))
    code = "\n".join(p.read_text(errors="replace") for d in ("collect", "render", "kernels")
                     for p in (ROOT / d).rglob("*.py"))
    used = []
    for span in _code_spans():
        for env, target, args in re.findall(r"((?:\b[A-Z_]+=\S+\s+)*)\bmake ([a-z][a-z-]*)((?:\s+[A-Z_]+=(?:\"[^\"]*\""
                                            r"|'[^']*'|\S+))*)", span):
            used.append(target)
            assert target in targets, f"make {target}: no such target"
            for name in re.findall(r"\b([A-Z_]+)=", args):
                assert name in variables, f"make {target} {name}=...: the Makefile has no variable {name}"
            for name in re.findall(r"\b([A-Z_]+)=", env):  # set before make: read by the code itself
                assert f'"{name}"' in code, f"{name}=... make {target}: no code reads {name}"
    assert {"serve", "test", "collect", "compact", "publish", "diff", "noise", "stamp"} <= set(used)


def test_every_name_in_capitals_the_readme_puts_in_code_is_one_the_code_has():
    sources = [ROOT / "Makefile", ROOT / "mkdocs.yml", ROOT / ".ci" / "run",
               *(p for d in ("collect", "render", "kernels", "scripts", "tests") for p in (ROOT / d).rglob("*")
                 if p.is_file() and p.suffix in (".py", ".sh"))]
    code = "\n".join(p.read_text(errors="replace") for p in sources)
    names = {m for span in _code_spans() for m in re.findall(r"(?<![\w$-])([A-Z][A-Z0-9]*_[A-Z0-9_]+|[A-Z]{4,})\b", span)}
    assert {"BENCH_BUDGET_S", "COLLECT_SHARED_COMPILE", "REPORT_RUN", "COLLECT_GIT_COMMIT"} <= names
    missing = sorted(n for n in names if not re.search(rf"\b{n}\b", code))
    assert not missing, f"names the README gives that no code, test or script has: {missing}"


def test_the_collect_synopsis_names_every_option_the_collect_takes():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "collect", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    usage = out.stdout.split("\n\n")[0]
    options = set(re.findall(r"\[(--[a-z-]+)", usage))
    synopsis = re.search(r"Or directly: `(python -m collect [^`]+)`", README).group(1)
    assert options and options == set(re.findall(r"--[a-z-]+", synopsis)), (options, synopsis)


def test_make_serve_narrates_the_run_the_readme_says(tmp_path, monkeypatch):
    """Without a name, the newest run whose every phase completed or does not apply to its GPU: a T4's run, whose
    iterations phase is recorded unsupported, is narrated once collected; a bench-only repeat is not. REPORT_RUN wins
    over extra.run."""
    import synthetic
    from collect.schema import PHASES
    from render.runs import RUN_ENV_VAR, load_runs, select_run

    text = " ".join(README.split())
    assert "Then `make serve` narrates your run: the one named by `REPORT_RUN=<run-id>` or by `extra.run`" in text
    assert "whose every phase completed or does not apply to its GPU" in text
    assert "make it the narrated run with `run: <run-id>` under `extra:` in `mkdocs.yml`" in text

    def run(run_id, created, unsupported=(), only=None):
        d = synthetic.make_run(tmp_path, run_id, created=created)
        m = json.loads((d / "manifest.json").read_text())
        m["phases"] = [dict(m["phases"][0], name=p.name, file=None,
                            status="unsupported" if p.name in unsupported else "complete",
                            reason="not a Hopper GPU" if p.name in unsupported else None)
                       for p in PHASES if only is None or p.name in only]
        (d / "manifest.json").write_text(json.dumps(m))

    run("h200-20261201", "2026-12-01T08:00:00+00:00")
    run("t4-20261202", "2026-12-02T08:00:00+00:00", unsupported=("iterations",))
    run("repeat-20261203", "2026-12-03T08:00:00+00:00", only=("env", "bench"))
    monkeypatch.delenv(RUN_ENV_VAR, raising=False)
    runs = load_runs(tmp_path)
    assert select_run(runs).id == "t4-20261202"
    assert select_run(runs, "h200-20261201").id == "h200-20261201"  # extra.run in mkdocs.yml
    monkeypatch.setenv(RUN_ENV_VAR, "repeat-20261203")
    assert select_run(runs, "h200-20261201").id == "repeat-20261203"  # REPORT_RUN wins over extra.run


def test_adding_the_profile_later_writes_over_a_profile_whose_profiler_never_ran(tmp_path, monkeypatch):
    """A profile phase that found no ncu saves one row per case saying why, and names the fix: `make collect
    PHASES=profile RUN_ID=<run>`. That collect writes over the file, with or without --resume, as the README says;
    a profile that measured something is still refused without --resume and kept with it."""
    from collect import profile as P
    from collect.jsonio import write_json_atomic
    from collect.runner import CollectConfig, _already_complete, refuse_compacted, saved_rows_for
    from collect.saved import SavedRowsError
    from collect.schema.manifest import PhaseRecord

    text = " ".join(README.split())
    assert ("adds the profile later, before the run is compacted: a `profile.json` whose profiler never ran holds no "
            "measurement, only why, and is written over") in text
    monkeypatch.setenv("NCU", str(tmp_path / "no-ncu-here"))
    run_id, run_dir = "t4-20261202", tmp_path / "t4-20261202"
    run_dir.mkdir()
    pf = P.profile_cases(P.main_cases(True, hopper=False), run_dir / "ncu", run_id)
    assert pf.status == "unsupported" and pf.fix and pf.impls and {r.status for r in pf.impls} == {"unsupported"}
    assert "make collect PHASES=profile RUN_ID=<run>" in pf.fix
    path = write_json_atomic(run_dir / "profile.json", pf)
    rec = PhaseRecord(name="profile", status="complete", file="profile.json", profile="quick")
    manifest = synthetic_manifest(run_id, [rec])
    again = CollectConfig(phases=["profile"], profile="quick", run_id=run_id, out=tmp_path)
    resumed = CollectConfig(phases=["profile"], profile="quick", run_id=run_id, out=tmp_path, resume=True)
    assert saved_rows_for("profile", path, rec, again, run_id) is None
    assert saved_rows_for("profile", path, rec, resumed, run_id) is None
    assert not _already_complete("profile", manifest, resumed, run_dir)
    # a profile whose profiler ran keeps its rows: refused without --resume, complete with it
    pf.status, pf.reason, pf.fix = "ok", None, None
    write_json_atomic(path, pf)
    with pytest.raises(SavedRowsError, match="already holds"):
        saved_rows_for("profile", path, rec, again, run_id)
    assert _already_complete("profile", manifest, resumed, run_dir)
    refuse_compacted(run_dir)  # a plain run takes the collect; a compacted one does not
    (run_dir / "bench.json.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="kept compressed"):
        refuse_compacted(run_dir)


def synthetic_manifest(run_id, phases):
    import synthetic

    m = synthetic.manifest(run_id)
    m.phases = phases
    return m
