"""The README states what the repository holds: the scripts that exist, and a full collect's time
taken from the committed run it names."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_names_every_script_and_only_scripts_that_exist():
    named = set(re.findall(r"`(?:scripts/)?([\w-]+\.(?:py|sh))`", README))
    present = {p.name for p in (ROOT / "scripts").iterdir() if p.is_file()}
    assert present <= named, f"scripts the README does not name: {sorted(present - named)}"
    in_layout = set(re.findall(r"`([\w-]+\.(?:py|sh))`", next(ln for ln in README.splitlines()
                                                               if ln.startswith("| `scripts/`"))))
    assert in_layout <= present, f"the README's layout names scripts that do not exist: {sorted(in_layout - present)}"


def test_the_full_collect_time_is_the_named_runs_own():
    m = re.search(r"run `([\w-]+)` \(the newest\s+committed run that one full collect produced\) took (\d+) s, "
                  r"about ([\d.]+) minutes", README)
    assert m, "the README states one full-collect time, with the run it comes from"
    run, seconds, minutes = m.group(1), int(m.group(2)), float(m.group(3))
    manifest = json.loads((ROOT / "data" / "runs" / run / "manifest.json").read_text())
    phases = manifest["phases"]
    assert manifest["profile"] == "full" and len({p["git_commit"] for p in phases}) == 1  # one collect
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
